package networkpolicy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestDefaults(t *testing.T) {
	np := &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(80))}}}},
	}}
	SetDefaults(np)
	if got := np.Spec.PolicyTypes; len(got) != 1 || got[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policyTypes %v", got)
	}
	if p := np.Spec.Ingress[0].Ports[0].Protocol; p == nil || *p != corev1.ProtocolTCP {
		t.Errorf("protocol %v", p)
	}
	np.Spec.PolicyTypes = nil
	np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	SetDefaults(np)
	if got := np.Spec.PolicyTypes; len(got) != 2 || got[1] != networkingv1.PolicyTypeEgress {
		t.Errorf("policyTypes with egress %v", got)
	}
	// An explicit Egress-only policy stays Egress-only.
	np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	SetDefaults(np)
	if got := np.Spec.PolicyTypes; len(got) != 1 || got[0] != networkingv1.PolicyTypeEgress {
		t.Errorf("explicit policyTypes changed: %v", got)
	}
}

// TestValidate checks field paths and messages as kube-apiserver 1.37's
// ValidateNetworkPolicySpec gives them.
func TestValidate(t *testing.T) {
	port := func(p intstr.IntOrString, end *int32, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Port: &p, EndPort: end, Protocol: &proto}
	}
	ingress := func(ports []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicySpec {
		return networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports, From: peers}}}
	}
	ipb := func(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
	}
	cases := []struct {
		name string
		spec networkingv1.NetworkPolicySpec
		want []string // one per error, in order; none = valid
	}{
		{"empty", networkingv1.NetworkPolicySpec{}, nil},
		{"ok ports", ingress([]networkingv1.NetworkPolicyPort{port(intstr.FromInt32(80), ptr.To[int32](90), "TCP"), port(intstr.FromString("dns"), nil, "UDP"), port(intstr.FromInt32(9), nil, "SCTP")}), nil},
		{"endPort below port", ingress([]networkingv1.NetworkPolicyPort{port(intstr.FromInt32(90), ptr.To[int32](80), "TCP")}),
			[]string{"spec.ingress[0].ports[0].endPort: Invalid value: 80: must be greater than or equal to `port`"}},
		{"endPort too big", ingress([]networkingv1.NetworkPolicyPort{port(intstr.FromInt32(90), ptr.To[int32](70000), "TCP")}),
			[]string{"spec.ingress[0].ports[0].endPort: Invalid value: 70000: must be between 1 and 65535, inclusive"}},
		{"named port with endPort", ingress([]networkingv1.NetworkPolicyPort{port(intstr.FromString("http"), ptr.To[int32](80), "TCP")}),
			[]string{"spec.ingress[0].ports[0].endPort: Invalid value: 80: may not be specified when `port` is non-numeric"}},
		{"endPort without port", ingress([]networkingv1.NetworkPolicyPort{{EndPort: ptr.To[int32](80)}}),
			[]string{"spec.ingress[0].ports[0].endPort: Invalid value: 80: may not be specified when `port` is not specified"}},
		{"bad protocol and port", ingress([]networkingv1.NetworkPolicyPort{port(intstr.FromInt32(0), nil, "ICMP")}),
			[]string{`spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"`,
				"spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"}},
		{"bad port name", ingress([]networkingv1.NetworkPolicyPort{port(intstr.FromString("-x"), nil, "TCP")}),
			[]string{`spec.ingress[0].ports[0].port: Invalid value: "-x": must not begin or end with a hyphen`}},
		{"invalid cidr", ingress(nil, ipb("10.0.0.0/33")),
			[]string{`spec.ingress[0].from[0].ipBlock.cidr: Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`}},
		{"cidr with host bits", ingress(nil, ipb("10.0.0.1/8")),
			[]string{`spec.ingress[0].from[0].ipBlock.cidr: Invalid value: "10.0.0.1/8": must not have bits set beyond the prefix length`}},
		{"cidr required", ingress(nil, ipb("")),
			[]string{`spec.ingress[0].from[0].ipBlock.cidr: Required value`}},
		{"except outside", ingress(nil, ipb("10.0.0.0/16", "10.0.1.0/24", "10.1.0.0/24", "10.0.0.0/16")),
			[]string{"spec.ingress[0].from[0].ipBlock.except[1]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`",
				"spec.ingress[0].from[0].ipBlock.except[2]: Invalid value: \"10.0.0.0/16\": must be a strict subset of `cidr`"}},
		{"empty peer", ingress(nil, networkingv1.NetworkPolicyPeer{}),
			[]string{"spec.ingress[0].from[0]: Required value: must specify a peer"}},
		{"ipBlock and selector", ingress(nil, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}}),
			[]string{"spec.ingress[0].from[0]: Forbidden: may not specify both ipBlock and another peer"}},
		{"bad selector", networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "In"}}}}}}}},
			[]string{"spec.egress[0].to[0].namespaceSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"}},
		{"unknown policyType", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Ingress", "Sideways"}},
			[]string{`spec.policyTypes[1]: Unsupported value: "Sideways": supported values: "Ingress", "Egress"`}},
		{"three policyTypes", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Ingress", "Egress", "Ingress"}},
			[]string{`spec.policyTypes: Invalid value: ["Ingress","Egress","Ingress"]: may not specify more than two policyTypes`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := Validate(&networkingv1.NetworkPolicy{Spec: c.spec})
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(c.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], c.want[i]) {
					t.Errorf("error %d:\n got %s\nwant %s", i, got[i], c.want[i])
				}
			}
		})
	}
}

// TestValidateUpdateRatchets: a CIDR already stored (from before the strict
// IP rules) may stay; a new one may not.
func TestValidateUpdateRatchets(t *testing.T) {
	mk := func(cidr string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}}}}}}
	}
	old := mk("010.0.0.0/8")
	if errs := Validate(old); len(errs) == 0 {
		t.Fatal("leading zeros accepted on create")
	}
	if errs := ValidateUpdate(mk("010.0.0.0/8"), old); len(errs) != 0 {
		t.Errorf("stored CIDR refused on update: %v", errs)
	}
	if errs := ValidateUpdate(mk("011.0.0.0/8"), old); len(errs) == 0 {
		t.Error("new invalid CIDR accepted on update")
	}
}
