package iptables

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

// randomService makes Service i of a generated model: ClusterIPs spread
// over a few /24s, some NodePorts, externalIPs, LoadBalancers with source
// ranges, Local traffic policies and affinity.
func randomService(rng *rand.Rand, i int) (*proxy.ServicePort, []*proxy.Endpoint) {
	name := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("s%03d", i)}, Port: "p", Protocol: v1.ProtocolTCP}
	if rng.Intn(4) == 0 {
		name.Protocol = v1.ProtocolUDP
	}
	sp := &proxy.ServicePort{Name: name, Type: v1.ServiceTypeClusterIP, Port: 80 + rng.Intn(3), Protocol: name.Protocol,
		ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(rng.Intn(3)), byte(1 + i)})}, SessionAffinity: v1.ServiceAffinityNone}
	if rng.Intn(3) == 0 {
		sp.Type = v1.ServiceTypeNodePort
		sp.NodePort = 30000 + i
	}
	if rng.Intn(5) == 0 {
		sp.ExternalIPs = []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.Intn(40))})}
	}
	if rng.Intn(5) == 0 {
		sp.Type, sp.NodePort = v1.ServiceTypeLoadBalancer, 31000+i
		sp.LoadBalancerVIPs = []netip.Addr{netip.AddrFrom4([4]byte{203, 0, 113, byte(i)})}
		if rng.Intn(2) == 0 {
			sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
		}
		if rng.Intn(2) == 0 {
			sp.ExternalPolicyLocal, sp.HealthCheckNodePort = true, 32000+i
		}
	}
	if rng.Intn(6) == 0 {
		sp.InternalPolicyLocal = true
	}
	if rng.Intn(6) == 0 {
		sp.SessionAffinity, sp.StickyMaxAgeSeconds = v1.ServiceAffinityClientIP, 10800
	}
	var eps []*proxy.Endpoint
	for k, n := 0, rng.Intn(4); k < n; k++ {
		local := rng.Intn(2) == 0
		node := "n2"
		if local {
			node = "n1"
		}
		eps = append(eps, &proxy.Endpoint{Addr: netip.AddrFrom4([4]byte{10, 244, byte(rng.Intn(4)), byte(1 + rng.Intn(250))}), Port: 8080,
			Ready: true, Serving: true, NodeName: node, IsLocal: local, Weight: 1})
	}
	return sp, eps
}

// canonicalState is a Fake's state with the rules of each chain sorted, so
// that states that differ only in the order of Service rules (which an
// incremental sync changes in KUBE-SERVICES and friends) compare equal.
func canonicalState(t *testing.T, f *Fake) string {
	t.Helper()
	var out []string
	for _, table := range []string{"filter", "nat"} {
		ft := f.state[false][table]
		for _, c := range ft.order {
			var rules []string
			for _, r := range ft.rules[c] {
				rules = append(rules, strings.Join(r, " "))
			}
			if c == ChainServices && table == "nat" {
				// The closing KUBE-NODEPORTS jump must stay last.
				for i, r := range rules {
					if strings.Contains(r, "-j "+ChainNodePorts) && i != len(rules)-1 {
						t.Errorf("KUBE-SERVICES: %q is not the last rule", r)
					}
				}
			}
			slices.Sort(rules)
			out = append(out, table+" "+c+"\n  "+strings.Join(rules, "\n  "))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestIncrementalSyncsEqualFull applies random changes with partial syncs
// (in both dispatch layouts) and checks after each one that the tables hold
// exactly what a full sync of the same model writes, that a one-Service
// change never rewrites the top-level chains in the linear layout, and that
// every Service address traces to the same outcome in both layouts.
func TestIncrementalSyncsEqualFull(t *testing.T) {
	for _, dispatch := range []Dispatch{DispatchLinear, DispatchTree} {
		t.Run(string(dispatch), func(t *testing.T) {
			rng := rand.New(rand.NewSource(7))
			ctx := context.Background()
			cfg := proxy.ModeConfig{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, IPTablesDispatch: string(dispatch)}
			fake := NewFake()
			p := New(cfg, fake)
			node := proxy.NodeInfo{Name: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}
			svcs, epm := proxy.ServicePortMap{}, proxy.EndpointsMap{}
			for i := 0; i < 60; i++ {
				sp, eps := randomService(rng, i)
				svcs[sp.Name], epm[sp.Name] = sp, eps
			}
			var cv proxytest.ClaimsView
			if err := p.Sync(ctx, &proxy.SyncRequest{Full: true, Services: cv.View(svcs, sets.New[types.NamespacedName]()), Endpoints: epm, Node: node}); err != nil {
				t.Fatal(err)
			}
			next := 60
			var deletes, inserts, leaves int
			defer func() {
				t.Logf("%d rules deleted, %d inserted, %d tree leaves rewritten", deletes, inserts, leaves)
				if deletes == 0 || inserts == 0 || (dispatch == DispatchTree && leaves == 0) {
					t.Error("the random changes never edited the top-level chains")
				}
			}()
			for step := 0; step < 120; step++ {
				changed := mutate(rng, svcs, epm, &next)
				view := cv.View(svcs, changed)
				req := &proxy.SyncRequest{Services: view, Endpoints: epm, Node: node,
					EndpointsResult: proxy.EndpointsUpdateResult{UpdatedServices: changed}}
				if err := p.Sync(ctx, req); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if !req.Stats.Partial || !p.LastPlan[false].Incremental {
					t.Fatalf("step %d: not an incremental partial sync", step)
				}
				payload := fake.Restores[len(fake.Restores)-1].Data
				deletes += strings.Count(payload, "\n-D ")
				inserts += strings.Count(payload, "\n-I ") + strings.Count(payload, "\n-A "+ChainNodePorts+" ")
				for _, l := range strings.Split(payload, "\n") {
					if strings.HasPrefix(l, "-A "+prefixDST) && strings.Contains(l, "--comment") {
						leaves++
					}
				}
				if strings.Contains(payload, ":"+ChainNodePorts+" ") || strings.Contains(payload, ":"+ChainExternalServices+" ") ||
					(dispatch == DispatchLinear && strings.Contains(payload, ":"+ChainServices+" ")) {
					t.Fatalf("step %d: a top-level chain was rewritten:\n%s", step, payload)
				}

				ref := NewFake()
				rp := New(cfg, ref)
				if err := rp.Sync(ctx, &proxy.SyncRequest{Full: true, Services: view, Endpoints: epm, Node: node}); err != nil {
					t.Fatal(err)
				}
				if got, want := canonicalState(t, fake), canonicalState(t, ref); got != want {
					t.Fatalf("step %d: incremental state differs from a full sync:\n%s", step, lineDiff(got, want))
				}
				if dispatch == DispatchLinear {
					// The order of Service rules may differ from a full
					// sync's, but no packet may fare differently: where
					// Services share an address and port, the same one wins.
					sameServiceTraces(t, fmt.Sprintf("step %d", step), fake, ref, svcs)
				}
				if got, want := p.LastPlan[false].NATRules, rp.LastPlan[false].NATRules; got != want {
					t.Errorf("step %d: NATRules %d, full sync counts %d", step, got, want)
				}
				if got, want := p.LastPlan[false].FilterRules, rp.LastPlan[false].FilterRules; got != want {
					t.Errorf("step %d: FilterRules %d, full sync counts %d", step, got, want)
				}
			}
		})
	}
}

// sameServiceTraces traces a packet from outside the cluster to every
// address and port of every Service through two Fakes' tables and fails
// where the outcomes differ.
func sameServiceTraces(t *testing.T, step string, got, want *Fake, svcs proxy.ServicePortMap) {
	t.Helper()
	trace := func(f *Fake, pkt proxy.TracePacket) string {
		out, err := (&Tracer{Fake: f}).Trace(pkt)
		if err != nil {
			t.Fatalf("%s: trace %+v: %v", step, pkt, err)
		}
		var s []string
		for _, o := range out {
			s = append(s, fmt.Sprintf("%s masq=%v %s", o.Endpoint, o.Masquerade, o.Verdict))
		}
		slices.Sort(s)
		return strings.Join(s, ", ")
	}
	for _, name := range proxy.SortedServicePorts(svcs) {
		sp := svcs[name]
		dsts := append(append(slices.Clone(sp.ClusterIPs), sp.ExternalIPs...), sp.LoadBalancerVIPs...)
		for _, dst := range dsts {
			pkt := proxy.TracePacket{Src: netip.MustParseAddr("198.51.100.7"), Dst: dst, Protocol: sp.Protocol, DPort: sp.Port}
			if g, w := trace(got, pkt), trace(want, pkt); g != w {
				t.Errorf("%s: %s to %s:%d/%s: %s, a full sync gives %s", step, name, dst, sp.Port, sp.Protocol, g, w)
			}
		}
	}
}

func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	as, bs := sets.New(al...), sets.New(bl...)
	var out []string
	for _, l := range al {
		if !bs.Has(l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !as.Has(l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// mutate changes 1-3 Services of the model: new endpoints, a new Service
// definition under the same name, a new Service, or a removal. It returns
// the names it changed.
func mutate(rng *rand.Rand, svcs proxy.ServicePortMap, epm proxy.EndpointsMap, next *int) sets.Set[types.NamespacedName] {
	changed := sets.New[types.NamespacedName]()
	for k := 0; k <= rng.Intn(3); k++ {
		names := proxy.SortedServicePorts(svcs)
		victim := names[rng.Intn(len(names))]
		switch rng.Intn(4) {
		case 0:
			_, eps := randomService(rng, 0)
			epm[victim] = eps
			changed.Insert(victim.NamespacedName)
		case 1:
			var i int
			fmt.Sscanf(victim.Name, "s%d", &i)
			sp, eps := randomService(rng, i)
			delete(svcs, victim)
			delete(epm, victim)
			svcs[sp.Name], epm[sp.Name] = sp, eps
			changed.Insert(victim.NamespacedName)
		case 2:
			sp, eps := randomService(rng, *next)
			*next++
			svcs[sp.Name], epm[sp.Name] = sp, eps
			changed.Insert(sp.Name.NamespacedName)
		case 3:
			delete(svcs, victim)
			delete(epm, victim)
			changed.Insert(victim.NamespacedName)
		}
	}
	return changed
}

// canonicalSave sorts the rules of each chain of an iptables-save output
// (and drops comments, counters and the header).
func canonicalSave(out string) string {
	chains := map[string][]string{}
	var names []string
	table := ""
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":"):
			n := table + " " + strings.Fields(l[1:])[0]
			names = append(names, n)
			chains[n] = nil
		case strings.HasPrefix(l, "-A "):
			c := table + " " + strings.Fields(l)[1]
			chains[c] = append(chains[c], l)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		rules := chains[n]
		slices.Sort(rules)
		b.WriteString(n + "\n  " + strings.Join(rules, "\n  ") + "\n")
	}
	return b.String()
}

// TestKernelIncrementalSyncs runs random changes as partial syncs through
// the real iptables-restore in one namespace and as full syncs in another,
// in both dispatch layouts, and compares the two kernels' rules after each
// step (as sets per chain).
func TestKernelIncrementalSyncs(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "iptables-restore", "iptables-save")
	for _, dispatch := range []Dispatch{DispatchLinear, DispatchTree} {
		t.Run(string(dispatch), func(t *testing.T) {
			rng := rand.New(rand.NewSource(11))
			ctx := context.Background()
			nsInc := testbed.NewNetNS(t, "ipt-inc")
			nsFull := testbed.NewNetNS(t, "ipt-full")
			mk := func(ns *testbed.NetNS) *Proxier {
				ex := proxy.OSExecutor{NetNS: ns.Name}
				return New(proxy.ModeConfig{IPv4: true, Exec: ex, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
					IPTablesDispatch: string(dispatch)}, &Runner{Exec: ex})
			}
			inc, full := mk(nsInc), mk(nsFull)
			node := proxy.NodeInfo{Name: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}
			svcs, epm := proxy.ServicePortMap{}, proxy.EndpointsMap{}
			for i := 0; i < 40; i++ {
				sp, eps := randomService(rng, i)
				svcs[sp.Name], epm[sp.Name] = sp, eps
			}
			if err := inc.Sync(ctx, &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: epm, Node: node}); err != nil {
				t.Fatal(err)
			}
			next := 40
			for step := 0; step < 25; step++ {
				changed := mutate(rng, svcs, epm, &next)
				req := &proxy.SyncRequest{Services: svcs, Endpoints: epm, Node: node,
					EndpointsResult: proxy.EndpointsUpdateResult{UpdatedServices: changed}}
				if err := inc.Sync(ctx, req); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if !req.Stats.Partial || !inc.LastPlan[false].Incremental {
					t.Fatalf("step %d: not an incremental partial sync", step)
				}
				if err := full.Sync(ctx, &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: epm, Node: node}); err != nil {
					t.Fatal(err)
				}
				for _, table := range []string{"filter", "nat"} {
					got := canonicalSave(nsInc.MustRun("iptables-save", "-t", table))
					want := canonicalSave(nsFull.MustRun("iptables-save", "-t", table))
					if got != want {
						t.Fatalf("step %d, table %s: incremental kernel state differs from a full sync:\n%s", step, table, lineDiff(got, want))
					}
				}
			}
		})
	}
}

// TestLargeClusterDefersChainDeletion: above 1000 endpoints an incremental
// plan leaves the chains a change made unused to the periodic sweep (no
// -X), as kube-proxy does; the sweep then deletes them.
func TestLargeClusterDefersChainDeletion(t *testing.T) {
	svcs, epm := benchModel(200) // 2000 endpoints
	full := BuildPlan(PlanInput{Services: svcs, Endpoints: epm})
	if !full.LargeClusterMode {
		t.Fatal("not in large cluster mode")
	}
	name := proxy.SortedServicePorts(svcs)[7]
	gone := EndpointChain(svcs[name], epm[name][0])
	epm[name] = epm[name][1:]
	ch := sets.New(name.NamespacedName)
	inc := BuildPlan(PlanInput{Services: svcs, Endpoints: epm, Partial: true, Changed: ch, Prev: full})
	if !inc.Incremental || strings.Contains(string(inc.Data), "-X ") || inc.ActiveNATChains.Has(gone) {
		t.Fatalf("incremental=%v, active(gone)=%v, payload:\n%s", inc.Incremental, inc.ActiveNATChains.Has(gone), inc.Data)
	}
	// The sweep (a list of the kernel's chains) deletes it.
	epm[name] = epm[name][1:]
	sweep := BuildPlan(PlanInput{Services: svcs, Endpoints: epm, Partial: true, Changed: ch, Prev: inc, ExistingNATChains: []string{gone}})
	if !strings.Contains(string(sweep.Data), "-X "+gone+"\n") {
		t.Fatalf("sweep did not delete %s:\n%s", gone, sweep.Data)
	}
}

// TestSharedExternalIPPartialSyncs: Services a, b and c claim one
// external IP and port. Through partial syncs that add, change and remove
// claimants (the winner among them), handed to the mode as the core does
// (proxytest.ClaimsView: only the winner's claim, the first in name order
// among Services of one age), a packet to that address must reach the
// Service a full sync of the same model sends it to.
func TestSharedExternalIPPartialSyncs(t *testing.T) {
	ctx := context.Background()
	ext := netip.MustParseAddr("192.0.2.99")
	svcs, epm := proxy.ServicePortMap{}, proxy.EndpointsMap{}
	claimant := func(name string, i byte, port int) proxy.ServicePortName {
		n := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "claims", Name: name}, Port: "p", Protocol: v1.ProtocolTCP}
		svcs[n] = &proxy.ServicePort{Name: n, Type: v1.ServiceTypeClusterIP, Port: port, Protocol: v1.ProtocolTCP,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 7, i})}, ExternalIPs: []netip.Addr{ext},
			SessionAffinity: v1.ServiceAffinityNone}
		epm[n] = []*proxy.Endpoint{{Addr: netip.AddrFrom4([4]byte{10, 244, 7, i}), Port: 8080, Ready: true, Serving: true, NodeName: "n2", Weight: 1}}
		return n
	}
	node := proxy.NodeInfo{Name: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}
	cfg := proxy.ModeConfig{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	fake := NewFake()
	p := New(cfg, fake)
	var cv proxytest.ClaimsView
	sync := func(step string, changed ...string) {
		t.Helper()
		upd := sets.New[types.NamespacedName]()
		for _, c := range changed {
			upd.Insert(types.NamespacedName{Namespace: "claims", Name: c})
		}
		view := cv.View(svcs, upd)
		req := &proxy.SyncRequest{Full: len(changed) == 0, Services: view, Endpoints: epm, Node: node}
		req.EndpointsResult.UpdatedServices = upd
		if err := p.Sync(ctx, req); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(changed) > 0 && !p.LastPlan[false].Incremental {
			t.Fatalf("%s: not an incremental sync", step)
		}
		ref := NewFake()
		if err := New(cfg, ref).Sync(ctx, &proxy.SyncRequest{Full: true, Services: view, Endpoints: epm, Node: node}); err != nil {
			t.Fatal(err)
		}
		sameServiceTraces(t, step, fake, ref, svcs)
	}
	b := claimant("b", 2, 80)
	sync("b alone")
	claimant("c", 3, 80)
	sync("c claims it", "c")
	a := claimant("a", 1, 80)
	sync("a claims it", "a")
	epm[b] = append(epm[b], &proxy.Endpoint{Addr: netip.MustParseAddr("10.244.7.22"), Port: 8080, Ready: true, Serving: true, NodeName: "n2", Weight: 1})
	sync("b's endpoints change", "b")
	svcs[a].ExternalIPs = nil
	sync("a leaves the address", "a")
	svcs[a].ExternalIPs = []netip.Addr{ext}
	sync("a claims it again", "a")
	delete(svcs, a)
	delete(epm, a)
	sync("a is deleted", "a")
	claimant("a", 1, 81)
	sync("a back on another port", "a")
	svcs[b].Port = 81
	sync("b moves to a's port", "b")
	delete(svcs, b)
	delete(epm, b)
	sync("b is deleted", "b")
}
