package proxy

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// Regressions found by hack/kpdiff against kube-proxy 1.37.

// kube-proxy orders a port's endpoints by their "IP:port" string, and the
// order decides which rule gets which probability.
func TestEndpointOrderIsKubeProxys(t *testing.T) {
	et := NewEndpointsChangeTracker("n1")
	et.EndpointSliceUpdate(testSlice("ns", "s", "s-1", 80, v1.ProtocolTCP,
		ep("10.0.0.9", "n1", true), ep("10.0.0.10", "n2", true), ep("10.0.0.8", "n2", true)), false)
	m := EndpointsMap{}
	et.Apply(m)
	var got []string
	for _, eps := range m {
		for _, e := range eps {
			got = append(got, e.String())
		}
	}
	want := []string{"10.0.0.10:80", "10.0.0.8:80", "10.0.0.9:80"}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("order %v, want %v", got, want)
	}
}

// An endpoint in two slices: the non-terminating copy wins, whichever
// slice comes first; an unset serving condition means serving.
func TestDuplicateEndpointAndServingDefault(t *testing.T) {
	term := discovery.Endpoint{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("n1"),
		Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}}
	notReady := discovery.Endpoint{Addresses: []string{"10.0.0.2"}, NodeName: ptr.To("n1"),
		Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(true)}}
	et := NewEndpointsChangeTracker("n1")
	et.EndpointSliceUpdate(testSlice("ns", "s", "s-a", 80, v1.ProtocolTCP, term, notReady), false)
	et.EndpointSliceUpdate(testSlice("ns", "s", "s-b", 80, v1.ProtocolTCP, ep("10.0.0.1", "n1", true)), false)
	m := EndpointsMap{}
	et.Apply(m)
	for _, eps := range m {
		if len(eps) != 2 {
			t.Fatalf("endpoints %v", eps)
		}
		if !eps[0].Ready || eps[0].Terminating {
			t.Errorf("10.0.0.1: the ready copy should win, got %+v", eps[0])
		}
		if !eps[1].Serving {
			t.Errorf("10.0.0.2: unset serving should mean serving, got %+v", eps[1])
		}
	}
}

// A zero loadBalancerSourceRange allows everyone: no firewall in that family.
func TestZeroSourceRangeMeansNoFirewall(t *testing.T) {
	sp := &ServicePort{ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("fd00::1")},
		LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/24"), netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("2001:db8::/64")}}
	v4, _ := sp.ForFamily(false)
	if len(v4.LoadBalancerSourceRanges) != 0 {
		t.Errorf("IPv4 ranges %v, want none", v4.LoadBalancerSourceRanges)
	}
	v6, _ := sp.ForFamily(true)
	if len(v6.LoadBalancerSourceRanges) != 1 {
		t.Errorf("IPv6 ranges %v, want 2001:db8::/64", v6.LoadBalancerSourceRanges)
	}
}

// --iptables-masquerade-bit 0 is a real choice (mark 0x1), not "default".
func TestMasqueradeBitZero(t *testing.T) {
	for _, c := range []struct {
		bit  *int
		want uint32
	}{{nil, 0x4000}, {ptr.To(0), 0x1}, {ptr.To(31), 0x80000000}, {ptr.To(15), 0x8000}} {
		if got := (ModeConfig{MasqueradeBit: c.bit}).MasqueradeValue(); got != c.want {
			t.Errorf("bit %v: got %#x, want %#x", c.bit, got, c.want)
		}
	}
}
