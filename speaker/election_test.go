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
	last := order[2]
	alive := map[string]bool{"n1": true, "n2": true, "n3": true}
	// zoneA labels one node zone=a; hostnames labels every node
	// kubernetes.io/hostname=<name>.
	zoneA := func(name string) func(map[string]*corev1.Node) {
		return func(m map[string]*corev1.Node) {
			if m[name].Labels == nil {
				m[name].Labels = map[string]string{}
			}
			m[name].Labels["zone"] = "a"
		}
	}
	hostnames := func(m map[string]*corev1.Node) {
		for name, n := range m {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[corev1.LabelHostname] = name
		}
	}
	prefer := func(name string, w int32) metallbv1beta1.PreferredNodeSelector {
		return metallbv1beta1.PreferredNodeSelector{Weight: w, Preference: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelHostname: name}}}
	}
	prefAd := func(name string, nodeSels []metav1.LabelSelector, prefs ...metallbv1beta1.PreferredNodeSelector) *metallbv1beta1.L2Advertisement {
		return &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "metallb-system"},
			Spec: metallbv1beta1.L2AdvertisementSpec{NodeSelectors: nodeSels, PreferredNodeSelectors: prefs}}
	}
	// forWebOnLast applies to Services labelled app=web, from zone=a
	// nodes; forAPI to Services labelled app=api, from every node.
	forWebOnLast := &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "metallb-system"},
		Spec: metallbv1beta1.L2AdvertisementSpec{NodeSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": "a"}}},
			ServiceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}}}}
	forAPI := &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "metallb-system"},
		Spec: metallbv1beta1.L2AdvertisementSpec{ServiceSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{"app": "other"}}, {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"api"}}}}}}}
	labelled := func(k, v string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Labels = map[string]string{k: v} }
	}
	shared := func(annotation, k, v string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Labels = map[string]string{k: v}
			s.Annotations = map[string]string{annotation: "key"}
		}
	}
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
		svc        func(*corev1.Service) // labels, annotations
	}{
		{"cluster: first by hash", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(nil), alive, first, "", nil},
		{"no serving endpoint: nobody", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", false)), nodes(nil), alive, "", "notOwner", nil},
		{"no endpoints at all: nobody", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			nil, nodes(nil), alive, "", "notOwner", nil},
		{"no advertisement: nobody", corev1.ServiceExternalTrafficPolicyCluster, nil,
			slice(ep("n1", true)), nodes(nil), alive, "", "noMatchingAdvertisement", nil},
		{"winner's speaker dead: next by hash", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(nil), without(first), second, "", nil},
		{"winner NotReady: next by hash", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) { m[first] = node(first, false, m[first].Labels) }), alive, second, "", nil},
		{"winner excluded by label: next by hash", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) {
				m[first].Labels = map[string]string{corev1.LabelNodeExcludeBalancers: ""}
			}), alive, second, "", nil},
		{"winner NetworkUnavailable: next by hash", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) {
				m[first].Status.Conditions = append(m[first].Status.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue})
			}), alive, second, "", nil},
		{"node without Node object is no candidate", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) { delete(m, first) }), alive, second, "", nil},
		{"nodeSelectors restrict candidates", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{onlyB},
			slice(ep("n1", true)), nodes(nil), alive, "n2", "", nil},
		{"local: only nodes with a ready endpoint", corev1.ServiceExternalTrafficPolicyLocal, []*metallbv1beta1.L2Advertisement{all},
			slice(ep(second, true), ep(first, false)), nodes(nil), alive, second, "", nil},
		{"local: serving-while-terminating counts", corev1.ServiceExternalTrafficPolicyLocal, []*metallbv1beta1.L2Advertisement{all},
			slice(discoveryv1.Endpoint{NodeName: ptr(second), Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}}),
			nodes(nil), alive, second, "", nil},
		{"local: endpoint's node has no live speaker", corev1.ServiceExternalTrafficPolicyLocal, []*metallbv1beta1.L2Advertisement{all},
			slice(ep(second, true)), nodes(nil), without(second), "", "notOwner", nil},
		{"no live speaker", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(nil), map[string]bool{}, "", "notOwner", nil},

		// serviceSelectors: an advertisement applies only to the Services
		// its selectors match (none: every Service).
		{"serviceSelectors match the Service", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{forWebOnLast},
			slice(ep("n1", true)), nodes(zoneA(last)), alive, last, "", labelled("app", "web")},
		{"serviceSelectors do not match: no advertisement", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{forWebOnLast},
			slice(ep("n1", true)), nodes(zoneA(last)), alive, "", "noMatchingAdvertisement", labelled("app", "api")},
		{"unlabelled Service: only advertisements without serviceSelectors", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{forWebOnLast},
			slice(ep("n1", true)), nodes(zoneA(last)), alive, "", "noMatchingAdvertisement", nil},
		{"candidates come only from the advertisements matching the Service", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{forWebOnLast, forAPI},
			slice(ep("n1", true)), nodes(zoneA(last)), alive, last, "", labelled("app", "web")},
		{"the other Service gets the other advertisement's nodes", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{forWebOnLast, forAPI},
			slice(ep("n1", true)), nodes(zoneA(last)), alive, first, "", labelled("app", "api")},

		// allow-shared-ip with serviceSelectors: nobody announces.
		{"shared IP and a serviceSelector: nobody", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{forWebOnLast},
			slice(ep("n1", true)), nodes(zoneA(last)), alive, "", "sharedIPWithServiceSelector", shared("metallb.io/allow-shared-ip", "app", "web")},
		{"shared IP (old annotation prefix) and a serviceSelector: nobody", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all, forWebOnLast},
			slice(ep("n1", true)), nodes(zoneA(last)), alive, "", "sharedIPWithServiceSelector", shared("metallb.universe.tf/allow-shared-ip", "app", "web")},
		{"shared IP, advertisements without serviceSelectors: elected as usual", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all},
			slice(ep("n1", true)), nodes(nil), alive, first, "", shared("metallb.io/allow-shared-ip", "app", "web")},
		{"shared IP, the selecting advertisement does not match the Service: elected as usual", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{all, forWebOnLast},
			slice(ep("n1", true)), nodes(zoneA(last)), alive, first, "", shared("metallb.io/allow-shared-ip", "app", "api")},
		{"shared IP without serving endpoints: notOwner first", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{forWebOnLast},
			slice(ep("n1", false)), nodes(zoneA(last)), alive, "", "notOwner", shared("metallb.io/allow-shared-ip", "app", "web")},

		// preferredNodeSelectors: the highest summed weight wins.
		{"a preferred node wins over hash order", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{prefAd("p", nil, prefer(last, 10))},
			slice(ep("n1", true)), nodes(hostnames), alive, last, "", nil},
		{"weights are summed over two advertisements", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{
			prefAd("p1", nil, prefer(last, 40), prefer(second, 30)), prefAd("p2", nil, prefer(second, 30), prefer(last, 10))},
			slice(ep("n1", true)), nodes(hostnames), alive, second, "", nil},
		{"weights of one advertisement's selectors are summed", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{
			prefAd("p", nil, prefer(last, 40), prefer(second, 30), metallbv1beta1.PreferredNodeSelector{Weight: 20, Preference: metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}})},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) { hostnames(m); m[second].Labels["zone"] = "a" }), alive, second, "", nil},
		{"a preference for a node the advertisement does not select counts for nothing", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{
			all, prefAd("p", []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": "a"}}}, prefer(second, 100), prefer(last, 1))},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) { hostnames(m); zoneA(last)(m) }), alive, last, "", nil},
		{"an ineligible preference alone: hash order", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{
			all, prefAd("p", []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": "a"}}}, prefer(second, 100))},
			slice(ep("n1", true)), nodes(func(m map[string]*corev1.Node) { hostnames(m); zoneA(last)(m) }), alive, first, "", nil},
		{"an empty preference weighs every node the advertisement selects", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{
			all, prefAd("p", []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": "a"}}}, metallbv1beta1.PreferredNodeSelector{Weight: 5})},
			slice(ep("n1", true)), nodes(zoneA(last)), alive, last, "", nil},
		{"equal weights fall back to hash order", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{
			prefAd("p", nil, prefer(last, 20), prefer(second, 20))},
			slice(ep("n1", true)), nodes(hostnames), alive, second, "", nil},
		{"preferred node's speaker dead: hash order among the rest", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{prefAd("p", nil, prefer(last, 50))},
			slice(ep("n1", true)), nodes(hostnames), without(last), first, "", nil},
		{"local: a preferred node without an endpoint is no candidate", corev1.ServiceExternalTrafficPolicyLocal, []*metallbv1beta1.L2Advertisement{prefAd("p", nil, prefer(last, 50), prefer(second, 5))},
			slice(ep(first, true), ep(second, true)), nodes(hostnames), alive, second, "", nil},
		{"preferences of an advertisement not matching the Service count for nothing", corev1.ServiceExternalTrafficPolicyCluster, []*metallbv1beta1.L2Advertisement{
			all, func() *metallbv1beta1.L2Advertisement {
				ad := prefAd("p", nil, prefer(last, 50))
				ad.Spec.ServiceSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}}
				return ad
			}()},
			slice(ep("n1", true)), nodes(hostnames), alive, first, "", labelled("app", "api")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: tc.policy}}
			if tc.svc != nil {
				tc.svc(svc)
			}
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

// TestL2InterfacesOfServiceAds: the interfaces come from this node's
// advertisements that apply to the Service (serviceSelectors), as in
// MetalLB; an advertisement for other Services adds none.
func TestL2InterfacesOfServiceAds(t *testing.T) {
	ad := func(name, app string, ifs ...string) *metallbv1beta1.L2Advertisement {
		a := &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: metallbv1beta1.L2AdvertisementSpec{Interfaces: ifs}}
		if app != "" {
			a.Spec.ServiceSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"app": app}}}
		}
		return a
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}}
	in := &ServiceInput{Service: svc, Nodes: map[string]*corev1.Node{"n1": node("n1", true, nil)}, MyNode: "n1",
		L2Advertisements: []*metallbv1beta1.L2Advertisement{ad("web", "web", "eth1"), ad("api", "api"), ad("web2", "web", "eth2")}}
	if got := L2Interfaces(in); !slices.Equal(got, []string{"eth1", "eth2"}) {
		t.Fatalf("interfaces %v, want [eth1 eth2] (the api advertisement, all interfaces, does not apply)", got)
	}
	svc.Labels["app"] = "api"
	if got := L2Interfaces(in); got != nil {
		t.Fatalf("interfaces for app=api %v, want all (nil)", got)
	}
}

// TestSortCandidatesByScore: higher scores first, equal scores (missing
// ones are 0) in SortCandidates' order; nil scores are SortCandidates.
func TestSortCandidatesByScore(t *testing.T) {
	ip := netip.MustParseAddr("172.18.0.200")
	nodes := []string{"node-a", "node-b", "node-c", "node-d"}
	hash := expectedOrder(nodes, ip.String()) // node-d node-b node-a node-c
	got := slices.Clone(nodes)
	SortCandidatesByScore(got, ip, nil)
	if !slices.Equal(got, hash) {
		t.Fatalf("nil scores: %v, want %v", got, hash)
	}
	got = slices.Clone(nodes)
	SortCandidatesByScore(got, ip, map[string]int64{"node-c": 150, "node-a": 7, "node-b": 7})
	if want := []string{"node-c", "node-b", "node-a", "node-d"}; !slices.Equal(got, want) {
		t.Fatalf("scored: %v, want %v", got, want)
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
