package ipvs

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/proxy"
)

// TestPartialSyncsTouchOnlyChanges: after a full sync, a partial sync of
// one change writes that change and reads nothing back (no virtual server
// list, no ipset list, no address list, no iptables restore when the
// payload is the same); a failed sync makes the next one read the kernel
// back; what was changed behind the proxy's back is repaired by the next
// full sync.
func TestPartialSyncsTouchOnlyChanges(t *testing.T) {
	k := newTestKernel(t, "")
	s := newState()
	for i := range 50 {
		s.service(clusterIP(fmt.Sprintf("svc%d", i), fmt.Sprintf("10.96.1.%d", i+1), 80, v1.ProtocolTCP),
			ep(fmt.Sprintf("10.244.1.%d", i+1), 8080, false), ep(fmt.Sprintf("10.244.2.%d", i+1), 8080, false))
	}
	k.syncFull(t, s, true)
	if got := k.calls.take(); got != "AddDestination:100 AddService:50 GetServices:1" {
		t.Fatalf("first sync: %s", got)
	}
	lists, reads, restores := k.sets.lists, k.iface.reads, k.ipt.restores
	step := func(name string, change func(), full bool, want, wantSets string) {
		t.Helper()
		change()
		k.syncFull(t, s, full)
		if got := k.calls.take(); got != want {
			t.Errorf("%s: IPVS calls %q, want %q", name, got, want)
		}
		if !full && (k.sets.lists != lists || k.iface.reads != reads) {
			t.Errorf("%s: a partial sync read back ipsets (%d) or addresses (%d)", name, k.sets.lists-lists, k.iface.reads-reads)
		}
		if wantSets != "-" && string(k.sets.payload) != wantSets {
			t.Errorf("%s: ipset payload %q, want %q", name, k.sets.payload, wantSets)
		}
		k.sets.payload = nil
		lists, reads = k.sets.lists, k.iface.reads
	}
	step("a Service added", func() {
		s.service(clusterIP("new", "10.96.2.1", 443, v1.ProtocolTCP), ep("10.244.3.1", 8443, false))
	}, false, "AddDestination:1 AddService:1", "add KUBE-CLUSTER-IP 10.96.2.1,tcp:443\nadd KUBE-IPVS-IPS 10.96.2.1\n")
	if k.ipt.restores != restores {
		t.Errorf("a ClusterIP Service added: iptables restored although its payload did not change")
	}
	if !slices.Contains(k.iface.addrs, mustAddr("10.96.2.1")) {
		t.Errorf("10.96.2.1 not bound: %v", k.iface.addrs)
	}
	step("an endpoint added", func() {
		s.eps[spn("default", "svc7", "", v1.ProtocolTCP)] = append(s.eps[spn("default", "svc7", "", v1.ProtocolTCP)], ep("10.244.3.7", 8080, false))
	}, false, "AddDestination:1 GetDestinations:1", "")
	step("a Service removed", func() {
		delete(s.svcs, spn("default", "svc3", "", v1.ProtocolTCP))
		delete(s.eps, spn("default", "svc3", "", v1.ProtocolTCP))
	}, false, "DelService:1", "del KUBE-CLUSTER-IP 10.96.1.4,tcp:80\ndel KUBE-IPVS-IPS 10.96.1.4\n")
	if slices.Contains(k.iface.addrs, mustAddr("10.96.1.4")) {
		t.Errorf("10.96.1.4 still bound: %v", k.iface.addrs)
	}
	step("nothing changed", func() {}, false, "", "-")

	// A failure forgets the last plan: the next partial sync reads back.
	k.calls.fail = "AddService"
	s.service(clusterIP("fails", "10.96.2.2", 80, v1.ProtocolTCP), ep("10.244.3.2", 8080, false))
	if err := k.mode.Sync(t.Context(), k.request(s, false)); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("sync with a failing AddService: %v", err)
	}
	k.calls.take()
	lists, reads = k.sets.lists, k.iface.reads
	k.syncFull(t, s, false)
	if got := k.calls.take(); !strings.Contains(got, "GetServices:1") || !strings.Contains(got, "AddService:1") {
		t.Errorf("partial sync after a failure: %q, want the kernel read back and the Service added", got)
	}
	if k.sets.lists == lists || k.iface.reads == reads {
		t.Error("partial sync after a failure did not read back ipsets and addresses")
	}

	// Behind the proxy's back: a partial sync does not see it, a full one
	// repairs it.
	gone := VirtualServer{Addr: mustAddr("10.96.1.10"), Protocol: v1.ProtocolTCP, Port: 80, Scheduler: "rr"}
	must(t, k.ipvs.DelService(gone))
	k.syncFull(t, s, false)
	if strings.Contains(k.dump(t), "10.96.1.10:80") {
		t.Fatal("a partial sync read the IPVS table back")
	}
	k.syncFull(t, s, true)
	if got := k.dump(t); !strings.Contains(got, "10.96.1.10:80") {
		t.Errorf("the full sync did not restore the deleted virtual server:\n%s", got)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestPartialSyncsMatchFullSyncs drives random changes (Services of every
// type added, changed and removed, ports shared by addresses, endpoints
// coming and going, Local policies losing their local endpoint, source
// ranges that exclude the node, Services that claim the same external
// address and port) through partial syncs, and after each one compares the
// whole kernel state with that of a second kernel given the same state by
// a full sync.
func TestPartialSyncsMatchFullSyncs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	k := newTestKernel(t, "")
	s := newState()
	k.syncFull(t, s, true)
	// Port k of Service i: virtual server keys are their own (as
	// validation and allocation make them) but for external address
	// 203.0.113.9, which Services claim on one port (the API allows it; the
	// port that sorts last gets the virtual server), while addresses, ipset
	// entries and the health-check port are shared.
	randomPort := func(name string, i, k int) (*proxy.ServicePort, []*proxy.Endpoint) {
		proto := []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}[rng.IntN(3)]
		sp := clusterIP(name, fmt.Sprintf("10.96.%d.%d", i/200, i%200+1), 1000+2*i+k, proto)
		sp.Name.Port = fmt.Sprint("p", k)
		if rng.IntN(3) == 0 {
			sp.Type, sp.NodePort = v1.ServiceTypeNodePort, 30000+2*i+k
		}
		if rng.IntN(4) == 0 {
			sp.Type = v1.ServiceTypeLoadBalancer
			sp.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", rng.IntN(5)+1))}
			if rng.IntN(2) == 0 {
				sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix([]string{"203.0.113.0/24", "192.168.0.0/24"}[rng.IntN(2)])}
			}
		}
		switch rng.IntN(10) {
		case 0, 1:
			// Shared by several Services: the entries are reference counted.
			sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.7")}
		case 2:
			// Claimed by several Services on the same port.
			sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.9")}
			sp.Port, sp.Protocol, sp.Name.Protocol = 7000, v1.ProtocolTCP, v1.ProtocolTCP
		}
		if sp.Type != v1.ServiceTypeClusterIP && rng.IntN(2) == 0 {
			sp.ExternalPolicyLocal = true
			sp.HealthCheckNodePort = 32000 + i
		}
		if rng.IntN(4) == 0 {
			sp.SessionAffinity, sp.StickyMaxAgeSeconds = v1.ServiceAffinityClientIP, 60
		}
		var eps []*proxy.Endpoint
		for j := range rng.IntN(4) {
			eps = append(eps, ep(fmt.Sprintf("10.244.%d.%d", j, i%250+1), 8080, rng.IntN(2) == 0))
		}
		return sp, eps
	}
	names := map[string]bool{}
	for step := range 300 {
		switch op := rng.IntN(10); {
		case op < 4 || len(names) == 0: // a Service added or replaced
			i := rng.IntN(40)
			name := fmt.Sprint("svc", i)
			for n := range s.svcs {
				if n.Name == name {
					delete(s.svcs, n)
					delete(s.eps, n)
				}
			}
			for k := range 1 + rng.IntN(2) {
				sp, eps := randomPort(name, i, k)
				s.service(sp, eps...)
			}
			names[name] = true
		case op < 8: // endpoints of one port change
			for _, sp := range s.svcs {
				var i int
				fmt.Sscanf(sp.Name.Name, "svc%d", &i)
				var eps []*proxy.Endpoint
				for j := range rng.IntN(4) {
					eps = append(eps, ep(fmt.Sprintf("10.244.%d.%d", j, i%250+1), 8080, rng.IntN(2) == 0))
				}
				s.eps[sp.Name] = eps
				break
			}
		default: // a Service removed
			for n := range s.svcs {
				for m := range s.svcs {
					if m.NamespacedName == n.NamespacedName {
						delete(s.svcs, m)
						delete(s.eps, m)
					}
				}
				break
			}
		}
		k.syncFull(t, s, false)
		// What the state keeps of the applied plan: no real servers.
		if st := k.mode.state[0]; st == nil || len(st.fresh) > 0 {
			t.Fatalf("step %d: state %v after a partial sync", step, st)
		} else {
			for _, fs := range st.services {
				for _, f := range fs {
					if f.services != nil {
						t.Fatalf("step %d: the state keeps the planned real servers of %s", step, f.name)
					}
				}
			}
		}
		ref := newTestKernel(t, "")
		ref.syncFull(t, s, true)
		if got, want := norm(k.dump(t)), norm(ref.dump(t)); got != want {
			t.Fatalf("step %d: IPVS table after partial syncs:\n%s\nafter a full sync:\n%s", step, got, want)
		}
		if got, want := sortedSets(k.sets.sets), sortedSets(ref.sets.sets); got != want {
			t.Fatalf("step %d: ipsets after partial syncs:\n%s\nafter a full sync:\n%s", step, got, want)
		}
		if got, want := sortedAddrs(k.iface.addrs), sortedAddrs(ref.iface.addrs); got != want {
			t.Fatalf("step %d: kube-ipvs0 after partial syncs %s, after a full sync %s", step, got, want)
		}
		if string(k.ipt.last) != string(ref.ipt.last) {
			t.Fatalf("step %d: iptables payload after partial syncs:\n%s\nafter a full sync:\n%s", step, k.ipt.last, ref.ipt.last)
		}
	}
}

func sortedSets(m map[string][]string) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s %v\n", n, slices.Sorted(slices.Values(m[n])))
	}
	return b.String()
}

func sortedAddrs(as []netip.Addr) string {
	return fmt.Sprint(slices.SortedFunc(slices.Values(as), func(a, b netip.Addr) int { return a.Compare(b) }))
}
