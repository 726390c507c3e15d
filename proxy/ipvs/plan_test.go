package ipvs

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/proxy"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestSeedService programs the seed's myapp Service and compares the dump
// with the seed's `ipvsadm -ln` output (connection counters aside), in
// ipvsadm's exact columns.
func TestSeedService(t *testing.T) {
	k := newTestKernel(t, "")
	s := newState()
	s.service(clusterIP("myapp", "10.96.3.215", 38080, v1.ProtocolTCP),
		ep("100.84.80.88", 8080, false), ep("100.121.213.72", 8080, false), ep("100.121.213.109", 8080, true))
	k.sync(t, s)
	want := "" +
		"TCP  10.96.3.215:38080 rr\n" +
		"  -> 100.84.80.88:8080            Masq    1      0          0         \n" +
		"  -> 100.121.213.72:8080          Masq    1      0          0         \n" +
		"  -> 100.121.213.109:8080         Masq    1      0          0         \n"
	// Dump sorts real servers by address; the seed shows the kernel's order.
	got := k.dump(t)
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	slices.Sort(gl)
	slices.Sort(wl)
	if !slices.Equal(gl, wl) {
		t.Fatalf("dump:\n%s\nwant (any order):\n%s", got, want)
	}
	full, _ := Dump(k.ipvs)
	if !strings.HasPrefix(full, "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n") {
		t.Fatalf("header:\n%s", full)
	}
	if got := k.sets.sets[SetClusterIP]; !slices.Equal(got, []string{"10.96.3.215,tcp:38080"}) {
		t.Errorf("KUBE-CLUSTER-IP = %v", got)
	}
	if got := k.sets.sets[SetLoopBack]; !slices.Equal(got, []string{"100.121.213.109,tcp:8080,100.121.213.109"}) {
		t.Errorf("KUBE-LOOP-BACK = %v", got)
	}
	if !slices.Equal(k.iface.addrs, []netip.Addr{netip.MustParseAddr("10.96.3.215")}) {
		t.Errorf("kube-ipvs0 addresses = %v", k.iface.addrs)
	}
	if !k.ipt.rules["nat PREROUTING -m comment --comment kubernetes service portals -j KUBE-SERVICES"] {
		t.Errorf("jump rules: %v", k.ipt.rules)
	}
}

func nodePortLocal() (*proxy.ServicePort, []*proxy.Endpoint) {
	sp := clusterIP("web", "10.96.0.20", 80, v1.ProtocolTCP)
	sp.Type = v1.ServiceTypeLoadBalancer
	sp.NodePort = 30080
	sp.ExternalPolicyLocal = true
	sp.HealthCheckNodePort = 32000
	sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.7")}
	sp.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr("198.51.100.9")}
	sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	return sp, []*proxy.Endpoint{ep("10.244.1.5", 8080, true), ep("10.244.2.6", 8080, false)}
}

// TestNodePortLocalPolicy: the ClusterIP uses every endpoint, the external
// addresses (node IP × NodePort, externalIP, LB IP) only the local one;
// Local sets are filled next to the plain ones.
func TestNodePortLocalPolicy(t *testing.T) {
	k := newTestKernel(t, "")
	s := newState()
	sp, eps := nodePortLocal()
	s.service(sp, eps...)
	k.sync(t, s)
	want := `TCP 10.96.0.20:80 rr
  -> 10.244.1.5:8080 Masq 1 0 0
  -> 10.244.2.6:8080 Masq 1 0 0
TCP 192.168.0.11:30080 rr
  -> 10.244.1.5:8080 Masq 1 0 0
TCP 198.51.100.9:80 rr
  -> 10.244.1.5:8080 Masq 1 0 0
TCP 203.0.113.7:80 rr
  -> 10.244.1.5:8080 Masq 1 0 0`
	if got := norm(k.dump(t)); got != want {
		t.Fatalf("dump:\n%s\nwant:\n%s", got, want)
	}
	for set, want := range map[string][]string{
		SetNodePortTCP:          {"30080"},
		SetNodePortLocalTCP:     {"30080"},
		SetExternalIPLocal:      {"203.0.113.7,tcp:80"},
		SetExternalIP:           {},
		SetLoadBalancer:         {"198.51.100.9,tcp:80"},
		SetLoadBalancerLocal:    {"198.51.100.9,tcp:80"},
		SetLoadBalancerFW:       {"198.51.100.9,tcp:80"},
		SetLoadBalancerSrcCIDR:  {"198.51.100.9,tcp:80,203.0.113.0/24"},
		SetHealthCheckNodePort:  {"32000"},
		SetIPVSIPs:              {"10.96.0.20", "198.51.100.9", "203.0.113.7"},
		SetLoadBalancerSourceIP: {},
	} {
		got := slices.Clone(k.sets.sets[set])
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", set, got, want)
		}
	}
	// The node address is not bound to kube-ipvs0; service addresses are.
	if slices.Contains(k.iface.addrs, nodeIP) || len(k.iface.addrs) != 3 {
		t.Errorf("kube-ipvs0 = %v", k.iface.addrs)
	}
}

// TestLocalPolicyWithoutLocalEndpoints: kube-proxy keeps the cluster-wide
// endpoints then (so pods can still reach the Service) and counts it.
func TestLocalPolicyWithoutLocalEndpoints(t *testing.T) {
	sp, _ := nodePortLocal()
	sp.ExternalIPs, sp.LoadBalancerVIPs = nil, nil
	svcs := proxy.ServicePortMap{sp.Name: sp}
	eps := proxy.EndpointsMap{sp.Name: {ep("10.244.2.6", 8080, false)}}
	p := BuildPlan(PlanConfig{NodePortAddrs: []netip.Addr{nodeIP}, NodeName: "node-1", MasqueradeMark: "0x00004000"}, svcs, eps)
	if p.NoLocalEndpointsExternal != 1 || p.NoLocalEndpointsInternal != 0 {
		t.Errorf("no-local counts = %d/%d", p.NoLocalEndpointsInternal, p.NoLocalEndpointsExternal)
	}
	for _, ps := range p.Services {
		if len(ps.Dests) != 1 {
			t.Errorf("%s: %v", ps.VS, ps.Dests)
		}
	}
}

func TestSessionAffinityIsPersistence(t *testing.T) {
	k := newTestKernel(t, "")
	s := newState()
	a := clusterIP("sticky", "10.96.0.30", 80, v1.ProtocolTCP)
	a.SessionAffinity, a.StickyMaxAgeSeconds = v1.ServiceAffinityClientIP, 10800
	b := clusterIP("short", "10.96.0.31", 53, v1.ProtocolUDP)
	b.SessionAffinity, b.StickyMaxAgeSeconds = v1.ServiceAffinityClientIP, 60
	s.service(a, ep("10.244.1.5", 80, true))
	s.service(b, ep("10.244.1.6", 53, true))
	k.sync(t, s)
	want := `TCP 10.96.0.30:80 rr persistent 10800
  -> 10.244.1.5:80 Masq 1 0 0
UDP 10.96.0.31:53 rr persistent 60
  -> 10.244.1.6:53 Masq 1 0 0`
	if got := norm(k.dump(t)); got != want {
		t.Fatalf("dump:\n%s\nwant:\n%s", got, want)
	}
	// Turning affinity off updates the virtual server in place.
	a2 := *a
	a2.SessionAffinity = v1.ServiceAffinityNone
	s.service(&a2, ep("10.244.1.5", 80, true))
	k.sync(t, s)
	if got := norm(k.dump(t)); !strings.HasPrefix(got, "TCP 10.96.0.30:80 rr\n") {
		t.Fatalf("after affinity off:\n%s", got)
	}
}

func TestSchedulerAnnotation(t *testing.T) {
	k := newTestKernel(t, "wlc")
	s := newState()
	a := clusterIP("hashed", "10.96.0.40", 80, v1.ProtocolTCP)
	a.Scheduler = "sh"
	b := clusterIP("typo", "10.96.0.41", 80, v1.ProtocolTCP)
	b.Scheduler = "roundrobin"
	c := clusterIP("plain", "10.96.0.42", 80, v1.ProtocolTCP)
	d := clusterIP("weighted", "10.96.0.43", 80, v1.ProtocolTCP)
	d.Scheduler = "WRR"
	heavy := ep("10.244.1.9", 80, true)
	heavy.Weight = 3
	s.service(a, ep("10.244.1.5", 80, true))
	s.service(b, ep("10.244.1.6", 80, true))
	s.service(c, ep("10.244.1.7", 80, true))
	s.service(d, ep("10.244.1.8", 80, true), heavy)
	k.sync(t, s)
	k.sync(t, s) // reported once, not per sync
	want := `TCP 10.96.0.40:80 sh
  -> 10.244.1.5:80 Masq 1 0 0
TCP 10.96.0.41:80 wlc
  -> 10.244.1.6:80 Masq 1 0 0
TCP 10.96.0.42:80 wlc
  -> 10.244.1.7:80 Masq 1 0 0
TCP 10.96.0.43:80 wrr
  -> 10.244.1.8:80 Masq 1 0 0
  -> 10.244.1.9:80 Masq 3 0 0`
	if got := norm(k.dump(t)); got != want {
		t.Fatalf("dump:\n%s\nwant:\n%s", got, want)
	}
	if !slices.Equal(k.fell, []string{"default/typo roundrobin->wlc"}) {
		t.Errorf("reports = %v", k.fell)
	}
	// Changing the annotation updates the scheduler in place.
	a2 := *a
	a2.Scheduler = "dh"
	s.service(&a2, ep("10.244.1.5", 80, true))
	k.sync(t, s)
	if got := norm(k.dump(t)); !strings.HasPrefix(got, "TCP 10.96.0.40:80 dh\n") {
		t.Fatalf("after annotation change:\n%s", got)
	}
}

func TestModeSchedulers(t *testing.T) {
	for _, c := range []struct {
		ann, def, want, fallback string
	}{
		{"", "", "rr", ""}, {"", "bogus", "rr", ""}, {"sed", "rr", "sed", ""},
		{"nq", "lc", "nq", ""}, {" Sh ", "rr", "sh", ""}, {"maglev", "lc", "mh", ""}, {"lblcr", "rr", "lblcr", ""},
		{"random", "lc", "lc", proxy.ReasonUnsupportedScheduler}, {"roundrobin", "wlc", "wlc", proxy.ReasonUnknownScheduler},
	} {
		b := proxy.NewBalance(&proxy.ServicePort{Scheduler: c.ann}, ModeSchedulers(c.def))
		if b.Scheduler != c.want || b.Fallback != c.fallback {
			t.Errorf("NewBalance(%q, default %q) = %q, %q; want %q, %q", c.ann, c.def, b.Scheduler, b.Fallback, c.want, c.fallback)
		}
	}
}

// TestGracefulTermination walks a real server through removal: weight 0
// while it has connections, deleted once they drain, re-added with weight 1
// if the endpoint comes back; UDP real servers go at once; a deleted
// Service takes its virtual server and address with it.
// TestGracefulTermination runs the same steps with full syncs and with
// partial ones: a partial sync must still visit the draining real servers.
func TestGracefulTermination(t *testing.T) {
	for _, full := range []bool{true, false} {
		t.Run(fmt.Sprintf("full=%v", full), func(t *testing.T) { testGracefulTermination(t, full) })
	}
}

func testGracefulTermination(t *testing.T, full bool) {
	k := newTestKernel(t, "")
	s := newState()
	svc := clusterIP("myapp", "10.96.3.215", 38080, v1.ProtocolTCP)
	dns := clusterIP("dns", "10.96.0.10", 53, v1.ProtocolUDP)
	a, b := ep("10.244.1.5", 8080, true), ep("10.244.2.6", 8080, false)
	s.service(svc, a, b)
	s.service(dns, ep("10.244.1.3", 53, true), ep("10.244.2.3", 53, false))
	vsKey := Key{netip.MustParseAddr("10.96.3.215"), v1.ProtocolTCP, 38080}
	dnsKey := Key{netip.MustParseAddr("10.96.0.10"), v1.ProtocolUDP, 53}

	steps := []struct {
		name   string
		change func()
		want   string
	}{
		{"initial", func() {}, `TCP 10.96.3.215:38080 rr
  -> 10.244.1.5:8080 Masq 1 0 0
  -> 10.244.2.6:8080 Masq 1 0 0
UDP 10.96.0.10:53 rr
  -> 10.244.1.3:53 Masq 1 0 0
  -> 10.244.2.3:53 Masq 1 0 0`},
		{"endpoint removed while busy: quiesced", func() {
			must(t, k.ipvs.SetConnections(vsKey, b.AddrPort(), 2, 1))
			must(t, k.ipvs.SetConnections(dnsKey, netip.MustParseAddrPort("10.244.2.3:53"), 0, 5))
			s.eps[svc.Name] = []*proxy.Endpoint{a}
			s.eps[dns.Name] = []*proxy.Endpoint{ep("10.244.1.3", 53, true)}
		}, `TCP 10.96.3.215:38080 rr
  -> 10.244.1.5:8080 Masq 1 0 0
  -> 10.244.2.6:8080 Masq 0 2 1
UDP 10.96.0.10:53 rr
  -> 10.244.1.3:53 Masq 1 0 0`},
		{"still inactive connections: kept", func() {
			must(t, k.ipvs.SetConnections(vsKey, b.AddrPort(), 0, 1))
		}, `TCP 10.96.3.215:38080 rr
  -> 10.244.1.5:8080 Masq 1 0 0
  -> 10.244.2.6:8080 Masq 0 0 1
UDP 10.96.0.10:53 rr
  -> 10.244.1.3:53 Masq 1 0 0`},
		{"drained: deleted", func() {
			must(t, k.ipvs.SetConnections(vsKey, b.AddrPort(), 0, 0))
		}, `TCP 10.96.3.215:38080 rr
  -> 10.244.1.5:8080 Masq 1 0 0
UDP 10.96.0.10:53 rr
  -> 10.244.1.3:53 Masq 1 0 0`},
		{"terminating endpoint returns before drained: weight restored", func() {
			s.eps[svc.Name] = []*proxy.Endpoint{a, b}
		}, `TCP 10.96.3.215:38080 rr
  -> 10.244.1.5:8080 Masq 1 0 0
  -> 10.244.2.6:8080 Masq 1 0 0
UDP 10.96.0.10:53 rr
  -> 10.244.1.3:53 Masq 1 0 0`},
		{"service deleted", func() {
			delete(s.svcs, svc.Name)
			delete(s.eps, svc.Name)
		}, `UDP 10.96.0.10:53 rr
  -> 10.244.1.3:53 Masq 1 0 0`},
	}
	for i, st := range steps {
		st.change()
		k.syncFull(t, s, full || i == 0)
		if got := norm(k.dump(t)); got != st.want {
			t.Fatalf("step %q:\n%s\nwant:\n%s", st.name, got, st.want)
		}
	}
	if !slices.Equal(k.iface.addrs, []netip.Addr{netip.MustParseAddr("10.96.0.10")}) {
		t.Errorf("kube-ipvs0 = %v", k.iface.addrs)
	}
	if got := k.sets.sets[SetClusterIP]; !slices.Equal(got, []string{"10.96.0.10,udp:53"}) {
		t.Errorf("KUBE-CLUSTER-IP = %v", got)
	}
	if err := k.mode.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := norm(k.dump(t)); got != "" || len(k.sets.sets) != 0 || len(k.ipt.rules) != 0 {
		t.Errorf("after cleanup: dump %q sets %v rules %v", got, k.sets.sets, k.ipt.rules)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestIPTablesGolden compares the iptables-restore payload with
// testdata/<name>.golden (go test -update rewrites them).
func TestIPTablesGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  PlanConfig
	}{
		{"iptables_detect_local", PlanConfig{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}},
		{"iptables_masquerade_all", PlanConfig{MasqueradeAll: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sp, eps := nodePortLocal()
			seed := clusterIP("myapp", "10.96.3.215", 38080, v1.ProtocolTCP)
			svcs := proxy.ServicePortMap{sp.Name: sp, seed.Name: seed}
			epm := proxy.EndpointsMap{sp.Name: eps, seed.Name: {ep("10.244.1.7", 8080, true)}}
			cfg := c.cfg
			cfg.NodePortAddrs, cfg.NodeIPs, cfg.NodeName, cfg.MasqueradeMark = []netip.Addr{nodeIP}, []netip.Addr{nodeIP}, "node-1", "0x00004000"
			got := BuildPlan(cfg, svcs, epm).IPTables
			path := filepath.Join("testdata", c.name+".golden")
			if *update {
				must(t, os.MkdirAll("testdata", 0o755))
				must(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			must(t, err)
			if string(got) != string(want) {
				t.Fatalf("payload differs from %s:\n%s", path, got)
			}
		})
	}
}

func TestIPSetPayloadIsADiff(t *testing.T) {
	cur := map[string][]string{SetClusterIP: {"10.96.0.1,tcp:443", "10.96.0.9,tcp:80"}}
	for _, s := range Sets {
		if _, ok := cur[s.Name]; !ok {
			cur[s.Name] = nil
		}
	}
	want := map[string][]string{SetClusterIP: {"10.96.0.1,tcp:443", "10.96.0.10,udp:53"}}
	got := string(ipsetPayload(want, cur, false))
	if got != "add KUBE-CLUSTER-IP 10.96.0.10,udp:53\ndel KUBE-CLUSTER-IP 10.96.0.9,tcp:80\n" {
		t.Fatalf("payload:\n%s", got)
	}
	created := string(ipsetPayload(nil, map[string][]string{}, true))
	for _, line := range []string{
		"create KUBE-6-CLUSTER-IP hash:ip,port family inet6 hashsize 1024 maxelem 65536 comment\n",
		"create KUBE-6-NODE-PORT-TCP bitmap:port range 0-65535 comment\n",
		"create KUBE-6-LOAD-BALANCER-SOURCE-CID hash:ip,port,net family inet6",
	} {
		if !strings.Contains(created, line) {
			t.Errorf("missing %q in:\n%s", line, created)
		}
	}
	if got := parseIPSetSave([]byte("create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 comment\nadd KUBE-CLUSTER-IP 10.96.0.1,tcp:443\ncreate other hash:ip\nadd other 1.2.3.4\n")); len(got) != 1 || !slices.Equal(got[SetClusterIP], []string{"10.96.0.1,tcp:443"}) {
		t.Errorf("parseIPSetSave = %v", got)
	}
}

// TestJumpsCheckedOnFullSyncs: the jumps from the built-in chains are
// checked on full syncs (and until a check passes), not on every sync; a
// jump deleted behind the proxy's back is back after the next full sync.
func TestJumpsCheckedOnFullSyncs(t *testing.T) {
	k := newTestKernel(t, "")
	s := newState()
	s.service(clusterIP("web", "10.96.0.10", 80, v1.ProtocolTCP), ep("10.244.1.5", 8080, false))
	k.sync(t, s)
	if len(k.ipt.rules) != len(jumps) {
		t.Fatalf("after the first sync: %d jump rules, want %d", len(k.ipt.rules), len(jumps))
	}
	j := jumps[1]
	gone := j.table + " " + j.from + " -m comment --comment " + j.comment + " -j " + j.to
	if !k.ipt.rules[gone] {
		t.Fatalf("jump %q not written; have %v", gone, k.ipt.rules)
	}
	delete(k.ipt.rules, gone)

	partial := func() {
		t.Helper()
		s.service(clusterIP("api", "10.96.0.11", 443, v1.ProtocolTCP), ep("10.244.1.6", 8443, false))
		if err := k.mode.Sync(context.Background(), k.request(s, false)); err != nil {
			t.Fatal(err)
		}
	}
	partial()
	if k.ipt.rules[gone] {
		t.Fatal("a partial sync checked the jumps")
	}
	if got := norm(k.dump(t)); !strings.Contains(got, "10.96.0.11:443") {
		t.Fatalf("the partial sync did not program the new Service:\n%s", got)
	}
	k.sync(t, s)
	if !k.ipt.rules[gone] {
		t.Fatal("the full sync did not put the deleted jump back")
	}
}

// What hack/kpdiff found against kube-proxy's IPVS proxier, one case each.

// TestInternalLocalWithoutLocalEndpoints: with internalTrafficPolicy Local
// and no endpoint on this node, the ClusterIP keeps the cluster-wide
// endpoints too (kube-proxy's syncEndpoint falls back for both policies).
func TestInternalLocalWithoutLocalEndpoints(t *testing.T) {
	sp := clusterIP("itp", "10.96.0.40", 80, v1.ProtocolTCP)
	sp.Type, sp.NodePort, sp.InternalPolicyLocal = v1.ServiceTypeNodePort, 30040, true
	p := BuildPlan(PlanConfig{NodePortAddrs: []netip.Addr{nodeIP}, NodeName: "node-1", MasqueradeMark: "0x00004000"},
		proxy.ServicePortMap{sp.Name: sp}, proxy.EndpointsMap{sp.Name: {ep("10.244.2.6", 8080, false)}})
	if p.NoLocalEndpointsInternal != 1 {
		t.Errorf("no-local internal count = %d, want 1", p.NoLocalEndpointsInternal)
	}
	for _, ps := range p.Services {
		if len(ps.Dests) != 1 || ps.Dests[0].Addr != netip.MustParseAddr("10.244.2.6") {
			t.Errorf("%s: real servers %v, want the remote endpoint", ps.VS, ps.Dests)
		}
	}
	// A ClusterIP-only Service never uses cluster-wide endpoints: none.
	sp.Type, sp.NodePort = v1.ServiceTypeClusterIP, 0
	p = BuildPlan(PlanConfig{NodeName: "node-1", MasqueradeMark: "0x00004000"},
		proxy.ServicePortMap{sp.Name: sp}, proxy.EndpointsMap{sp.Name: {ep("10.244.2.6", 8080, false)}})
	if len(p.Services) != 1 || len(p.Services[0].Dests) != 0 {
		t.Errorf("ClusterIP-only, internal Local, no local endpoint: %+v", p.Services)
	}
}

// TestMaglevHashesPorts: the mh scheduler gets the mh-port flag.
func TestMaglevHashesPorts(t *testing.T) {
	k := newTestKernel(t, "mh")
	s := newState()
	s.service(clusterIP("mh", "10.96.0.41", 80, v1.ProtocolTCP), ep("10.244.1.5", 80, true))
	s.service(clusterIP("rr", "10.96.0.42", 80, v1.ProtocolTCP), ep("10.244.1.5", 80, true))
	s.svcs[spn("default", "rr", "", v1.ProtocolTCP)].Scheduler = "rr"
	k.sync(t, s)
	want := `TCP 10.96.0.41:80 mh (mh-port)
  -> 10.244.1.5:80 Masq 1 0 0
TCP 10.96.0.42:80 rr
  -> 10.244.1.5:80 Masq 1 0 0`
	if got := norm(k.dump(t)); got != want {
		t.Fatalf("dump:\n%s\nwant:\n%s", got, want)
	}
}

// TestLocalExternalIPNotBound: an externalIP the node already has is not
// bound to kube-ipvs0; with no NodePort address, NodePorts and their
// health-check ports are left out.
func TestLocalExternalIPNotBound(t *testing.T) {
	sp, eps := nodePortLocal()
	sp.ExternalIPs = []netip.Addr{nodeIP}
	p := BuildPlan(PlanConfig{LocalAddrs: []netip.Addr{nodeIP}, NodeName: "node-1", MasqueradeMark: "0x00004000"},
		proxy.ServicePortMap{sp.Name: sp}, proxy.EndpointsMap{sp.Name: eps})
	if slices.Contains(p.Bind, nodeIP) {
		t.Errorf("the node's own address bound to kube-ipvs0: %v", p.Bind)
	}
	if !slices.Contains(p.Bind, netip.MustParseAddr("198.51.100.9")) {
		t.Errorf("LoadBalancer IP not bound: %v", p.Bind)
	}
	for _, set := range []string{SetNodePortTCP, SetNodePortLocalTCP, SetHealthCheckNodePort} {
		if len(p.IPSets[set]) != 0 {
			t.Errorf("%s = %v with no NodePort address", set, p.IPSets[set])
		}
	}
}

// TestNodeAddressChangeReplans: a new address on the node gets the
// NodePorts at the next sync, partial or not (every NodePort changes, so
// the sync replans everything).
func TestNodeAddressChangeReplans(t *testing.T) {
	k := newTestKernel(t, "")
	s := newState()
	sp, eps := nodePortLocal()
	s.service(sp, eps...)
	k.sync(t, s)
	second := netip.MustParseAddr("192.168.1.11")
	k.iface.local = append(k.iface.local, second)
	k.syncFull(t, s, false) // nothing changed in the API
	if !strings.Contains(k.dump(t), "TCP  192.168.1.11:30080 rr") {
		t.Fatalf("no NodePort on the new address:\n%s", k.dump(t))
	}
	k.iface.local = k.iface.local[:1]
	k.syncFull(t, s, false)
	if strings.Contains(k.dump(t), "192.168.1.11:30080") {
		t.Fatalf("NodePort left on the removed address:\n%s", k.dump(t))
	}
}

// TestExternalIPOverNodePort: an externalIP that is a node address, on a
// port that is another Service's NodePort, plans the same virtual server
// as that NodePort; the externalIP's Service gets it (as the iptables and
// nftables modes match externalIPs before NodePorts), whatever the names'
// order, in full and partial syncs, and the NodePort takes it over when
// the externalIP goes.
func TestExternalIPOverNodePort(t *testing.T) {
	k := newTestKernel(t, "")
	s := newState()
	np := clusterIP("z-nodeport", "10.96.0.30", 80, v1.ProtocolTCP)
	np.Type, np.NodePort = v1.ServiceTypeNodePort, 30080
	ext := clusterIP("a-external", "10.96.0.31", 30080, v1.ProtocolTCP)
	ext.ExternalIPs = []netip.Addr{nodeIP}
	s.service(np, ep("10.244.1.30", 8080, false))
	s.service(ext, ep("10.244.1.31", 8080, false))
	vsOf := func() string {
		for _, l := range strings.Split(norm(k.dump(t)), "\n") {
			if strings.HasPrefix(l, "TCP 192.168.0.11:30080 ") {
				return l
			}
		}
		return ""
	}
	destOf := func() string {
		lines := strings.Split(norm(k.dump(t)), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "TCP 192.168.0.11:30080 ") && i+1 < len(lines) {
				return strings.Fields(lines[i+1])[1]
			}
		}
		return ""
	}
	for _, full := range []bool{true, false} {
		k.syncFull(t, s, full)
		if got := destOf(); got != "10.244.1.31:8080" {
			t.Errorf("full=%v: %s goes to %q, want the externalIP's endpoint 10.244.1.31:8080\n%s", full, vsOf(), got, norm(k.dump(t)))
		}
		// Touch both, so that the partial sync replans them.
		np2, ext2 := *np, *ext
		np, ext = &np2, &ext2
		s.service(np, ep("10.244.1.30", 8080, false))
		s.service(ext, ep("10.244.1.31", 8080, false))
	}
	ext3 := *ext
	ext3.ExternalIPs = nil
	s.service(&ext3, ep("10.244.1.31", 8080, false))
	k.syncFull(t, s, false)
	if got := destOf(); got != "10.244.1.30:8080" {
		t.Errorf("externalIP gone: the NodePort goes to %q, want 10.244.1.30:8080", got)
	}
}
