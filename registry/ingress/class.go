package ingress

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// maxControllerLen is the longest spec.controller an IngressClass may have.
const maxControllerLen = 250

// NewClassStrategy is the registry strategy of IngressClasses:
// cluster-scoped, defaulted and validated as below, generation 1 on create
// and +1 on every spec change. As kube-apiserver 1.37's, it validates
// declaratively too (ObjectMeta's rules, and parameters.kind and .name
// required).
func NewClassStrategy() registry.Strategy {
	return core.WithDeclarative(&core.Basic{
		Defaulter: DefaultClass,
		OnCreate:  func(obj runtime.Object) { obj.(*networkingv1.IngressClass).Generation = 1 },
		OnUpdate: func(obj, old runtime.Object) {
			ic, o := obj.(*networkingv1.IngressClass), old.(*networkingv1.IngressClass)
			if !equality.Semantic.DeepEqual(ic.Spec, o.Spec) {
				ic.Generation = o.Generation + 1
			}
		},
		Validator:       ValidateClass,
		UpdateValidator: ValidateClassUpdate,
	}, validateClassDeclaratively)
}

// DefaultClass applies networking/v1's defaulting of an IngressClass:
// parameters without a scope get scope Cluster. Other objects are left
// alone.
func DefaultClass(obj runtime.Object) {
	ic, ok := obj.(*networkingv1.IngressClass)
	if !ok {
		return
	}
	if p := ic.Spec.Parameters; p != nil && p.Scope == nil {
		scope := networkingv1.IngressClassParametersReferenceScopeCluster
		p.Scope = &scope
	}
}

// ValidateClass checks a new IngressClass (ValidateIngressClass without the
// generic ObjectMeta checks, which the store runs first).
func ValidateClass(obj runtime.Object) field.ErrorList {
	ic, ok := obj.(*networkingv1.IngressClass)
	if !ok {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a *v1.IngressClass: %T", obj))}
	}
	return append(validateKubeFinalizers(&ic.ObjectMeta), validateClassSpec(&ic.Spec, field.NewPath("spec"))...)
}

// ValidateClassUpdate checks an update as ValidateIngressClassUpdate does:
// the metadata update rules, spec.controller unchanged, then everything
// ValidateIngressClass checks (the whole metadata again included).
func ValidateClassUpdate(obj, old runtime.Object) field.ErrorList {
	ic, ok1 := obj.(*networkingv1.IngressClass)
	o, ok2 := old.(*networkingv1.IngressClass)
	if !ok1 || !ok2 {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a *v1.IngressClass: %T", obj))}
	}
	errs := metavalidation.ValidateObjectMetaUpdate(&ic.ObjectMeta, &o.ObjectMeta, metaPath)
	errs = append(errs, validateKubeFinalizers(&ic.ObjectMeta)...)
	errs = append(errs, metavalidation.ValidateImmutableField(ic.Spec.Controller, o.Spec.Controller, field.NewPath("spec", "controller"))...)
	errs = append(errs, metavalidation.ValidateObjectMeta(&ic.ObjectMeta, false, metavalidation.NameIsDNSSubdomain, metaPath)...)
	return append(errs, ValidateClass(ic)...)
}

// validateClassSpec: controller at most 250 bytes and a domain-prefixed
// path ("example.com/ingress-nginx"), then the parameters.
func validateClassSpec(spec *networkingv1.IngressClassSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	cp := p.Child("controller")
	if len(spec.Controller) > maxControllerLen {
		errs = append(errs, field.TooLong(cp, "", maxControllerLen))
	}
	errs = append(errs, validation.IsDomainPrefixedPath(cp, spec.Controller)...)
	return append(errs, validateParameters(spec.Parameters, p.Child("parameters"))...)
}

var supportedScopes = []string{networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace}

// validateParameters checks a parameters reference: apiGroup a DNS
// subdomain when set, kind and name required path segments, scope required
// and Cluster or Namespace; a Namespace scope needs a valid namespace, a
// Cluster scope forbids one.
func validateParameters(params *networkingv1.IngressClassParametersReference, p *field.Path) field.ErrorList {
	if params == nil {
		return nil
	}
	var errs field.ErrorList
	if params.APIGroup != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*params.APIGroup) {
			errs = append(errs, field.Invalid(p.Child("apiGroup"), *params.APIGroup, msg))
		}
	}
	errs = append(errs, requiredPathSegment(params.Kind, p.Child("kind"), true)...)
	errs = append(errs, requiredPathSegment(params.Name, p.Child("name"), true)...)
	if params.Scope == nil {
		return append(errs, field.Required(p.Child("scope"), ""))
	}
	switch scope := *params.Scope; scope {
	case networkingv1.IngressClassParametersReferenceScopeNamespace:
		if params.Namespace == nil {
			errs = append(errs, field.Required(p.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
		} else {
			for _, msg := range metavalidation.ValidateNamespaceName(*params.Namespace, false) {
				errs = append(errs, field.Invalid(p.Child("namespace"), *params.Namespace, msg))
			}
		}
	case networkingv1.IngressClassParametersReferenceScopeCluster:
		if params.Namespace != nil {
			errs = append(errs, field.Forbidden(p.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("scope"), scope, supportedScopes))
	}
	return errs
}

// validateClassDeclaratively returns the errors of the rules networking/v1
// declares for an IngressClass (beta in 1.37, so enforced): ObjectMeta's,
// then, unless the spec or the parameters are unchanged, parameters.kind
// and parameters.name required (each checked unless it is unchanged).
func validateClassDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	ic := obj.(*networkingv1.IngressClass)
	o, _ := old.(*networkingv1.IngressClass)
	var oldMeta *metav1.ObjectMeta
	var oldParams *networkingv1.IngressClassParametersReference
	if o != nil {
		oldMeta, oldParams = &o.ObjectMeta, o.Spec.Parameters
	}
	errs := registry.ValidateObjectMetaDeclaratively(ctx, op, &ic.ObjectMeta, oldMeta)
	params := ic.Spec.Parameters
	if o != nil && (equality.Semantic.DeepEqual(ic.Spec, o.Spec) || equality.Semantic.DeepEqual(params, oldParams)) {
		return errs
	}
	if params == nil {
		return errs
	}
	vop := operation.Operation{Type: op}
	p := field.NewPath("spec", "parameters")
	required := func(name string, v, old *string) {
		if old != nil && *v == *old {
			return
		}
		errs = append(errs, validate.RequiredValue(ctx, vop, p.Child(name), v, old).MarkBeta().MarkShortCircuit()...)
	}
	var oldKind, oldName *string
	if oldParams != nil {
		oldKind, oldName = &oldParams.Kind, &oldParams.Name
	}
	required("kind", &params.Kind, oldKind)
	required("name", &params.Name, oldName)
	return errs
}
