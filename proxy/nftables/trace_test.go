package nftables

import (
	"context"
	"net/netip"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

// TestBehaviourTable runs the shared behaviour table through the rules the
// nftables mode programs (full sync into the fake, then the tracer).
func TestBehaviourTable(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	p := NewProxier(Config{PodCIDRs: []netip.Prefix{proxytest.ClusterCIDR}, ServiceCIDRs: []netip.Prefix{proxytest.ServiceCIDR}}, nft)
	svcs, eps := proxytest.Scenario()
	req := &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: eps,
		Node: proxytest.ScenarioNodeInfo()}
	if err := p.Sync(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	proxytest.RunBehaviour(t, &Tracer{Fake: nft, LocalAddrs: []netip.Addr{proxytest.Node1IP}})
}
