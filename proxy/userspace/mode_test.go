package userspace

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/proxy"
)

func TestPlanSplitsLocalExternalPolicyAndResolvesSchedulers(t *testing.T) {
	web := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}, Port: "http", Protocol: v1.ProtocolTCP}
	lbsvc := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "lb"}, Protocol: v1.ProtocolUDP}
	sctp := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "sctp"}, Protocol: v1.ProtocolSCTP}
	ep := func(ip string, local bool, w int) *proxy.Endpoint {
		return &proxy.Endpoint{Addr: netip.MustParseAddr(ip), Port: 8080, Ready: true, Serving: true, IsLocal: local, Weight: w}
	}
	req := &proxy.SyncRequest{
		Services: proxy.ServicePortMap{
			web: {Name: web, Type: v1.ServiceTypeNodePort, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.20")},
				Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080, Scheduler: "wrr",
				SessionAffinity: v1.ServiceAffinityClientIP, StickyMaxAgeSeconds: 30},
			lbsvc: {Name: lbsvc, Type: v1.ServiceTypeLoadBalancer, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.30")},
				Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053, ExternalPolicyLocal: true, Scheduler: "fancy",
				LoadBalancerVIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}},
			sctp: {Name: sctp, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.40")}, Port: 9, Protocol: v1.ProtocolSCTP},
		},
		Endpoints: proxy.EndpointsMap{
			web:   {ep("10.244.1.2", true, 3), ep("10.244.2.2", false, 1)},
			lbsvc: {ep("10.244.1.3", true, 1), ep("10.244.2.3", false, 1)},
		},
	}
	var unknown []string
	got := Plan(req, "lc", func(n proxy.ServicePortName, b proxy.Balance) {
		if b.Fallback != "" {
			unknown = append(unknown, n.String()+"="+b.Requested)
		}
	})
	if len(unknown) != 1 || unknown[0] != "default/lb=fancy" {
		t.Errorf("unknown scheduler reports %v", unknown)
	}
	if len(got) != 3 {
		t.Fatalf("plan has %d entries, want 3 (lb split in two, web, no sctp): %+v", len(got), got)
	}
	in, ext, w := got[0], got[1], got[2]
	if in.Name != "default/lb" || in.Scheduler != "lc" || in.NodePort != 0 || len(in.Endpoints) != 2 || len(in.Addrs) != 1 {
		t.Errorf("lb internal listener %+v", in)
	}
	if ext.Name != "default/lb (external)" || ext.NodePort != 30053 || len(ext.Endpoints) != 1 ||
		ext.Endpoints[0].Addr.String() != "10.244.1.3:8080" || len(ext.Addrs) != 1 || ext.Addrs[0].String() != "192.0.2.10" {
		t.Errorf("lb external listener %+v", ext)
	}
	if w.Name != "default/web:http" || w.Scheduler != "wrr" || w.AffinityTimeout.Seconds() != 30 || w.NodePort != 30080 ||
		len(w.Endpoints) != 2 || w.Endpoints[0].Weight != 3 {
		t.Errorf("web listener %+v", w)
	}
}
