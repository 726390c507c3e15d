package netpol

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Helpers to write policies the way the upstream tests' builders do.
func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func np(ns, name string, pods *metav1.LabelSelector, types []networkingv1.PolicyType, in []networkingv1.NetworkPolicyIngressRule, eg []networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *pods, PolicyTypes: types, Ingress: in, Egress: eg}}
}

var (
	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	both        = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
)

func port(p int32, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Port: ptr.To(intstr.FromInt32(p)), Protocol: &proto}
}

func named(n string, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Port: ptr.To(intstr.FromString(n)), Protocol: &proto}
}

func from(peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyIngressRule {
	return networkingv1.NetworkPolicyIngressRule{From: peers}
}

func to(peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{To: peers}
}

func pods(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: s}
}

func nss(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: s}
}

func block(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func is(p peer, ns, pod string) bool { return p.ns == ns && p.pod == pod }

// truthTable is the upstream method: one policy set, the full expected
// reachability over 9 pods x 9 pods x ports, written by hand. Pods a and c
// are on node 1 (10.244.1.x), b on node 2 (10.244.2.x); x/a is 10.244.1.10,
// z/c is 10.244.1.18.
var truthTable = []struct {
	name     string
	policies []*networkingv1.NetworkPolicy
	ports    []portProto
	want     func(from, to peer, port int, proto string) bool
}{
	{"no policy: all reach all", nil, nil,
		func(from, to peer, port int, proto string) bool { return true }},
	{"deny all ingress in x", []*networkingv1.NetworkPolicy{np("x", "deny", sel(), ingressOnly, nil, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return to.ns != "x" }},
	{"deny all egress in x", []*networkingv1.NetworkPolicy{np("x", "deny", sel(), egressOnly, nil, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return from.ns != "x" }},
	{"deny all ingress and egress in x", []*networkingv1.NetworkPolicy{np("x", "deny", sel(), both, nil, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return from.ns != "x" && to.ns != "x" }},
	{"allow all ingress in x", []*networkingv1.NetworkPolicy{np("x", "allow", sel(), ingressOnly, []networkingv1.NetworkPolicyIngressRule{{}}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return true }},
	{"allow within namespace x", []*networkingv1.NetworkPolicy{np("x", "same-ns", sel(), ingressOnly, []networkingv1.NetworkPolicyIngressRule{from(pods(sel()))}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return to.ns != "x" || from.ns == "x" }},
	{"x/a from x/b only", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{from(pods(sel("pod", "b")))}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || is(from, "x", "b") }},
	{"x/a from namespace y", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{from(nss(sel("ns", "y")))}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || from.ns == "y" }},
	{"x/a from namespace y AND pod c", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "y"), PodSelector: sel("pod", "c")})}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || is(from, "y", "c") }},
	{"x/a from namespace y OR pod c of x", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		from(nss(sel("ns", "y")), pods(sel("pod", "c")))}, nil)}, nil,
		func(from, to peer, port int, proto string) bool {
			return !is(to, "x", "a") || from.ns == "y" || is(from, "x", "c")
		}},
	{"x/a from namespaces not x (matchExpressions)", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		from(nss(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x"}}}}))}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || from.ns != "x" }},
	{"x/a on 80/TCP only", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		{Ports: []networkingv1.NetworkPolicyPort{port(80, corev1.ProtocolTCP)}}}, nil)}, nil,
		func(from, to peer, port int, proto string) bool {
			return !is(to, "x", "a") || port == 80 && proto == "TCP"
		}},
	{"x/a on 81/UDP from namespace z only", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		{Ports: []networkingv1.NetworkPolicyPort{port(81, corev1.ProtocolUDP)}, From: []networkingv1.NetworkPolicyPeer{nss(sel("ns", "z"))}}}, nil)}, nil,
		func(from, to peer, port int, proto string) bool {
			return !is(to, "x", "a") || port == 81 && proto == "UDP" && from.ns == "z"
		}},
	{"x/a on named port serve-81-tcp", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		{Ports: []networkingv1.NetworkPolicyPort{named("serve-81-tcp", corev1.ProtocolTCP)}}}, nil)}, nil,
		func(from, to peer, port int, proto string) bool {
			return !is(to, "x", "a") || port == 81 && proto == "TCP"
		}},
	{"all of x on named port serve-80-udp (resolved per pod)", []*networkingv1.NetworkPolicy{np("x", "p", sel(), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		{Ports: []networkingv1.NetworkPolicyPort{named("serve-80-udp", corev1.ProtocolUDP)}}}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return to.ns != "x" || port == 80 && proto == "UDP" }},
	{"x/a on TCP 80-81 (endPort)", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(80)), EndPort: ptr.To[int32](81), Protocol: ptr.To(corev1.ProtocolTCP)}}}}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || proto == "TCP" }},
	{"x/a on UDP 75-80 (endPort excludes 81)", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(75)), EndPort: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolUDP)}}}}, nil)}, nil,
		func(from, to peer, port int, proto string) bool {
			return !is(to, "x", "a") || proto == "UDP" && port == 80
		}},
	{"x/a any UDP port (protocol only)", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP)}}}}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || proto == "UDP" }},
	{"x/a from ipBlock 10.244.0.0/16 except node 2's pods", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		from(block("10.244.0.0/16", "10.244.2.0/24"))}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || from.pod != "b" }},
	{"x/a from ipBlock except one pod (z/c) plus pods of y", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		from(block("10.244.1.0/24", "10.244.1.18/32"), nss(sel("ns", "y")))}, nil)}, nil,
		func(from, to peer, port int, proto string) bool {
			return !is(to, "x", "a") || from.ns == "y" || from.pod != "b" && !is(from, "z", "c")
		}},
	{"x/a egress to namespace y only", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{to(nss(sel("ns", "y")))})}, nil,
		func(from, to peer, port int, proto string) bool { return !is(from, "x", "a") || to.ns == "y" }},
	{"x/a egress to DNS only (53/UDP)", []*networkingv1.NetworkPolicy{np("x", "dns", sel("pod", "a"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
		{Ports: []networkingv1.NetworkPolicyPort{port(53, corev1.ProtocolUDP), port(53, corev1.ProtocolTCP)}}})},
		append([]portProto{{53, "UDP"}}, defaultPorts...),
		func(from, to peer, port int, proto string) bool { return !is(from, "x", "a") || port == 53 }},
	{"x/a egress to ipBlock except z/c", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
		to(block("10.244.0.0/16", "10.244.1.18/32"))})}, nil,
		func(from, to peer, port int, proto string) bool { return !is(from, "x", "a") || !is(to, "z", "c") }},
	{"x/a egress on named port serve-80-udp (resolved on destinations)", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
		{Ports: []networkingv1.NetworkPolicyPort{named("serve-80-udp", corev1.ProtocolUDP)}}})}, nil,
		func(from, to peer, port int, proto string) bool {
			return !is(from, "x", "a") || port == 80 && proto == "UDP"
		}},
	{"x egress to pods c of all namespaces", []*networkingv1.NetworkPolicy{np("x", "p", sel(), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
		to(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel(), PodSelector: sel("pod", "c")})})}, nil,
		func(from, to peer, port int, proto string) bool { return from.ns != "x" || to.pod == "c" }},
	{"x/a ingress from y and egress to z (both types)", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), both,
		[]networkingv1.NetworkPolicyIngressRule{from(nss(sel("ns", "y")))}, []networkingv1.NetworkPolicyEgressRule{to(nss(sel("ns", "z")))})}, nil,
		func(from, to peer, port int, proto string) bool {
			return (!is(to, "x", "a") || from.ns == "y") && (!is(from, "x", "a") || to.ns == "z")
		}},
	{"two policies on x/a add up (from y, from z)", []*networkingv1.NetworkPolicy{
		np("x", "from-y", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{from(nss(sel("ns", "y")))}, nil),
		np("x", "from-z", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{from(nss(sel("ns", "z")))}, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || from.ns != "x" }},
	{"deny all in z except pod c (matchExpressions In)", []*networkingv1.NetworkPolicy{np("z", "p",
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pod", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}, ingressOnly, nil, nil)}, nil,
		func(from, to peer, port int, proto string) bool { return to.ns != "z" || to.pod == "c" }},
	{"egress deny of x meets ingress allow of y (egress wins)", []*networkingv1.NetworkPolicy{
		np("x", "deny-eg", sel(), egressOnly, nil, nil),
		np("y", "allow-from-x", sel(), ingressOnly, []networkingv1.NetworkPolicyIngressRule{from(nss(sel("ns", "x")))}, nil)}, nil,
		func(from, to peer, port int, proto string) bool {
			return from.ns != "x" && (to.ns != "y" || from.ns == "x")
		}},
}

// TestTruthTable applies each policy set, probes the full matrix and
// compares it with the expected one, then removes the policies.
func TestTruthTable(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	for _, tc := range truthTable {
		t.Run(tc.name, func(t *testing.T) {
			b.t = t
			for _, p := range tc.policies {
				if _, err := b.client.NetworkingV1().NetworkPolicies(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() {
				for _, p := range tc.policies {
					_ = b.client.NetworkingV1().NetworkPolicies(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
				}
			})
			b.waitSynced()
			ports := tc.ports
			if ports == nil {
				ports = defaultPorts
			}
			b.check(ports, tc.want)
		})
	}
	b.t = t
	b.checkSyncs(t)
}

// TestPolicyChangesWithOpenConnections: a connection allowed when it was
// opened keeps working when a policy that denies it arrives (replies and
// later packets are conntrack-established), new connections are refused,
// and once the policy is removed new connections work again. The agents
// write only the difference each time (no full rewrite, no failed sync).
func TestPolicyChangesWithOpenConnections(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	src, dst := b.pods["y/b"], b.pods["x/a"] // node 2 -> node 1
	var conn net.Conn
	if err := src.netns.Do(func() (err error) {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(dst.ip, "80"), time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	echo := func() error {
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		_, err := io.ReadFull(conn, buf)
		return err
	}
	if err := echo(); err != nil {
		t.Fatalf("open connection before any policy: %v", err)
	}
	deny := np("x", "deny", sel(), both, nil, nil)
	if _, err := b.client.NetworkingV1().NetworkPolicies("x").Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.waitSynced()
	if (probe{src, dst, 80, "TCP", false}).try() {
		t.Error("new connection allowed under deny-all")
	}
	for i := 0; i < 3; i++ {
		if err := echo(); err != nil {
			t.Fatalf("open connection broken by the new policy: %v", err)
		}
	}
	if err := b.client.NetworkingV1().NetworkPolicies("x").Delete(ctx, "deny", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.waitSynced()
	if !(probe{src, dst, 80, "TCP", false}).try() || !(probe{src, dst, 81, "UDP", false}).try() {
		t.Error("new connections refused after the policy was removed")
	}
	if err := echo(); err != nil {
		t.Errorf("open connection after removal: %v", err)
	}
	b.checkSyncs(t)
}

// checkSyncs asserts that every sync after the first was incremental and
// none failed.
func (b *bed) checkSyncs(t *testing.T) {
	t.Helper()
	for i, a := range b.agents {
		if n := counter(a.cfg.Metrics.SyncErrorsTotal); n != 0 {
			t.Errorf("node%d: %v failed syncs", i+1, n)
		}
		if n := counter(a.cfg.Metrics.FullSyncsTotal); n != 1 {
			t.Errorf("node%d: %v full syncs, want 1 (then incremental ones)", i+1, n)
		}
	}
}

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// ipv6Want is, for the truth table's ipBlock rows, the expectation over
// IPv6: their IPv4 CIDRs match no IPv6 source or destination (selectors
// pick a pod's addresses of both families).
var ipv6Want = map[string]func(from, to peer, port int, proto string) bool{
	"x/a from ipBlock 10.244.0.0/16 except node 2's pods": func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") },
	"x/a from ipBlock except one pod (z/c) plus pods of y": func(from, to peer, port int, proto string) bool {
		return !is(to, "x", "a") || from.ns == "y"
	},
	"x/a egress to ipBlock except z/c": func(from, to peer, port int, proto string) bool { return !is(from, "x", "a") },
}

// ipv6BlockTable: IPv6 ipBlocks, each with its expectation over IPv4 and
// over IPv6. Pod i of node n is fd00:10:244:n::i (hex): z/c is
// fd00:10:244:1::12.
var ipv6BlockTable = []struct {
	name         string
	policies     []*networkingv1.NetworkPolicy
	want4, want6 func(from, to peer, port int, proto string) bool
}{
	{"x/a from ipBlock fd00:10:244::/48 except node 2's pods", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		from(block("fd00:10:244::/48", "fd00:10:244:2::/64"))}, nil)},
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") },
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || from.pod != "b" }},
	{"x/a egress to ipBlock ::/0 except z/c", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
		to(block("::/0", "fd00:10:244:1::12/128"))})},
		func(from, to peer, port int, proto string) bool { return !is(from, "x", "a") },
		func(from, to peer, port int, proto string) bool { return !is(from, "x", "a") || !is(to, "z", "c") }},
	{"x/a from node 1's pods over IPv4 and node 2's over IPv6 (one block per family)", []*networkingv1.NetworkPolicy{np("x", "p", sel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{
		from(block("10.244.1.0/24"), block("fd00:10:244:2::/64"))}, nil)},
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || from.pod != "b" },
		func(from, to peer, port int, proto string) bool { return !is(to, "x", "a") || from.pod == "b" }},
}

// TestTruthTableIPv6 (issue 16): the truth table over IPv6, on the same
// dual-stack pods: every policy set of TestTruthTable isolates IPv6 traffic
// as it isolates IPv4 traffic (IPv4 ipBlocks match no IPv6 peer), and IPv6
// ipBlocks, with except and beside IPv4 ones, are checked over both
// families.
func TestTruthTableIPv6(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	apply := func(t *testing.T, policies []*networkingv1.NetworkPolicy) {
		for _, p := range policies {
			if _, err := b.client.NetworkingV1().NetworkPolicies(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			for _, p := range policies {
				_ = b.client.NetworkingV1().NetworkPolicies(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			}
		})
		b.waitSynced()
	}
	for _, tc := range truthTable {
		t.Run(tc.name, func(t *testing.T) {
			b.t = t
			apply(t, tc.policies)
			ports := tc.ports
			if ports == nil {
				ports = defaultPorts
			}
			want := tc.want
			if w, ok := ipv6Want[tc.name]; ok {
				want = w
			}
			b.checkFamily(ports, true, want)
		})
	}
	for _, tc := range ipv6BlockTable {
		t.Run(tc.name, func(t *testing.T) {
			b.t = t
			apply(t, tc.policies)
			b.checkFamily(defaultPorts, false, tc.want4)
			b.checkFamily(defaultPorts, true, tc.want6)
		})
	}
	b.t = t
	b.checkSyncs(t)
}
