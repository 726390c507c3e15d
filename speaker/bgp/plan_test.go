package bgp

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/apis/metallb/v1beta2"
	"github.com/svcnet/svcnet/apis/metallb/validation"
	"github.com/svcnet/svcnet/controller/lbipam"
	"github.com/svcnet/svcnet/speaker"
)

func node(name string, labels map[string]string, ip string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func input(t *testing.T, policy corev1.ServiceExternalTrafficPolicy, endpointNodes ...string) *speaker.ServiceInput {
	pool, err := lbipam.ParsePool(&v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: "pool"},
		Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"172.18.255.200-172.18.255.250"}}})
	if err != nil {
		t.Fatal(err)
	}
	ready := true
	es := &discoveryv1.EndpointSlice{}
	for i, n := range endpointNodes {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0." + string(rune('1'+i))},
			NodeName: &n, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return &speaker.ServiceInput{
		Key:     types.NamespacedName{Namespace: "default", Name: "web"},
		Service: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy}},
		IPs:     []netip.Addr{netip.MustParseAddr("172.18.255.200")},
		Pool:    &speaker.Pool{Pool: pool, Namespace: "metallb-system"},
		Slices:  []*discoveryv1.EndpointSlice{es},
		Nodes: map[string]*corev1.Node{
			"n1": node("n1", map[string]string{"rack": "a"}, "172.18.0.2"),
			"n2": node("n2", map[string]string{"rack": "b"}, "172.18.0.3"),
		},
		MyNode: "n1",
	}
}

func ad(name string, f func(*v1beta1.BGPAdvertisementSpec)) *v1beta1.BGPAdvertisement {
	a := &v1beta1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: name}}
	if f != nil {
		f(&a.Spec)
	}
	return a
}

func ptr[T any](v T) *T { return &v }

func TestShouldAnnounce(t *testing.T) {
	all := []*v1beta1.BGPAdvertisement{ad("all", nil)}
	// sel is an advertisement for Services labelled app=<app>.
	sel := func(name, app string, localPref uint32) *v1beta1.BGPAdvertisement {
		return ad(name, func(s *v1beta1.BGPAdvertisementSpec) {
			s.ServiceSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"app": app}}}
			s.LocalPref = localPref
		})
	}
	peers := func(a *v1beta1.BGPAdvertisement, names ...string) *v1beta1.BGPAdvertisement {
		a.Spec.Peers = names
		return a
	}
	for _, tc := range []struct {
		name string
		in   *speaker.ServiceInput
		ads  []*v1beta1.BGPAdvertisement
		want string
	}{
		{"cluster, endpoint elsewhere", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n2"), all, ""},
		{"cluster, no endpoints", input(t, corev1.ServiceExternalTrafficPolicyCluster), all, "noEndpoints"},
		{"local, endpoint here", input(t, corev1.ServiceExternalTrafficPolicyLocal, "n1"), all, ""},
		{"local, endpoint elsewhere", input(t, corev1.ServiceExternalTrafficPolicyLocal, "n2"), all, "noLocalEndpoints"},
		// No advertisement of the pool selects this node: "notOwner", as
		// MetalLB's poolMatchesNodeBGP.
		{"no advertisement", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"), nil, "notOwner"},
		{"other pool", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{ad("a", func(s *v1beta1.BGPAdvertisementSpec) { s.IPAddressPools = []string{"other"} })}, "notOwner"},
		{"other nodes", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{ad("a", func(s *v1beta1.BGPAdvertisementSpec) {
				s.NodeSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"rack": "b"}}}
			})}, "notOwner"},
		{"other services", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{ad("a", func(s *v1beta1.BGPAdvertisementSpec) {
				s.ServiceSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "db"}}}
			})}, "noMatchingAdvertisement"},
		{"other services here, this one's advertisement on other nodes", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{sel("db", "db", 0), ad("web", func(s *v1beta1.BGPAdvertisementSpec) {
				s.ServiceSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}}
				s.NodeSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"rack": "b"}}}
			})}, "noMatchingAdvertisement"},
		{"serviceSelectors match", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{sel("web", "web", 0)}, ""},
		// The webhook lets advertisements with serviceSelectors differ in
		// localPref; the speaker refuses the Services they both carry.
		{"two advertisements of the Service with different localPref", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{sel("a", "web", 100), sel("b", "web", 200)}, "conflictingAdvertisements"},
		{"conflict checked before the node's conditions", func() *speaker.ServiceInput {
			in := input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1")
			in.Nodes["n1"].Labels[corev1.LabelNodeExcludeBalancers] = ""
			return in
		}(), []*v1beta1.BGPAdvertisement{sel("a", "web", 100), all[0]}, "conflictingAdvertisements"},
		{"same localPref: no conflict", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{sel("a", "web", 100), sel("b", "web", 100)}, ""},
		{"different localPref for other Services only", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{sel("a", "web", 100), sel("b", "db", 200)}, ""},
		{"different localPref, different IPv4 aggregation: no conflict", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{sel("a", "web", 100), ad("b", func(s *v1beta1.BGPAdvertisementSpec) { s.LocalPref = 200; s.AggregationLength = ptr(int32(28)) })}, ""},
		{"different localPref, only the IPv6 aggregation differs on an IPv4 pool: conflict", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{sel("a", "web", 100), ad("b", func(s *v1beta1.BGPAdvertisementSpec) { s.LocalPref = 200; s.AggregationLengthV6 = ptr(int32(64)) })}, "conflictingAdvertisements"},
		{"different localPref, disjoint peers: no conflict", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{peers(sel("a", "web", 100), "edge"), peers(sel("b", "web", 200), "core")}, ""},
		{"different localPref, a shared peer: conflict", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{peers(sel("a", "web", 100), "edge", "core"), peers(sel("b", "web", 200), "core")}, "conflictingAdvertisements"},
		{"different localPref, one for every peer: conflict", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{peers(sel("a", "web", 100), "edge"), sel("b", "web", 200)}, "conflictingAdvertisements"},
		{"different localPref, the other advertisement not on this node", input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1"),
			[]*v1beta1.BGPAdvertisement{sel("a", "web", 100), ad("b", func(s *v1beta1.BGPAdvertisementSpec) {
				s.LocalPref = 200
				s.NodeSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"rack": "b"}}}
			})}, ""},
	} {
		if got := ShouldAnnounce(tc.in, tc.ads); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	in := input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1")
	if err := ConflictingAds(in.Pool, []*v1beta1.BGPAdvertisement{sel("a", "web", 100), sel("b", "web", 200)}); err == nil ||
		err.Error() != "advertisements 'a' and 'b' have conflicting LOCAL_PREF (100 vs 200)" {
		t.Errorf("ConflictingAds: %v", err)
	}
	in.Nodes["n1"].Labels[corev1.LabelNodeExcludeBalancers] = ""
	if got := ShouldAnnounce(in, all); got != "nodeLabeledExcludeBalancers" {
		t.Errorf("excluded node: %q", got)
	}
}

func TestAnnouncementsAndRoutes(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	in := input(t, corev1.ServiceExternalTrafficPolicyCluster, "n1")
	ads := []*v1beta1.BGPAdvertisement{
		ad("host", func(s *v1beta1.BGPAdvertisementSpec) {
			s.Communities = []string{"no-advertise", "large:1:2:3"}
			s.LocalPref = 50
		}),
		ad("agg", func(s *v1beta1.BGPAdvertisementSpec) { s.AggregationLength = i32(28); s.Peers = []string{"core"} }),
		ad("bad", func(s *v1beta1.BGPAdvertisementSpec) {
			s.Communities = []string{"missing-alias"}
			s.Peers = []string{"core"}
		}),
	}
	aliases := map[string]validation.Community{"no-advertise": {Value: 0xffffff02}}
	anns, errs := Announcements(in, ads, aliases)
	if len(errs) != 1 {
		t.Errorf("errors: %v", errs)
	}
	var got []string
	for _, a := range anns {
		got = append(got, a.key()+" "+slices.Concat(a.Peers, []string{"-"})[0])
	}
	want := []string{
		"172.18.255.200/32|65535:65282,large:1:2:3|50 -",
		"172.18.255.192/28||0 core",
		"172.18.255.200/32||0 core",
	}
	if !slices.Equal(got, want) {
		t.Errorf("announcements:\n got %q\nwant %q", got, want)
	}
	edge := RoutesFor(PeerConfig{PeerName: "edge"}, anns)
	core := RoutesFor(PeerConfig{PeerName: "core"}, anns)
	if len(edge) != 1 || len(core) != 3 {
		t.Errorf("edge %v, core %v", edge, core)
	}
}

func TestPeersFor(t *testing.T) {
	peer := func(name string, f func(*v1beta2.BGPPeerSpec)) *v1beta2.BGPPeer {
		p := &v1beta2.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: name},
			Spec: v1beta2.BGPPeerSpec{MyASN: 64512, ASN: 64500, Address: "172.18.0.1"}}
		if f != nil {
			f(&p.Spec)
		}
		return p
	}
	peers := []*v1beta2.BGPPeer{
		peer("all", func(s *v1beta2.BGPPeerSpec) {
			s.HoldTime = &metav1.Duration{Duration: 9 * time.Second}
			s.Password = "x"
		}),
		peer("rack-b", func(s *v1beta2.BGPPeerSpec) {
			s.NodeSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"rack": "b"}}}
		}),
		peer("bad", func(s *v1beta2.BGPPeerSpec) { s.MyASN = 0 }),
		peer("secret", func(s *v1beta2.BGPPeerSpec) { s.PasswordSecret.Name = "pw" }),
		peer("multihop", func(s *v1beta2.BGPPeerSpec) {
			s.EBGPMultiHop = true
			s.SrcAddress = "172.18.0.2"
			s.RouterID = "1.1.1.1"
			s.Port = 1179
		}),
	}
	got, errs := PeersFor(peers, node("n1", map[string]string{"rack": "a"}, "172.18.0.2"))
	if len(errs) != 2 {
		t.Errorf("errors: %v", errs)
	}
	want := []PeerConfig{
		{Name: "metallb-system/all", PeerName: "all", MyASN: 64512, PeerASN: 64500, Address: netip.MustParseAddr("172.18.0.1"), Port: 179,
			RouterID: netip.MustParseAddr("172.18.0.2"), HoldTime: 9 * time.Second, Keepalive: 3 * time.Second, Password: "x"},
		{Name: "metallb-system/multihop", PeerName: "multihop", MyASN: 64512, PeerASN: 64500, Address: netip.MustParseAddr("172.18.0.1"), Port: 1179,
			RouterID: netip.MustParseAddr("1.1.1.1"), SourceAddress: netip.MustParseAddr("172.18.0.2"), EBGPMultiHop: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("peers:\n got %+v\nwant %+v", got, want)
	}
	m := peerMessage(want[1])
	if !m.EbgpMultihop.Enabled || m.EbgpMultihop.MultihopTtl != 255 || m.Transport.LocalAddress != "172.18.0.2" || m.Transport.RemotePort != 1179 {
		t.Errorf("gobgp peer: %v", m)
	}
}
