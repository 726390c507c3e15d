package ipvs

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

// TestBehaviourTable runs the shared behaviour table through IPVS mode's
// plan: its virtual and real servers and its firewall ipsets.
func TestBehaviourTable(t *testing.T) {
	svcs, eps := proxytest.Scenario()
	req := &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: eps, Node: proxytest.ScenarioNodeInfo()}
	node := proxytest.ScenarioNodeInfo()
	plan := BuildPlan(PlanConfig{NodePortAddrs: []netip.Addr{proxytest.Node1IP}, NodeIPs: node.IPs, NodeName: node.Name, NodeLabels: node.Labels,
		MasqueradeMark: "0x00004000", ClusterCIDR: proxytest.ClusterCIDR, Policy: req.Policy}, svcs, eps)
	const oneVS = "one virtual server per external address serves external clients, pods and the node alike; it uses the Local endpoints when there are some (as kube-proxy's IPVS mode)"
	proxytest.RunSelection(t, &Tracer{Plan: plan}, map[string]string{
		"pod to Local policy LB IP uses all endpoints":                  oneVS,
		"node to Local policy NodePort uses all endpoints, masqueraded": oneVS,
	})
}
