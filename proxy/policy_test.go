package proxy

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/proxy/lb"
)

func polEP(ip, node string, opts ...func(*Endpoint)) *Endpoint {
	ep := &Endpoint{Addr: netip.MustParseAddr(ip), Port: 8080, Ready: true, Serving: true, NodeName: node, IsLocal: node == "n1"}
	for _, o := range opts {
		o(ep)
	}
	return ep
}

func nodeHint(n ...string) func(*Endpoint) { return func(e *Endpoint) { hints(e).Nodes = n } }
func zoneHint(z ...string) func(*Endpoint) { return func(e *Endpoint) { hints(e).Zones = z } }

func hints(e *Endpoint) *Hints {
	if e.Hints == nil {
		e.Hints = &Hints{}
	}
	return e.Hints
}
func terminating(e *Endpoint) { e.Ready, e.Terminating = false, true }
func quiesced(e *Endpoint)    { e.Quiesced = true }

func addrsOf(eps []*Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.Addr.String())
	}
	slices.Sort(out)
	return out
}

func TestPortPolicy(t *testing.T) {
	svcName := ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "s"}, Protocol: v1.ProtocolTCP}
	base := func() *ServicePort {
		return &ServicePort{Name: svcName, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("fd00::1")},
			Port: 80, Protocol: v1.ProtocolTCP, SessionAffinity: v1.ServiceAffinityNone}
	}
	n1 := PolicyNode{Name: "n1", Labels: map[string]string{v1.LabelTopologyZone: "za"}, IP: netip.MustParseAddr("172.18.0.2")}
	for _, c := range []struct {
		name     string
		svc      func(*ServicePort)
		eps      []*Endpoint
		node     PolicyNode
		ipv6     bool
		topology string
		internal []string
		verdict  string
		external string // external verdict, when it matters
		check    func(t *testing.T, p *PortPolicy)
	}{
		{name: "node hints for this node keep traffic on it",
			eps:  []*Endpoint{polEP("10.0.1.1", "n1", nodeHint("n1")), polEP("10.0.2.1", "n2", nodeHint("n2"))},
			node: n1, topology: "PreferSameNode", internal: []string{"10.0.1.1"}, verdict: VerdictAccept},
		{name: "node hints that do not name this node are ignored",
			eps:  []*Endpoint{polEP("10.0.2.1", "n2", nodeHint("n2")), polEP("10.0.3.1", "n3", nodeHint("n3"))},
			node: n1, topology: "", internal: []string{"10.0.2.1", "10.0.3.1"}, verdict: VerdictAccept},
		{name: "node hints missing on one endpoint are ignored, zone hints apply",
			eps:  []*Endpoint{polEP("10.0.1.1", "n1", nodeHint("n1"), zoneHint("za")), polEP("10.0.2.1", "n2", zoneHint("za")), polEP("10.0.3.1", "n3", zoneHint("zb"))},
			node: n1, topology: "PreferSameZone", internal: []string{"10.0.1.1", "10.0.2.1"}, verdict: VerdictAccept},
		{name: "zone hints without a zone label on the node are ignored",
			eps:  []*Endpoint{polEP("10.0.2.1", "n2", zoneHint("za")), polEP("10.0.3.1", "n3", zoneHint("zb"))},
			node: PolicyNode{Name: "n1"}, topology: "", internal: []string{"10.0.2.1", "10.0.3.1"}, verdict: VerdictAccept},
		{name: "hints of non-ready endpoints do not count; terminating fallback ignores topology",
			eps:  []*Endpoint{polEP("10.0.2.1", "n2", nodeHint("n2"), terminating), polEP("10.0.3.1", "n3", terminating)},
			node: n1, topology: "", internal: []string{"10.0.2.1", "10.0.3.1"}, verdict: VerdictAccept},
		{name: "weight 0 is quiesced",
			eps:  []*Endpoint{polEP("10.0.1.1", "n1", quiesced), polEP("10.0.2.1", "n2")},
			node: n1, internal: []string{"10.0.2.1"}, verdict: VerdictAccept},
		{name: "all quiesced: as without endpoints",
			eps:  []*Endpoint{polEP("10.0.1.1", "n1", quiesced)},
			node: n1, verdict: VerdictReject},
		{name: "internalTrafficPolicy Local with only terminating local endpoints uses them",
			svc:  func(s *ServicePort) { s.InternalPolicyLocal = true },
			eps:  []*Endpoint{polEP("10.0.1.1", "n1", terminating), polEP("10.0.2.1", "n2")},
			node: n1, internal: []string{"10.0.1.1"}, verdict: VerdictAccept},
		{name: "internalTrafficPolicy Local without local endpoints drops",
			svc:  func(s *ServicePort) { s.InternalPolicyLocal = true },
			eps:  []*Endpoint{polEP("10.0.2.1", "n2")},
			node: n1, verdict: VerdictDrop},
		{name: "externalTrafficPolicy Local: terminating local endpoints, cluster stays ready-only",
			svc: func(s *ServicePort) {
				s.NodePort, s.ExternalPolicyLocal = 30000, true
			},
			eps:  []*Endpoint{polEP("10.0.1.1", "n1", terminating), polEP("10.0.2.1", "n2")},
			node: n1, internal: []string{"10.0.2.1"}, verdict: VerdictAccept, external: VerdictAccept,
			check: func(t *testing.T, p *PortPolicy) {
				if got := addrsOf(p.External.Endpoints); !slices.Equal(got, []string{"10.0.1.1"}) {
					t.Errorf("external endpoints %v", got)
				}
				if p.MasqueradeExternal || !p.ShortCircuitLocalOrigin {
					t.Errorf("masquerade %v short-circuit %v", p.MasqueradeExternal, p.ShortCircuitLocalOrigin)
				}
			}},
		{name: "source range containing the primary node IP lets the node reach its LB IPs",
			svc: func(s *ServicePort) {
				s.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr("172.18.0.100")}
				s.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("172.18.0.0/24"), netip.MustParsePrefix("fd00::/64")}
			},
			eps: []*Endpoint{polEP("10.0.2.1", "n2")}, node: n1, internal: []string{"10.0.2.1"}, verdict: VerdictAccept,
			check: func(t *testing.T, p *PortPolicy) {
				if !p.Firewall || !p.FirewallAllowsNode || len(p.SourceRanges) != 1 {
					t.Errorf("firewall %v allowsNode %v ranges %v", p.Firewall, p.FirewallAllowsNode, p.SourceRanges)
				}
			}},
		{name: "source range containing only a secondary node IP does not",
			svc: func(s *ServicePort) {
				s.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr("172.18.0.100")}
				s.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/24")}
			},
			eps: []*Endpoint{polEP("10.0.2.1", "n2")}, node: n1, internal: []string{"10.0.2.1"}, verdict: VerdictAccept,
			check: func(t *testing.T, p *PortPolicy) {
				if !p.Firewall || p.FirewallAllowsNode {
					t.Errorf("firewall %v allowsNode %v", p.Firewall, p.FirewallAllowsNode)
				}
			}},
		{name: "dual-stack: the IPv6 policy uses the IPv6 endpoints",
			eps:  []*Endpoint{polEP("10.0.1.1", "n1"), polEP("fd00:10::1", "n2")},
			node: n1, ipv6: true, internal: []string{"fd00:10::1"}, verdict: VerdictAccept,
			check: func(t *testing.T, p *PortPolicy) {
				if p.Port.ClusterIP() != netip.MustParseAddr("fd00::1") {
					t.Errorf("cluster IP %v", p.Port.ClusterIP())
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := base()
			if c.svc != nil {
				c.svc(svc)
			}
			p := NewPortPolicy(svc, c.eps, c.node, c.ipv6)
			if p.Topology != c.topology {
				t.Errorf("topology %q, want %q", p.Topology, c.topology)
			}
			if p.Internal.Verdict != c.verdict {
				t.Errorf("internal verdict %s, want %s", p.Internal.Verdict, c.verdict)
			}
			if got := addrsOf(p.Internal.Endpoints); !slices.Equal(got, c.internal) {
				t.Errorf("internal endpoints %v, want %v", got, c.internal)
			}
			if c.external != "" && p.External.Verdict != c.external {
				t.Errorf("external verdict %s, want %s", p.External.Verdict, c.external)
			}
			if c.check != nil {
				c.check(t, p)
			}
		})
	}
}

// TestPolicyCacheIncremental checks that the Proxier's cache recomputes a
// changed Service's policy and every policy when the node's facts change.
func TestPolicyCacheIncremental(t *testing.T) {
	a := ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}, Protocol: v1.ProtocolTCP}
	b := ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "b"}, Protocol: v1.ProtocolTCP}
	svcs := ServicePortMap{}
	for i, n := range []ServicePortName{a, b} {
		svcs[n] = &ServicePort{Name: n, ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 1)})}, Port: 80, Protocol: v1.ProtocolTCP}
	}
	eps := EndpointsMap{
		a: {polEP("10.0.1.1", "n1", nodeHint("n1")), polEP("10.0.2.1", "n2", nodeHint("n2"))},
		b: {polEP("10.0.2.2", "n2")},
	}
	c := NewPolicyCache()
	node := NodeInfo{Name: "n1"}
	c.UpdatePorts(node, nil, nil)
	pa, pb := c.Get(a, false, svcs, eps), c.Get(b, false, svcs, eps)
	if got := addrsOf(pa.Internal.Endpoints); !slices.Equal(got, []string{"10.0.1.1"}) {
		t.Fatalf("a on n1: %v", got)
	}
	eps[b] = append(eps[b], polEP("10.0.2.3", "n2"))
	c.UpdatePorts(node, map[types.NamespacedName][]ServicePortName{b.NamespacedName: {b}}, nil)
	if c.Get(a, false, svcs, eps) != pa {
		t.Errorf("unchanged Service a was recomputed")
	}
	if c.Get(b, false, svcs, eps) == pb || len(c.Get(b, false, svcs, eps).Internal.Endpoints) != 2 {
		t.Errorf("changed Service b was not recomputed")
	}
	c.UpdatePorts(NodeInfo{Name: "n2"}, nil, nil)
	if got := addrsOf(c.Get(a, false, svcs, eps).Internal.Endpoints); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Errorf("after the node changed, a: %v", got)
	}
	// A removed port's policy goes too (a port of that name added later
	// must not find it).
	pa = c.Get(a, false, svcs, eps)
	c.UpdatePorts(NodeInfo{Name: "n2"}, nil, []*ServicePort{svcs[a]})
	if c.Get(a, false, svcs, eps) == pa {
		t.Errorf("the policy of a deleted port was kept")
	}
}

// TestMasqueradeBit checks kube-proxy's range 0..31: bit 0 is honoured,
// nil is the default 14, and out-of-range bits are rejected by NewMode.
func TestMasqueradeBit(t *testing.T) {
	bit := func(b int) *int { return &b }
	for _, c := range []struct {
		bit  *int
		mark uint32
	}{{nil, 0x4000}, {bit(0), 0x1}, {bit(31), 0x80000000}, {bit(14), 0x4000}} {
		cfg := ModeConfig{MasqueradeBit: c.bit}
		if err := cfg.Validate(); err != nil {
			t.Errorf("bit %v: %v", c.bit, err)
		}
		if got := cfg.MasqueradeValue(); got != c.mark {
			t.Errorf("bit %v: mark %#x, want %#x", c.bit, got, c.mark)
		}
	}
	for _, b := range []int{-1, 32} {
		cfg := ModeConfig{MasqueradeBit: bit(b)}
		if err := cfg.Validate(); err == nil {
			t.Errorf("bit %d accepted", b)
		}
		if _, err := NewMode("no-such-mode-needed", cfg); err == nil {
			t.Errorf("NewMode accepted bit %d", b)
		}
	}
}

// TestPolicyFollowsAReusedRequest: a request built outside the Proxier and
// modified between syncs (as the IPVS VM guest does) must not serve stale
// policies.
func TestPolicyFollowsAReusedRequest(t *testing.T) {
	n := ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}, Protocol: v1.ProtocolTCP}
	req := &SyncRequest{Services: ServicePortMap{n: {Name: n, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}, Port: 80, Protocol: v1.ProtocolTCP}},
		Endpoints: EndpointsMap{n: {polEP("10.0.1.1", "n1"), polEP("10.0.2.1", "n2")}}}
	if got := len(req.Policy(n, false).Internal.Endpoints); got != 2 {
		t.Fatalf("%d endpoints", got)
	}
	req.Endpoints[n] = req.Endpoints[n][:1]
	if got := len(req.Policy(n, false).Internal.Endpoints); got != 1 {
		t.Errorf("after removing an endpoint from the reused request: %d endpoints, want 1", got)
	}
}

// TestNewBalance is the one decision every mode uses: which scheduler a
// port gets in a mode, whether it fell back (and why), and whether the
// endpoints' weights count.
func TestNewBalance(t *testing.T) {
	random := ModeSchedulers{Default: "random", Supported: func(n string) bool { return n == "random" || n == "wrr" }}
	all := ModeSchedulers{Default: "wlc", Supported: lb.Known}
	for _, c := range []struct {
		ann      string
		mode     ModeSchedulers
		sched    string
		fallback string
		weighted bool
	}{
		{"", random, "random", "", false},
		{"wrr", random, "wrr", "", true},
		{" WRR ", random, "wrr", "", true},
		{"lc", random, "random", ReasonUnsupportedScheduler, false},
		{"sh", random, "random", ReasonUnsupportedScheduler, false},
		{"heavy", random, "random", ReasonUnknownScheduler, false},
		{"", all, "wlc", "", true},
		{"rr", all, "rr", "", false},
		{"maglev", all, "mh", "", true},
		{"bogus", all, "wlc", ReasonUnknownScheduler, true},
		{"", ModeSchedulers{Default: "bogus", Supported: lb.Known}, "rr", "", false},
		{"wrr", ModeSchedulers{}, "rr", ReasonUnsupportedScheduler, false},
	} {
		b := NewBalance(&ServicePort{Scheduler: c.ann}, c.mode)
		if b.Scheduler != c.sched || b.Fallback != c.fallback || b.Weighted != c.weighted || b.Requested != c.ann {
			t.Errorf("NewBalance(%q, default %q) = %+v; want scheduler %q, fallback %q, weighted %v", c.ann, c.mode.Default, b, c.sched, c.fallback, c.weighted)
		}
		heavy := &Endpoint{Weight: 7}
		if want := map[bool]int{true: 7, false: 1}[c.weighted]; b.Weight(heavy) != want {
			t.Errorf("%q: Weight(7) = %d, want %d", c.ann, b.Weight(heavy), want)
		}
	}
}

// TestPolicySharesWhatItKeeps: a policy refers to the ServicePort and the
// endpoint list themselves when it keeps all of them (the proxy holds one
// policy per port: copies would double what it holds), and to copies
// restricted to the family or the usable endpoints otherwise.
func TestPolicySharesWhatItKeeps(t *testing.T) {
	name := ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "s"}, Protocol: v1.ProtocolTCP}
	v4 := &ServicePort{Name: name, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}, Port: 80, Protocol: v1.ProtocolTCP}
	eps := []*Endpoint{polEP("10.0.1.1", "n1"), polEP("10.0.2.1", "n2")}
	node := PolicyNode{Name: "n1"}
	p := NewPortPolicy(v4, eps, node, false)
	if p.Port != v4 || len(p.Cluster) != 2 || &p.Cluster[0] != &eps[0] || &p.Reachable[0] != &eps[0] {
		t.Errorf("single-family port, every endpoint usable: policy %+v does not share the port and the list", p)
	}
	if NewPortPolicy(v4, eps, node, true) != nil {
		t.Error("IPv4-only port has an IPv6 policy")
	}
	dual := *v4
	dual.ClusterIPs = append(dual.ClusterIPs, netip.MustParseAddr("fd00::1"))
	dual.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	p = NewPortPolicy(&dual, append(slices.Clone(eps), polEP("fd00:1::1", "n2")), node, false)
	if p.Port == &dual || !slices.Equal(p.Port.ClusterIPs, v4.ClusterIPs) || p.Port.LoadBalancerSourceRanges != nil {
		t.Errorf("dual-stack port: IPv4 policy's port %+v", p.Port)
	}
	if got := addrsOf(p.Cluster); !slices.Equal(got, []string{"10.0.1.1", "10.0.2.1"}) {
		t.Errorf("dual-stack port: IPv4 endpoints %v", got)
	}
	q := NewPortPolicy(v4, []*Endpoint{eps[0], polEP("10.0.3.1", "n3", terminating)}, node, false)
	if got := addrsOf(q.Cluster); !slices.Equal(got, []string{"10.0.1.1"}) {
		t.Errorf("terminating endpoint left in: %v", got)
	}
}
