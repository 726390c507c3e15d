package core

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
)

// apps/v1 DaemonSets, as kube-apiserver 1.37 defaults, prepares and
// validates them (its daemonset registry strategy and ValidateDaemonSet*).
// The internal type's spec.templateGeneration is, in apps/v1, the
// deprecated.daemonset.template.generation annotation: kube-apiserver reads
// it on the way in and always writes it on the way out, so svcnet keeps that
// annotation as the field (set to at least 1 on create, carried over from
// the stored object and moved on by one when the template changes).

// templateGenerationAnnotation holds a DaemonSet's template generation.
const templateGenerationAnnotation = appsv1.DeprecatedTemplateGeneration

// DefaultDaemonSet applies Kubernetes' apps/v1 DaemonSet defaults.
func DefaultDaemonSet(ds *appsv1.DaemonSet) {
	us := &ds.Spec.UpdateStrategy
	if us.Type == "" {
		us.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if us.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if us.RollingUpdate == nil {
			us.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if us.RollingUpdate.MaxUnavailable == nil {
			one := intstr.FromInt32(1)
			us.RollingUpdate.MaxUnavailable = &one
		}
		if us.RollingUpdate.MaxSurge == nil {
			zero := intstr.FromInt32(0)
			us.RollingUpdate.MaxSurge = &zero
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		n := int32(10)
		ds.Spec.RevisionHistoryLimit = &n
	}
	DefaultPodSpec(&ds.Spec.Template.Spec)
}

// NewDaemonSetStrategy: apps/v1 defaults; a create starts at generation 1
// and template generation (at least) 1 with an empty status; an update
// keeps the status and the stored template generation, and moves both
// generations on when the template changes (only the generation for other
// spec changes); /status keeps the spec (and so the template generation).
// Validation is kube-apiserver's, with the selector immutable, and
// declarative (ObjectMeta's rules).
func NewDaemonSetStrategy() registry.Strategy {
	return WithDeclarative(&Basic{
		Namespaced: true,
		HasStatus:  true,
		Defaulter:  func(obj runtime.Object) { DefaultDaemonSet(obj.(*appsv1.DaemonSet)) },
		// Warnings about the pod template (on update only when the
		// template generation moves).
		CreateWarnings: daemonSetCreateWarnings,
		UpdateWarnings: daemonSetUpdateWarnings,
		OnCreate: func(obj runtime.Object) {
			ds := obj.(*appsv1.DaemonSet)
			ds.Generation = 1
			normalizeDaemonSetRollingUpdate(ds)
			dropDisabledVolumeFields(&ds.Spec.Template.Spec, nil)
			setTemplateGeneration(ds, max(templateGeneration(ds), 1))
		},
		OnUpdate: func(obj, old runtime.Object) {
			ds, o := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
			normalizeDaemonSetRollingUpdate(ds)
			dropDisabledVolumeFields(&ds.Spec.Template.Spec, &o.Spec.Template.Spec)
			tg := templateGeneration(o)
			switch {
			case !equality.Semantic.DeepEqual(ds.Spec.Template, o.Spec.Template):
				tg++
				ds.Generation = o.Generation + 1
			case !equality.Semantic.DeepEqual(internalDaemonSetSpec(&ds.Spec), internalDaemonSetSpec(&o.Spec)):
				ds.Generation = o.Generation + 1
			}
			setTemplateGeneration(ds, tg)
		},
		Validator: func(obj runtime.Object) field.ErrorList {
			ds := obj.(*appsv1.DaemonSet)
			errs := validateKubeFinalizers(&ds.ObjectMeta)
			return append(errs, validateDaemonSetSpec(ds, nil)...)
		},
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			ds, o := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
			errs := validateAppsMetaUpdate(&ds.ObjectMeta, &o.ObjectMeta)
			errs = append(errs, validateDaemonSetSpecUpdate(ds, o)...)
			return append(errs, validateDaemonSetSpec(ds, &o.Spec.Template.Spec)...)
		},
		// /status keeps the stored spec, of which the template generation
		// is part in kube-apiserver's internal type.
		StatusPrepare: func(obj, old runtime.Object) {
			ds, o := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
			setTemplateGeneration(ds, templateGeneration(o))
		},
		StatusValidator: func(obj, old runtime.Object) field.ErrorList {
			ds, o := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
			errs := validateAppsMetaUpdate(&ds.ObjectMeta, &o.ObjectMeta)
			errs = append(errs, validateDaemonSetStatus(&ds.Status)...)
			if cur, prev := ds.Status.CollisionCount, o.Status.CollisionCount; prev != nil && (cur == nil || *cur < *prev) {
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

// templateGeneration is a DaemonSet's template generation (0 when the
// annotation is missing or not a number).
func templateGeneration(ds *appsv1.DaemonSet) int64 {
	n, err := strconv.ParseInt(ds.Annotations[templateGenerationAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// setTemplateGeneration writes the template generation annotation (always
// present on what kube-apiserver returns).
func setTemplateGeneration(ds *appsv1.DaemonSet, n int64) {
	m := make(map[string]string, len(ds.Annotations)+1)
	for k, v := range ds.Annotations {
		m[k] = v
	}
	m[templateGenerationAnnotation] = strconv.FormatInt(n, 10)
	ds.Annotations = m
}

// normalizeDaemonSetRollingUpdate: kube-apiserver stores a rollingUpdate's
// unset maxUnavailable and maxSurge as 0 (its internal type has no nil).
func normalizeDaemonSetRollingUpdate(ds *appsv1.DaemonSet) {
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
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

// dsStrategyValue and dsRollingUpdateValue are a DaemonSet's update
// strategy as kube-apiserver's internal type holds it: rendered that way in
// errors, and compared that way for the generation.
type dsStrategyValue struct {
	Type          appsv1.DaemonSetUpdateStrategyType
	RollingUpdate *dsRollingUpdateValue
}

type dsRollingUpdateValue struct {
	MaxUnavailable intstr.IntOrString
	MaxSurge       intstr.IntOrString
}

func internalDaemonSetStrategy(s *appsv1.DaemonSetUpdateStrategy) *dsStrategyValue {
	v := &dsStrategyValue{Type: s.Type}
	if ru := s.RollingUpdate; ru != nil {
		v.RollingUpdate = &dsRollingUpdateValue{}
		if ru.MaxUnavailable != nil {
			v.RollingUpdate.MaxUnavailable = *ru.MaxUnavailable
		}
		if ru.MaxSurge != nil {
			v.RollingUpdate.MaxSurge = *ru.MaxSurge
		}
	}
	return v
}

// internalDaemonSetSpec is the spec with its strategy in internal form.
func internalDaemonSetSpec(s *appsv1.DaemonSetSpec) any {
	c := *s
	c.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{}
	return struct {
		Spec     appsv1.DaemonSetSpec
		Strategy *dsStrategyValue
	}{c, internalDaemonSetStrategy(&s.UpdateStrategy)}
}

func validateDaemonSetSpec(ds *appsv1.DaemonSet, oldTemplate *corev1.PodSpec) field.ErrorList {
	spec := &ds.Spec
	p := field.NewPath("spec")
	sp, tp := p.Child("selector"), p.Child("template")
	// A missing selector is no error of its own: it selects nothing, so
	// the template's labels do not match it.
	errs := metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, sp)
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !sel.Matches(labels.Set(spec.Template.Labels)) {
		errs = append(errs, field.Invalid(tp.Child("metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	if spec.Selector != nil && len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(sp, spec.Selector, "empty selector is invalid for daemonset"))
	}
	errs = append(errs, validatePodTemplateSpec(&spec.Template, oldTemplate, tp)...)
	if spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tp.Child("spec", "restartPolicy"), spec.Template.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if spec.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tp.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in DaemonSet is not Supported"))
	}
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), p.Child("minReadySeconds"))...)
	errs = append(errs, nonNegative(templateGeneration(ds), p.Child("templateGeneration"))...)
	errs = append(errs, validateDaemonSetUpdateStrategy(&spec.UpdateStrategy, p.Child("updateStrategy"))...)
	if n := spec.RevisionHistoryLimit; n != nil {
		errs = append(errs, nonNegative(int64(*n), p.Child("revisionHistoryLimit"))...)
	}
	return errs
}

// validateDaemonSetSpecUpdate: the template generation never goes back and
// moves exactly when the template changes (which PrepareForUpdate ensures),
// and the selector is immutable.
func validateDaemonSetSpecUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "templateGeneration")
	tg, oldTG := templateGeneration(ds), templateGeneration(old)
	if tg < oldTG {
		errs = append(errs, field.Invalid(p, tg, "must not be decremented"))
	}
	changed := !equality.Semantic.DeepEqual(ds.Spec.Template, old.Spec.Template)
	if tg == oldTG && changed {
		errs = append(errs, field.Invalid(p, tg, "must be incremented upon template update"))
	} else if tg > oldTG && !changed {
		errs = append(errs, field.Invalid(p, tg, "must not be incremented without template update"))
	}
	return append(errs, metavalidation.ValidateImmutableField(ds.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

func validateDaemonSetUpdateStrategy(s *appsv1.DaemonSetUpdateStrategy, p *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(p.Child("rollingUpdate"), "")}
		}
		return validateDaemonSetRollingUpdate(internalDaemonSetStrategy(s).RollingUpdate, p.Child("rollingUpdate"))
	default:
		return field.ErrorList{field.NotSupported(p, internalDaemonSetStrategy(s),
			[]string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)})}
	}
	return nil
}

// validateDaemonSetRollingUpdate: both values are non-negative numbers or
// valid percentages of at most 100%, and exactly one of them is non-zero.
func validateDaemonSetRollingUpdate(ru *dsRollingUpdateValue, p *field.Path) field.ErrorList {
	up, sp := p.Child("maxUnavailable"), p.Child("maxSurge")
	errs := validateIntOrPercent(ru.MaxUnavailable, up)
	errs = append(errs, validateIntOrPercent(ru.MaxSurge, sp)...)
	if pct, ok := percentValue(ru.MaxUnavailable); ok && pct > 100 {
		errs = append(errs, field.Invalid(up, ru.MaxUnavailable, "must not be greater than 100%"))
	}
	if pct, ok := percentValue(ru.MaxSurge); ok && pct > 100 {
		errs = append(errs, field.Invalid(sp, ru.MaxSurge, "must not be greater than 100%"))
	}
	unavailable, surge := intOrPercentValue(ru.MaxUnavailable) != 0, intOrPercentValue(ru.MaxSurge) != 0
	switch {
	case unavailable && surge:
		errs = append(errs, field.Invalid(sp, ru.MaxSurge, "may not be set when maxUnavailable is non-zero"))
	case !unavailable && !surge:
		errs = append(errs, field.Required(up, "cannot be 0 when maxSurge is 0"))
	}
	return errs
}

func validateDaemonSetStatus(s *appsv1.DaemonSetStatus) field.ErrorList {
	p := field.NewPath("status")
	errs := nonNegative(int64(s.CurrentNumberScheduled), p.Child("currentNumberScheduled"))
	errs = append(errs, nonNegative(int64(s.NumberMisscheduled), p.Child("numberMisscheduled"))...)
	errs = append(errs, nonNegative(int64(s.DesiredNumberScheduled), p.Child("desiredNumberScheduled"))...)
	errs = append(errs, nonNegative(int64(s.NumberReady), p.Child("numberReady"))...)
	errs = append(errs, nonNegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	errs = append(errs, nonNegative(int64(s.UpdatedNumberScheduled), p.Child("updatedNumberScheduled"))...)
	errs = append(errs, nonNegative(int64(s.NumberAvailable), p.Child("numberAvailable"))...)
	errs = append(errs, nonNegative(int64(s.NumberUnavailable), p.Child("numberUnavailable"))...)
	if n := s.CollisionCount; n != nil {
		errs = append(errs, nonNegative(int64(*n), p.Child("collisionCount"))...)
	}
	return errs
}
