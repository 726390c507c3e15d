package nftables

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

// TestKernelScenarios runs the shared real-kernel behaviour scenarios (two
// node namespaces, pods, real nft inside each node) against nftables mode.
func TestKernelScenarios(t *testing.T) {
	testbed.RequireCommand(t, "nft")
	proxytest.RunKernelScenarios(t, func(_ *proxytest.Node, cfg proxy.ModeConfig) (proxy.Provider, error) {
		return NewModeWithServiceCIDRs(cfg, []netip.Prefix{proxytest.ServiceCIDR}, nil)
	})
}

// TestKernelScenariosChoiceRules runs the same scenarios with
// --nftables-endpoint-choice=rules (one rule per endpoint), programmed
// through netlink.
func TestKernelScenariosChoiceRules(t *testing.T) {
	testbed.RequireCommand(t, "nft")
	proxytest.RunKernelScenarios(t, func(_ *proxytest.Node, cfg proxy.ModeConfig) (proxy.Provider, error) {
		cfg.NFTablesEndpointChoice = "rules"
		return NewModeWithServiceCIDRs(cfg, []netip.Prefix{proxytest.ServiceCIDR}, nil)
	})
}

// TestKernelScenariosChoiceShared runs the same scenarios with
// --nftables-endpoint-choice=shared (the Services' endpoints in one map
// per protocol), programmed through netlink.
func TestKernelScenariosChoiceShared(t *testing.T) {
	testbed.RequireCommand(t, "nft")
	proxytest.RunKernelScenarios(t, func(_ *proxytest.Node, cfg proxy.ModeConfig) (proxy.Provider, error) {
		cfg.NFTablesEndpointChoice = "shared"
		return NewModeWithServiceCIDRs(cfg, []netip.Prefix{proxytest.ServiceCIDR}, nil)
	})
}

// TestKernelSchedulers checks the per-Service schedulers on real nftables,
// with kube-proxy's maps and with --nftables-endpoint-choice=rules: rr (numgen
// inc) alternates exactly, wrr follows the weights, and sh and mh (jhash
// of the source) pin one client to one endpoint.
func TestKernelSchedulers(t *testing.T) {
	testbed.RequireCommand(t, "nft")
	for _, choice := range []string{"map", "rules", "shared"} {
		t.Run(choice, func(t *testing.T) { kernelSchedulers(t, choice) })
	}
}

func kernelSchedulers(t *testing.T, choice string) {
	c := proxytest.NewCluster(t, func(_ *proxytest.Node, cfg proxy.ModeConfig) (proxy.Provider, error) {
		cfg.NFTablesEndpointChoice = choice
		return NewModeWithServiceCIDRs(cfg, []netip.Prefix{proxytest.ServiceCIDR}, nil)
	}, 1, 3)
	n1 := c.Nodes[0]
	client := n1.Pods[2]
	servers := []*proxytest.Pod{n1.Pods[0], n1.Pods[1]}
	ask := func(ip string) string {
		t.Helper()
		pod, _, err := proxytest.Ask(client.NS, netip.AddrPortFrom(netip.MustParseAddr(ip), 80), 3*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", ip, err)
		}
		return pod
	}
	for i, sched := range []string{"rr", "wrr", "sh", "mh"} {
		ip := netip.AddrFrom4([4]byte{10, 96, 5, byte(i + 1)}).String()
		svc := proxytest.Service(sched, ip, 80, v1.ProtocolTCP)
		svc.Annotations = map[string]string{"service.kubernetes.io/ipvs-scheduler": sched}
		slice := proxytest.Slice(svc, proxytest.PodTCPPort, servers...)
		c.Apply(svc, slice)
	}
	random := proxytest.Service("random", "10.96.5.5", 80, v1.ProtocolTCP) // kube-proxy's choice (the shared map's)
	c.Apply(random, proxytest.Slice(random, proxytest.PodTCPPort, servers...))
	c.Sync(t)
	var seq []string
	for i := 0; i < 6; i++ {
		seq = append(seq, ask("10.96.5.1"))
	}
	for i := 2; i < len(seq); i++ {
		if seq[i] != seq[i-2] || seq[i] == seq[i-1] {
			t.Fatalf("rr did not alternate: %v", seq)
		}
	}
	for _, ip := range []string{"10.96.5.3", "10.96.5.4"} {
		first := ask(ip)
		for i := 0; i < 8; i++ {
			if got := ask(ip); got != first {
				t.Fatalf("%s: source hashing moved the client from %s to %s", ip, first, got)
			}
		}
	}
	// wrr with equal weights (EndpointSlices carry none yet) spreads over both.
	seen := map[string]bool{}
	for i := 0; i < 40; i++ {
		seen[ask("10.96.5.2")] = true
	}
	if len(seen) != 2 {
		t.Errorf("wrr reached %v", seen)
	}
	seen = map[string]bool{}
	for i := 0; i < 40; i++ {
		seen[ask("10.96.5.5")] = true
	}
	if len(seen) != 2 {
		t.Errorf("random reached %v", seen)
	}
}

// TestGoldenRulesLoadIntoNFT feeds every golden dump to the real nft (in a
// test-made namespace), so the goldens cannot drift into syntax the kernel
// refuses (IPv6 DNAT, weighted jhash intervals, Maglev vmaps...).
func TestGoldenRulesLoadIntoNFT(t *testing.T) {
	testbed.RequireCommand(t, "nft")
	for _, g := range []string{"overall", "ipv6", "rules", "shared"} {
		data, err := os.ReadFile(filepath.Join("testdata", g+".golden"))
		if err != nil {
			t.Fatal(err)
		}
		ns := testbed.NewNetNS(t, "nftgold")
		ex := proxy.OSExecutor{NetNS: ns.Name}
		if _, err := ex.Run(context.Background(), data, "nft", "-f", "-"); err != nil {
			t.Errorf("%s.golden rejected by nft: %v", g, err)
		}
	}
}
