package iptables

import (
	"context"
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

// TestBehaviourTable runs the shared behaviour table through the rules the
// iptables mode programs (full sync into the fake, then a packet tracer).
func TestBehaviourTable(t *testing.T) {
	for _, d := range []Dispatch{DispatchLinear, DispatchTree} {
		t.Run(string(d), func(t *testing.T) { testBehaviourTable(t, d) })
	}
}

// testBehaviourTable runs the table with one layout of KUBE-SERVICES
// (--iptables-dispatch).
func testBehaviourTable(t *testing.T, d Dispatch) {
	fake := NewFake()
	fake.LocalAddrs = []netip.Addr{proxytest.Node1IP}
	p := New(proxy.ModeConfig{ClusterCIDRs: []netip.Prefix{proxytest.ClusterCIDR}, IPTablesDispatch: string(d)}, fake)
	svcs, eps := proxytest.Scenario()
	req := &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: eps,
		Node: proxytest.ScenarioNodeInfo()}
	if err := p.Sync(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	proxytest.RunBehaviour(t, &Tracer{Fake: fake})
}
