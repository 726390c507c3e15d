// Package networkpolicy is the registry strategy for networking.k8s.io/v1
// NetworkPolicies: Kubernetes 1.37's defaulting (policyTypes: Ingress, plus
// Egress when egress rules are present; port protocol TCP) and
// kube-apiserver 1.37's validation (label selectors, ports and endPort
// ranges, ipBlock CIDRs and their excepts, peers, policyTypes), with the same
// field paths and messages, so bad input is a 422 with field causes and
// nothing is stored.
package networkpolicy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// NewStrategy is the registry strategy of NetworkPolicies: namespaced,
// defaulted and validated as below (the store keeps metadata.generation).
// As kube-apiserver 1.37's, it validates declaratively too.
func NewStrategy() registry.Strategy {
	return core.WithDeclarative(&core.Basic{Namespaced: true, Defaulter: Default, Validator: Validate, UpdateValidator: ValidateUpdate,
		CreateWarnings: Warnings, UpdateWarnings: func(obj, _ runtime.Object) []string { return Warnings(obj) }},
		ValidateDeclaratively)
}

// ValidateDeclaratively returns the errors of the rules networking/v1
// declares for a NetworkPolicy (beta in 1.37, so enforced): ObjectMeta's,
// and every ipBlock's cidr is required. An update does not check again what
// it left unchanged: the metadata, the spec, or the ingress or egress list
// as a whole (within a changed list every rule is checked).
func ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	np := obj.(*networkingv1.NetworkPolicy)
	o, _ := old.(*networkingv1.NetworkPolicy)
	var oldMeta *metav1.ObjectMeta
	if o != nil {
		oldMeta = &o.ObjectMeta
	}
	errs := registry.ValidateObjectMetaDeclaratively(ctx, op, &np.ObjectMeta, oldMeta)
	if o != nil && equality.Semantic.DeepEqual(np.Spec, o.Spec) {
		return errs
	}
	vop := operation.Operation{Type: op}
	peers := func(p *field.Path, list []networkingv1.NetworkPolicyPeer) {
		for j := range list {
			if b := list[j].IPBlock; b != nil {
				errs = append(errs, validate.RequiredValue(ctx, vop, p.Index(j).Child("ipBlock", "cidr"), &b.CIDR, nil).MarkBeta()...)
			}
		}
	}
	spec := field.NewPath("spec")
	if o == nil || !equality.Semantic.DeepEqual(np.Spec.Ingress, o.Spec.Ingress) {
		for i, r := range np.Spec.Ingress {
			peers(spec.Child("ingress").Index(i).Child("from"), r.From)
		}
	}
	if o == nil || !equality.Semantic.DeepEqual(np.Spec.Egress, o.Spec.Egress) {
		for i, r := range np.Spec.Egress {
			peers(spec.Child("egress").Index(i).Child("to"), r.To)
		}
	}
	return errs
}

// Default applies SetDefaults to a NetworkPolicy; other objects are left alone.
func Default(obj runtime.Object) {
	if np, ok := obj.(*networkingv1.NetworkPolicy); ok {
		SetDefaults(np)
	}
}

// SetDefaults gives every port without a protocol TCP and, when policyTypes
// is empty, sets it to [Ingress] or, with egress rules, [Ingress, Egress]:
// a policy always isolates ingress unless it says otherwise.
func SetDefaults(np *networkingv1.NetworkPolicy) {
	for i := range np.Spec.Ingress {
		defaultPorts(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		defaultPorts(np.Spec.Egress[i].Ports)
	}
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) != 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}

func defaultPorts(ports []networkingv1.NetworkPolicyPort) {
	for i := range ports {
		if ports[i].Protocol == nil {
			tcp := corev1.ProtocolTCP
			ports[i].Protocol = &tcp
		}
	}
}

// Validate checks a new (defaulted) NetworkPolicy. Object metadata is
// checked by the generic registry.
func Validate(obj runtime.Object) field.ErrorList {
	np, ok := obj.(*networkingv1.NetworkPolicy)
	if !ok {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a *v1.NetworkPolicy: %T", obj))}
	}
	return ValidateSpec(&np.Spec, Options{}, field.NewPath("spec"))
}

// ValidateUpdate checks an update. As in kube-apiserver, a pod selector that
// was already invalid in the stored object lets invalid label values through
// (ratcheting), and any CIDR that appeared in the stored object is accepted
// again without the strict IP checks.
func ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	np, ok1 := obj.(*networkingv1.NetworkPolicy)
	o, ok2 := old.(*networkingv1.NetworkPolicy)
	if !ok1 || !ok2 {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a *v1.NetworkPolicy: %T", obj))}
	}
	var opts Options
	if len(metavalidation.ValidateLabelSelector(&o.Spec.PodSelector, metavalidation.LabelSelectorValidationOptions{}, nil)) > 0 {
		opts.AllowInvalidLabelValueInSelector = true
	}
	for _, r := range o.Spec.Ingress {
		opts.AllowCIDRsEvenIfInvalid = appendCIDRs(opts.AllowCIDRsEvenIfInvalid, r.From)
	}
	for _, r := range o.Spec.Egress {
		opts.AllowCIDRsEvenIfInvalid = appendCIDRs(opts.AllowCIDRsEvenIfInvalid, r.To)
	}
	return ValidateSpec(&np.Spec, opts, field.NewPath("spec"))
}

func appendCIDRs(dst []string, peers []networkingv1.NetworkPolicyPeer) []string {
	for _, p := range peers {
		if p.IPBlock != nil {
			dst = append(dst, p.IPBlock.CIDR)
			dst = append(dst, p.IPBlock.Except...)
		}
	}
	return dst
}

// Options relax validation on update, for values already stored.
type Options struct {
	AllowInvalidLabelValueInSelector bool
	AllowCIDRsEvenIfInvalid          []string
}

var (
	supportedProtocols   = []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}
	supportedPolicyTypes = []string{string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)}
)

// ValidateSpec checks the spec in kube-apiserver's order: pod selector,
// each ingress rule's ports then peers, each egress rule's, then
// policyTypes.
func ValidateSpec(spec *networkingv1.NetworkPolicySpec, opts Options, fp *field.Path) field.ErrorList {
	sel := metavalidation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.AllowInvalidLabelValueInSelector}
	allErrs := metavalidation.ValidateLabelSelector(&spec.PodSelector, sel, fp.Child("podSelector"))
	for i, r := range spec.Ingress {
		rp := fp.Child("ingress").Index(i)
		for j := range r.Ports {
			allErrs = append(allErrs, ValidatePort(&r.Ports[j], rp.Child("ports").Index(j))...)
		}
		for j := range r.From {
			allErrs = append(allErrs, ValidatePeer(&r.From[j], opts, rp.Child("from").Index(j))...)
		}
	}
	for i, r := range spec.Egress {
		rp := fp.Child("egress").Index(i)
		for j := range r.Ports {
			allErrs = append(allErrs, ValidatePort(&r.Ports[j], rp.Child("ports").Index(j))...)
		}
		for j := range r.To {
			allErrs = append(allErrs, ValidatePeer(&r.To[j], opts, rp.Child("to").Index(j))...)
		}
	}
	if len(spec.PolicyTypes) > len(supportedPolicyTypes) {
		return append(allErrs, field.Invalid(fp.Child("policyTypes"), &spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			allErrs = append(allErrs, field.NotSupported(fp.Child("policyTypes").Index(i), t, supportedPolicyTypes))
		}
	}
	return allErrs
}

// ValidatePort checks one port: protocol, a port number or name, and endPort
// only with a numeric port and not below it.
func ValidatePort(p *networkingv1.NetworkPolicyPort, fp *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP && *p.Protocol != corev1.ProtocolUDP && *p.Protocol != corev1.ProtocolSCTP {
		allErrs = append(allErrs, field.NotSupported(fp.Child("protocol"), *p.Protocol, supportedProtocols))
	}
	switch {
	case p.Port == nil:
		if p.EndPort != nil {
			allErrs = append(allErrs, field.Invalid(fp.Child("endPort"), *p.EndPort, "may not be specified when `port` is not specified"))
		}
	case p.Port.Type == intstr.Int:
		for _, msg := range validation.IsValidPortNum(int(p.Port.IntVal)) {
			allErrs = append(allErrs, field.Invalid(fp.Child("port"), p.Port.IntVal, msg))
		}
		if p.EndPort != nil {
			if *p.EndPort < p.Port.IntVal {
				allErrs = append(allErrs, field.Invalid(fp.Child("endPort"), *p.EndPort, "must be greater than or equal to `port`"))
			}
			for _, msg := range validation.IsValidPortNum(int(*p.EndPort)) {
				allErrs = append(allErrs, field.Invalid(fp.Child("endPort"), *p.EndPort, msg))
			}
		}
	default:
		if p.EndPort != nil {
			allErrs = append(allErrs, field.Invalid(fp.Child("endPort"), *p.EndPort, "may not be specified when `port` is non-numeric"))
		}
		for _, msg := range validation.IsValidPortName(p.Port.StrVal) {
			allErrs = append(allErrs, field.Invalid(fp.Child("port"), p.Port.StrVal, msg))
		}
	}
	return allErrs
}

// ValidatePeer checks one peer: at least one of podSelector,
// namespaceSelector and ipBlock, and ipBlock alone.
func ValidatePeer(p *networkingv1.NetworkPolicyPeer, opts Options, fp *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	sel := metavalidation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.AllowInvalidLabelValueInSelector}
	n := 0
	if p.PodSelector != nil {
		n++
		allErrs = append(allErrs, metavalidation.ValidateLabelSelector(p.PodSelector, sel, fp.Child("podSelector"))...)
	}
	if p.NamespaceSelector != nil {
		n++
		allErrs = append(allErrs, metavalidation.ValidateLabelSelector(p.NamespaceSelector, sel, fp.Child("namespaceSelector"))...)
	}
	if p.IPBlock != nil {
		n++
		allErrs = append(allErrs, ValidateIPBlock(p.IPBlock, opts, fp.Child("ipBlock"))...)
	}
	switch {
	case n == 0:
		allErrs = append(allErrs, field.Required(fp, "must specify a peer"))
	case n > 1 && p.IPBlock != nil:
		allErrs = append(allErrs, field.Forbidden(fp, "may not specify both ipBlock and another peer"))
	}
	return allErrs
}

// ValidateIPBlock checks cidr (required, a valid CIDR under the strict
// rules of Kubernetes 1.37: no leading zeros, no host bits... unless the
// value was already stored) and that each except is a strict subset of it.
func ValidateIPBlock(b *networkingv1.IPBlock, opts Options, fp *field.Path) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(fp.Child("cidr"), "").MarkCoveredByDeclarative()}
	}
	allErrs := validation.IsValidCIDRForLegacyField(fp.Child("cidr"), b.CIDR, true, opts.AllowCIDRsEvenIfInvalid)
	_, cidr, err := netutils.ParseCIDRSloppy(b.CIDR)
	if err != nil {
		return allErrs // already reported
	}
	cidrLen, _ := cidr.Mask.Size()
	for i, s := range b.Except {
		ep := fp.Child("except").Index(i)
		allErrs = append(allErrs, validation.IsValidCIDRForLegacyField(ep, s, true, opts.AllowCIDRsEvenIfInvalid)...)
		_, except, err := netutils.ParseCIDRSloppy(s)
		if err != nil {
			continue
		}
		exceptLen, _ := except.Mask.Size()
		if !cidr.Contains(except.IP) || cidrLen >= exceptLen {
			allErrs = append(allErrs, field.Invalid(ep, s, "must be a strict subset of `cidr`"))
		}
	}
	return allErrs
}
