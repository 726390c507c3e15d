package core

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
)

// apps/v1 Deployments and ReplicaSets, as kube-apiserver 1.37 defaults,
// prepares and validates them (its apps registry strategies and
// ValidateDeployment*/ValidateReplicaSet*). Kubernetes validates its internal
// types; where that shows through (a nil maxSurge or maxUnavailable is 0
// there, the deprecated rollback annotation is a spec field, values in
// messages are rendered from the internal structs), svcnet reproduces it on
// the v1 types.

// rollbackAnnotation is apps/v1's stand-in for the internal
// spec.rollbackTo: kube-apiserver turns a numeric value into that field
// (validated at spec.rollback.version) and writes it back in canonical form.
const rollbackAnnotation = appsv1.DeprecatedRollbackTo

// DefaultDeployment applies Kubernetes' apps/v1 Deployment defaults.
func DefaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		r := int32(1)
		d.Spec.Replicas = &r
	}
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if d.Spec.Strategy.RollingUpdate == nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		q := intstr.FromString("25%")
		if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &q
		}
		if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
			d.Spec.Strategy.RollingUpdate.MaxSurge = &q
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		n := int32(10)
		d.Spec.RevisionHistoryLimit = &n
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		n := int32(600)
		d.Spec.ProgressDeadlineSeconds = &n
	}
	DefaultPodSpec(&d.Spec.Template.Spec)
}

// NewDeploymentStrategy: apps/v1 defaults; a create starts at generation 1
// with an empty status; an update keeps the status and moves the
// generation on when the spec or the annotations change (annotations are
// copied to the ReplicaSets); /status keeps spec and labels. Validation is
// kube-apiserver's, with the selector immutable, and declarative
// (ObjectMeta's rules).
func NewDeploymentStrategy() registry.Strategy {
	return WithDeclarative(&Basic{
		Namespaced: true,
		HasStatus:  true,
		Defaulter:  func(obj runtime.Object) { DefaultDeployment(obj.(*appsv1.Deployment)) },
		// Warnings about the name and the pod template (on update only
		// when the generation moves).
		CreateWarnings: deploymentCreateWarnings,
		UpdateWarnings: deploymentUpdateWarnings,
		OnCreate: func(obj runtime.Object) {
			d := obj.(*appsv1.Deployment)
			d.Generation = 1
			dropDisabledVolumeFields(&d.Spec.Template.Spec, nil)
			normalizeRollingUpdate(d)
			canonicalRollback(d)
		},
		OnUpdate: func(obj, old runtime.Object) {
			d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
			normalizeRollingUpdate(d)
			dropDisabledVolumeFields(&d.Spec.Template.Spec, &o.Spec.Template.Spec)
			if !equality.Semantic.DeepEqual(d.Spec, o.Spec) || !equality.Semantic.DeepEqual(rollbackView(d.Annotations), rollbackView(o.Annotations)) {
				d.Generation = o.Generation + 1
			}
			canonicalRollback(d)
		},
		Validator: func(obj runtime.Object) field.ErrorList {
			d := obj.(*appsv1.Deployment)
			errs := validateKubeFinalizers(&d.ObjectMeta)
			return append(errs, validateDeploymentSpec(d, nil)...)
		},
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
			errs := validateAppsMetaUpdate(&d.ObjectMeta, &o.ObjectMeta)
			errs = append(errs, validateDeploymentSpec(d, &o.Spec.Template.Spec)...)
			return append(errs, metavalidation.ValidateImmutableField(d.Spec.Selector, o.Spec.Selector, field.NewPath("spec", "selector"))...)
		},
		// /status keeps the stored labels too, and (being part of the spec
		// in kube-apiserver's internal type) the stored rollback annotation.
		StatusPrepare: func(obj, old runtime.Object) {
			d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
			d.Labels = o.Labels
			setRollback(d, rollbackView(o.Annotations)[rollbackAnnotation])
		},
		StatusValidator: func(obj, old runtime.Object) field.ErrorList {
			d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
			errs := validateAppsMetaUpdate(&d.ObjectMeta, &o.ObjectMeta)
			errs = append(errs, validateDeploymentStatus(&d.Status)...)
			if cur, prev := d.Status.CollisionCount, o.Status.CollisionCount; prev != nil && (cur == nil || *cur < *prev) {
				v := int32(0)
				if cur != nil {
					v = *cur
				}
				errs = append(errs, field.Invalid(field.NewPath("status", "collisionCount"), v, "cannot be decremented"))
			}
			return errs
		},
	}, ObjectMetaDeclarative)
}

// NewReplicaSetStrategy: replicas default 1; a create starts at generation
// 1 with an empty status; an update keeps the status and moves the
// generation on when the spec changes; /status keeps the spec. Validation
// is kube-apiserver's, with the selector immutable, and declarative
// (ObjectMeta's rules).
func NewReplicaSetStrategy() registry.Strategy {
	return WithDeclarative(&Basic{
		Namespaced: true,
		HasStatus:  true,
		Defaulter: func(obj runtime.Object) {
			rs := obj.(*appsv1.ReplicaSet)
			if rs.Spec.Replicas == nil {
				r := int32(1)
				rs.Spec.Replicas = &r
			}
			DefaultPodSpec(&rs.Spec.Template.Spec)
		},
		CreateWarnings: replicaSetCreateWarnings,
		UpdateWarnings: replicaSetUpdateWarnings,
		OnCreate: func(obj runtime.Object) {
			rs := obj.(*appsv1.ReplicaSet)
			rs.Generation = 1
			dropDisabledVolumeFields(&rs.Spec.Template.Spec, nil)
		},
		OnUpdate: func(obj, old runtime.Object) {
			rs, o := obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet)
			dropDisabledVolumeFields(&rs.Spec.Template.Spec, &o.Spec.Template.Spec)
			if !equality.Semantic.DeepEqual(rs.Spec, o.Spec) {
				rs.Generation = o.Generation + 1
			}
		},
		Validator: func(obj runtime.Object) field.ErrorList {
			rs := obj.(*appsv1.ReplicaSet)
			errs := validateKubeFinalizers(&rs.ObjectMeta)
			return append(errs, validateReplicaSetSpec(rs, nil)...)
		},
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			rs, o := obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet)
			errs := validateAppsMetaUpdate(&rs.ObjectMeta, &o.ObjectMeta)
			errs = append(errs, validateReplicaSetSpec(rs, &o.Spec.Template.Spec)...)
			return append(errs, metavalidation.ValidateImmutableField(rs.Spec.Selector, o.Spec.Selector, field.NewPath("spec", "selector"))...)
		},
		StatusValidator: func(obj, old runtime.Object) field.ErrorList {
			rs, o := obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet)
			errs := validateAppsMetaUpdate(&rs.ObjectMeta, &o.ObjectMeta)
			return append(errs, validateReplicaSetStatus(&rs.Status)...)
		},
		// Kubernetes' ReplicaSet registry puts status.replicas in the field
		// set, but apps/v1 registers no field-label conversion for
		// ReplicaSet, so a selector on it is refused (apimachinery's
		// default conversion) exactly as kube-apiserver refuses it.
		FieldsFunc: func(obj runtime.Object) map[string]string {
			rs := obj.(*appsv1.ReplicaSet)
			return map[string]string{"metadata.name": rs.Name, "metadata.namespace": rs.Namespace, "status.replicas": itoa(rs.Status.Replicas)}
		},
	}, ObjectMetaDeclarative)
}

// normalizeRollingUpdate: kube-apiserver stores a rollingUpdate's unset
// maxUnavailable and maxSurge as 0 (their internal type has no nil).
func normalizeRollingUpdate(d *appsv1.Deployment) {
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxUnavailable == nil {
			z := intstr.FromInt32(0)
			ru.MaxUnavailable = &z
		}
		if ru.MaxSurge == nil {
			z := intstr.FromInt32(0)
			ru.MaxSurge = &z
		}
	}
}

// canonicalRollback: kube-apiserver keeps the rollback annotation only with
// a numeric value, which it writes back canonically.
func canonicalRollback(d *appsv1.Deployment) {
	if v, ok := d.Annotations[rollbackAnnotation]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			d.Annotations[rollbackAnnotation] = strconv.FormatInt(n, 10)
		} else if v == "" {
			setRollback(d, "")
		}
	}
}

// setRollback sets the rollback annotation to v, or removes it when v is "".
func setRollback(d *appsv1.Deployment, v string) {
	if v != "" {
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[rollbackAnnotation] = v
		return
	}
	delete(d.Annotations, rollbackAnnotation)
	if len(d.Annotations) == 0 {
		d.Annotations = nil
	}
}

// rollbackView is the annotations as kube-apiserver compares them for the
// generation: a numeric rollback annotation by its number.
func rollbackView(m map[string]string) map[string]string {
	v := m[rollbackAnnotation]
	n, err := strconv.ParseInt(v, 10, 64)
	if v == "" || err != nil {
		return m
	}
	c := make(map[string]string, len(m))
	for k, x := range m {
		c[k] = x
	}
	c[rollbackAnnotation] = strconv.FormatInt(n, 10)
	return c
}

// validateKubeFinalizers is kube-apiserver's addition to the generic
// ObjectMeta checks: a finalizer without a "/" must be a standard one.
func validateKubeFinalizers(m *metav1.ObjectMeta) field.ErrorList {
	var errs field.ErrorList
	for i, f := range m.Finalizers {
		if !strings.Contains(f, "/") && f != string(corev1.FinalizerKubernetes) && f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "finalizers").Index(i), f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}

// validateAppsMetaUpdate is the metadata part of kube-apiserver's update
// validation of these kinds (the generic registry repeats its first part;
// the declarative step drops the repeats).
func validateAppsMetaUpdate(m, old *metav1.ObjectMeta) field.ErrorList {
	errs := metavalidation.ValidateObjectMetaUpdate(m, old, field.NewPath("metadata"))
	return append(errs, validateKubeFinalizers(m)...)
}

func nonNegative(v int64, p *field.Path) field.ErrorList {
	return metavalidation.ValidateNonnegativeField(v, p)
}

func replicasOf(r *int32) int32 {
	if r == nil {
		return 0
	}
	return *r
}

// validateAppsSelector checks spec.selector (required, strictly valid, not
// empty) and returns the selector the template must match, or nil when the
// selector does not convert.
func validateAppsSelector(sel *metav1.LabelSelector, p *field.Path) (labels.Selector, field.ErrorList) {
	var errs field.ErrorList
	sp := p.Child("selector")
	if sel == nil {
		errs = append(errs, field.Required(sp, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, sp)...)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(sp, sel, "empty selector is invalid for deployment"))
		}
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, append(errs, field.Invalid(sp, sel, "invalid label selector"))
	}
	return s, errs
}

// validateAppsTemplate: the template must carry the labels the selector
// selects (a missing selector selects nothing), be a valid pod template,
// restart its containers Always and have no activeDeadlineSeconds. old is
// the stored template's spec on update (nil on create).
func validateAppsTemplate(t *corev1.PodTemplateSpec, old *corev1.PodSpec, sel labels.Selector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !sel.Empty() && !sel.Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(p.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, validatePodTemplateSpec(t, old, p)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(p.Child("spec", "restartPolicy"), t.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(p.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return errs
}

func validateDeploymentSpec(d *appsv1.Deployment, oldTemplate *corev1.PodSpec) field.ErrorList {
	spec := &d.Spec
	p := field.NewPath("spec")
	errs := nonNegative(int64(replicasOf(spec.Replicas)), p.Child("replicas"))
	sel, selErrs := validateAppsSelector(spec.Selector, p)
	errs = append(errs, selErrs...)
	if sel != nil {
		errs = append(errs, validateAppsTemplate(&spec.Template, oldTemplate, sel, p.Child("template"))...)
	}
	errs = append(errs, validateDeploymentStrategy(&spec.Strategy, p.Child("strategy"))...)
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), p.Child("minReadySeconds"))...)
	if n := spec.RevisionHistoryLimit; n != nil {
		errs = append(errs, nonNegative(int64(*n), p.Child("revisionHistoryLimit"))...)
	}
	if v := d.Annotations[rollbackAnnotation]; v != "" {
		if rev, err := strconv.ParseInt(v, 10, 64); err == nil {
			errs = append(errs, nonNegative(rev, p.Child("rollback", "version"))...)
		}
	}
	if n := spec.ProgressDeadlineSeconds; n != nil {
		errs = append(errs, nonNegative(int64(*n), p.Child("progressDeadlineSeconds"))...)
		if *n <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(p.Child("progressDeadlineSeconds"), n, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

// strategyValue and rollingUpdateValue render a strategy in an error as
// kube-apiserver does: its internal struct (Go field names, unset
// intOrStrings 0) as JSON.
type strategyValue struct {
	Type          appsv1.DeploymentStrategyType
	RollingUpdate *rollingUpdateValue
}

type rollingUpdateValue struct {
	MaxUnavailable intstr.IntOrString
	MaxSurge       intstr.IntOrString
}

func internalRollingUpdate(ru *appsv1.RollingUpdateDeployment) *rollingUpdateValue {
	if ru == nil {
		return nil
	}
	v := &rollingUpdateValue{}
	if ru.MaxUnavailable != nil {
		v.MaxUnavailable = *ru.MaxUnavailable
	}
	if ru.MaxSurge != nil {
		v.MaxSurge = *ru.MaxSurge
	}
	return v
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, p *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(p.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'")}
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(p.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		return validateRollingUpdate(internalRollingUpdate(s.RollingUpdate), p.Child("rollingUpdate"))
	default:
		v := &strategyValue{Type: s.Type, RollingUpdate: internalRollingUpdate(s.RollingUpdate)}
		return field.ErrorList{field.NotSupported(p, v, []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)})}
	}
	return nil
}

func validateRollingUpdate(ru *rollingUpdateValue, p *field.Path) field.ErrorList {
	up, sp := p.Child("maxUnavailable"), p.Child("maxSurge")
	errs := validateIntOrPercent(ru.MaxUnavailable, up)
	errs = append(errs, validateIntOrPercent(ru.MaxSurge, sp)...)
	if intOrPercentValue(ru.MaxUnavailable) == 0 && intOrPercentValue(ru.MaxSurge) == 0 {
		errs = append(errs, field.Invalid(up, ru.MaxUnavailable, "may not be 0 when `maxSurge` is 0"))
	}
	if pct, ok := percentValue(ru.MaxUnavailable); ok && pct > 100 {
		errs = append(errs, field.Invalid(up, ru.MaxUnavailable, "must not be greater than 100%"))
	}
	return errs
}

// validateIntOrPercent: a string must be a percentage, a number must not be
// negative.
func validateIntOrPercent(v intstr.IntOrString, p *field.Path) field.ErrorList {
	switch v.Type {
	case intstr.String:
		var errs field.ErrorList
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(p, v, msg))
		}
		return errs
	case intstr.Int:
		return nonNegative(int64(v.IntValue()), p)
	}
	return field.ErrorList{field.Invalid(p, v, "must be an integer or percentage (e.g '5%%')")}
}

// percentValue is the number of a valid percentage.
func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, _ := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	return n, true
}

// intOrPercentValue is a percentage's number, else the value as an int (a
// string that is no number counts as 0).
func intOrPercentValue(v intstr.IntOrString) int {
	if n, ok := percentValue(v); ok {
		return n
	}
	return v.IntValue()
}

func validateReplicaSetSpec(rs *appsv1.ReplicaSet, oldTemplate *corev1.PodSpec) field.ErrorList {
	spec := &rs.Spec
	p := field.NewPath("spec")
	errs := nonNegative(int64(replicasOf(spec.Replicas)), p.Child("replicas"))
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), p.Child("minReadySeconds"))...)
	sel, selErrs := validateAppsSelector(spec.Selector, p)
	errs = append(errs, selErrs...)
	if sel != nil {
		errs = append(errs, validateAppsTemplate(&spec.Template, oldTemplate, sel, p.Child("template"))...)
	}
	return errs
}

const notMoreThanReplicas = "cannot be greater than status.replicas"

func validateDeploymentStatus(s *appsv1.DeploymentStatus) field.ErrorList {
	p := field.NewPath("status")
	errs := nonNegative(s.ObservedGeneration, p.Child("observedGeneration"))
	errs = append(errs, nonNegative(int64(s.Replicas), p.Child("replicas"))...)
	errs = append(errs, nonNegative(int64(s.UpdatedReplicas), p.Child("updatedReplicas"))...)
	errs = append(errs, nonNegative(int64(s.ReadyReplicas), p.Child("readyReplicas"))...)
	errs = append(errs, nonNegative(int64(s.AvailableReplicas), p.Child("availableReplicas"))...)
	errs = append(errs, nonNegative(int64(s.UnavailableReplicas), p.Child("unavailableReplicas"))...)
	if n := s.TerminatingReplicas; n != nil {
		errs = append(errs, nonNegative(int64(*n), p.Child("terminatingReplicas"))...)
	}
	if n := s.CollisionCount; n != nil {
		errs = append(errs, nonNegative(int64(*n), p.Child("collisionCount"))...)
	}
	if s.UpdatedReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("updatedReplicas"), s.UpdatedReplicas, notMoreThanReplicas))
	}
	if s.ReadyReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("readyReplicas"), s.ReadyReplicas, notMoreThanReplicas))
	}
	if s.AvailableReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, notMoreThanReplicas))
	}
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}

func validateReplicaSetStatus(s *appsv1.ReplicaSetStatus) field.ErrorList {
	p := field.NewPath("status")
	errs := nonNegative(int64(s.Replicas), p.Child("replicas"))
	errs = append(errs, nonNegative(int64(s.FullyLabeledReplicas), p.Child("fullyLabeledReplicas"))...)
	errs = append(errs, nonNegative(int64(s.ReadyReplicas), p.Child("readyReplicas"))...)
	errs = append(errs, nonNegative(int64(s.AvailableReplicas), p.Child("availableReplicas"))...)
	errs = append(errs, nonNegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	if n := s.TerminatingReplicas; n != nil {
		errs = append(errs, nonNegative(int64(*n), p.Child("terminatingReplicas"))...)
	}
	if s.FullyLabeledReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("fullyLabeledReplicas"), s.FullyLabeledReplicas, notMoreThanReplicas))
	}
	if s.ReadyReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("readyReplicas"), s.ReadyReplicas, notMoreThanReplicas))
	}
	if s.AvailableReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, notMoreThanReplicas))
	}
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}

func itoa(i int32) string { return strconvItoa(int(i)) }
