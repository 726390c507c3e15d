package index

import (
	"net/netip"
	"testing"
)

func TestSliceLifecycleKeepsReverseMapsExact(t *testing.T) {
	x := New()
	a, b := netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("10.244.1.2")
	x.SetSlice(&Slice{Namespace: "ns", Name: "s1", Service: "web", Endpoints: []Endpoint{{Addr: a}, {Addr: b}}})
	if got := x.SlicesByIP(a); len(got) != 1 || got[0].Service != "web" {
		t.Fatalf("by IP: %v", got)
	}
	// The slice changes owner and drops an endpoint.
	x.SetSlice(&Slice{Namespace: "ns", Name: "s1", Service: "api", Endpoints: []Endpoint{{Addr: b}}})
	if got := x.Slices("ns", "web"); len(got) != 0 {
		t.Errorf("old service keeps the moved slice: %v", got)
	}
	if got := x.Slices("ns", "api"); len(got) != 1 {
		t.Errorf("new service lacks the slice: %v", got)
	}
	if got := x.SlicesByIP(a); len(got) != 0 {
		t.Errorf("dropped endpoint still reverses: %v", got)
	}
	x.DeleteSlice("ns", "s1")
	x.DeleteSlice("ns", "never-existed")
	if len(x.sliceByIP) != 0 || len(x.slicesBySvc) != 0 || len(x.slices) != 0 {
		t.Errorf("leftovers after delete: %v %v %v", x.sliceByIP, x.slicesBySvc, x.slices)
	}
}

func TestServiceIPChangeAndPods(t *testing.T) {
	x := New()
	ip1, ip2 := netip.MustParseAddr("10.96.0.5"), netip.MustParseAddr("10.96.0.6")
	x.SetService(&Service{Namespace: "ns", Name: "a", ClusterIPs: []netip.Addr{ip1}})
	x.SetService(&Service{Namespace: "ns", Name: "a", ClusterIPs: []netip.Addr{ip2}})
	if len(x.ServicesByIP(ip1)) != 0 || len(x.ServicesByIP(ip2)) != 1 {
		t.Errorf("reverse map not moved with the cluster IP")
	}
	x.DeleteService("ns", "a")
	if len(x.svcByIP) != 0 || x.Service("ns", "a") != nil {
		t.Errorf("leftovers after delete")
	}
	p := []string{"10.244.0.9", "fd00:244::9"}
	g := x.Generation()
	x.SetPod("ns", "p1", p)
	x.SetPod("ns", "p1", p) // update with the same IPs must not double count
	if !x.PodExists("ns", "fd00:244::9") || x.PodExists("ns", "fd00:244:0:0:0:0:0:9") || x.PodExists("other", "10.244.0.9") {
		t.Errorf("pod IPs: want both of the pod's IPs as spelled, in its namespace only")
	}
	if x.Generation() == g {
		t.Errorf("generation unchanged by a pod: cached pod answers would go stale")
	}
	x.DeletePod("ns", "p1")
	if x.PodExists("ns", p[0]) || len(x.podsByIP) != 0 {
		t.Errorf("pod still indexed after delete")
	}
}
