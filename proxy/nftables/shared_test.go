package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

func sharedConfig() Config {
	cfg := testConfig()
	cfg.ChoiceShared = true
	return cfg
}

// TestChoiceShared: the overall world with --nftables-endpoint-choice=shared
// (golden: the random choices look their endpoints up in the shared map),
// and the behaviour table through that map.
func TestChoiceShared(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	p := NewProxier(sharedConfig(), nft)
	if err := p.Sync(context.Background(), addTwins(overallWorld()).request(true)); err != nil {
		t.Fatal(err)
	}
	dump := nft.Dump()
	golden(t, "shared", dump)
	if !strings.Contains(dump, "map @"+sharedEndpointsMap+"-tcp-") {
		t.Errorf("no chain uses the shared map:\n%s", dump)
	}
	checkSharedMap(t, "full sync", nft)

	nft = knftables.NewFake(knftables.IPv4Family, TableName)
	p = NewProxier(Config{PodCIDRs: []netip.Prefix{proxytest.ClusterCIDR}, ServiceCIDRs: []netip.Prefix{proxytest.ServiceCIDR},
		ChoiceShared: true}, nft)
	svcs, eps := proxytest.Scenario()
	if err := p.Sync(context.Background(), &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: eps,
		Node: proxytest.ScenarioNodeInfo()}); err != nil {
		t.Fatal(err)
	}
	proxytest.RunBehaviour(t, &Tracer{Fake: nft, LocalAddrs: []netip.Addr{proxytest.Node1IP}})
}

// TestChoiceSharedPartialSyncs: the partial syncs of the rules layout's
// test (endpoints removed and added beyond a chain's range, affinity and
// weighted schedulers switched on and off, Services gone and new) trace
// as full syncs do, and after each the shared map holds exactly the keys
// the rules use, in ranges that do not overlap.
func TestChoiceSharedPartialSyncs(t *testing.T) {
	partialSyncsTraceAsFull(t, sharedConfig(), checkSharedMap)
}

// checkSharedMap checks that the rules using a shared map own disjoint
// ranges of its keys and that each map holds its rules' keys and no other.
func checkSharedMap(t *testing.T, step string, nft *knftables.Fake) {
	t.Helper()
	used := map[string]map[string]string{} // map -> key -> chain
	owner := map[string]string{}           // map and key -> chain
	for name, ch := range nft.Table.Chains {
		for _, r := range ch.Rules {
			// ... numgen random mod N offset O map @service-endpoints-P
			f := strings.Fields(r.Rule)
			if len(f) < 6 || !strings.HasPrefix(f[len(f)-1], "@"+sharedEndpointsMap+"-") {
				continue
			}
			m := strings.TrimPrefix(f[len(f)-1], "@")
			n, err1 := strconv.Atoi(f[len(f)-5])
			off, err2 := strconv.Atoi(f[len(f)-3])
			if err1 != nil || err2 != nil || f[len(f)-4] != "offset" {
				t.Fatalf("%s: rule %q: no range", step, r.Rule)
			}
			if used[m] == nil {
				used[m] = map[string]string{}
			}
			for k := off; k < off+n; k++ {
				mk := m + " " + strconv.Itoa(k)
				if other, dup := owner[mk]; dup {
					t.Errorf("%s: key %s used by %s and %s", step, mk, other, name)
				}
				owner[mk] = name
				used[m][strconv.Itoa(k)] = name
			}
		}
	}
	for name := range used {
		if nft.Table.Maps[name] == nil {
			t.Errorf("%s: no map %s", step, name)
		}
	}
	for name, m := range nft.Table.Maps {
		if !strings.HasPrefix(name, sharedEndpointsMap+"-") {
			continue
		}
		held := map[string]bool{}
		for _, e := range m.Elements {
			k := strings.Join(e.Key, " . ")
			held[k] = true
			if _, ok := used[name][k]; !ok {
				t.Errorf("%s: key %s of %s is used by no rule (a leak)", step, k, name)
			}
		}
		for k, chain := range used[name] {
			if !held[k] {
				t.Errorf("%s: key %s of chain %s is missing from %s", step, k, chain, name)
			}
		}
	}
	checkDirectMaps(t, step, nft)
}

// checkDirectMaps checks the direct ClusterIP and external address
// choices (planner.direct): each map cluster-ip-endpoints-P-N has exactly
// one rule, in cluster-ip-endpoints, with mod N; it holds keys 0 .. N-1 of
// each address . port it serves and no other; an address . port is in one
// map at most and is not also dispatched by service-ips; the address is in
// cluster-ips (which the jump to the chain matches) or the address .
// protocol . port in direct-external-ips (which leads to
// external-ip-endpoints: the masquerade mark, then cluster-ip-endpoints),
// not both; and every element of direct-external-ips is served.
func checkDirectMaps(t *testing.T, step string, nft *knftables.Fake) {
	t.Helper()
	external := map[string]bool{} // address . protocol . port
	if s := nft.Table.Sets[directExternalIPsSet]; s != nil {
		for _, e := range s.Elements {
			external[strings.Join(e.Key, " . ")] = true
		}
	}
	if ch := nft.Table.Chains[externalIPEndpointsChain]; ch != nil && (len(ch.Rules) != 2 ||
		!strings.HasPrefix(ch.Rules[0].Rule, "mark set mark or ") || ch.Rules[1].Rule != "goto "+clusterIPEndpointsChain) {
		t.Errorf("%s: %s is not the masquerade mark and a goto %s: %v", step, externalIPEndpointsChain, clusterIPEndpointsChain, ch.Rules)
	}
	served := map[string]bool{}
	for _, d := range directMapKeys(t, step, nft, clusterIPEndpointsChain, false) {
		ipPort, name, proto := d.dst, d.name, d.proto
		ip, port, _ := strings.Cut(ipPort, " . ")
		if nft.Table.Maps[serviceIPsMap] != nil {
			for _, e := range nft.Table.Maps[serviceIPsMap].Elements {
				if strings.Join(e.Key, " . ") == ip+" . "+proto+" . "+port {
					t.Errorf("%s: %s . %s is in %s and service-ips", step, ipPort, proto, name)
				}
			}
		}
		in := false
		for _, e := range nft.Table.Sets[clusterIPsSet].Elements {
			in = in || e.Key[0] == ip
		}
		ext := external[ip+" . "+proto+" . "+port]
		served[ip+" . "+proto+" . "+port] = true
		if in == ext {
			t.Errorf("%s: %s of %s: in cluster-ips %v, in %s %v (want exactly one)", step, ip, name, in, directExternalIPsSet, ext)
		}
	}
	for k := range external {
		if !served[k] {
			t.Errorf("%s: %s is in %s but in no direct choice map", step, k, directExternalIPsSet)
		}
	}
	checkDirectNodePorts(t, step, nft)
}

// checkDirectNodePorts checks the direct NodePort choices of the shared
// layout: node-port-endpoints marks for masquerading first and then has
// one rule per map; each map holds keys 0..N-1 of each NodePort it serves
// and nothing else; each such NodePort is in direct-node-ports (and in no
// other map, nor in service-nodeports), and each element of
// direct-node-ports is served.
func checkDirectNodePorts(t *testing.T, step string, nft *knftables.Fake) {
	t.Helper()
	if ch := nft.Table.Chains[nodePortEndpointsChain]; ch != nil && (len(ch.Rules) == 0 || !strings.HasPrefix(ch.Rules[0].Rule, "mark set mark or ")) {
		t.Errorf("%s: %s does not begin with the masquerade mark", step, nodePortEndpointsChain)
	}
	direct := map[string]bool{} // proto . port
	if s := nft.Table.Sets[directNodePortsSet]; s != nil {
		for _, e := range s.Elements {
			direct[strings.Join(e.Key, " . ")] = true
		}
	}
	served := map[string]bool{}
	for _, d := range directMapKeys(t, step, nft, nodePortEndpointsChain, true) {
		name, pp := d.name, d.proto+" . "+d.dst
		served[pp] = true
		if !direct[pp] {
			t.Errorf("%s: %s of %s is not in %s", step, pp, name, directNodePortsSet)
		}
		if nft.Table.Maps[serviceNodePortsMap] != nil {
			for _, e := range nft.Table.Maps[serviceNodePortsMap].Elements {
				if strings.Join(e.Key, " . ") == pp {
					t.Errorf("%s: %s is in %s and %s", step, pp, name, serviceNodePortsMap)
				}
			}
		}
	}
	for pp := range direct {
		if !served[pp] {
			t.Errorf("%s: %s is in %s but in no direct NodePort map", step, pp, directNodePortsSet)
		}
	}
}

// directMapKeys checks the direct choice maps CHAIN-P-N and their rules in
// CHAIN (after its masquerade mark when marked): each map has exactly one
// rule, whose generator is mod N; it holds keys 0 .. N-1 of each
// destination (cluster IP . port, or NodePort) it serves and no other; a
// destination is in one map of its protocol at most. It returns the
// destinations served.
func directMapKeys(t *testing.T, step string, nft *knftables.Fake, chain string, marked bool) []directDst {
	t.Helper()
	rules := map[string]int{}
	if ch := nft.Table.Chains[chain]; ch != nil {
		for i, r := range ch.Rules {
			if marked && i == 0 {
				continue
			}
			f := strings.Fields(r.Rule)
			m := strings.TrimPrefix(f[len(f)-1], "@")
			if want := fmt.Sprintf("%s dport . numgen random mod %s map @%s", f[2], m[strings.LastIndex(m, "-")+1:], m); !strings.HasSuffix(r.Rule, want) {
				t.Errorf("%s: rule %q, want it to end %q", step, r.Rule, want)
			}
			rules[m]++
		}
	}
	served := map[directDst]string{} // protocol and destination -> map
	var out []directDst
	for name, m := range nft.Table.Maps {
		if !strings.HasPrefix(name, chain+"-") {
			continue
		}
		if rules[name] != 1 && len(m.Elements) > 0 {
			t.Errorf("%s: map %s has %d rules, want 1", step, name, rules[name])
		}
		n, err := strconv.Atoi(name[strings.LastIndex(name, "-")+1:])
		if err != nil {
			t.Fatalf("%s: map %s: %v", step, name, err)
		}
		keys := map[string][]int{}
		for _, e := range m.Elements {
			if len(e.Key) < 2 {
				t.Fatalf("%s: %s key %v", step, name, e.Key)
			}
			i, _ := strconv.Atoi(e.Key[len(e.Key)-1])
			dst := strings.Join(e.Key[:len(e.Key)-1], " . ")
			keys[dst] = append(keys[dst], i)
		}
		proto := strings.Split(name, "-")[3]
		for dst, is := range keys {
			slices.Sort(is)
			if len(is) != n || is[0] != 0 || is[n-1] != n-1 {
				t.Errorf("%s: %s holds keys %v of %s, want 0..%d", step, name, is, dst, n-1)
			}
			d := directDst{proto: proto, dst: dst}
			if other, dup := served[d]; dup {
				t.Errorf("%s: %s in %s and %s", step, dst, other, name)
			}
			served[d] = name
			d.name = name
			out = append(out, d)
		}
	}
	return out
}

// directDst is a destination a direct choice map serves: a cluster IP .
// port or a NodePort, of a protocol, in map name.
type directDst struct{ proto, dst, name string }

// TestSpanAlloc: a chain keeps its range while its endpoints fit, moves to
// a larger one when they do not, and a range given up is reused from the
// next sync on.
func TestSpanAlloc(t *testing.T) {
	a := newSpanAlloc()
	key := func(name string) chainKey { return chainKey{port: proxy.ServicePortName{Port: name}} }
	if sp := a.alloc(key("x"), 3); sp != (span{0, 4}) {
		t.Fatalf("x(3) = %v, want {0 4}", sp)
	}
	if sp := a.alloc(key("y"), 5); sp != (span{4, 8}) {
		t.Fatalf("y(5) = %v, want {4 8}", sp)
	}
	if sp := a.alloc(key("x"), 4); sp != (span{0, 4}) {
		t.Fatalf("x(4) = %v, want its own {0 4}", sp)
	}
	if sp := a.alloc(key("x"), 5); sp != (span{12, 8}) {
		t.Fatalf("x(5) = %v, want a new {12 8}", sp)
	}
	a.release(key("y"))
	if sp := a.alloc(key("z"), 6); sp != (span{20, 8}) {
		t.Fatalf("z(6) in the same sync = %v, want a new {20 8} (y's is not free before the next sync)", sp)
	}
	a.reuse()
	if sp := a.alloc(key("w"), 2); sp != (span{0, 4}) {
		t.Fatalf("w(2) after the sync = %v, want x's old {0 4}", sp)
	}
	if sp := a.alloc(key("v"), 8); sp != (span{4, 8}) {
		t.Fatalf("v(8) after the sync = %v, want y's old {4 8}", sp)
	}
}

// recordingApplier keeps the transactions it applies.
type recordingApplier struct {
	applier
	txs [][]op
}

func (r *recordingApplier) apply(ctx context.Context, ops []op) error {
	r.txs = append(r.txs, slices.Clone(ops))
	return r.applier.apply(ctx, ops)
}

// TestSharedFullSyncAgain: a full sync over tables that exist — the
// periodic one, and the first of a restarted proxy — deletes the shared
// endpoint maps before writing any rule, fills them only after every rule
// that looks them up (so the kernel's binding checks walk empty maps), and
// leaves the same ruleset, and the same outcomes for every packet, as a
// full sync from nothing.
func TestSharedFullSyncAgain(t *testing.T) {
	ctx := context.Background()
	for _, shards := range []int{0, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			cfg := shardsConfig(shards, true)
			w := addTwins(overallWorld())
			pkts := overallPackets(w)
			// Enough Services that every shared map serves several.
			for i := range 600 {
				w.add(service("many", fmt.Sprintf("s%d", i), fmt.Sprintf("172.30.%d.%d", 100+i/200, i%200+1)),
					ep(fmt.Sprintf("10.181.%d.%d", i/200, i%200+1), 80, false), ep(fmt.Sprintf("10.182.%d.%d", i/200, i%200+1), 80, false))
			}
			fresh := newFake(cfg)
			if err := NewProxier(cfg, fresh).Sync(ctx, w.request(true)); err != nil {
				t.Fatal(err)
			}
			nft := newFake(cfg)
			p := NewProxier(cfg, nft)
			rec := &recordingApplier{applier: p.apply}
			p.apply = rec
			restarted := NewProxier(cfg, nft)
			rec2 := &recordingApplier{applier: restarted.apply}
			restarted.apply = rec2
			for _, step := range []struct {
				name string
				p    *Proxier
				rec  *recordingApplier
			}{{"first", p, rec}, {"again", p, rec}, {"restarted", restarted, rec2}} {
				step.rec.txs = nil
				if err := step.p.Sync(ctx, w.request(true)); err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				if got, want := nft.Dump(), fresh.Dump(); got != want {
					t.Errorf("%s: ruleset differs from a full sync from nothing: %s", step.name, firstDiff(got, want))
				}
				sameTraces(t, step.name, nft, fresh, pkts)
				checkSharedOrder(t, step.name, step.rec.txs, step.name != "first")
			}
		})
	}
}

// checkSharedOrder: in each transaction no element of a shared map comes
// before a rule that looks the map up, and, when the maps existed
// (existed), each is deleted before such a rule.
func checkSharedOrder(t *testing.T, step string, txs [][]op, existed bool) {
	t.Helper()
	rules := 0
	for _, ops := range txs {
		firstRule, lastRule, firstElem, deleted := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
		for i, o := range ops {
			switch obj := o.obj.(type) {
			case *knftables.Rule:
				if j := strings.Index(obj.Rule, "map @"+sharedEndpointsMap+"-"); j >= 0 && o.verb == opAdd {
					m := obj.Table + "/" + strings.TrimPrefix(obj.Rule[j:], "map @")
					if _, ok := firstRule[m]; !ok {
						firstRule[m] = i
					}
					lastRule[m] = i
					rules++
				}
			case *knftables.Element:
				if isSharedMap(obj.Map) && o.verb == opAdd {
					if _, ok := firstElem[obj.Table+"/"+obj.Map]; !ok {
						firstElem[obj.Table+"/"+obj.Map] = i
					}
				}
			case *knftables.Map:
				if isSharedMap(obj.Name) && o.verb == opDelete {
					deleted[obj.Table+"/"+obj.Name] = i
				}
			}
		}
		for m, r := range lastRule {
			if e, ok := firstElem[m]; ok && e < r {
				t.Errorf("%s: map %s gets elements (op %d) before a rule that looks it up (op %d)", step, m, e, r)
			}
			if d, ok := deleted[m]; existed && (!ok || d > firstRule[m]) {
				t.Errorf("%s: map %s is not deleted before its rules (delete at %d, ok %v; a rule at %d)", step, m, d, ok, firstRule[m])
			}
		}
	}
	if rules == 0 {
		t.Errorf("%s: no rule looks a shared map up", step)
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, a, b)
		}
	}
	return "equal"
}

// TestChoiceSwitch: a proxy restarted over its own table with another
// endpoint choice or table layout (shared, kube-proxy's map, shared again,
// shared in dispatch tables, shared in one table) leaves exactly the table
// a fresh proxy of that configuration writes (the chain and maps of the
// direct ClusterIP choices go with the shared layout, or move to the
// dispatch tables), and the same traces.
func TestChoiceSwitch(t *testing.T) {
	ctx := context.Background()
	w := overallWorld()
	nft := knftables.NewFake("", "")
	for i, cfg := range []Config{sharedConfig(), testConfig(), sharedConfig(), shardsConfig(2, true), sharedConfig()} {
		step := fmt.Sprintf("step %d (shared %v, %d tables)", i, cfg.ChoiceShared, cfg.Shards)
		p := NewProxier(cfg, nft)
		if err := p.Sync(ctx, w.request(true)); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		// Leftover Service chains go stale, then go.
		p.now = func() time.Time { return time.Now().Add(2 * time.Second) }
		if err := p.Sync(ctx, w.request(false, "ns1/svc1")); err != nil {
			t.Fatal(err)
		}
		fresh := knftables.NewFake("", "")
		if err := NewProxier(cfg, fresh).Sync(ctx, w.request(true)); err != nil {
			t.Fatal(err)
		}
		if got, want := objectNames(nft), objectNames(fresh); !slices.Equal(got, want) {
			t.Errorf("%s: tables hold\n%v\nwant\n%v", step, got, want)
		}
		sameTraces(t, step, nft, fresh, overallPackets(w))
	}
}

// objectNames lists the tables, chains, sets and maps of nft's IPv4 tables.
func objectNames(nft *knftables.Fake) []string {
	var out []string
	for name, tbl := range nft.Tables[knftables.IPv4Family] {
		out = append(out, "table "+name)
		for c := range tbl.Chains {
			out = append(out, name+" chain "+c)
		}
		for s := range tbl.Sets {
			out = append(out, name+" set "+s)
		}
		for m := range tbl.Maps {
			out = append(out, name+" map "+m)
		}
	}
	slices.Sort(out)
	return out
}

// TestDirectExternalClaims: Services that claim one external address and
// port, coming, changing and going in partial syncs, through the service
// change tracker as the Proxier hands them to the mode: after each sync
// every packet traces as after a full sync from nothing, in every layout,
// and the address leads to the winner of proxy/claims.go (the oldest
// Service). In the shared layout the winner's address is a direct choice,
// also when it moves from one direct port to another in one partial sync
// (the loser's keys are released before the winner's are added), and the
// direct maps hold exactly their keys.
func TestDirectExternalClaims(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		shards int
		shared bool
	}{{0, true}, {2, true}, {0, false}, {2, false}} {
		shards, shared := c.shards, c.shared
		t.Run(fmt.Sprintf("shards=%d/shared=%v", shards, shared), func(t *testing.T) {
			cfg := shardsConfig(shards, shared)
			extIP := "192.168.99.55"
			ages := map[string]int{"b": 0, "a": 1, "c": 2}
			cips := map[string]string{"a": "172.30.0.51", "b": "172.30.0.52", "c": "172.30.0.53"}
			w := overallWorld()
			tr := proxy.NewServiceChangeTracker()
			objs := map[string]*v1.Service{}
			var changed []string
			set := func(name string, n int) {
				i := int(cips[name][len(cips[name])-1] - '0')
				svc := service("claims", name, cips[name], func(s *v1.Service) {
					s.Spec.ExternalIPs = []string{extIP}
					s.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, ages[name], 0, 0, time.UTC))
				})
				tr.Update(objs[name], svc)
				objs[name] = svc
				var eps []*proxy.Endpoint
				for j := 1; j <= n; j++ {
					eps = append(eps, ep(fmt.Sprintf("10.183.%d.%d", i, j), 80, false))
				}
				for _, sp := range proxy.NewServicePorts(svc) {
					w.eps[sp.Name] = eps
				}
				changed = append(changed, "claims/"+name)
			}
			del := func(name string) {
				for _, sp := range proxy.NewServicePorts(objs[name]) {
					delete(w.eps, sp.Name)
				}
				tr.Update(objs[name], nil)
				delete(objs, name)
				changed = append(changed, "claims/"+name)
			}
			nft := newFake(cfg)
			p := NewProxier(cfg, nft)
			winner := func() string {
				for _, tbl := range tablesOf(nft) {
					for _, m := range tbl.Maps {
						for _, e := range m.Elements {
							if e.Key[0] == extIP && len(e.Value) > 0 {
								if _, ep, ok := strings.Cut(e.Value[0], "10.183."); ok {
									return ep[:1]
								}
								if _, ch, ok := strings.Cut(e.Value[0], "claims/"); ok {
									return ch[:1]
								}
							}
						}
					}
				}
				return ""
			}
			direct := func() bool {
				for _, tbl := range tablesOf(nft) {
					if s := tbl.Sets[directExternalIPsSet]; s != nil {
						for _, e := range s.Elements {
							if e.Key[0] == extIP {
								return true
							}
						}
					}
				}
				return false
			}
			sync := func(step string, full bool, want string) {
				t.Helper()
				res := tr.Apply(w.svcs)
				r := w.request(full, changed...)
				changed = nil
				for nn := range res.UpdatedServices {
					r.ServiceResult.UpdatedServices.Insert(nn)
				}
				r.ServiceResult.Deleted = res.Deleted
				if err := p.Sync(ctx, r); err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				fresh := newFake(cfg)
				if err := NewProxier(cfg, fresh).Sync(ctx, w.request(true)); err != nil {
					t.Fatal(err)
				}
				sameTraces(t, step, nft, fresh, overallPackets(w))
				if shards == 0 && shared {
					checkSharedMap(t, step, nft)
				}
				if got := direct(); got != shared {
					t.Errorf("%s: %s direct %v, want %v", step, extIP, got, shared)
				}
				if shards == 0 && shared {
					// The endpoints of the address's keys tell its Service.
					if got := winner(); got != want {
						t.Errorf("%s: %s leads to Service %q's endpoints, want %q", step, extIP, got, want)
					}
				}
			}
			set("b", 2)
			sync("b alone", true, "2")
			// a, younger, claims b's address (a sorts first), then c does,
			// while b's endpoints change: b keeps it.
			set("a", 2)
			sync("a claims it", false, "2")
			set("c", 2)
			set("b", 1)
			sync("c claims it too", false, "2")
			set("b", 2)
			sync("b has two endpoints again", false, "2")
			// The winner goes: the address moves to a in the same sync, its
			// keys the same as b's (both have two endpoints; a sorts before
			// b, so the sync plans a's keys before b's release).
			del("b")
			sync("b gone", false, "1")
			sync("full", true, "1")
			del("a")
			set("c", 3)
			sync("a gone, c changes", false, "3")
		})
	}
}

// tablesOf returns the fake's tables (the main table, and the dispatch
// tables with --nftables-shards).
func tablesOf(nft *knftables.Fake) []*knftables.FakeTable {
	if nft.Table != nil {
		return []*knftables.FakeTable{nft.Table}
	}
	var out []*knftables.FakeTable
	for _, fam := range nft.Tables {
		for _, t := range fam {
			out = append(out, t)
		}
	}
	return out
}
