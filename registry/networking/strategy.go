// Package networking holds the strategies of networking.k8s.io/v1
// ServiceCIDR and IPAddress, the objects behind ClusterIP allocation since
// Kubernetes 1.33: a ServiceCIDR is a range Services take ClusterIPs from,
// and every allocated ClusterIP is an IPAddress named by the address whose
// parentRef is its Service.
//
// Validation follows kube-apiserver 1.37's rules and messages (built on
// apimachinery's IP/CIDR validators). As in kube-apiserver, overlapping
// ServiceCIDRs are valid (an address belongs to any range containing it),
// and an IPAddress is not checked against the ServiceCIDRs: the allocator
// only creates addresses inside a ready range, and the repair loop reports
// Services whose addresses are outside every range.
package networking

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// Names and labels Kubernetes gives the objects of ClusterIP allocation.
const (
	// DefaultServiceCIDRName is the ServiceCIDR made from
	// --service-cluster-ip-range.
	DefaultServiceCIDRName = "kubernetes"
	// ServiceCIDRFinalizer keeps a ServiceCIDR until no IPAddress depends on it.
	ServiceCIDRFinalizer = "networking.k8s.io/service-cidr-finalizer"
	// ManagedByIPAllocator is the managed-by label value of the IPAddresses
	// the ClusterIP allocator creates.
	ManagedByIPAllocator = "ipallocator.k8s.io"
)

// NewServiceCIDRStrategy: cluster-scoped, with a status subresource (status
// is wiped on create and kept on update, as with kube-apiserver's
// ServiceCIDRStatusFieldWiping); spec.cidrs is one or two CIDRs of
// different families, immutable except that a single-stack range may gain
// its second family.
//
// As kube-apiserver 1.37's, the strategy validates declaratively too (its
// only declarative rules are ObjectMeta's), so repeated errors are reported
// once; /status keeps the stored spec and the stored metadata but for
// managed fields (metav1.ResetObjectMetaForStatus).
func NewServiceCIDRStrategy() registry.Strategy {
	return core.WithDeclarative(&core.Basic{
		HasStatus: true,
		Validator: func(obj runtime.Object) field.ErrorList {
			return validateServiceCIDRSpec(obj.(*networkingv1.ServiceCIDR).Spec.CIDRs, field.NewPath("spec", "cidrs"))
		},
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			return validateServiceCIDRUpdate(obj.(*networkingv1.ServiceCIDR).Spec.CIDRs, old.(*networkingv1.ServiceCIDR).Spec.CIDRs)
		},
		StatusPrepare: func(obj, old runtime.Object) {
			metav1.ResetObjectMetaForStatus(&obj.(*networkingv1.ServiceCIDR).ObjectMeta, &old.(*networkingv1.ServiceCIDR).ObjectMeta)
		},
	}, core.ObjectMetaDeclarative)
}

// cidrsValue renders spec.cidrs in an error as kube-apiserver does (its
// internal ServiceCIDRSpec, whose JSON has no field tags).
type cidrsValue struct{ CIDRs []string }

func validateServiceCIDRSpec(cidrs []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case len(cidrs) == 0:
		return field.ErrorList{field.Required(p, "at least one CIDR required")}
	case len(cidrs) > 2:
		return field.ErrorList{field.Invalid(p, cidrsValue{cidrs}, "may only hold up to 2 values")}
	}
	for i, c := range cidrs {
		errs = append(errs, validation.IsValidCIDR(p.Index(i), c)...)
	}
	// The family as kube-apiserver tells it, sloppily (an address with
	// leading zeros still has one).
	if f := netutils.IPFamilyOfCIDRString(cidrs[0]); len(cidrs) == 2 && f == netutils.IPFamilyOfCIDRString(cidrs[1]) && f != netutils.IPFamilyUnknown {
		errs = append(errs, field.Invalid(p, cidrs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
	}
	return errs
}

func validateServiceCIDRUpdate(cidrs, old []string) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "cidrs")
	switch {
	case len(old) == len(cidrs):
		for i := range old {
			if old[i] != cidrs[i] {
				errs = append(errs, field.Invalid(p.Index(i), cidrs[i], apimachineryvalidation.FieldImmutableErrorMsg))
			}
		}
	case len(old) == 1 && len(cidrs) == 2:
		// Single stack may become dual stack.
		if cidrs[0] != old[0] {
			errs = append(errs, field.Invalid(p.Index(0), cidrs[0], apimachineryvalidation.FieldImmutableErrorMsg))
		}
		errs = append(errs, validateServiceCIDRSpec(cidrs, p)...)
	default:
		errs = append(errs, field.Invalid(p, cidrs, apimachineryvalidation.FieldImmutableErrorMsg))
	}
	return errs
}

// NewIPAddressStrategy: cluster-scoped, no status; the name is the address
// in canonical form; spec.parentRef is required and immutable.
//
// As kube-apiserver 1.37's, the strategy validates declaratively: the
// required parentRef, its resource and name, and its immutability are
// declarative rules (reported after the handwritten errors), and an update
// checks the name again.
func NewIPAddressStrategy() registry.Strategy {
	return core.WithDeclarative(&core.Basic{
		NameFunc: ValidateIPAddressName,
		Validator: func(obj runtime.Object) field.ErrorList {
			return validateParentRef(obj.(*networkingv1.IPAddress).Spec.ParentRef, field.NewPath("spec"))
		},
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			ip, oldIP := obj.(*networkingv1.IPAddress), old.(*networkingv1.IPAddress)
			errs := apimachineryvalidation.ValidateObjectMeta(&ip.ObjectMeta, false, ValidateIPAddressName, field.NewPath("metadata"))
			errs = append(errs, validateParentRef(ip.Spec.ParentRef, field.NewPath("spec"))...)
			if !equalRef(ip.Spec.ParentRef, oldIP.Spec.ParentRef) {
				errs = append(errs, field.Invalid(field.NewPath("spec", "parentRef"), ip.Spec.ParentRef, apimachineryvalidation.FieldImmutableErrorMsg).
					WithOrigin("immutable").MarkCoveredByDeclarative())
			}
			return errs
		},
	}, validateIPAddressDeclaratively)
}

// validateIPAddressDeclaratively: the rules networking/v1 declares for an
// IPAddress (beta in 1.37, so enforced): ObjectMeta's, then, unless the
// spec is unchanged, parentRef required and immutable (either stops the
// checks below it), and its resource and name required unless the
// reference is unchanged.
func validateIPAddressDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	ip := obj.(*networkingv1.IPAddress)
	var oldMeta *metav1.ObjectMeta
	var oldRef *networkingv1.ParentReference
	o, _ := old.(*networkingv1.IPAddress)
	if o != nil {
		oldMeta, oldRef = &o.ObjectMeta, o.Spec.ParentRef
	}
	errs := registry.ValidateObjectMetaDeclaratively(ctx, op, &ip.ObjectMeta, oldMeta)
	ref := ip.Spec.ParentRef
	if o != nil && equalRef(ref, oldRef) {
		return errs
	}
	vop := operation.Operation{Type: op}
	p := field.NewPath("spec", "parentRef")
	short := validate.RequiredPointer(ctx, vop, p, ref, oldRef).MarkBeta()
	if o != nil {
		short = append(short, validate.Immutable(ctx, vop, p, ref, oldRef).MarkBeta()...)
	}
	if len(short) > 0 {
		return append(errs, short...)
	}
	errs = append(errs, validate.RequiredValue(ctx, vop, p.Child("resource"), &ref.Resource, nil).MarkBeta()...)
	return append(errs, validate.RequiredValue(ctx, vop, p.Child("name"), &ref.Name, nil).MarkBeta()...)
}

// ValidateIPAddressName accepts an IP address in canonical form (the
// messages of apimachinery's IsValidIP).
func ValidateIPAddressName(name string, _ bool) []string {
	var out []string
	for _, e := range validation.IsValidIP(&field.Path{}, name) {
		out = append(out, e.Detail)
	}
	return out
}

func equalRef(a, b *networkingv1.ParentReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func validateParentRef(ref *networkingv1.ParentReference, p *field.Path) field.ErrorList {
	if ref == nil {
		return field.ErrorList{field.Required(p.Child("parentRef"), "").MarkCoveredByDeclarative()}
	}
	var errs field.ErrorList
	p = p.Child("parentRef")
	if ref.Group != "" {
		for _, msg := range validation.IsDNS1123Subdomain(ref.Group) {
			errs = append(errs, field.Invalid(p.Child("group"), ref.Group, msg))
		}
	}
	if ref.Resource == "" {
		errs = append(errs, field.Required(p.Child("resource"), "").MarkCoveredByDeclarative())
	} else {
		for _, msg := range content.IsPathSegmentName(ref.Resource) {
			errs = append(errs, field.Invalid(p.Child("resource"), ref.Resource, msg))
		}
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "").MarkCoveredByDeclarative())
	} else {
		for _, msg := range content.IsPathSegmentName(ref.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
		}
	}
	if ref.Namespace != "" {
		for _, msg := range content.IsPathSegmentName(ref.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), ref.Namespace, msg))
		}
	}
	return errs
}
