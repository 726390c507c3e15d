// Package endpoints is the registry strategy for core/v1 Endpoints:
// Kubernetes' defaulting (port protocol TCP) and kube-apiserver 1.37's
// validation rules and messages (subsets need addresses, addresses must be
// valid IPs that are not loopback, link-local, link-local multicast or
// unspecified, port names required when a subset has more than one port).
package endpoints

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/service"
)

// Strategy implements registry.Strategy for Endpoints.
type Strategy struct{}

var _ registry.Strategy = Strategy{}

// NewStrategy returns the Endpoints strategy. It holds no state.
func NewStrategy() Strategy { return Strategy{} }

// NamespaceScoped: Endpoints live in a namespace.
func (Strategy) NamespaceScoped() bool { return true }

// Default sets protocol TCP on every port that has none.
func (Strategy) Default(obj runtime.Object) {
	if ep, ok := obj.(*corev1.Endpoints); ok {
		SetDefaults(ep)
	}
}

// SetDefaults applies Kubernetes' v1 Endpoints defaults in place.
func SetDefaults(ep *corev1.Endpoints) {
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if ep.Subsets[i].Ports[j].Protocol == "" {
				ep.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// PrepareForCreate does nothing: Endpoints have no status and no server-owned fields.
func (Strategy) PrepareForCreate(context.Context, runtime.Object) {}

// PrepareForUpdate does nothing, as PrepareForCreate.
func (Strategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

// Validate returns ValidateEndpoints of obj.
func (Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	ep, ok := obj.(*corev1.Endpoints)
	if !ok {
		return field.ErrorList{field.InternalError(nil, errNotEndpoints(obj))}
	}
	return ValidateEndpoints(ep, nil)
}

// ValidateUpdate returns the metadata update errors plus ValidateEndpoints of obj.
func (Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	ep, ok1 := obj.(*corev1.Endpoints)
	oldEp, ok2 := old.(*corev1.Endpoints)
	if !ok1 || !ok2 {
		return field.ErrorList{field.InternalError(nil, errNotEndpoints(obj))}
	}
	allErrs := apivalidation.ValidateObjectMetaUpdate(&ep.ObjectMeta, &oldEp.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, ValidateEndpoints(ep, oldEp)...)
}

// ValidateDeclaratively: kube-apiserver 1.37 validates Endpoints
// declaratively too; the only rules are ObjectMeta's.
func (Strategy) ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	ep, ok := obj.(*corev1.Endpoints)
	if !ok {
		return nil
	}
	var oldMeta *metav1.ObjectMeta
	if o, ok := old.(*corev1.Endpoints); ok {
		oldMeta = &o.ObjectMeta
	}
	return registry.ValidateObjectMetaDeclaratively(ctx, op, &ep.ObjectMeta, oldMeta)
}

type wrongType struct{ obj runtime.Object }

func (e wrongType) Error() string { return "not an *v1.Endpoints: " + typeName(e.obj) }

func errNotEndpoints(obj runtime.Object) error { return wrongType{obj} }

func typeName(obj runtime.Object) string {
	if obj == nil {
		return "<nil>"
	}
	return obj.GetObjectKind().GroupVersionKind().String()
}

// ValidateEndpoints checks an Endpoints object as kube-apiserver 1.37 does.
// On update (old != nil) the subset errors are dropped when the subsets are
// unchanged from old (semantic equality), so an object stored under older,
// looser rules can still have its metadata edited; any change to the subsets
// re-validates all of them with today's strict rules.
//
// An address that is not a valid IP is reported twice on subsets[i].*[j].ip
// ("must be a valid IP address" from the syntax check and again from the
// endpoint-IP check), exactly as kube-apiserver lists it in the 422 causes.
// An IP written with leading zeros ("010.0.0.1") fails the strict syntax check
// and is then still checked, read as decimal, for the forbidden ranges.
func ValidateEndpoints(ep *corev1.Endpoints, old *corev1.Endpoints) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&ep.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	subsetErrs := validateSubsets(ep.Subsets, field.NewPath("subsets"))
	if len(subsetErrs) != 0 && old != nil && equality.Semantic.DeepEqual(old.Subsets, ep.Subsets) {
		subsetErrs = nil
	}
	return append(allErrs, subsetErrs...)
}

func validateSubsets(subsets []corev1.EndpointSubset, subsetsPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i := range subsets {
		ss := &subsets[i]
		idx := subsetsPath.Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			allErrs = append(allErrs, field.Required(idx, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			allErrs = append(allErrs, validateAddress(&ss.Addresses[j], idx.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			allErrs = append(allErrs, validateAddress(&ss.NotReadyAddresses[j], idx.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			allErrs = append(allErrs, validatePort(&ss.Ports[j], len(ss.Ports) > 1, idx.Child("ports").Index(j))...)
		}
	}
	return allErrs
}

func validateAddress(a *corev1.EndpointAddress, fp *field.Path) field.ErrorList {
	allErrs := validation.IsValidIPForLegacyField(fp.Child("ip"), a.IP, true, nil)
	if a.Hostname != "" {
		for _, msg := range validation.IsDNS1123Label(a.Hostname) {
			allErrs = append(allErrs, field.Invalid(fp.Child("hostname"), a.Hostname, msg))
		}
	}
	if a.NodeName != nil {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*a.NodeName, false) {
			allErrs = append(allErrs, field.Invalid(fp.Child("nodeName"), *a.NodeName, msg))
		}
	}
	return append(allErrs, service.ValidateEndpointIPSloppy(a.IP, fp.Child("ip"))...)
}

func validatePort(p *corev1.EndpointPort, requireName bool, fp *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if requireName && p.Name == "" {
		allErrs = append(allErrs, field.Required(fp.Child("name"), ""))
	} else if p.Name != "" {
		for _, msg := range validation.IsDNS1123Label(p.Name) {
			allErrs = append(allErrs, field.Invalid(fp.Child("name"), p.Name, msg))
		}
	}
	for _, msg := range validation.IsValidPortNum(int(p.Port)) {
		allErrs = append(allErrs, field.Invalid(fp.Child("port"), p.Port, msg))
	}
	if p.Protocol == "" {
		allErrs = append(allErrs, field.Required(fp.Child("protocol"), ""))
	} else if !service.SupportedPortProtocols.Has(p.Protocol) {
		allErrs = append(allErrs, field.NotSupported(fp.Child("protocol"), p.Protocol, sets.List(service.SupportedPortProtocols)))
	}
	if p.AppProtocol != nil {
		allErrs = append(allErrs, service.ValidateQualifiedName(*p.AppProtocol, fp.Child("appProtocol"))...)
	}
	return allErrs
}
