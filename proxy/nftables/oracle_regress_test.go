package nftables

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
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
