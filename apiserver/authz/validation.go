package authz

import (
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
					errs = append(errs, field.Invalid(p.Index(i), sel, "invalid label selector."))
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
		errs = append(errs, field.Invalid(field.NewPath("roleRef"), ref, apivalidation.FieldImmutableErrorMsg))
	}
	return errs
}

func validateRule(r rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
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
		errs = append(errs, field.Required(refPath.Child("name"), ""))
	} else {
		for _, msg := range ValidateName(ref.Name, false) {
			errs = append(errs, field.Invalid(refPath.Child("name"), ref.Name, msg))
		}
	}
	for i, s := range subjects {
		p := field.NewPath("subjects").Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
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
