package ipvs

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
)

// TestNewModeNamesMissingModule: on a kernel without IPVS (this CI's) the
// mode refuses to start and says which module is missing.
func TestNewModeNamesMissingModule(t *testing.T) {
	if KernelHasIPVS() {
		t.Skip("this kernel has IPVS; the missing-module error cannot be observed")
	}
	testbed.RequireRoot(t)
	_, err := NewMode(proxy.ModeConfig{IPv4: true})
	if err == nil || !strings.Contains(err.Error(), `kernel module "ip_vs"`) {
		t.Fatalf("NewMode on a kernel without IPVS: err = %v, want one naming ip_vs", err)
	}
}

// TestKernelApplyIPSetsIPTablesInterface applies plans with the real
// ipset and iptables-restore programs and rtnetlink (kube-ipvs0) in a throwaway namespace (the
// IPVS table itself is the Fake: this kernel has no IPVS; see vmtest for
// the real one), then cleans up.
func TestKernelApplyIPSetsIPTablesInterface(t *testing.T) {
	testbed.RequireCommand(t, "ipset", "iptables-restore", "iptables-save")
	ns := testbed.NewNetNS(t, "ipvs")
	exe := proxy.OSExecutor{NetNS: ns.Name}
	ctx := context.Background()
	// The node's address, on a port-less bridge (no dummy driver here):
	// NodePorts get a virtual server on it, found over rtnetlink.
	ns.MustRun("ip", "link", "add", "eth0", "type", "bridge")
	ns.MustRun("ip", "addr", "add", nodeIP.String()+"/24", "dev", "eth0")
	ns.MustRun("ip", "link", "set", "eth0", "up")
	h := NewFake()
	m, err := New(Config{ModeConfig: proxy.ModeConfig{Exec: exe, NodeName: "node-1", IPv4: true,
		NodeIPs: []netip.Addr{nodeIP}, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
		Handle: h, SkipSysctls: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Cleanup(context.Background()) })
	s := newState()
	s.service(clusterIP("myapp", "10.96.3.215", 38080, v1.ProtocolTCP), ep("10.244.1.5", 8080, true))
	web, eps := nodePortLocal()
	web.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")} // includes the node
	s.service(web, eps...)
	sync := func() {
		t.Helper()
		req := &proxy.SyncRequest{Full: true, Services: s.svcs, Endpoints: s.eps, Node: proxy.NodeInfo{Name: "node-1", IPs: []netip.Addr{nodeIP}}}
		if err := m.Sync(ctx, req); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
	sync()
	sync() // idempotent
	table, _ := Dump(h)
	if !strings.Contains(table, "TCP  "+nodeIP.String()+":30080 ") {
		t.Errorf("no NodePort virtual server on the node's address %s:\n%s", nodeIP, table)
	}
	for _, a := range []string{"127.0.0.1:30080", "10.96.0.20:30080"} {
		if strings.Contains(table, a) {
			t.Errorf("NodePort virtual server on %s (loopback and kube-ipvs0 addresses take none):\n%s", a, table)
		}
	}
	addrs := ns.MustRun("ip", "-o", "-4", "addr", "show", "dev", "kube-ipvs0")
	for _, a := range []string{"10.96.3.215/32", "10.96.0.20/32", "198.51.100.9/32", "203.0.113.7/32"} {
		if !strings.Contains(addrs, a) {
			t.Errorf("kube-ipvs0 lacks %s:\n%s", a, addrs)
		}
	}
	sets := ns.MustRun("ipset", "save")
	for _, e := range []string{"add KUBE-CLUSTER-IP 10.96.3.215,tcp:38080", "add KUBE-NODE-PORT-LOCAL-TCP 30080",
		"add KUBE-LOAD-BALANCER-SOURCE-IP 198.51.100.9,tcp:80,198.51.100.9", "add KUBE-LOOP-BACK 10.244.1.5,tcp:8080,10.244.1.5"} {
		if !strings.Contains(sets, e) {
			t.Errorf("ipset save lacks %q:\n%s", e, sets)
		}
	}
	nat := ns.MustRun("iptables-save", "-t", "nat")
	for _, r := range []string{
		`-A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ`,
		`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		`-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-TCP dst -j RETURN`,
	} {
		if !strings.Contains(nat, r) {
			t.Errorf("iptables-save -t nat lacks\n%s\nin:\n%s", r, nat)
		}
	}
	// The Service goes away: its set entries and address go with it.
	delete(s.svcs, web.Name)
	sync()
	if out := ns.MustRun("ipset", "list", "KUBE-NODE-PORT-TCP"); strings.Contains(out, "30080") {
		t.Errorf("stale node port entry:\n%s", out)
	}
	if out := ns.MustRun("ip", "-o", "-4", "addr", "show", "dev", "kube-ipvs0"); strings.Contains(out, "10.96.0.20") {
		t.Errorf("stale address on kube-ipvs0:\n%s", out)
	}
	if err := m.Cleanup(ctx); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if out := ns.MustRun("ipset", "save"); strings.Contains(out, "KUBE-") {
		t.Errorf("sets left after cleanup:\n%s", out)
	}
	if out := ns.MustRun("iptables-save", "-t", "nat"); strings.Contains(out, "KUBE-") {
		t.Errorf("rules left after cleanup:\n%s", out)
	}
	if _, err := ns.Run("ip", "link", "show", "dev", "kube-ipvs0"); err == nil {
		t.Error("kube-ipvs0 left after cleanup")
	}
}
