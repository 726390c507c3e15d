package main

import (
	"math/rand"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/networking"
	k8sipaddress "k8s.io/kubernetes/pkg/registry/networking/ipaddress"
	k8snetpol "k8s.io/kubernetes/pkg/registry/networking/networkpolicy"
	k8sservicecidr "k8s.io/kubernetes/pkg/registry/networking/servicecidr"

	"github.com/svcnet/svcnet/registry"
	svcnetnetworking "github.com/svcnet/svcnet/registry/networking"
	svcnetnetpol "github.com/svcnet/svcnet/registry/networkpolicy"
)

// NetworkPolicies, ServiceCIDRs and IPAddresses (networking.k8s.io/v1): the
// defaulted object and the create/update error lists, through
// kube-apiserver's strategies (rest.ValidateCreate / ValidateUpdate, with
// the group's declarative validation) and svcnet's store path.

var cidrPool = []string{"10.0.0.0/8", "10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32", "10.0.0.1/8", "010.0.0.0/8",
	"0.0.0.0/0", "fd00::/64", "fd00::/64", "fd00::1/64", "::/0", "2001:db8::/48", "10.0.0.0/33", "bad", "", "10.0.0.0",
	"::ffff:10.0.0.0/104", "192.168.0.0/16", "192.168.1.0/24"}

func randSelector(r *rand.Rand) *metav1.LabelSelector {
	s := &metav1.LabelSelector{}
	if maybe(r, 0.5) {
		s.MatchLabels = map[string]string{pick(r, "app", "app", "tier", "bad key!", "example.com/app", strings.Repeat("k", 64)): pick(r, "web", "", "Bad Value", strings.Repeat("v", 64))}
	}
	for i, n := 0, r.Intn(3); i < n; i++ {
		e := metav1.LabelSelectorRequirement{
			Key:      pick(r, "app", "tier", "bad key!", ""),
			Operator: pick(r, metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist, "Equals"),
		}
		for j, m := 0, r.Intn(3); j < m; j++ {
			e.Values = append(e.Values, pick(r, "web", "db", "bad value!", ""))
		}
		s.MatchExpressions = append(s.MatchExpressions, e)
	}
	return s
}

func randNPPort(r *rand.Rand) networkingv1.NetworkPolicyPort {
	var p networkingv1.NetworkPolicyPort
	if maybe(r, 0.6) {
		p.Protocol = ptr(pick(r, corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP, "ICMP", ""))
	}
	switch r.Intn(4) {
	case 0:
	case 1, 2:
		p.Port = ptr(intstr.FromInt32(pick[int32](r, 80, 443, 0, 65536, 32000)))
	case 3:
		p.Port = ptr(intstr.FromString(pick(r, "http", "HTTP", "a_b", "web-metrics-port", "")))
	}
	if maybe(r, 0.3) {
		p.EndPort = ptr(pick[int32](r, 90, 80, 70, 65536, 0))
	}
	return p
}

func randPeer(r *rand.Rand) networkingv1.NetworkPolicyPeer {
	var p networkingv1.NetworkPolicyPeer
	if maybe(r, 0.4) {
		p.PodSelector = randSelector(r)
	}
	if maybe(r, 0.3) {
		p.NamespaceSelector = randSelector(r)
	}
	if maybe(r, 0.4) {
		b := &networkingv1.IPBlock{CIDR: pick(r, cidrPool...)}
		for i, n := 0, r.Intn(3); i < n; i++ {
			b.Except = append(b.Except, pick(r, cidrPool...))
		}
		p.IPBlock = b
	}
	return p
}

func randNetworkPolicy(r *rand.Rand) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny", Namespace: namespace}}
	if maybe(r, 0.2) {
		np.Name = randObjectName(r)
	}
	if maybe(r, 0.1) {
		np.Labels = map[string]string{pick(r, "bad key!", "ok"): pick(r, "x", "bad value!")}
	}
	np.Spec.PodSelector = *randSelector(r)
	for i, n := 0, r.Intn(3); i < n; i++ {
		var rule networkingv1.NetworkPolicyIngressRule
		for j, m := 0, r.Intn(3); j < m; j++ {
			rule.Ports = append(rule.Ports, randNPPort(r))
		}
		for j, m := 0, r.Intn(3); j < m; j++ {
			rule.From = append(rule.From, randPeer(r))
		}
		np.Spec.Ingress = append(np.Spec.Ingress, rule)
	}
	for i, n := 0, r.Intn(3); i < n; i++ {
		var rule networkingv1.NetworkPolicyEgressRule
		for j, m := 0, r.Intn(3); j < m; j++ {
			rule.Ports = append(rule.Ports, randNPPort(r))
		}
		for j, m := 0, r.Intn(3); j < m; j++ {
			rule.To = append(rule.To, randPeer(r))
		}
		np.Spec.Egress = append(np.Spec.Egress, rule)
	}
	for i, n := 0, pick(r, 0, 0, 1, 2, 3); i < n; i++ {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, pick(r, networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress, "Bad", ""))
	}
	return np
}

// storedNetworkPolicy is a valid policy as the store holds it, sometimes
// with values that were valid under older rules (a leading-zero CIDR, an
// invalid label value in the pod selector).
func storedNetworkPolicy(r *rand.Rand) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny", Namespace: namespace, UID: "uid-3", ResourceVersion: "9", Generation: 2},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt32(80))}},
				From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}},
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if maybe(r, 0.2) {
		np.Spec.Ingress[0].From[0].IPBlock.CIDR = "010.0.0.0/8"
	}
	if maybe(r, 0.2) {
		np.Spec.PodSelector.MatchLabels["app"] = "bad value!"
	}
	return np
}

func networkPolicyCreateCase(r *rand.Rand) string {
	// Not the prepared objects: kube-apiserver's strategy sets generation,
	// svcnet's store does.
	return compareCreate(randNetworkPolicy(r), "networking.k8s.io", "networkpolicies", true, false, k8snetpol.Strategy, svcnetnetpol.NewStrategy(),
		func() runtime.Object { return &networking.NetworkPolicy{} }, func() runtime.Object { return &networkingv1.NetworkPolicy{} })
}

func networkPolicyUpdateCase(r *rand.Rand) string {
	old := storedNetworkPolicy(r)
	in := old.DeepCopy()
	switch r.Intn(6) {
	case 0:
		in.Spec = randNetworkPolicy(r).Spec
	case 1:
		in.Spec.Ingress = append(in.Spec.Ingress, randNetworkPolicy(r).Spec.Ingress...)
	case 2:
		in.Spec.Ingress[0].From = append(in.Spec.Ingress[0].From, randPeer(r))
	case 3:
		in.Spec.PodSelector = *randSelector(r)
	case 4:
		in.Spec.Ingress[0].From[0].IPBlock.Except = append(in.Spec.Ingress[0].From[0].IPBlock.Except, pick(r, cidrPool...))
	case 5:
		in.Spec.PolicyTypes = randNetworkPolicy(r).Spec.PolicyTypes
	}
	if maybe(r, 0.1) {
		in.Name = "other"
	}
	if maybe(r, 0.1) {
		in.Labels = map[string]string{"bad key!": "x"}
	}
	ctx := requestCtx("update", "networking.k8s.io", "v1", "networkpolicies", "", in.Name)

	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopy()
	ki, kold := &networking.NetworkPolicy{}, &networking.NetworkPolicy{}
	toInternal(kv, ki)
	toInternal(old.DeepCopy(), kold)
	k8snetpol.Strategy.PrepareForUpdate(ctx, ki, kold)
	kErrs := genericrest.ValidateUpdate(ctx, ki, kold, k8snetpol.Strategy)

	st := svcnetnetpol.NewStrategy()
	sv := in.DeepCopy()
	st.Default(sv)
	sDefaulted := sv.DeepCopy()
	st.PrepareForUpdate(ctx, sv, old.DeepCopy())
	sErrs := registry.ValidateUpdate(ctx, st, true, sv, old.DeepCopy())
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings("update", k8snetpol.Strategy.WarningsOnUpdate(ctx, ki, kold), updateWarnings(ctx, st, sv, old))
	}
	return withInput(joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), compareErrs("update", kErrs, sErrs), warnDiff), in, old)
}

var serviceCIDRPool = []string{"10.96.0.0/16", "10.96.0.0/16", "10.100.0.0/24", "fd00:96::/112", "fd00:96::/112", "2001:db8::/64",
	"10.96.0.1/16", "010.96.0.0/16", "10.96.0.0", "bad", "", "fd00:96::1/112", "0.0.0.0/0", "10.96.0.0/33"}

func randServiceCIDRs(r *rand.Rand) []string {
	var out []string
	for i, n := 0, pick(r, 0, 1, 1, 2, 2, 3); i < n; i++ {
		out = append(out, pick(r, serviceCIDRPool...))
	}
	return out
}

func randConditions(r *rand.Rand) []metav1.Condition {
	var out []metav1.Condition
	for i, n := 0, r.Intn(3); i < n; i++ {
		out = append(out, metav1.Condition{
			Type:               pick(r, "Ready", "Ready", "bad type!", ""),
			Status:             pick(r, metav1.ConditionTrue, metav1.ConditionFalse, "Maybe", ""),
			Reason:             pick(r, "Ready", "", "bad reason!"),
			Message:            pick(r, "", "ok"),
			LastTransitionTime: pick(r, metav1.Time{}, metav1.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)),
			ObservedGeneration: pick[int64](r, 0, 1, -1),
		})
	}
	return out
}

func randServiceCIDR(r *rand.Rand) *networkingv1.ServiceCIDR {
	sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: randServiceCIDRs(r)}}
	if maybe(r, 0.2) {
		sc.Name = randObjectName(r)
	}
	if maybe(r, 0.1) {
		sc.Namespace = namespace // cluster-scoped: must be empty
	}
	if maybe(r, 0.2) {
		sc.Status.Conditions = randConditions(r) // wiped on create
	}
	return sc
}

func storedServiceCIDR(r *rand.Rand) *networkingv1.ServiceCIDR {
	sc := &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "extra", UID: "uid-4", ResourceVersion: "11"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16"}},
	}
	if maybe(r, 0.3) {
		sc.Spec.CIDRs = append(sc.Spec.CIDRs, "fd00:96::/112")
	}
	if maybe(r, 0.5) {
		sc.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)}}
	}
	return sc
}

func serviceCIDRCreateCase(r *rand.Rand) string {
	return compareCreate(randServiceCIDR(r), "networking.k8s.io", "servicecidrs", false, true, k8sservicecidr.Strategy, svcnetnetworking.NewServiceCIDRStrategy(),
		func() runtime.Object { return &networking.ServiceCIDR{} }, func() runtime.Object { return &networkingv1.ServiceCIDR{} })
}

func serviceCIDRUpdateCase(r *rand.Rand) string {
	old := storedServiceCIDR(r)
	in := old.DeepCopy()
	switch r.Intn(4) {
	case 0:
		in.Spec.CIDRs = randServiceCIDRs(r)
	case 1:
		in.Spec.CIDRs = append(in.Spec.CIDRs, pick(r, serviceCIDRPool...))
	case 2:
		in.Spec.CIDRs[0] = pick(r, serviceCIDRPool...)
	case 3:
		in.Status.Conditions = randConditions(r) // kept from the stored object
	}
	if maybe(r, 0.1) {
		in.Name = "other"
	}
	return withInput(compareClusterUpdate(in, old, "servicecidrs", "", k8sservicecidr.Strategy, svcnetnetworking.NewServiceCIDRStrategy(),
		func() (runtime.Object, runtime.Object) { return &networking.ServiceCIDR{}, &networking.ServiceCIDR{} },
		func() runtime.Object { return &networkingv1.ServiceCIDR{} }), in, old)
}

func serviceCIDRStatusCase(r *rand.Rand) string {
	old := storedServiceCIDR(r)
	in := old.DeepCopy()
	in.Status.Conditions = randConditions(r)
	if maybe(r, 0.2) {
		in.Spec.CIDRs = randServiceCIDRs(r) // discarded by the status strategy
	}
	if maybe(r, 0.1) {
		in.Labels = map[string]string{"bad key!": "x"}
	}
	st := svcnetnetworking.NewServiceCIDRStrategy().(interface{ StatusStrategy() registry.Strategy }).StatusStrategy()
	return withInput(compareClusterUpdate(in, old, "servicecidrs", "status", k8sservicecidr.StatusStrategy, st,
		func() (runtime.Object, runtime.Object) { return &networking.ServiceCIDR{}, &networking.ServiceCIDR{} },
		func() runtime.Object { return &networkingv1.ServiceCIDR{} }), in, old)
}

var ipAddressNames = []string{"10.96.0.10", "10.96.0.10", "fd00:96::a", "fd00:96::a", "010.96.0.10", "fd00:96:0::a", "FD00:96::A",
	"10.96.0.0/24", "bad", "::ffff:10.96.0.10", "0.0.0.0", "::"}

func randParentRef(r *rand.Rand) *networkingv1.ParentReference {
	if maybe(r, 0.1) {
		return nil
	}
	return &networkingv1.ParentReference{
		Group:     pick(r, "", "", "apps", "Bad_Group", "gateway.networking.k8s.io"),
		Resource:  pick(r, "services", "services", "", "a/b", "..", "%"),
		Namespace: pick(r, "default", "", "a/b", "kube-system"),
		Name:      pick(r, "web", "web", "", "a/b", ".", "Web_1"),
	}
}

func randIPAddress(r *rand.Rand) *networkingv1.IPAddress {
	ip := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: pick(r, ipAddressNames...)}, Spec: networkingv1.IPAddressSpec{ParentRef: randParentRef(r)}}
	if maybe(r, 0.1) {
		ip.GenerateName = "10.96.0."
	}
	if maybe(r, 0.1) {
		ip.Labels = map[string]string{pick(r, "ipaddress.kubernetes.io/managed-by", "bad key!"): pick(r, "ipallocator.k8s.io", "bad value!")}
	}
	return ip
}

func ipAddressCreateCase(r *rand.Rand) string {
	return compareCreate(randIPAddress(r), "networking.k8s.io", "ipaddresses", false, true, k8sipaddress.Strategy, svcnetnetworking.NewIPAddressStrategy(),
		func() runtime.Object { return &networking.IPAddress{} }, func() runtime.Object { return &networkingv1.IPAddress{} })
}

func ipAddressUpdateCase(r *rand.Rand) string {
	old := &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "10.96.0.10", UID: "uid-5", ResourceVersion: "12",
			Labels: map[string]string{"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}},
	}
	in := old.DeepCopy()
	switch r.Intn(3) {
	case 0:
		in.Spec.ParentRef = randParentRef(r)
	case 1:
		in.Labels = map[string]string{pick(r, "app", "bad key!"): "x"}
	case 2:
		in.Name = pick(r, ipAddressNames...)
	}
	return withInput(compareClusterUpdate(in, old, "ipaddresses", "", k8sipaddress.Strategy, svcnetnetworking.NewIPAddressStrategy(),
		func() (runtime.Object, runtime.Object) { return &networking.IPAddress{}, &networking.IPAddress{} },
		func() runtime.Object { return &networkingv1.IPAddress{} }), in, old)
}

// compareClusterUpdate runs an update of a cluster-scoped networking.k8s.io
// object through both strategies.
func compareClusterUpdate(in, old runtime.Object, resource, sub string, kst genericrest.RESTUpdateStrategy, st registry.Strategy,
	internal func() (runtime.Object, runtime.Object), versioned func() runtime.Object) string {
	return compareUpdate(in, old, "networking.k8s.io", resource, sub, false, kst, st, internal, versioned)
}

// compareCreate runs a create through both strategies: the defaulted
// objects, the prepared ones (unless !prepared) and the errors.
func compareCreate(in runtime.Object, group, resource string, namespaced, prepared bool, kst genericrest.RESTCreateStrategy, st registry.Strategy,
	internal, versioned func() runtime.Object) string {
	name := in.(metav1.Object).GetName()
	ctx := clusterCtx("create", group, "v1", resource, "", name)
	if namespaced {
		ctx = requestCtx("create", group, "v1", resource, "", name)
	}

	kv := in.DeepCopyObject()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopyObject()
	ki := internal()
	toInternal(kv, ki)
	// What kube-apiserver's PrepareForCreate warns about (the pod
	// strategy's AppArmor annotations) goes to the request's recorder.
	rec := &warnings{}
	kst.PrepareForCreate(warning.WithWarningRecorder(ctx, rec), ki)
	kErrs := genericrest.ValidateCreate(ctx, ki, kst)
	kPrepared := versioned()
	toInternal(ki, kPrepared)

	sv := in.DeepCopyObject()
	st.Default(sv)
	sDefaulted := sv.DeepCopyObject()
	var sPrepareWarnings []string
	st.PrepareForCreate(registry.WithWarningSink(ctx, func(w string) { sPrepareWarnings = append(sPrepareWarnings, w) }), sv)
	sErrs := registry.ValidateCreate(ctx, st, namespaced, sv)
	preparedDiff := ""
	if prepared {
		preparedDiff = compareObjs("prepared", kPrepared, sv)
	}
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings("create", append(rec.list, kst.WarningsOnCreate(ctx, ki)...), append(sPrepareWarnings, createWarnings(ctx, st, sv)...))
	}
	return withInput(joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), preparedDiff, compareErrs("create", kErrs, sErrs), warnDiff), in)
}

// compareUpdate runs an update (of subresource sub) through both
// strategies: the defaulted objects, the prepared ones and the errors.
func compareUpdate(in, old runtime.Object, group, resource, sub string, namespaced bool, kst genericrest.RESTUpdateStrategy, st registry.Strategy,
	internal func() (runtime.Object, runtime.Object), versioned func() runtime.Object) string {
	name := ""
	if a, ok := in.(metav1.Object); ok {
		name = a.GetName()
	}
	ctx := clusterCtx("update", group, "v1", resource, sub, name)
	if namespaced {
		ctx = requestCtx("update", group, "v1", resource, sub, name)
	}

	kv := in.DeepCopyObject()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopyObject()
	ki, kold := internal()
	toInternal(kv, ki)
	toInternal(old.DeepCopyObject(), kold)
	kst.PrepareForUpdate(ctx, ki, kold)
	kErrs := genericrest.ValidateUpdate(ctx, ki, kold, kst)
	kPrepared := versioned()
	toInternal(ki, kPrepared)

	sv := in.DeepCopyObject()
	st.Default(sv)
	sDefaulted := sv.DeepCopyObject()
	st.PrepareForUpdate(ctx, sv, old.DeepCopyObject())
	sErrs := registry.ValidateUpdate(ctx, st, namespaced, sv, old.DeepCopyObject())
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings(strings.TrimSpace("update "+sub), kst.WarningsOnUpdate(ctx, ki, kold), updateWarnings(ctx, st, sv, old))
	}
	return joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), compareObjs("prepared", kPrepared, sv),
		compareErrs(strings.TrimSpace("update "+sub), kErrs, sErrs), warnDiff)
}
