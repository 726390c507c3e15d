package nftables

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

func shardsConfig(shards int, shared bool) Config {
	cfg := testConfig()
	cfg.Shards, cfg.ChoiceShared = shards, shared
	return cfg
}

// overallPackets are first packets to every address and port of the
// overall world, from a pod, from outside and from the node itself.
func overallPackets(w *world) []proxy.TracePacket {
	var pkts []proxy.TracePacket
	for _, sp := range w.svcs {
		var dsts []netip.Addr
		dsts = append(dsts, sp.ClusterIPs...)
		dsts = append(dsts, sp.ExternalIPs...)
		dsts = append(dsts, sp.LoadBalancerVIPs...)
		for _, src := range []string{"10.0.0.5", "203.0.113.9", "192.168.0.2"} {
			for _, d := range dsts {
				pkts = append(pkts, proxy.TracePacket{Src: netip.MustParseAddr(src), Dst: d, DPort: sp.Port, Protocol: sp.Protocol})
				pkts = append(pkts, proxy.TracePacket{Src: netip.MustParseAddr(src), Dst: d, DPort: sp.Port + 1, Protocol: sp.Protocol})
			}
			if sp.NodePort != 0 {
				pkts = append(pkts, proxy.TracePacket{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr("192.168.0.2"), DPort: sp.NodePort, Protocol: sp.Protocol})
			}
		}
		pkts = append(pkts, proxy.TracePacket{Src: netip.MustParseAddr("192.168.0.2"), Dst: sp.ClusterIPs[0], DPort: sp.Port, Protocol: sp.Protocol, FromLocalHost: true})
	}
	pkts = append(pkts, proxy.TracePacket{Src: netip.MustParseAddr("10.0.0.5"), Dst: netip.MustParseAddr("172.30.9.9"), DPort: 80, Protocol: v1.ProtocolTCP})
	return pkts
}

// sameTraces checks that every packet of pkts has the same outcomes in
// got's tables as in want's.
func sameTraces(t *testing.T, step string, got, want *knftables.Fake, pkts []proxy.TracePacket) {
	t.Helper()
	local := []netip.Addr{netip.MustParseAddr("192.168.0.2")}
	for _, pkt := range pkts {
		a, err1 := (&Tracer{Fake: got, LocalAddrs: local}).Trace(pkt)
		b, err2 := (&Tracer{Fake: want, LocalAddrs: local}).Trace(pkt)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %+v: trace: %v / %v", step, pkt, err1, err2)
		}
		sortOutcomes(a)
		sortOutcomes(b)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: %+v:\n got %v\nwant %v (one table)", step, pkt, a, b)
		}
	}
}

func sortOutcomes(o []proxy.TraceOutcome) {
	slices.SortFunc(o, func(a, b proxy.TraceOutcome) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
}

// checkShardLayout: the main table holds no Service chain but firewall
// ones and dispatches nothing itself; every Service's chains are in the
// dispatch table its name hashes to, and no table outside the
// configuration's exists.
func checkShardLayout(t *testing.T, step string, nft *knftables.Fake, cfg Config) {
	t.Helper()
	pl := &planner{cfg: cfg}
	tables := nft.Tables[knftables.IPv4Family]
	for name, tbl := range tables {
		if name != TableName && !pl.keepsTable(name) {
			t.Errorf("%s: table %s left", step, name)
		}
		for c := range tbl.Chains {
			if !isServiceChainName(c) {
				continue
			}
			if name == TableName && !strings.HasPrefix(c, firewallChainPrefix) {
				t.Errorf("%s: Service chain %s in the main table", step, c)
			}
			if name != TableName && strings.HasPrefix(c, firewallChainPrefix) {
				t.Errorf("%s: firewall chain %s in %s", step, c, name)
			}
		}
	}
	if m := tables[TableName].Maps[serviceIPsMap]; m != nil && cfg.Shards > 0 {
		t.Errorf("%s: the main table still has %s", step, serviceIPsMap)
	}
	for i := range cfg.Shards {
		tbl := tables[shardTable(i)]
		if tbl == nil {
			t.Fatalf("%s: no table %s", step, shardTable(i))
		}
		for _, e := range tbl.Maps[serviceIPsMap].Elements {
			chain := strings.TrimPrefix(strings.Join(e.Value, " "), "goto ")
			if tbl.Chains[chain] == nil {
				t.Errorf("%s: %s: %s goes to %s, not a chain of the table", step, shardTable(i), strings.Join(e.Key, " . "), chain)
			}
		}
	}
}

// TestShards: with --nftables-shards every packet of the overall world and
// of the behaviour table has the outcomes it has with one table, with
// kube-proxy's endpoint maps and with the shared ones; the layout is the
// documented one (golden).
func TestShards(t *testing.T) {
	ctx := context.Background()
	w := overallWorld()
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			one := knftables.NewFake(knftables.IPv4Family, TableName)
			c1 := testConfig()
			c1.ChoiceShared = shared
			if err := NewProxier(c1, one).Sync(ctx, w.request(true)); err != nil {
				t.Fatal(err)
			}
			cfg := shardsConfig(3, shared)
			nft := knftables.NewFake("", "")
			if err := NewProxier(cfg, nft).Sync(ctx, w.request(true)); err != nil {
				t.Fatal(err)
			}
			if shared {
				golden(t, "shards-shared", nft.Dump())
			}
			checkShardLayout(t, "full sync", nft, cfg)
			sameTraces(t, "full sync", nft, one, overallPackets(w))

			nft = knftables.NewFake("", "")
			svcs, eps := proxytest.Scenario()
			cfg = Config{PodCIDRs: []netip.Prefix{proxytest.ClusterCIDR}, ServiceCIDRs: []netip.Prefix{proxytest.ServiceCIDR}, Shards: 4, ChoiceShared: shared}
			if err := NewProxier(cfg, nft).Sync(ctx, &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: eps, Node: proxytest.ScenarioNodeInfo()}); err != nil {
				t.Fatal(err)
			}
			proxytest.RunBehaviour(t, &Tracer{Fake: nft, LocalAddrs: []netip.Addr{proxytest.Node1IP}})
		})
	}
}

// TestShardsPartialSyncs: partial syncs over dispatch tables trace as full
// syncs do (endpoints removed and added, affinity and weighted schedulers
// switched on and off, Services gone and new), and keep the layout.
func TestShardsPartialSyncs(t *testing.T) {
	for _, shared := range []bool{false, true} {
		cfg := shardsConfig(3, shared)
		partialSyncsTraceAsFull(t, cfg, func(t *testing.T, step string, nft *knftables.Fake) {
			checkShardLayout(t, step, nft, cfg)
			if shared {
				for i := range cfg.Shards {
					sub := &knftables.Fake{Table: nft.Tables[knftables.IPv4Family][shardTable(i)]}
					checkSharedMap(t, step+" "+shardTable(i), sub)
				}
			}
		})
	}
}

// TestShardsResize: a proxy restarted with fewer dispatch tables, none, or
// again some, leaves exactly the tables of its configuration, and the
// packets' outcomes stay those of one table.
func TestShardsResize(t *testing.T) {
	ctx := context.Background()
	w := overallWorld()
	one := knftables.NewFake(knftables.IPv4Family, TableName)
	if err := NewProxier(testConfig(), one).Sync(ctx, w.request(true)); err != nil {
		t.Fatal(err)
	}
	nft := knftables.NewFake("", "")
	for _, n := range []int{4, 2, 0, 3} {
		cfg := shardsConfig(n, n == 2)
		p := NewProxier(cfg, nft)
		if err := p.Sync(ctx, w.request(true)); err != nil {
			t.Fatalf("%d tables: %v", n, err)
		}
		// Leftover Service chains of the old layout go stale, then go.
		p.now = func() time.Time { return time.Now().Add(2 * time.Second) }
		if err := p.Sync(ctx, w.request(false, "ns1/svc1")); err != nil {
			t.Fatal(err)
		}
		step := fmt.Sprintf("%d dispatch tables", n)
		if n > 0 {
			checkShardLayout(t, step, nft, cfg)
		} else if len(nft.Tables[knftables.IPv4Family]) != 1 {
			t.Errorf("%s: tables %v", step, slices.Sorted(maps.Keys(nft.Tables[knftables.IPv4Family])))
		}
		var chains int
		for _, tbl := range nft.Tables[knftables.IPv4Family] {
			for c := range tbl.Chains {
				if isServiceChainName(c) {
					chains++
				}
			}
		}
		// One table of the same endpoint choice (the shared layout's
		// direct ClusterIP ports have no chain).
		ref := knftables.NewFake(knftables.IPv4Family, TableName)
		if err := NewProxier(shardsConfig(0, cfg.ChoiceShared), ref).Sync(ctx, w.request(true)); err != nil {
			t.Fatal(err)
		}
		var want int
		for c := range ref.Table.Chains {
			if isServiceChainName(c) {
				want++
			}
		}
		if chains != want {
			t.Errorf("%s: %d Service chains, want %d (no leftovers)", step, chains, want)
		}
		sameTraces(t, step, nft, one, overallPackets(w))
	}
	m, err := NewModeWithServiceCIDRs(proxy.ModeConfig{IPv4: true, NFTablesShards: 3}, nil, []NFT{nft})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if d := nft.Dump(); d != "" {
		t.Errorf("tables left after cleanup:\n%s", d)
	}
}

func TestValidateShards(t *testing.T) {
	for _, n := range []int{0, 1, 16, MaxShards} {
		if err := ValidateShards(n); err != nil {
			t.Errorf("%d: %v", n, err)
		}
	}
	for _, n := range []int{-1, MaxShards + 1} {
		if err := ValidateShards(n); err == nil {
			t.Errorf("%d accepted", n)
		}
	}
}

// TestKernelScenariosShards runs the real-kernel scenarios with four
// dispatch tables and the shared endpoint maps, programmed through netlink.
func TestKernelScenariosShards(t *testing.T) {
	testbed.RequireCommand(t, "nft")
	proxytest.RunKernelScenarios(t, func(_ *proxytest.Node, cfg proxy.ModeConfig) (proxy.Provider, error) {
		cfg.NFTablesEndpointChoice, cfg.NFTablesShards = "shared", 4
		return NewModeWithServiceCIDRs(cfg, []netip.Prefix{proxytest.ServiceCIDR}, nil)
	})
}

// newFake returns a Fake for cfg: without a default table when cfg has
// dispatch tables (knftables allows other tables only then).
func newFake(cfg Config) *knftables.Fake {
	if cfg.Shards > 0 {
		return knftables.NewFake("", "")
	}
	return knftables.NewFake(knftables.IPv4Family, TableName)
}
