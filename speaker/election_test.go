package speaker

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/controller/lbipam"
)

func node(name string, ready bool, lbls map[string]string) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
}

func slice(eps ...discoveryv1.Endpoint) []*discoveryv1.EndpointSlice {
	return []*discoveryv1.EndpointSlice{{Endpoints: eps}}
}

func ep(nodeName string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{"10.244.0.1"}, NodeName: &nodeName,
		Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
}

// TestSortCandidates: the order depends only on the names and the address
// (every speaker of a cluster must agree on it), and is the order of
// sha256(node+"#"+ip).
func TestSortCandidates(t *testing.T) {
	nodes := []string{"node-a", "node-b", "node-c", "node-d"}
	for _, ip := range []string{"172.18.0.200", "172.18.0.201", "fd00::200"} {
		got := slices.Clone(nodes)
		SortCandidates(got, netip.MustParseAddr(ip))
		// Every permutation of the input sorts to the same order.
		rev := slices.Clone(nodes)
		slices.Reverse(rev)
		SortCandidates(rev, netip.MustParseAddr(ip))
		if !slices.Equal(got, rev) {
			t.Fatalf("%s: order depends on input order: %v vs %v", ip, got, rev)
		}
	}
	// The same order as sorting the digests' hex text.
	got := slices.Clone(nodes)
	SortCandidates(got, netip.MustParseAddr("172.18.0.200"))
	if want := expectedOrder(nodes, "172.18.0.200"); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestElectL2(t *testing.T) {
	pool := &Pool{Pool: &lbipam.Pool{Name: "p"}, Namespace: "metallb-system"}
	all := &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: "metallb-system"}}
	onlyB := &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "metallb-system"},
		Spec: metallbv1beta1.L2AdvertisementSpec{NodeSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": "b"}}}}}
	ip := netip.MustParseAddr("172.18.0.200")
	// The hash order of the three nodes for ip decides the Cluster cases.
	order := expectedOrder([]string{"n1", "n2", "n3"}, ip.String())
	first, second := order[0], order[1]
	nodes := func(mod func(map[string]*corev1.Node)) map[string]*corev1.Node {
		m := map[string]*corev1.Node{"n1": node("n1", true, nil), "n2": node("n2", true, map[string]string{"zone": "b"}), "n3": node("n3", true, nil)}
		if mod != nil {
			mod(m)
		}
		return m
	}
	alive := map[string]bool{"n1": true, "n2": true, "n3": true}
	without := func(n string) map[string]bool {
		m := map[string]bool{}
		for k := range alive {
			if k != n {
				m[k] = true
			}
		}
		return m
	}
	cases := []struct {
		name       string
		policy     corev1.ServiceExternalTrafficPolicy
		ads        []*metallbv1beta1.L2Advertisement
		slices     []*discoveryv1.EndpointSlice
		nodes      map[string]*corev1.Node
		speakers   map[string]bool
		wantWinner string
		wantReason string
	}{
		{"cluster: first by hash", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(nil), alive, first, ""},
		{"no serving endpoint: nobody", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", false)), nodes(nil), alive, "", "notOwner"},
		{"no endpoints at all: nobody", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			nil, nodes(nil), alive, "", "notOwner"},
		{"no advertisement: nobody", corev1.ServiceExternalTrafficPolicyCluster, nil,
			slice(ep("n1", true)), nodes(nil), alive, "", "noMatchingAdvertisement"},
		{"winner's speaker dead: next by hash", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(nil), without(first), second, ""},
		{"winner NotReady: next by hash", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) { m[first] = node(first, false, m[first].Labels) }), alive, second, ""},
		{"winner excluded by label: next by hash", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) {
				m[first].Labels = map[string]string{corev1.LabelNodeExcludeBalancers: ""}
			}), alive, second, ""},
		{"winner NetworkUnavailable: next by hash", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) {
				m[first].Status.Conditions = append(m[first].Status.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue})
			}), alive, second, ""},
		{"node without Node object is no candidate", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) { delete(m, first) }), alive, second, ""},
		{"nodeSelectors restrict candidates", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{onlyB},
			slice(ep("n1", true)), nodes(nil), alive, "n2", ""},
		{"local: only nodes with a ready endpoint", corev1.ServiceExternalTrafficPolicyLocal, []*metallbv1beta1.L2Advertisement{all},
			slice(ep(second, true), ep(first, false)), nodes(nil), alive, second, ""},
		{"local: serving-while-terminating counts", corev1.ServiceExternalTrafficPolicyLocal, []*metallbv1beta1.L2Advertisement{all},
			slice(discoveryv1.Endpoint{NodeName: ptr(second), Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}}),
			nodes(nil), alive, second, ""},
		{"local: endpoint's node has no live speaker", corev1.ServiceExternalTrafficPolicyLocal, []*metallbv1beta1.L2Advertisement{all},
			slice(ep(second, true)), nodes(nil), without(second), "", "notOwner"},
		{"no live speaker", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(nil), map[string]bool{}, "", "notOwner"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: tc.policy}}
			in := &ServiceInput{Key: types.NamespacedName{Namespace: "default", Name: "s"}, Service: svc, IPs: []netip.Addr{ip},
				Pool: pool, L2Advertisements: tc.ads, Slices: tc.slices, Nodes: tc.nodes, Speakers: tc.speakers}
			w, r := ElectL2(in)
			if w != tc.wantWinner || r != tc.wantReason {
				t.Fatalf("ElectL2 = (%q, %q), want (%q, %q)", w, r, tc.wantWinner, tc.wantReason)
			}
			// Every node agrees: exactly the winner's ShouldAnnounce is "".
			l2 := &Layer2{}
			for name := range tc.nodes {
				in.MyNode = name
				got := l2.ShouldAnnounce(in)
				if (got == "") != (name == tc.wantWinner) {
					t.Errorf("node %s: ShouldAnnounce = %q (winner %q)", name, got, tc.wantWinner)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

type fakeResponder struct{ calls []string }

func (f *fakeResponder) SetBalancer(key string, ips []netip.Addr, ifs []string) {
	f.calls = append(f.calls, "set "+key)
}
func (f *fakeResponder) DeleteBalancer(key string) { f.calls = append(f.calls, "delete "+key) }

func TestLayer2InterfacesAndNoOpUpdates(t *testing.T) {
	n := node("n1", true, map[string]string{"zone": "a"})
	mk := func(name string, zone string, ifs ...string) *metallbv1beta1.L2Advertisement {
		ad := &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: metallbv1beta1.L2AdvertisementSpec{Interfaces: ifs}}
		if zone != "" {
			ad.Spec.NodeSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": zone}}}
		}
		return ad
	}
	in := &ServiceInput{Key: types.NamespacedName{Namespace: "d", Name: "s"}, IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
		Nodes: map[string]*corev1.Node{"n1": n}, MyNode: "n1"}
	in.L2Advertisements = []*metallbv1beta1.L2Advertisement{mk("x", "a", "eth1", "eth0"), mk("y", "b"), mk("z", "", "eth0")}
	if got := L2Interfaces(in); !slices.Equal(got, []string{"eth0", "eth1"}) {
		t.Fatalf("interfaces %v", got)
	}
	in.L2Advertisements = append(in.L2Advertisements, mk("w", "a"))
	if got := L2Interfaces(in); got != nil {
		t.Fatalf("an advertisement without interfaces means all; got %v", got)
	}
	f := &fakeResponder{}
	l2 := &Layer2{Responder: f}
	ctx := context.Background()
	_ = l2.SetBalancer(ctx, in)
	_ = l2.SetBalancer(ctx, in)
	in.IPs = append(in.IPs, netip.MustParseAddr("fd00::1"))
	_ = l2.SetBalancer(ctx, in)
	_ = l2.DeleteBalancer(ctx, in.Key, "x")
	if want := []string{"set d/s", "set d/s", "delete d/s"}; !slices.Equal(f.calls, want) {
		t.Fatalf("responder calls %v, want %v", f.calls, want)
	}
}

func TestAdvertisementSelectsPool(t *testing.T) {
	p := &Pool{Pool: &lbipam.Pool{Name: "first"}, Namespace: "ns", Labels: map[string]string{"tier": "gold"}}
	sel := []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "gold"}}}
	other := []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "iron"}}}
	for _, tc := range []struct {
		ns    string
		names []string
		sels  []metav1.LabelSelector
		want  bool
	}{
		{"ns", nil, nil, true},
		{"other", nil, nil, false},
		{"ns", []string{"first"}, nil, true},
		{"ns", []string{"second"}, nil, false},
		{"ns", []string{"second"}, sel, true},
		{"ns", nil, other, false},
	} {
		if got := AdvertisementSelectsPool(tc.ns, tc.names, tc.sels, p); got != tc.want {
			t.Errorf("%+v: got %v", tc, got)
		}
	}
}
