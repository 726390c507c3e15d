package authz

import (
	"context"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// ValidateName is the name rule of RBAC objects: any path segment.
func ValidateName(name string, _ bool) []string { return content.IsPathSegmentName(name) }

// Default applies the rbac/v1 defaults: a roleRef's apiGroup and the
// apiGroup of User and Group subjects default to rbac.authorization.k8s.io.
func Default(obj runtime.Object) {
	var ref *rbacv1.RoleRef
	var subjects []rbacv1.Subject
	switch o := obj.(type) {
	case *rbacv1.RoleBinding:
		ref, subjects = &o.RoleRef, o.Subjects
	case *rbacv1.ClusterRoleBinding:
		ref, subjects = &o.RoleRef, o.Subjects
	default:
		return
	}
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		if subjects[i].APIGroup == "" && (subjects[i].Kind == rbacv1.UserKind || subjects[i].Kind == rbacv1.GroupKind) {
			subjects[i].APIGroup = rbacv1.GroupName
		}
	}
}

// NewStrategy is the registry strategy of the four RBAC kinds (the API
// server puts its escalation checks in front of it): rbac/v1 defaults,
// kube-apiserver's validation, and, as kube-apiserver 1.37, declarative
// validation.
func NewStrategy(namespaced bool) registry.Strategy {
	return core.WithDeclarative(NewBasic(namespaced), ValidateDeclaratively)
}

// NewBasic is NewStrategy without the declarative step, for a wrapper that
// adds it (the API server's escalation checks).
func NewBasic(namespaced bool) *core.Basic {
	return &core.Basic{Namespaced: namespaced, Defaulter: Default, Validator: Validate, UpdateValidator: ValidateUpdate, NameFunc: ValidateName}
}

// ValidateDeclaratively returns the errors of the rules rbac/v1 declares
// (beta in 1.37, so enforced): ObjectMeta's; every rule's verbs, a roleRef's
// name and every subject's name required. An update does not check again
// the rules, subjects or roleRef it left unchanged; a changed roleRef is an
// alpha immutability error (reported by the handwritten check) and is not
// checked further.
func ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	errs := core.ObjectMetaDeclarative(ctx, op, obj, old)
	vop := operation.Operation{Type: op}
	rules := func(now, before []rbacv1.PolicyRule, isUpdate bool) {
		if isUpdate && equality.Semantic.DeepEqual(now, before) {
			return
		}
		for i := range now {
			errs = append(errs, validate.RequiredSlice(ctx, vop, field.NewPath("rules").Index(i).Child("verbs"), now[i].Verbs, nil).MarkBeta()...)
		}
	}
	binding := func(ref, oldRef rbacv1.RoleRef, subjects, oldSubjects []rbacv1.Subject, isUpdate bool) {
		if !isUpdate || !equality.Semantic.DeepEqual(subjects, oldSubjects) {
			for i := range subjects {
				errs = append(errs, validate.RequiredValue(ctx, vop, field.NewPath("subjects").Index(i).Child("name"), &subjects[i].Name, nil).MarkBeta()...)
			}
		}
		if isUpdate {
			return // unchanged: not checked again; changed: immutable (alpha), nothing below it
		}
		errs = append(errs, validate.RequiredValue(ctx, vop, field.NewPath("roleRef", "name"), &ref.Name, nil).MarkBeta()...)
	}
	switch o := obj.(type) {
	case *rbacv1.Role:
		b, ok := old.(*rbacv1.Role)
		if !ok {
			b = &rbacv1.Role{}
		}
		rules(o.Rules, b.Rules, ok)
	case *rbacv1.ClusterRole:
		b, ok := old.(*rbacv1.ClusterRole)
		if !ok {
			b = &rbacv1.ClusterRole{}
		}
		rules(o.Rules, b.Rules, ok)
	case *rbacv1.RoleBinding:
		b, ok := old.(*rbacv1.RoleBinding)
		if !ok {
			b = &rbacv1.RoleBinding{}
		}
		binding(o.RoleRef, b.RoleRef, o.Subjects, b.Subjects, ok)
	case *rbacv1.ClusterRoleBinding:
		b, ok := old.(*rbacv1.ClusterRoleBinding)
		if !ok {
			b = &rbacv1.ClusterRoleBinding{}
		}
		binding(o.RoleRef, b.RoleRef, o.Subjects, b.Subjects, ok)
	}
	return errs
}

// Validate returns kube-apiserver's field errors of a Role, ClusterRole,
// RoleBinding or ClusterRoleBinding (ObjectMeta is checked by the generic
// registry with ValidateName).
func Validate(obj runtime.Object) field.ErrorList {
	var errs field.ErrorList
	switch o := obj.(type) {
	case *rbacv1.Role:
		for i, r := range o.Rules {
			errs = append(errs, validateRule(r, true, field.NewPath("rules").Index(i))...)
		}
	case *rbacv1.ClusterRole:
		for i, r := range o.Rules {
			errs = append(errs, validateRule(r, false, field.NewPath("rules").Index(i))...)
		}
		if o.AggregationRule != nil {
			p := field.NewPath("aggregationRule", "clusterRoleSelectors")
			if len(o.AggregationRule.ClusterRoleSelectors) == 0 {
				errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
			}
			for i, sel := range o.AggregationRule.ClusterRoleSelectors {
				errs = append(errs, metav1validation.ValidateLabelSelector(&sel, metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
				if _, err := metav1.LabelSelectorAsSelector(&sel); err != nil {
					// kube-apiserver reports the (nil) parsed selector.
					errs = append(errs, field.Invalid(p.Index(i), nil, "invalid label selector."))
				}
			}
		}
	case *rbacv1.RoleBinding:
		errs = validateBinding(o.RoleRef, o.Subjects, true)
	case *rbacv1.ClusterRoleBinding:
		errs = validateBinding(o.RoleRef, o.Subjects, false)
	}
	return errs
}

// ValidateUpdate adds the update rule of bindings: roleRef is immutable.
func ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	errs := Validate(obj)
	var ref, oldRef any
	switch o := obj.(type) {
	case *rbacv1.RoleBinding:
		ref, oldRef = o.RoleRef, old.(*rbacv1.RoleBinding).RoleRef
	case *rbacv1.ClusterRoleBinding:
		ref, oldRef = o.RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef
	default:
		return errs
	}
	if !reflect.DeepEqual(ref, oldRef) {
		// A declarative rule (alpha in 1.37) covers it; kube-apiserver
		// marks the RoleBinding's alpha too.
		// Rendered as kube-apiserver's internal RoleRef (no JSON tags).
		rr := ref.(rbacv1.RoleRef)
		value := struct{ APIGroup, Kind, Name string }{rr.APIGroup, rr.Kind, rr.Name}
		e := field.Invalid(field.NewPath("roleRef"), value, apivalidation.FieldImmutableErrorMsg).WithOrigin("immutable")
		if _, ok := obj.(*rbacv1.RoleBinding); ok {
			e = e.MarkAlpha()
		}
		errs = append(errs, e.MarkCoveredByDeclarative())
	}
	return errs
}

func validateRule(r rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value").MarkCoveredByDeclarative())
	}
	if len(r.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	refPath := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(refPath.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if !(ref.Kind == "ClusterRole" || (namespaced && ref.Kind == "Role")) {
		errs = append(errs, field.NotSupported(refPath.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(refPath.Child("name"), "").MarkCoveredByDeclarative())
	} else {
		for _, msg := range ValidateName(ref.Name, false) {
			errs = append(errs, field.Invalid(refPath.Child("name"), ref.Name, msg))
		}
	}
	for i, s := range subjects {
		p := field.NewPath("subjects").Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "").MarkCoveredByDeclarative())
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.Name != "" {
				for _, msg := range apivalidation.ValidateServiceAccountName(s.Name, false) {
					errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
				}
			}
			if s.APIGroup != "" {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			if !namespaced && s.Namespace == "" {
				errs = append(errs, field.Required(p.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}
