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

// ScenarioNode is the name of the node the proxy under test runs on.
const ScenarioNode = "node1"

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
