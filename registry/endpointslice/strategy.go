// Package endpointslice is the registry strategy for discovery.k8s.io/v1
// EndpointSlices: Kubernetes' defaulting (port name "" and protocol TCP) and
// kube-apiserver 1.37's validation (addressType IPv4/IPv6/FQDN and immutable,
// at most 1000 endpoints of 1..100 addresses each, addresses of the slice's
// type that are not loopback, link-local, link-local multicast or
// unspecified, unique port names, at most 20000 ports, hints limits), with
// the rules that 1.37 validates declaratively reported as it reports them
// (registry.DeclarativeValidator), and deprecatedTopology dropped as the v1
// API does.
package endpointslice

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/service"
)

const (
	maxTopologyLabels = 16
	maxAddresses      = 100
	maxPorts          = 20000
	maxEndpoints      = 1000
	maxZoneHints      = 8
	maxNodeHints      = 8
)

var supportedAddressTypes = sets.New(string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6), string(discoveryv1.AddressTypeFQDN))

// Strategy implements registry.Strategy for EndpointSlices.
type Strategy struct{}

var _ registry.Strategy = Strategy{}

// NewStrategy returns the EndpointSlice strategy. It holds no state.
func NewStrategy() Strategy { return Strategy{} }

// NamespaceScoped: EndpointSlices live in a namespace.
func (Strategy) NamespaceScoped() bool { return true }

// Default applies SetDefaults.
func (Strategy) Default(obj runtime.Object) {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		SetDefaults(s)
	}
}

// SetDefaults gives every port a name ("" when unset) and protocol TCP when
// unset, as the v1 defaulting does.
func SetDefaults(s *discoveryv1.EndpointSlice) {
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Name == nil {
			empty := ""
			p.Name = &empty
		}
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
	}
}

// PrepareForCreate drops deprecatedTopology: the v1 API documents writes to
// it as dropped (kube-apiserver's strategy does so for every v1 request).
func (Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		dropDeprecatedTopology(s, nil)
	}
}

// PrepareForUpdate drops deprecatedTopology as PrepareForCreate, unless the
// endpoints are unchanged from the stored object.
func (Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	s, ok1 := obj.(*discoveryv1.EndpointSlice)
	o, ok2 := old.(*discoveryv1.EndpointSlice)
	if ok1 && ok2 {
		dropDeprecatedTopology(s, o)
	}
}

// dropDeprecatedTopology clears every endpoint's deprecatedTopology. An
// endpoint without nodeName whose kubernetes.io/hostname label names a node
// that the stored object already listed there keeps that node as nodeName,
// so that a client which only knows the old field does not lose it.
func dropDeprecatedTopology(s, old *discoveryv1.EndpointSlice) {
	if old != nil && equality.Semantic.DeepEqual(old.Endpoints, s.Endpoints) {
		return
	}
	prev := sets.New[string]()
	if old != nil {
		for _, ep := range old.Endpoints {
			if n, ok := ep.DeprecatedTopology[corev1.LabelHostname]; ok {
				prev.Insert(n)
			}
		}
	}
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		n, ok := ep.DeprecatedTopology[corev1.LabelHostname]
		if ep.NodeName == nil && ok && prev.Has(n) && len(apivalidation.NameIsDNSSubdomain(n, false)) == 0 {
			ep.NodeName = &n
		}
		ep.DeprecatedTopology = nil
	}
}

// Validate returns ValidateEndpointSlice(obj, nil).
func (Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not an *v1.EndpointSlice: %T", obj))}
	}
	return ValidateEndpointSlice(s, nil)
}

// ValidateUpdate adds the metadata update rules and addressType immutability.
func (Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	s, ok1 := obj.(*discoveryv1.EndpointSlice)
	o, ok2 := old.(*discoveryv1.EndpointSlice)
	if !ok1 || !ok2 {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not an *v1.EndpointSlice: %T", obj))}
	}
	// No metadata update rules here: kube-apiserver's EndpointSlice strategy
	// leaves them to the generic registry (which svcnet's store also runs).
	allErrs := ValidateEndpointSlice(s, o)
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(s.AddressType, o.AddressType, field.NewPath("addressType")).
		WithOrigin("immutable").MarkCoveredByDeclarative()...)
	return allErrs
}

// ValidateDeclaratively returns the errors of the rules the v1 types declare
// as +k8s: tags, beta since 1.37 (and so enforced by kube-apiserver 1.37):
// addressType is required, immutable and one of the enum values; every
// endpoint has 1 to 100 addresses. The handwritten errors they cover are
// marked so (registry.DeclarativeValidator explains the merge); on update,
// unchanged fields are not checked again.
func (Strategy) ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil
	}
	o, _ := old.(*discoveryv1.EndpointSlice)
	var oldMeta *metav1.ObjectMeta
	if o != nil {
		oldMeta = &o.ObjectMeta
	}
	errs := registry.ValidateObjectMetaDeclaratively(ctx, op, &s.ObjectMeta, oldMeta)
	vop := operation.Operation{Type: op}

	atPath := field.NewPath("addressType")
	if o == nil || s.AddressType != o.AddressType {
		var oldAT *discoveryv1.AddressType
		if o != nil {
			oldAT = &o.AddressType
		}
		short := validate.RequiredValue(ctx, vop, atPath, &s.AddressType, oldAT).MarkBeta()
		short = append(short, validate.Immutable(ctx, vop, atPath, &s.AddressType, oldAT).MarkBeta()...)
		errs = append(errs, short...)
		if len(short) == 0 {
			errs = append(errs, validate.Enum(ctx, vop, atPath, &s.AddressType, oldAT, supportedAddressTypeValues, nil).MarkBeta()...)
		}
	}

	if o == nil || !equality.Semantic.DeepEqual(s.Endpoints, o.Endpoints) {
		for i := range s.Endpoints {
			ap := field.NewPath("endpoints").Index(i).Child("addresses")
			addrs := s.Endpoints[i].Addresses
			errs = append(errs, validate.RequiredSlice(ctx, vop, ap, addrs, nil).MarkBeta()...)
			errs = append(errs, validate.MaxItems(ctx, vop, ap, addrs, nil, maxAddresses).MarkBeta()...)
		}
	}
	return errs
}

var supportedAddressTypeValues = sets.New(discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN)

// ValidateEndpointSlice checks a (defaulted) EndpointSlice as kube-apiserver
// 1.37 does: metadata, addressType, ports, then endpoints. On update (old !=
// nil) the endpoint errors are dropped when the endpoints are unchanged from
// old (semantic equality); any change re-validates them all with today's
// strict rules.
//
// Addresses: for IPv4 the legacy IP syntax check (strict: no leading zeros),
// for IPv6 the plain IP check; an address of the other family is reported on
// endpoints[i].addresses itself (no index), as kube-apiserver does (an
// IPv4-mapped IPv6 address is refused by the strict IPv4 syntax check). Then
// the endpoint-IP ranges
// (loopback, link-local, link-local multicast, unspecified) apply.
func ValidateEndpointSlice(s *discoveryv1.EndpointSlice, old *discoveryv1.EndpointSlice) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	atPath := field.NewPath("addressType")
	if s.AddressType == "" {
		allErrs = append(allErrs, field.Required(atPath, "").MarkCoveredByDeclarative())
	} else if !supportedAddressTypes.Has(string(s.AddressType)) {
		allErrs = append(allErrs, field.NotSupported(atPath, s.AddressType, sets.List(supportedAddressTypes)).MarkCoveredByDeclarative())
	}
	allErrs = append(allErrs, validatePorts(s.Ports, field.NewPath("ports"))...)
	epErrs := validateEndpoints(s.Endpoints, s.AddressType, field.NewPath("endpoints"))
	if len(epErrs) != 0 && old != nil && equality.Semantic.DeepEqual(old.Endpoints, s.Endpoints) {
		epErrs = nil
	}
	return append(allErrs, epErrs...)
}

func validateEndpoints(eps []discoveryv1.Endpoint, at discoveryv1.AddressType, fp *field.Path) field.ErrorList {
	if len(eps) > maxEndpoints {
		return field.ErrorList{field.TooMany(fp, len(eps), maxEndpoints)}
	}
	var allErrs field.ErrorList
	for i := range eps {
		ep := &eps[i]
		idx := fp.Index(i)
		ap := idx.Child("addresses")
		if len(ep.Addresses) == 0 {
			allErrs = append(allErrs, field.Required(ap, "must contain at least 1 address").MarkCoveredByDeclarative())
		} else if len(ep.Addresses) > maxAddresses {
			allErrs = append(allErrs, field.TooMany(ap, len(ep.Addresses), maxAddresses).WithOrigin("maxItems").MarkCoveredByDeclarative())
		}
		for j, addr := range ep.Addresses {
			p := ap.Index(j)
			switch at {
			case discoveryv1.AddressTypeIPv4:
				if errs := validation.IsValidIPForLegacyField(p, addr, true, nil); len(errs) > 0 {
					allErrs = append(allErrs, errs...)
					continue
				}
				if !netutils.IsIPv4String(addr) {
					allErrs = append(allErrs, field.Invalid(ap, addr, "must be an IPv4 address"))
				}
				allErrs = append(allErrs, service.ValidateEndpointIPSloppy(addr, p)...)
			case discoveryv1.AddressTypeIPv6:
				if errs := validation.IsValidIP(p, addr); len(errs) > 0 {
					allErrs = append(allErrs, errs...)
					continue
				}
				if !netutils.IsIPv6String(addr) {
					allErrs = append(allErrs, field.Invalid(ap, addr, "must be an IPv6 address"))
				}
				allErrs = append(allErrs, service.ValidateEndpointIPSloppy(addr, p)...)
			case discoveryv1.AddressTypeFQDN:
				allErrs = append(allErrs, validation.IsFullyQualifiedDomainName(p, addr)...)
			}
		}
		if ep.NodeName != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*ep.NodeName, false) {
				allErrs = append(allErrs, field.Invalid(idx.Child("nodeName"), *ep.NodeName, msg))
			}
		}
		tp := idx.Child("deprecatedTopology")
		if len(ep.DeprecatedTopology) > maxTopologyLabels {
			allErrs = append(allErrs, field.TooMany(tp, len(ep.DeprecatedTopology), maxTopologyLabels))
		}
		allErrs = append(allErrs, metavalidation.ValidateLabels(ep.DeprecatedTopology, tp)...)
		if ep.Hostname != nil {
			for _, msg := range validation.IsDNS1123Label(*ep.Hostname) {
				allErrs = append(allErrs, field.Invalid(idx.Child("hostname"), *ep.Hostname, msg))
			}
		}
		if ep.Hints != nil {
			allErrs = append(allErrs, validateHints(ep.Hints, idx.Child("hints"))...)
		}
	}
	return allErrs
}

// validateHints: zone names are label values, node names DNS subdomains,
// each unique; too many zone hints stops the check before the node hints.
func validateHints(h *discoveryv1.EndpointHints, fp *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	zp := fp.Child("forZones")
	if len(h.ForZones) > maxZoneHints {
		return append(allErrs, field.TooMany(zp, len(h.ForZones), maxZoneHints))
	}
	seen := sets.New[string]()
	for i, z := range h.ForZones {
		np := zp.Index(i).Child("name")
		if seen.Has(z.Name) {
			allErrs = append(allErrs, field.Duplicate(np, z.Name))
		}
		seen.Insert(z.Name)
		for _, msg := range validation.IsValidLabelValue(z.Name) {
			allErrs = append(allErrs, field.Invalid(np, z.Name, msg))
		}
	}
	np := fp.Child("forNodes")
	if len(h.ForNodes) > maxNodeHints {
		return append(allErrs, field.TooMany(np, len(h.ForNodes), maxNodeHints))
	}
	seen = sets.New[string]()
	for i, n := range h.ForNodes {
		p := np.Index(i).Child("name")
		if seen.Has(n.Name) {
			allErrs = append(allErrs, field.Duplicate(p, n.Name))
		}
		seen.Insert(n.Name)
		for _, msg := range apivalidation.NameIsDNSSubdomain(n.Name, false) {
			allErrs = append(allErrs, field.Invalid(p, n.Name, msg))
		}
	}
	return allErrs
}

func validatePorts(ports []discoveryv1.EndpointPort, fp *field.Path) field.ErrorList {
	if len(ports) > maxPorts {
		return field.ErrorList{field.TooMany(fp, len(ports), maxPorts)}
	}
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i := range ports {
		p := &ports[i]
		idx := fp.Index(i)
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != "" {
			for _, msg := range validation.IsDNS1123Label(name) {
				allErrs = append(allErrs, field.Invalid(idx.Child("name"), name, msg))
			}
		}
		if names.Has(name) {
			allErrs = append(allErrs, field.Duplicate(idx.Child("name"), name))
		} else {
			names.Insert(name)
		}
		if p.Protocol == nil {
			allErrs = append(allErrs, field.Required(idx.Child("protocol"), ""))
		} else if !service.SupportedPortProtocols.Has(*p.Protocol) {
			allErrs = append(allErrs, field.NotSupported(idx.Child("protocol"), *p.Protocol, sets.List(service.SupportedPortProtocols)))
		}
		if p.AppProtocol != nil {
			allErrs = append(allErrs, service.ValidateQualifiedName(*p.AppProtocol, idx.Child("appProtocol"))...)
		}
	}
	return allErrs
}
