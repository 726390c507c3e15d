package iptables

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from golden file:\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func spn(ns, name, port string, proto v1.Protocol) proxy.ServicePortName {
	return proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: port, Protocol: proto}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func eps(node string, local bool, port int, ips ...string) []*proxy.Endpoint {
	var out []*proxy.Endpoint
	for _, ip := range ips {
		out = append(out, &proxy.Endpoint{Addr: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true,
			NodeName: node, IsLocal: local, Weight: 1})
	}
	return out
}

// seedClusterIP is the seed's three-endpoint ClusterIP Service (seed 003).
func seedClusterIP() (proxy.ServicePortMap, proxy.EndpointsMap) {
	n := spn("default", "nginx", "", v1.ProtocolTCP)
	return proxy.ServicePortMap{n: {Name: n, Type: v1.ServiceTypeClusterIP, ClusterIPs: addrs("172.18.255.127"), Port: 80,
			Protocol: v1.ProtocolTCP, SessionAffinity: v1.ServiceAffinityNone}},
		proxy.EndpointsMap{n: eps("node2", false, 80, "172.18.0.5", "172.18.0.6", "172.18.0.7")}
}

func TestPlanGolden(t *testing.T) {
	np := spn("default", "web", "http", v1.ProtocolTCP)
	lb := spn("default", "lb-local", "https", v1.ProtocolTCP)
	aff := spn("default", "sticky", "", v1.ProtocolTCP)
	none := spn("default", "empty", "dns", v1.ProtocolUDP)
	cases := []struct {
		name string
		svcs proxy.ServicePortMap
		eps  proxy.EndpointsMap
		in   PlanInput
	}{
		{name: "clusterip_seed", in: PlanInput{LocalCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}},
		{name: "nodeport",
			svcs: proxy.ServicePortMap{np: {Name: np, Type: v1.ServiceTypeNodePort, ClusterIPs: addrs("10.96.0.50"), Port: 80, Protocol: v1.ProtocolTCP,
				NodePort: 30080, ExternalIPs: addrs("192.0.2.10"), SessionAffinity: v1.ServiceAffinityNone}},
			eps: proxy.EndpointsMap{np: append(eps("node1", true, 8080, "10.244.1.2"), eps("node2", false, 8080, "10.244.2.2")...)},
			in:  PlanInput{LocalCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}},
		{name: "loadbalancer_local",
			svcs: proxy.ServicePortMap{lb: {Name: lb, Type: v1.ServiceTypeLoadBalancer, ClusterIPs: addrs("10.96.0.60"), Port: 443, Protocol: v1.ProtocolTCP,
				NodePort: 31443, LoadBalancerVIPs: addrs("172.18.0.200"), LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("172.18.0.0/24")},
				ExternalPolicyLocal: true, HealthCheckNodePort: 32100, SessionAffinity: v1.ServiceAffinityNone}},
			eps: proxy.EndpointsMap{lb: append(eps("node1", true, 8443, "10.244.1.3"), eps("node2", false, 8443, "10.244.2.3")...)},
			in:  PlanInput{NodeIP: netip.MustParseAddr("172.18.0.2"), LocalCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}},
		{name: "affinity",
			svcs: proxy.ServicePortMap{aff: {Name: aff, Type: v1.ServiceTypeClusterIP, ClusterIPs: addrs("10.96.0.70"), Port: 80, Protocol: v1.ProtocolTCP,
				SessionAffinity: v1.ServiceAffinityClientIP, StickyMaxAgeSeconds: 10800}},
			eps: proxy.EndpointsMap{aff: eps("node2", false, 80, "10.244.2.4", "10.244.2.5")},
			in:  PlanInput{MasqueradeAll: true}},
		{name: "no_endpoints",
			svcs: proxy.ServicePortMap{none: {Name: none, Type: v1.ServiceTypeNodePort, ClusterIPs: addrs("10.96.0.80"), Port: 53, Protocol: v1.ProtocolUDP,
				NodePort: 30053, SessionAffinity: v1.ServiceAffinityNone}},
			in: PlanInput{NodePortIPs: addrs("172.18.0.2")}},
		{name: "ipv6",
			svcs: proxy.ServicePortMap{np: {Name: np, Type: v1.ServiceTypeClusterIP, ClusterIPs: addrs("10.96.0.50", "fd00:10:96::50"), Port: 80, Protocol: v1.ProtocolTCP,
				SessionAffinity: v1.ServiceAffinityNone}},
			eps: proxy.EndpointsMap{np: append(eps("node1", true, 8080, "10.244.1.2"), eps("node1", true, 8080, "fd00:10:244:1::2")...)},
			in:  PlanInput{IPv6: true, LocalCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Services, in.Endpoints = c.svcs, c.eps
			if c.name == "clusterip_seed" {
				in.Services, in.Endpoints = seedClusterIP()
			}
			in.LocalhostNodePorts = true
			plan := BuildPlan(in)
			checkGolden(t, c.name, plan.Data)
			// Every payload must be accepted by the fake restore parser.
			if err := NewFake().Restore(t.Context(), in.IPv6, plan.Data); err != nil {
				t.Errorf("fake restore rejected the plan: %v", err)
			}
		})
	}
}

func TestSeedChainNames(t *testing.T) {
	// Seed 003 was taken from a kube-proxy that named unnamed ports
	// "default/nginx:"; the hash algorithm must reproduce its chain names.
	h := portProtoHash("default/nginx:", "tcp")
	if "KUBE-SVC-"+h != "KUBE-SVC-4N57TFCL4MD7ZTDA" {
		t.Errorf("service chain hash %s", h)
	}
	n := spn("default", "nginx", "", v1.ProtocolTCP)
	sp := &proxy.ServicePort{Name: n, Protocol: v1.ProtocolTCP}
	if got := ClusterPolicyChain(sp); !strings.HasPrefix(got, "KUBE-SVC-") || len(got) != len("KUBE-SVC-")+16 {
		t.Errorf("chain name %q", got)
	}
}

func TestSeedProbabilities(t *testing.T) {
	svcs, eps := seedClusterIP()
	plan := BuildPlan(PlanInput{Services: svcs, Endpoints: eps})
	text := string(plan.Data)
	for _, want := range []string{"--probability 0.3333333333 ", "--probability 0.5000000000 "} {
		if !strings.Contains(text, want) {
			t.Errorf("plan lacks %q", want)
		}
	}
	// The last endpoint rule is unconditional.
	var svcRules []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "-A KUBE-SVC-") && strings.Contains(l, "-j KUBE-SEP-") {
			svcRules = append(svcRules, l)
		}
	}
	if len(svcRules) != 3 || strings.Contains(svcRules[2], "statistic") {
		t.Errorf("service chain rules: %q", svcRules)
	}
}

// TestPartialPlanAccounting checks that a partial plan reports the same
// active chains and rule count as the full plan of the same state, for
// every kind of service in the behaviour scenario plus an affinity one.
func TestPartialPlanAccounting(t *testing.T) {
	svcs, epm := benchModel(20)
	aff := spn("ns", "aff", "", v1.ProtocolTCP)
	svcs[aff] = &proxy.ServicePort{Name: aff, ClusterIPs: addrs("10.96.9.9"), Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30999,
		SessionAffinity: v1.ServiceAffinityClientIP, StickyMaxAgeSeconds: 60, ExternalPolicyLocal: true,
		LoadBalancerVIPs: addrs("172.18.0.250"), LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("172.18.0.0/24")}}
	epm[aff] = append(eps("n1", true, 80, "10.244.1.77"), eps("n2", false, 80, "10.244.2.77")...)
	in := PlanInput{Services: svcs, Endpoints: epm, NodeName: "n1", NodeIP: netip.MustParseAddr("172.18.0.2"),
		LocalCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	full := BuildPlan(in)
	in.Partial = true
	in.Changed = sets.New(types.NamespacedName{Namespace: "b", Name: "s00003"})
	part := BuildPlan(in)
	if full.NATRules != part.NATRules {
		t.Errorf("rule count: full %d, partial %d", full.NATRules, part.NATRules)
	}
	if !full.ActiveNATChains.Equal(part.ActiveNATChains) {
		t.Errorf("active chains differ: %v", full.ActiveNATChains.SymmetricDifference(part.ActiveNATChains))
	}
	if len(part.Data) >= len(full.Data)/2 {
		t.Errorf("partial payload %d bytes, full %d: not partial", len(part.Data), len(full.Data))
	}
}
