package userspace

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

// TestBehaviourTable runs the shared behaviour table through userspace
// mode's listener table (its endpoint selection).
func TestBehaviourTable(t *testing.T) {
	svcs, eps := proxytest.Scenario()
	req := &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: eps, Node: proxytest.ScenarioNodeInfo()}
	tr := &Tracer{Configs: Plan(req, "rr", nil), NodeAddrs: []netip.Addr{proxytest.Node1IP}}
	const oneListener = "one external listener serves external clients, pods and the node alike; it uses the Local endpoints"
	const noFirewall = "loadBalancerSourceRanges are not enforced in user space (documented in docs/proxy-modes.md)"
	proxytest.RunSelection(t, tr, map[string]string{
		"pod to Local policy LB IP uses all endpoints":                     oneListener,
		"node to Local policy NodePort uses all endpoints, masqueraded":    oneListener,
		"LB source range blocks others":                                    noFirewall,
		"LB source range containing the node IP still blocks others":       noFirewall,
		"dual-stack Service: the IPv4 ClusterIP reaches the IPv4 endpoint": "one listener per Service port serves both families and may connect to an endpoint of either (it proxies at L4)",
	})
}
