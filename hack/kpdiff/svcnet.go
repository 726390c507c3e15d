package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/iptables"
	"github.com/svcnet/svcnet/proxy/nftables"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// svcnetRequest runs the scenario's objects through svcnet's change
// trackers, as svcnet proxy's informers would, into one full SyncRequest.
func svcnetRequest(sc *Scenario) *proxy.SyncRequest {
	st := proxy.NewServiceChangeTracker()
	for _, s := range sc.Services {
		st.Update(nil, s.DeepCopy())
	}
	et := proxy.NewEndpointsChangeTracker(sc.NodeName)
	for _, s := range sc.Slices {
		et.EndpointSliceUpdate(s.DeepCopy(), false)
	}
	req := &proxy.SyncRequest{Full: true, Services: proxy.ServicePortMap{}, Endpoints: proxy.EndpointsMap{}}
	req.ServiceResult = st.Apply(req.Services)
	req.EndpointsResult = et.Apply(req.Endpoints)
	req.Node = proxy.NodeInfo{Name: sc.NodeName, IPs: sc.NodeIPs, Labels: sc.nodeLabels()}
	return req
}

func prefixes(ss []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s).Masked())
	}
	return out
}

func svcnetModeConfig(sc *Scenario, fam v1.IPFamily) proxy.ModeConfig {
	cfg := proxy.ModeConfig{
		Log: quiet, NodeName: sc.NodeName, NodeIPs: sc.NodeIPs,
		IPv4: fam == v1.IPv4Protocol, IPv6: fam == v1.IPv6Protocol,
		NodePortAddresses: prefixes(sc.NodePortAddresses),
		MasqueradeAll:     sc.MasqueradeAll, MasqueradeBit: &sc.MasqueradeBit,
		Exec: noExec{}, LocalAddrs: localAddrs(sc),
	}
	for _, f := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		if c := sc.podCIDR(f); c != "" {
			cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, netip.MustParsePrefix(c))
		}
		cfg.ServiceCIDRs = append(cfg.ServiceCIDRs, prefixes(sc.serviceCIDRs(f))...)
	}
	return cfg
}

// noExec runs nothing: with the fakes, no mode needs a program.
type noExec struct{}

func (noExec) Run(_ context.Context, _ []byte, name string, args ...string) ([]byte, error) {
	return nil, fmt.Errorf("kpdiff: unexpected command %s %v", name, args)
}

// localAddrs lists the scenario's addresses as the node's links hold them
// (the same ones kube-proxy's fake network interface and fake netlink
// handle list): loopback's on lo, the node's on eth0.
func localAddrs(sc *Scenario) func(context.Context) ([]proxy.LinkAddr, error) {
	return func(context.Context) ([]proxy.LinkAddr, error) {
		out := []proxy.LinkAddr{{Link: "lo", Addr: netip.MustParseAddr("127.0.0.1")}, {Link: "lo", Addr: netip.IPv6Loopback()}}
		for _, a := range sc.NodeIPs {
			out = append(out, proxy.LinkAddr{Link: "eth0", Addr: a})
		}
		return out, nil
	}
}

// svcnetIPTables runs svcnet's iptables mode (its Provider, with the
// in-memory Fake) for one family and returns its iptables-save text.
func svcnetIPTables(sc *Scenario, fam v1.IPFamily) (string, error) {
	f := iptables.NewFake()
	p := iptables.New(svcnetModeConfig(sc, fam), f)
	if err := p.Sync(context.Background(), svcnetRequest(sc)); err != nil {
		return "", err
	}
	return f.Dump(fam == v1.IPv6Protocol), nil
}

// svcnetNFTables runs svcnet's nftables mode for one family and returns
// knftables.Fake's dump of its table.
func svcnetNFTables(sc *Scenario, fam v1.IPFamily) (string, error) {
	fake := knftables.NewFake(knftables.IPv4Family, nftables.TableName)
	nfts := []nftables.NFT{fake, nil}
	if fam == v1.IPv6Protocol {
		fake = knftables.NewFake(knftables.IPv6Family, nftables.TableName)
		nfts = []nftables.NFT{nil, fake}
	}
	cfg := svcnetModeConfig(sc, fam)
	req := svcnetRequest(sc)
	// Odd scenarios pass the Service ranges the way a proxy watching the
	// ServiceCIDR objects does (in the request, none configured), even
	// ones as --service-cluster-ip-range: both must give kube-proxy's rule.
	configured := cfg.ServiceCIDRs
	if sc.ID%2 == 1 {
		req.ServiceCIDRs = append([]netip.Prefix{}, configured...)
		configured = nil
	}
	m, err := nftables.NewModeWithServiceCIDRs(cfg, configured, nfts)
	if err != nil {
		return "", err
	}
	if err := m.Sync(context.Background(), req); err != nil {
		return "", err
	}
	return fake.Dump(), nil
}
