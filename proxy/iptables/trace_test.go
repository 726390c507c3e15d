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
	fake := NewFake()
	fake.LocalAddrs = []netip.Addr{proxytest.Node1IP}
	p := New(proxy.ModeConfig{ClusterCIDRs: []netip.Prefix{proxytest.ClusterCIDR}}, fake)
	svcs, eps := proxytest.Scenario()
	req := &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: eps,
		Node: proxytest.ScenarioNodeInfo()}
	if err := p.Sync(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	proxytest.RunBehaviour(t, &Tracer{Fake: fake})
}
