package nftables

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
)

// Regressions found by comparing with kube-proxy 1.36 (docs/proxy-modes.md,
// "Differential check against kube-proxy"): kube-proxy writes the
// loadBalancerSourceRanges set with " , " between elements (and the node's
// own LB IPs appended when a range contains the node IP), and the
// ServiceCIDRs set with "," between elements.
func TestFirewallAndServiceCIDRSetSyntax(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	cfg := testConfig()
	cfg.ServiceCIDRs = append(cfg.ServiceCIDRs, netip.MustParsePrefix("172.31.0.0/16"))
	p := NewProxier(cfg, nft)
	w := newWorld()
	w.add(service("ns", "lb", "172.30.0.50", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30050
		s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/25", "192.168.0.2/32"}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "5.5.5.1"}}
	}), ep("10.180.0.1", 80, true))
	if err := p.Sync(context.Background(), w.request(true)); err != nil {
		t.Fatal(err)
	}
	dump := nft.Dump()
	for _, want := range []string{
		"ip saddr != { 203.0.113.0/25 , 192.168.0.2/32 , 5.5.5.1 } drop",
		"ip daddr { 172.30.0.0/16,172.31.0.0/16 } drop",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("dump lacks %q:\n%s", want, dump)
		}
	}
}

// Regressions found by hack/kpdiff against kube-proxy 1.37.

// --nodeport-addresses with a zero CIDR ("all") matches every local
// address, as no CIDR does: no nodeport-ips set.
func TestZeroNodePortCIDRMatchesAll(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	cfg := testConfig()
	cfg.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	p := NewProxier(cfg, nft)
	w := newWorld()
	w.add(service("ns", "np", "172.30.0.60", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30060
	}), ep("10.180.0.1", 80, true))
	if err := p.Sync(context.Background(), w.request(true)); err != nil {
		t.Fatal(err)
	}
	dump := nft.Dump()
	if strings.Contains(dump, "nodeport-ips") {
		t.Errorf("zero CIDR still uses the nodeport-ips set:\n%s", dump)
	}
	if !strings.Contains(dump, "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports") {
		t.Errorf("no match-all NodePort rule:\n%s", dump)
	}
}

// Topology hints apply in nftables mode too (PreferSameNode here), and a
// change of the node's zone forces every chain to be rewritten.
func TestTopologyHints(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	p := NewProxier(testConfig(), nft)
	w := newWorld()
	mine, other := ep("10.180.0.1", 80, true), ep("10.180.0.2", 80, false)
	mine.Hints = &proxy.Hints{Nodes: []string{"test-node"}, Zones: []string{"zone-b"}}
	other.Hints = &proxy.Hints{Nodes: []string{"node-b"}, Zones: []string{"zone-a"}}
	w.add(service("ns", "hinted", "172.30.0.61"), mine, other)
	if err := p.Sync(context.Background(), w.request(true)); err != nil {
		t.Fatal(err)
	}
	dump := nft.Dump()
	if !strings.Contains(dump, "dnat to 10.180.0.1:80") || strings.Contains(dump, "10.180.0.2 . 80") {
		t.Errorf("node hints ignored:\n%s", dump)
	}
	// Without node hints, zone hints decide; the zone label arrives in a
	// partial sync.
	mine.Hints.Nodes, other.Hints.Nodes = nil, nil
	req := w.request(false)
	req.Node.Labels = map[string]string{v1.LabelTopologyZone: "zone-a"}
	if err := p.Sync(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	dump = nft.Dump()
	if !strings.Contains(dump, "dnat to 10.180.0.2:80") {
		t.Errorf("zone hints ignored after the zone changed:\n%s", dump)
	}
}

// --nodeport-addresses selects from the addresses on the node's links, as
// kube-proxy reads them, not only the Node object's: here the pod bridge's
// gateway address, which no Node status lists.
func TestNodePortAddressesFromLinks(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	cfg := testConfig()
	cfg.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	cfg.LocalAddrs = func(context.Context) ([]proxy.LinkAddr, error) {
		return []proxy.LinkAddr{{Link: "lo", Addr: netip.MustParseAddr("127.0.0.1")},
			{Link: "eth0", Addr: netip.MustParseAddr("192.168.0.2")}, {Link: "cni0", Addr: netip.MustParseAddr("10.244.1.1")}}, nil
	}
	p := NewProxier(cfg, nft)
	w := newWorld()
	w.add(service("ns", "np", "172.30.0.61", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30061
	}), ep("10.180.0.1", 80, true))
	if err := p.Sync(context.Background(), w.request(true)); err != nil {
		t.Fatal(err)
	}
	dump := nft.Dump()
	if !strings.Contains(dump, "add element ip kube-proxy nodeport-ips { 10.244.1.1 }") || strings.Contains(dump, "nodeport-ips { 192.168.0.2 }") {
		t.Errorf("nodeport-ips should hold exactly the cni0 address:\n%s", dump)
	}
}

// The ServiceCIDR objects' ranges, when the proxy watches them (kube-proxy
// always does), replace the configured ones in the drop rule; a partial
// sync that brings new ranges rewrites it.
func TestServiceCIDRsFromRequest(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	cfg := testConfig()
	cfg.ServiceCIDRs = nil
	p := NewProxier(cfg, nft)
	w := newWorld()
	w.add(service("ns", "a", "10.96.0.10"), ep("10.180.0.1", 80, true))
	req := w.request(true)
	req.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")}
	if err := p.Sync(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if d := nft.Dump(); !strings.Contains(d, "ip daddr { 10.96.0.0/16 } drop") {
		t.Fatalf("no drop rule for the ServiceCIDR:\n%s", d)
	}
	req = w.request(false)
	req.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("10.97.0.0/16")}
	if err := p.Sync(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if d := nft.Dump(); !strings.Contains(d, "ip daddr { 10.96.0.0/16,10.97.0.0/16 } drop") || strings.Contains(d, "ip daddr { 10.96.0.0/16 } drop") {
		t.Fatalf("drop rule not rewritten for the new ranges:\n%s", d)
	}
}
