package iptables

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
)

func twoServices() (proxy.ServicePortMap, proxy.EndpointsMap) {
	a := spn("ns", "a", "", v1.ProtocolTCP)
	b := spn("ns", "b", "", v1.ProtocolUDP)
	return proxy.ServicePortMap{
			a: {Name: a, ClusterIPs: addrs("10.96.0.1"), Port: 80, Protocol: v1.ProtocolTCP, SessionAffinity: v1.ServiceAffinityNone},
			b: {Name: b, ClusterIPs: addrs("10.96.0.2"), Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053, SessionAffinity: v1.ServiceAffinityNone},
		}, proxy.EndpointsMap{
			a: eps("n2", false, 8080, "10.244.2.1", "10.244.2.2"),
			b: eps("n2", false, 5353, "10.244.2.3"),
		}
}

func TestProxierStates(t *testing.T) {
	ctx := context.Background()
	fake := NewFake()
	p := New(proxy.ModeConfig{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}, fake)
	svcs, epm := twoServices()

	// 1. First sync is full: jumps, canaries, all chains.
	if err := p.Sync(ctx, &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: epm}); err != nil {
		t.Fatal(err)
	}
	dump := fake.Dump(false)
	for _, want := range []string{
		"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
		"-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING",
		"-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
		":KUBE-PROXY-CANARY - [0:0]",
		ClusterPolicyChain(svcs[spn("ns", "a", "", v1.ProtocolTCP)]),
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("state after full sync lacks %q", want)
		}
	}

	// 2. Endpoint change of b only: a partial payload that leaves a's chains out.
	bName := spn("ns", "b", "", v1.ProtocolUDP)
	epm[bName] = eps("n2", false, 5353, "10.244.2.4")
	req := &proxy.SyncRequest{Services: svcs, Endpoints: epm,
		EndpointsResult: proxy.EndpointsUpdateResult{UpdatedServices: sets.New(types.NamespacedName{Namespace: "ns", Name: "b"})}}
	if err := p.Sync(ctx, req); err != nil {
		t.Fatal(err)
	}
	last := fake.Restores[len(fake.Restores)-1].Data
	aChain := ClusterPolicyChain(svcs[spn("ns", "a", "", v1.ProtocolTCP)])
	// Only b's own chains are written: b's rules in the top-level chains
	// did not change, so KUBE-SERVICES and KUBE-NODEPORTS are left alone.
	if !req.Stats.Partial || strings.Contains(last, ":"+aChain) || strings.Contains(last, ChainServices) || strings.Contains(last, ChainNodePorts) {
		t.Errorf("partial sync payload wrong (partial=%v):\n%s", req.Stats.Partial, last)
	}
	// The old endpoint chain of b was swept, the new one exists, a's chains survive.
	dump = fake.Dump(false)
	oldSEP := EndpointChain(svcs[bName], eps("n2", false, 5353, "10.244.2.3")[0])
	newSEP := EndpointChain(svcs[bName], epm[bName][0])
	if strings.Contains(dump, oldSEP) || !strings.Contains(dump, newSEP) || !strings.Contains(dump, ":"+aChain) ||
		!strings.Contains(dump, "-A KUBE-SERVICES -m comment --comment \"ns/a cluster IP\"") {
		t.Errorf("after partial sync: old SEP present=%v new SEP present=%v a present=%v",
			strings.Contains(dump, oldSEP), strings.Contains(dump, newSEP), strings.Contains(dump, ":"+aChain))
	}

	// 3. Someone flushes our canary: the next sync is full.
	fake.DeleteChain(false, "mangle", ChainProxyCanary)
	req = &proxy.SyncRequest{Services: svcs, Endpoints: epm}
	if err := p.Sync(ctx, req); err != nil {
		t.Fatal(err)
	}
	if req.Stats.Partial || !strings.Contains(fake.Restores[len(fake.Restores)-1].Data, ":"+aChain) {
		t.Error("missing canary did not force a full sync")
	}

	// 4. A failed restore makes the next sync full even if not requested.
	fake.FailNextRestore = true
	if err := p.Sync(ctx, &proxy.SyncRequest{Services: svcs, Endpoints: epm}); err == nil {
		t.Fatal("restore failure not reported")
	}
	req = &proxy.SyncRequest{Services: svcs, Endpoints: epm}
	if err := p.Sync(ctx, req); err != nil || req.Stats.Partial {
		t.Errorf("sync after failure: err=%v partial=%v", err, req.Stats.Partial)
	}

	// 5. Cleanup leaves nothing of ours.
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if d := fake.Dump(false); strings.Contains(d, "KUBE-") {
		t.Errorf("cleanup left rules:\n%s", d)
	}
}

// TestKernelRestore applies the golden plans with the real iptables-restore
// inside a throwaway network namespace, then cleans up.
func TestKernelRestore(t *testing.T) {
	t.Parallel()
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "iptables-restore", "ip6tables-restore")
	ns := testbed.NewNetNS(t, "ipt-restore")
	ctx := context.Background()
	run := &Runner{Exec: proxy.OSExecutor{NetNS: ns.Name}}
	p := New(proxy.ModeConfig{IPv4: true, IPv6: true, Exec: proxy.OSExecutor{NetNS: ns.Name},
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}, run)
	svcs, epm := twoServices()
	lb := spn("ns", "lb", "https", v1.ProtocolTCP)
	svcs[lb] = &proxy.ServicePort{Name: lb, ClusterIPs: addrs("10.96.0.3", "fd00::3"), Port: 443, Protocol: v1.ProtocolTCP, NodePort: 31443,
		LoadBalancerVIPs: addrs("172.18.0.200"), LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("172.18.0.0/24")},
		ExternalPolicyLocal: true, HealthCheckNodePort: 32100, SessionAffinity: v1.ServiceAffinityClientIP, StickyMaxAgeSeconds: 30}
	epm[lb] = append(eps("n1", true, 8443, "10.244.1.3", "fd00:244::3"), eps("n2", false, 8443, "10.244.2.3")...)
	if err := p.Sync(ctx, &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: epm}); err != nil {
		t.Fatal(err)
	}
	// The jumps are found textually in iptables-save output, so a
	// steady-state full sync runs no per-rule iptables commands.
	for _, j := range append(append([]jumpRule{}, jumpRules...), kubeletJumpRules...) {
		saved, err := run.SaveTable(ctx, false, j.table)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(saved), "\n"+j.saveLine()+"\n") {
			t.Errorf("jump %q not found as saved:\n%s", j.saveLine(), saved)
		}
	}
	out := ns.MustRun("iptables-save", "-t", "nat")
	for _, want := range []string{"--probability 0.50000000000", "--rcheck --seconds 30 --reap", "MASQUERADE --random-fully"} {
		if !strings.Contains(out, want) {
			t.Errorf("iptables-save lacks %q:\n%s", want, out)
		}
	}
	if out6 := ns.MustRun("ip6tables-save", "-t", "nat"); !strings.Contains(out6, "fd00::3") {
		t.Errorf("IPv6 rules missing:\n%s", out6)
	}
	// A partial sync after removing a Service deletes its chains.
	delete(svcs, lb)
	delete(epm, lb)
	if err := p.Sync(ctx, &proxy.SyncRequest{Services: svcs, Endpoints: epm,
		ServiceResult: proxy.ServiceUpdateResult{UpdatedServices: sets.New(lb.NamespacedName)}}); err != nil {
		t.Fatal(err)
	}
	if out := ns.MustRun("iptables-save", "-t", "nat"); strings.Contains(out, "ns/lb") || strings.Contains(out, FirewallChain(&proxy.ServicePort{Name: lb, Protocol: v1.ProtocolTCP})) {
		t.Errorf("removed service still programmed:\n%s", out)
	}
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"iptables-save", "ip6tables-save"} {
		if out := ns.MustRun(c); strings.Contains(out, "KUBE-") {
			t.Errorf("%s after cleanup:\n%s", c, out)
		}
	}
}

// askingFake records which tables the proxier asks about outside restores.
type askingFake struct {
	*Fake
	asked []string
}

func (f *askingFake) ChainExists(ctx context.Context, ipv6 bool, table, chain string) (bool, error) {
	f.asked = append(f.asked, table)
	return f.Fake.ChainExists(ctx, ipv6, table, chain)
}

func (f *askingFake) SaveChains(ctx context.Context, ipv6 bool, table string) ([]string, error) {
	f.asked = append(f.asked, table)
	return f.Fake.SaveChains(ctx, ipv6, table)
}

// TestCanaryChecks: a partial sync asks only mangle (the smallest table)
// whether our canary survived, as kube-proxy's monitor polls it; nat and
// filter are checked with the stale-chain sweep, every sync in small
// clusters and once per sync period in large ones (with iptables-legacy,
// any question about nat reads all of it). A flushed nat is found then.
func TestCanaryChecks(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		services int
		large    bool
	}{{"small", 20, false}, {"large", 200, true}} {
		t.Run(c.name, func(t *testing.T) {
			svcs, epm := benchModel(c.services)
			fake := &askingFake{Fake: NewFake()}
			p := New(proxy.ModeConfig{IPv4: true, SyncPeriod: time.Hour, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}, fake)
			if err := p.Sync(ctx, &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: epm}); err != nil {
				t.Fatal(err)
			}
			if got := p.LastPlan[false].LargeClusterMode; got != c.large {
				t.Fatalf("large cluster mode %v", got)
			}
			name := proxy.SortedServicePorts(svcs)[3]
			change := func() *proxy.SyncRequest {
				epm[name] = epm[name][1:]
				req := &proxy.SyncRequest{Services: svcs, Endpoints: epm,
					EndpointsResult: proxy.EndpointsUpdateResult{UpdatedServices: sets.New(name.NamespacedName)}}
				if err := p.Sync(ctx, req); err != nil {
					t.Fatal(err)
				}
				return req
			}
			fake.asked = nil
			if req := change(); !req.Stats.Partial {
				t.Fatal("not a partial sync")
			}
			want := []string{"nat", "mangle", "filter"}
			if c.large {
				want = []string{"mangle"}
			}
			if !slices.Equal(fake.asked, want) {
				t.Errorf("a partial sync asked about %v, want %v", fake.asked, want)
			}
			fake.DeleteChain(false, "nat", ChainProxyCanary)
			req := change()
			if req.Stats.Partial != c.large {
				t.Errorf("nat flushed: partial %v, want %v", req.Stats.Partial, c.large)
			}
			if c.large {
				p.lastSweep = time.Now().Add(-2 * time.Hour)
				if req := change(); req.Stats.Partial {
					t.Error("nat flushed: the sync after a sync period was not full")
				}
			}
		})
	}
}
