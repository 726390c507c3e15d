package iptables

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/proxy"
)

// Regressions found by comparing BuildPlan with kube-proxy 1.36 (see
// docs/proxy-modes.md, "Differential check against kube-proxy").

func TestNodePortCIDRs(t *testing.T) {
	p := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, c := range s {
			out = append(out, netip.MustParsePrefix(c))
		}
		return out
	}
	cases := []struct {
		name       string
		in         []netip.Prefix
		v6         bool
		n          int
		all, loopb bool
	}{
		{"empty v4", nil, false, 0, true, true},
		{"empty v6", nil, true, 0, true, false},
		{"v4 without loopback", p("192.168.0.0/24"), false, 1, false, false},
		{"v4 with loopback", p("192.168.0.0/24", "127.0.0.0/8"), false, 2, false, true},
		{"only other family is match-all", p("192.168.0.0/24"), true, 0, true, false},
		{"zero cidr", p("192.168.0.0/24", "0.0.0.0/0"), false, 0, true, true},
		{"v6 cidr", p("2001:db8::/64", "10.0.0.0/8"), true, 1, false, false},
	}
	for _, c := range cases {
		got, all, lo := NodePortCIDRs(c.in, c.v6)
		if len(got) != c.n || all != c.all || lo != c.loopb {
			t.Errorf("%s: got %v matchAll=%v loopback=%v, want %d cidrs matchAll=%v loopback=%v", c.name, got, all, lo, c.n, c.all, c.loopb)
		}
	}
}

// An externally accessible port keeps its cluster-wide KUBE-SVC- chain even
// when both traffic policies are Local: pods reaching the external address
// are short-circuited to it.
func TestBothPoliciesLocalKeepClusterChain(t *testing.T) {
	n := spn("ns", "both-local", "", v1.ProtocolTCP)
	sp := &proxy.ServicePort{Name: n, Type: v1.ServiceTypeNodePort, ClusterIPs: addrs("172.30.0.9"), Port: 80, NodePort: 30080,
		Protocol: v1.ProtocolTCP, SessionAffinity: v1.ServiceAffinityNone, InternalPolicyLocal: true, ExternalPolicyLocal: true}
	plan := BuildPlan(PlanInput{Services: proxy.ServicePortMap{n: sp},
		Endpoints: proxy.EndpointsMap{n: append(eps("test-node", true, 80, "10.1.0.1"), eps("node2", false, 80, "10.1.0.2")...)},
		NodeName:  "test-node", MasqueradeMark: "0x4000", LocalCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	data := string(plan.Data)
	svc, ext := ClusterPolicyChain(sp), ExternalChain(sp)
	for _, want := range []string{
		"-A " + svc + ` -m comment --comment "ns/both-local -> 10.1.0.1:80" -m statistic --mode random --probability 0.5000000000 -j `,
		"-A " + ext + ` -m comment --comment "pod traffic for ns/both-local external destinations" -s 10.0.0.0/8 -j ` + svc,
	} {
		if !strings.Contains(data, want) {
			t.Errorf("plan lacks %q:\n%s", want, data)
		}
	}
}
