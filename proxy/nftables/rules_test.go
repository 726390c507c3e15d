package nftables

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

func rulesConfig() Config {
	cfg := testConfig()
	cfg.ChoiceRules = true
	return cfg
}

// TestChoiceRules: the overall world with --nftables-endpoint-choice=rules
// (golden: no anonymous map left for the random choices), and the
// behaviour table through those rules.
func TestChoiceRules(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	p := NewProxier(rulesConfig(), nft)
	if err := p.Sync(context.Background(), overallWorld().request(true)); err != nil {
		t.Fatal(err)
	}
	dump := nft.Dump()
	golden(t, "rules", dump)
	if strings.Contains(dump, " map {") || strings.Contains(dump, " vmap {") {
		t.Errorf("anonymous endpoint map left with rules:\n%s", dump)
	}

	nft = knftables.NewFake(knftables.IPv4Family, TableName)
	p = NewProxier(Config{PodCIDRs: []netip.Prefix{proxytest.ClusterCIDR}, ServiceCIDRs: []netip.Prefix{proxytest.ServiceCIDR},
		ChoiceRules: true}, nft)
	svcs, eps := proxytest.Scenario()
	if err := p.Sync(context.Background(), &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: eps,
		Node: proxytest.ScenarioNodeInfo()}); err != nil {
		t.Fatal(err)
	}
	proxytest.RunBehaviour(t, &Tracer{Fake: nft, LocalAddrs: []netip.Addr{proxytest.Node1IP}})
}

// TestChoiceRulesProbabilities computes, from the rules written, the
// probability with which each endpoint is picked (each `numgen random mod
// R < W` rule takes W/R of what reaches it, the last rule the rest): it
// must be the endpoint's share, equal for the random choice, by weight for
// wrr.
func TestChoiceRulesProbabilities(t *testing.T) {
	for _, tc := range []struct {
		sched   string
		weights []int
	}{
		{"", []int{1, 1, 1, 1, 1, 1, 1}},
		{"", []int{1, 1}},
		{"wrr", []int{3, 1, 5, 2}},
		{"wrr", []int{1, 100}},
	} {
		t.Run(fmt.Sprintf("%s%v", tc.sched, tc.weights), func(t *testing.T) {
			nft := knftables.NewFake(knftables.IPv4Family, TableName)
			w := newWorld()
			var eps []*proxy.Endpoint
			total := 0
			for i, wt := range tc.weights {
				e := ep(fmt.Sprintf("10.1.0.%d", i+1), 80, false)
				e.Weight = wt
				eps = append(eps, e)
				total += wt
			}
			w.add(service("ns", "s", "172.30.0.1", func(s *v1.Service) {
				if tc.sched != "" {
					s.Annotations = map[string]string{"service.kubernetes.io/ipvs-scheduler": tc.sched}
				}
			}), eps...)
			if err := NewProxier(rulesConfig(), nft).Sync(context.Background(), w.request(true)); err != nil {
				t.Fatal(err)
			}
			var chain *knftables.FakeChain
			for name, c := range nft.Table.Chains {
				if strings.HasPrefix(name, clusterChainPrefix) && strings.Contains(name, "ns/s/") {
					chain = c
				}
			}
			got := map[string]*big.Rat{}
			reach := big.NewRat(1, 1)
			for _, r := range chain.Rules {
				f := strings.Fields(r.Rule)
				target := f[len(f)-1]
				if f[0] != "numgen" {
					got[target] = new(big.Rat).Set(reach)
					break
				}
				var mod, lt int64
				if _, err := fmt.Sscanf(strings.Join(f[:6], " "), "numgen random mod %d < %d", &mod, &lt); err != nil {
					t.Fatalf("rule %q: %v", r.Rule, err)
				}
				got[target] = new(big.Rat).Mul(reach, big.NewRat(lt, mod))
				reach.Mul(reach, big.NewRat(mod-lt, mod))
			}
			for i, e := range eps {
				want := big.NewRat(int64(tc.weights[i]), int64(total))
				if tc.sched == "" {
					want = big.NewRat(1, int64(len(eps)))
				}
				if g := got[e.AddrPort().String()]; g == nil || g.Cmp(want) != 0 {
					t.Errorf("%s: picked with probability %v, want %v\n%s", e.AddrPort(), g, want, nft.Dump())
				}
			}
		})
	}
}

// TestChoiceRulesPartialSyncs: endpoints added and removed, affinity
// switched on, a weighted scheduler, a Service removed and another
// created, as partial syncs: after each, every Service traces as after a
// full sync of the same world.
func TestChoiceRulesPartialSyncs(t *testing.T) {
	partialSyncsTraceAsFull(t, rulesConfig(), nil)
}

// partialSyncsTraceAsFull runs the steps of TestChoiceRulesPartialSyncs
// with cfg; check, if set, looks at the table after each step.
func partialSyncsTraceAsFull(t *testing.T, cfg Config, check func(t *testing.T, step string, nft *knftables.Fake)) {
	ctx := context.Background()
	nft := newFake(cfg)
	p := NewProxier(cfg, nft)
	w := newWorld()
	w.add(service("ns", "a", "172.30.0.1"), ep("10.1.0.1", 80, false), ep("10.1.0.2", 80, false), ep("10.1.0.3", 80, false))
	w.add(service("ns", "b", "172.30.0.2"), ep("10.2.0.1", 80, false), ep("10.2.0.2", 80, false))
	if err := p.Sync(ctx, w.request(true)); err != nil {
		t.Fatal(err)
	}
	affinity := func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		to := int32(60)
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &to}}
	}
	wrr := func(s *v1.Service) { s.Annotations = map[string]string{"service.kubernetes.io/ipvs-scheduler": "wrr"} }
	sh := func(s *v1.Service) { s.Annotations = map[string]string{"service.kubernetes.io/ipvs-scheduler": "sh"} }
	heavy := ep("10.1.0.9", 80, false)
	heavy.Weight = 5
	bPort := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "b"}, Port: "p80", Protocol: v1.ProtocolTCP}
	steps := []struct {
		name    string
		change  func()
		changed []string
	}{
		{"a loses an endpoint", func() { w.add(service("ns", "a", "172.30.0.1"), ep("10.1.0.1", 80, false), ep("10.1.0.2", 80, false)) }, []string{"ns/a"}},
		{"a gains four", func() {
			w.add(service("ns", "a", "172.30.0.1"), ep("10.1.0.1", 80, false), ep("10.1.0.2", 80, false), ep("10.1.0.4", 80, false),
				ep("10.1.0.5", 80, false), ep("10.1.0.6", 80, false), ep("10.1.0.7", 80, false))
		}, []string{"ns/a"}},
		{"b with affinity", func() {
			w.add(service("ns", "b", "172.30.0.2", affinity), ep("10.2.0.1", 80, false), ep("10.2.0.2", 80, false))
		}, []string{"ns/b"}},
		{"a weighted wrr", func() { w.add(service("ns", "a", "172.30.0.1", wrr), ep("10.1.0.1", 80, false), heavy) }, []string{"ns/a"}},
		{"b gone, c new with sh", func() {
			delete(w.svcs, bPort)
			delete(w.eps, bPort)
			w.add(service("ns", "c", "172.30.0.3", sh), ep("10.3.0.1", 80, false), heavy, ep("10.3.0.2", 80, false))
		}, []string{"ns/b", "ns/c"}},
		{"a down to one endpoint", func() { w.add(service("ns", "a", "172.30.0.1", wrr), ep("10.1.0.1", 80, false)) }, []string{"ns/a"}},
		{"b back with affinity", func() {
			w.add(service("ns", "b", "172.30.0.2", affinity), ep("10.2.0.1", 80, false), ep("10.2.0.3", 80, false))
		}, []string{"ns/b"}},
	}
	for _, st := range steps {
		st.change()
		if err := p.Sync(ctx, w.request(false, st.changed...)); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if check != nil {
			check(t, st.name, nft)
		}
		fresh := newFake(cfg)
		if err := NewProxier(cfg, fresh).Sync(ctx, w.request(true)); err != nil {
			t.Fatal(err)
		}
		for _, ip := range []string{"172.30.0.1", "172.30.0.2", "172.30.0.3"} {
			pkt := proxy.TracePacket{Src: netip.MustParseAddr("10.9.9.9"), Dst: netip.MustParseAddr(ip), DPort: 80, Protocol: v1.ProtocolTCP}
			got, err1 := (&Tracer{Fake: nft}).Trace(pkt)
			want, err2 := (&Tracer{Fake: fresh}).Trace(pkt)
			if err1 != nil || err2 != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: %s traces %v (%v) after partial syncs, %v (%v) from a full sync", st.name, ip, got, err1, want, err2)
			}
		}
	}
}
