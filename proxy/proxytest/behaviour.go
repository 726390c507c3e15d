package proxytest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/proxy"
)

// Addresses of the behaviour scenario. The proxy under test runs on node 1.
var (
	Node1IP     = netip.MustParseAddr("172.18.0.2")
	Node2IP     = netip.MustParseAddr("172.18.0.3")
	ClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	// PodOnNode1 is a client pod on the proxy's node.
	PodOnNode1 = netip.MustParseAddr("10.244.1.9")
	// External is a client outside the cluster.
	External = netip.MustParseAddr("198.51.100.5")
	// AllowedExternal is inside the firewall Service's source ranges.
	AllowedExternal = netip.MustParseAddr("203.0.113.7")
)

// ScenarioNode is the name of the node the proxy under test runs on, and
// ScenarioZone its topology.kubernetes.io/zone.
const (
	ScenarioNode = "node1"
	ScenarioZone = "zone-a"
)

// ScenarioNodeInfo is what the proxy under test knows about its node.
func ScenarioNodeInfo() proxy.NodeInfo {
	return proxy.NodeInfo{Name: ScenarioNode, IPs: []netip.Addr{Node1IP}, Labels: map[string]string{v1.LabelTopologyZone: ScenarioZone}}
}

// epOpt changes one endpoint of the scenario.
type epOpt func(*proxy.Endpoint)

func withNodeHint(ep *proxy.Endpoint) { hintsOf(ep).Nodes = []string{ep.NodeName} }
func withZoneHint(z string) epOpt {
	return func(ep *proxy.Endpoint) { hintsOf(ep).Zones = []string{z} }
}

// hintsOf returns ep's hints, made empty if it had none.
func hintsOf(ep *proxy.Endpoint) *proxy.Hints {
	if ep.Hints == nil {
		ep.Hints = &proxy.Hints{}
	}
	return ep.Hints
}
func asTerminating(ep *proxy.Endpoint) { ep.Ready, ep.Terminating = false, true }
func asQuiesced(ep *proxy.Endpoint)    { ep.Quiesced = true }

func endpoint(port int, spec string, opts ...epOpt) *proxy.Endpoint {
	ep := endpoints(port, spec)[0]
	for _, o := range opts {
		o(ep)
	}
	return ep
}

func name(n, port string, proto v1.Protocol) proxy.ServicePortName {
	return proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: n}, Port: port, Protocol: proto}
}

func endpoints(port int, spec ...string) []*proxy.Endpoint {
	var out []*proxy.Endpoint
	for _, s := range spec {
		ip, node, _ := strings.Cut(s, "@")
		out = append(out, &proxy.Endpoint{Addr: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true,
			NodeName: node, IsLocal: node == ScenarioNode, Weight: 1})
	}
	return out
}

func ips(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// Scenario returns the behaviour table's Services and endpoints:
//
//	web     ClusterIP 10.96.0.10:80  -> 3 endpoints (1 on node1)
//	np      NodePort  10.96.0.11:80, nodePort 30080, externalIP 192.0.2.10 -> 2 endpoints
//	lbl     LoadBalancer, externalTrafficPolicy Local, 10.96.0.12:80, nodePort 30081, LB 172.18.0.100,
//	        healthCheckNodePort 32000 -> 10.244.1.5 (node1), 10.244.2.5 (node2)
//	empty   ClusterIP 10.96.0.13:80, no endpoints
//	itl     ClusterIP 10.96.0.14:80, internalTrafficPolicy Local, endpoint only on node2
//	fw      LoadBalancer 10.96.0.15:80, LB 172.18.0.101, loadBalancerSourceRanges 203.0.113.0/24
//	udp     ClusterIP 10.96.0.16:53/UDP -> 2 endpoints
//	hint    ClusterIP 10.96.0.20:80, node hints (PreferSameNode): 10.244.1.20 (node1), 10.244.2.20 (node2)
//	hintx   ClusterIP 10.96.0.21:80, node hints for node2 and node3 only (do not cover node1)
//	zone    ClusterIP 10.96.0.22:80, zone hints: 10.244.2.22 (zone-a, on node2), 10.244.3.22 (zone-b)
//	quiet   ClusterIP 10.96.0.23:80, 10.244.1.23 weight 0 (quiesced), 10.244.2.23
//	fwnode  LoadBalancer 10.96.0.24:80, LB 172.18.0.102, source range 172.18.0.0/24 (contains node1's IP)
//	itlterm ClusterIP 10.96.0.25:80, internalTrafficPolicy Local: 10.244.1.25 (node1, terminating), 10.244.2.25 (ready)
//	etlterm NodePort 10.96.0.26:80, nodePort 30083, externalTrafficPolicy Local: 10.244.1.26 (node1, terminating),
//	        10.244.2.26 (ready)
//	ds      dual-stack ClusterIP 10.96.0.27 / fd00:96::27 :80 -> 10.244.1.27 and fd00:244:1::27 (node1)
func Scenario() (proxy.ServicePortMap, proxy.EndpointsMap) {
	none := v1.ServiceAffinityNone
	svcs := proxy.ServicePortMap{}
	eps := proxy.EndpointsMap{}
	add := func(p *proxy.ServicePort, e []*proxy.Endpoint) {
		if p.SessionAffinity == "" {
			p.SessionAffinity = none
		}
		svcs[p.Name] = p
		if e != nil {
			eps[p.Name] = e
		}
	}
	add(&proxy.ServicePort{Name: name("web", "http", v1.ProtocolTCP), Type: v1.ServiceTypeClusterIP, ClusterIPs: ips("10.96.0.10"), Port: 80, Protocol: v1.ProtocolTCP},
		endpoints(8080, "10.244.1.2@node1", "10.244.2.2@node2", "10.244.2.3@node2"))
	add(&proxy.ServicePort{Name: name("np", "", v1.ProtocolTCP), Type: v1.ServiceTypeNodePort, ClusterIPs: ips("10.96.0.11"), Port: 80, Protocol: v1.ProtocolTCP,
		NodePort: 30080, ExternalIPs: ips("192.0.2.10")},
		endpoints(8080, "10.244.1.4@node1", "10.244.2.4@node2"))
	add(&proxy.ServicePort{Name: name("lbl", "", v1.ProtocolTCP), Type: v1.ServiceTypeLoadBalancer, ClusterIPs: ips("10.96.0.12"), Port: 80, Protocol: v1.ProtocolTCP,
		NodePort: 30081, LoadBalancerVIPs: ips("172.18.0.100"), ExternalPolicyLocal: true, HealthCheckNodePort: 32000},
		endpoints(8080, "10.244.1.5@node1", "10.244.2.5@node2"))
	add(&proxy.ServicePort{Name: name("empty", "", v1.ProtocolTCP), Type: v1.ServiceTypeClusterIP, ClusterIPs: ips("10.96.0.13"), Port: 80, Protocol: v1.ProtocolTCP}, nil)
	add(&proxy.ServicePort{Name: name("itl", "", v1.ProtocolTCP), Type: v1.ServiceTypeClusterIP, ClusterIPs: ips("10.96.0.14"), Port: 80, Protocol: v1.ProtocolTCP,
		InternalPolicyLocal: true},
		endpoints(8080, "10.244.2.6@node2"))
	add(&proxy.ServicePort{Name: name("fw", "", v1.ProtocolTCP), Type: v1.ServiceTypeLoadBalancer, ClusterIPs: ips("10.96.0.15"), Port: 80, Protocol: v1.ProtocolTCP,
		NodePort: 30082, LoadBalancerVIPs: ips("172.18.0.101"), LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}},
		endpoints(8080, "10.244.2.7@node2"))
	add(&proxy.ServicePort{Name: name("udp", "dns", v1.ProtocolUDP), Type: v1.ServiceTypeClusterIP, ClusterIPs: ips("10.96.0.16"), Port: 53, Protocol: v1.ProtocolUDP},
		endpoints(5353, "10.244.1.8@node1", "10.244.2.8@node2"))
	cip := func(n, ip string) *proxy.ServicePort {
		return &proxy.ServicePort{Name: name(n, "", v1.ProtocolTCP), Type: v1.ServiceTypeClusterIP, ClusterIPs: ips(ip), Port: 80, Protocol: v1.ProtocolTCP}
	}
	add(cip("hint", "10.96.0.20"), []*proxy.Endpoint{endpoint(8080, "10.244.1.20@node1", withNodeHint), endpoint(8080, "10.244.2.20@node2", withNodeHint)})
	add(cip("hintx", "10.96.0.21"), []*proxy.Endpoint{endpoint(8080, "10.244.2.21@node2", withNodeHint), endpoint(8080, "10.244.3.21@node3", withNodeHint)})
	add(cip("zone", "10.96.0.22"), []*proxy.Endpoint{endpoint(8080, "10.244.2.22@node2", withZoneHint("zone-a")), endpoint(8080, "10.244.3.22@node3", withZoneHint("zone-b"))})
	add(cip("quiet", "10.96.0.23"), []*proxy.Endpoint{endpoint(8080, "10.244.1.23@node1", asQuiesced), endpoint(8080, "10.244.2.23@node2")})
	add(&proxy.ServicePort{Name: name("fwnode", "", v1.ProtocolTCP), Type: v1.ServiceTypeLoadBalancer, ClusterIPs: ips("10.96.0.24"), Port: 80, Protocol: v1.ProtocolTCP,
		NodePort: 30084, LoadBalancerVIPs: ips("172.18.0.102"), LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("172.18.0.0/24")}},
		endpoints(8080, "10.244.2.24@node2"))
	itl := cip("itlterm", "10.96.0.25")
	itl.InternalPolicyLocal = true
	add(itl, []*proxy.Endpoint{endpoint(8080, "10.244.1.25@node1", asTerminating), endpoint(8080, "10.244.2.25@node2")})
	add(&proxy.ServicePort{Name: name("etlterm", "", v1.ProtocolTCP), Type: v1.ServiceTypeNodePort, ClusterIPs: ips("10.96.0.26"), Port: 80, Protocol: v1.ProtocolTCP,
		NodePort: 30083, ExternalPolicyLocal: true},
		[]*proxy.Endpoint{endpoint(8080, "10.244.1.26@node1", asTerminating), endpoint(8080, "10.244.2.26@node2")})
	add(cip("ds", "10.96.0.27"), endpoints(8080, "10.244.1.27@node1", "fd00:244:1::27@node1"))
	svcs[name("ds", "", v1.ProtocolTCP)].ClusterIPs = ips("10.96.0.27", "fd00:96::27")
	return svcs, eps
}

// Case is one row of the behaviour table.
type Case struct {
	Name   string
	Packet proxy.TracePacket
	// Endpoints is the exact set of endpoints the packet may reach
	// ("ip:port"); empty when the packet is dropped or rejected.
	Endpoints []string
	// Masquerade is the expected source NAT on every accepted outcome.
	Masquerade bool
	// Verdict is the expected verdict of every outcome.
	Verdict string
}

func tcp(src, dst netip.Addr, port int) proxy.TracePacket {
	return proxy.TracePacket{Src: src, Dst: dst, Protocol: v1.ProtocolTCP, DPort: port}
}

// BehaviourCases is the shared behaviour table over Scenario, as seen by the
// proxy on node 1 (kube-proxy's semantics).
func BehaviourCases() []Case {
	web := []string{"10.244.1.2:8080", "10.244.2.2:8080", "10.244.2.3:8080"}
	np := []string{"10.244.1.4:8080", "10.244.2.4:8080"}
	lblAll := []string{"10.244.1.5:8080", "10.244.2.5:8080"}
	host := func(dst netip.Addr, port int) proxy.TracePacket {
		p := tcp(Node1IP, dst, port)
		p.FromLocalHost = true
		return p
	}
	A, D, R := proxy.VerdictAccept, proxy.VerdictDrop, proxy.VerdictReject
	return []Case{
		{"pod to ClusterIP is spread, not masqueraded", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.10"), 80), web, false, A},
		{"node to ClusterIP is masqueraded", host(netip.MustParseAddr("10.96.0.10"), 80), web, true, A},
		{"off-cluster source to ClusterIP is masqueraded", tcp(External, netip.MustParseAddr("10.96.0.10"), 80), web, true, A},
		{"pod to UDP ClusterIP", proxy.TracePacket{Src: PodOnNode1, Dst: netip.MustParseAddr("10.96.0.16"), Protocol: v1.ProtocolUDP, DPort: 53},
			[]string{"10.244.1.8:5353", "10.244.2.8:5353"}, false, A},
		{"external to NodePort is masqueraded", tcp(External, Node1IP, 30080), np, true, A},
		{"external to externalIP is masqueraded", tcp(External, netip.MustParseAddr("192.0.2.10"), 80), np, true, A},
		{"Local policy NodePort keeps source, local endpoint only", tcp(External, Node1IP, 30081), []string{"10.244.1.5:8080"}, false, A},
		{"Local policy LB IP keeps source, local endpoint only", tcp(External, netip.MustParseAddr("172.18.0.100"), 80), []string{"10.244.1.5:8080"}, false, A},
		{"pod to Local policy LB IP uses all endpoints", tcp(PodOnNode1, netip.MustParseAddr("172.18.0.100"), 80), lblAll, false, A},
		{"node to Local policy NodePort uses all endpoints, masqueraded", host(Node1IP, 30081), lblAll, true, A},
		{"Local policy ClusterIP uses all endpoints", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.12"), 80), lblAll, false, A},
		{"no endpoints rejects", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.13"), 80), nil, false, R},
		{"internalTrafficPolicy Local without local endpoints drops", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.14"), 80), nil, false, D},
		{"LB source range allows", tcp(AllowedExternal, netip.MustParseAddr("172.18.0.101"), 80), []string{"10.244.2.7:8080"}, true, A},
		{"LB source range blocks others", tcp(External, netip.MustParseAddr("172.18.0.101"), 80), nil, false, D},
		{"node hints for this node keep a pod's traffic on the node", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.20"), 80), []string{"10.244.1.20:8080"}, false, A},
		{"node hints that do not cover this node are ignored", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.21"), 80), []string{"10.244.2.21:8080", "10.244.3.21:8080"}, false, A},
		{"zone hints for this node's zone are used", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.22"), 80), []string{"10.244.2.22:8080"}, false, A},
		{"weight 0 gets no new connections", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.23"), 80), []string{"10.244.2.23:8080"}, false, A},
		{"LB source range containing the node IP lets the node reach its LB IP", tcp(netip.MustParseAddr("172.18.0.102"), netip.MustParseAddr("172.18.0.102"), 80), []string{"10.244.2.24:8080"}, true, A},
		{"LB source range containing the node IP admits the node's network", tcp(netip.MustParseAddr("172.18.0.50"), netip.MustParseAddr("172.18.0.102"), 80), []string{"10.244.2.24:8080"}, true, A},
		{"LB source range containing the node IP still blocks others", tcp(External, netip.MustParseAddr("172.18.0.102"), 80), nil, false, D},
		{"internalTrafficPolicy Local falls back to the local terminating endpoint", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.25"), 80), []string{"10.244.1.25:8080"}, false, A},
		{"externalTrafficPolicy Local falls back to the local terminating endpoint", tcp(External, Node1IP, 30083), []string{"10.244.1.26:8080"}, false, A},
		{"externalTrafficPolicy Local: cluster traffic uses ready endpoints only", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.26"), 80), []string{"10.244.2.26:8080"}, false, A},
		{"dual-stack Service: the IPv4 ClusterIP reaches the IPv4 endpoint", tcp(PodOnNode1, netip.MustParseAddr("10.96.0.27"), 80), []string{"10.244.1.27:8080"}, false, A},
	}
}

// RunBehaviour runs every case against tr, which must have been programmed
// with Scenario by a proxy on node ScenarioNode (node IP Node1IP, cluster
// CIDR ClusterCIDR).
func RunBehaviour(t *testing.T, tr proxy.Tracer) {
	t.Helper()
	for _, c := range BehaviourCases() {
		t.Run(c.Name, func(t *testing.T) {
			outs, err := tr.Trace(c.Packet)
			if err != nil {
				t.Fatalf("trace: %v", err)
			}
			if err := checkOutcomes(c, outs); err != nil {
				t.Errorf("%v\noutcomes: %+v", err, outs)
			}
		})
	}
}

func checkOutcomes(c Case, outs []proxy.TraceOutcome) error {
	if len(outs) == 0 {
		return fmt.Errorf("no outcome")
	}
	var got []string
	for _, o := range outs {
		if o.Verdict != c.Verdict {
			return fmt.Errorf("verdict %s, want %s", o.Verdict, c.Verdict)
		}
		if o.Verdict == proxy.VerdictAccept {
			if o.Masquerade != c.Masquerade {
				return fmt.Errorf("to %s masquerade=%v, want %v", o.Endpoint, o.Masquerade, c.Masquerade)
			}
			if o.Endpoint == "" {
				return fmt.Errorf("accepted without DNAT")
			}
			got = append(got, o.Endpoint)
		}
	}
	slices.Sort(got)
	got = slices.Compact(got)
	want := slices.Clone(c.Endpoints)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("endpoints %v, want %v", got, want)
	}
	return nil
}

// RunSelection runs the behaviour table against a mode whose tracer follows
// its endpoint selection rather than kernel rules (userspace: its listener
// table; ipvs: its virtual servers and firewall sets). It checks that each
// packet reaches exactly the expected endpoints, or is refused when the
// table expects a drop or a reject; masquerading is not compared (userspace
// always connects from the node; IPVS masquerading lives in iptables
// rules). limits names the cases the mode cannot express, with the reason
// (they are skipped with that reason, and a limit naming no case fails).
func RunSelection(t *testing.T, tr proxy.Tracer, limits map[string]string) {
	t.Helper()
	used := map[string]bool{}
	for _, c := range BehaviourCases() {
		t.Run(c.Name, func(t *testing.T) {
			if why, ok := limits[c.Name]; ok {
				used[c.Name] = true
				t.Skip("mode limit: " + why)
			}
			outs, err := tr.Trace(c.Packet)
			if err != nil {
				t.Fatalf("trace: %v", err)
			}
			if len(outs) == 0 {
				t.Fatal("no outcome")
			}
			var got []string
			for _, o := range outs {
				if (o.Verdict == proxy.VerdictAccept) != (c.Verdict == proxy.VerdictAccept) {
					t.Fatalf("verdict %s, want %s (%+v)", o.Verdict, c.Verdict, outs)
				}
				if o.Verdict == proxy.VerdictAccept {
					got = append(got, o.Endpoint)
				}
			}
			slices.Sort(got)
			got = slices.Compact(got)
			want := slices.Clone(c.Endpoints)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("endpoints %v, want %v", got, want)
			}
		})
	}
	for n := range limits {
		if !used[n] {
			t.Errorf("limit %q names no behaviour case", n)
		}
	}
}
