package ipvs

import (
	"fmt"
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
	req := &proxy.SyncRequest{Services: s.svcs, Endpoints: s.eps, Node: proxy.NodeInfo{Name: "node-1", IPs: []netip.Addr{nodeIP}}}
	if err := k.mode.Sync(t.Context(), req); err == nil || !strings.Contains(err.Error(), "injected") {
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
