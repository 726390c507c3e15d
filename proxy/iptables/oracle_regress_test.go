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
