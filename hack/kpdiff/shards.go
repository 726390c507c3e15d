package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/nftables"
)

// Mode "nftables-shards": svcnet's --nftables-shards layout has no
// counterpart in kube-proxy, so its rules cannot be compared line by line;
// instead kube-proxy's own nftables table and svcnet's tables with four
// dispatch tables (and the shared endpoint maps) are loaded into
// knftables fakes and svcnet's packet tracer walks the same first packets
// through both: every address . protocol . port kube-proxy dispatches or
// rejects, the same port + 1, every NodePort on each node address, each
// from outside the cluster, from an endpoint and from the node itself.
// The outcomes (verdict, possible endpoints, masquerading) must be equal.

// shardsLocal is the node's addresses of the scenario svcnetNFTablesShards
// ran last (the tracer's fib ... type local); main runs kube-proxy, svcnet
// and the comparison of one scenario and family in turn.
var shardsLocal []netip.Addr

// svcnetNFTablesShards runs svcnet's nftables mode with
// --nftables-endpoint-choice=shared --nftables-shards=4 and returns the dump
// of all its tables.
func svcnetNFTablesShards(sc *Scenario, fam v1.IPFamily) (string, error) {
	fake := knftables.NewFake("", "") // other tables need a Fake without a default
	nfts := []nftables.NFT{fake, nil}
	if fam == v1.IPv6Protocol {
		nfts = []nftables.NFT{nil, fake}
	}
	cfg := svcnetModeConfig(sc, fam)
	cfg.NFTablesEndpointChoice, cfg.NFTablesShards = "shared", 4
	req := svcnetRequest(sc)
	shardsLocal = req.Node.IPs
	m, err := nftables.NewModeWithServiceCIDRs(cfg, cfg.ServiceCIDRs, nfts)
	if err != nil {
		return "", err
	}
	if err := m.Sync(context.Background(), req); err != nil {
		return "", err
	}
	return fake.Dump(), nil
}

// diffTraces compares the outcomes of first packets through kube-proxy's
// table (kp) and svcnet's tables (sv).
func diffTraces(kp, sv string) []string {
	kf, sf := knftables.NewFake("", ""), knftables.NewFake("", "")
	if err := kf.ParseDump(kp); err != nil {
		return []string{"parse kube-proxy dump: " + err.Error()}
	}
	if err := sf.ParseDump(sv); err != nil {
		return []string{"parse svcnet dump: " + err.Error()}
	}
	var main *knftables.FakeTable
	for _, f := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		if t := kf.Tables[f][nftables.TableName]; t != nil {
			main = t
		}
	}
	if main == nil {
		return []string{"kube-proxy wrote no table"}
	}
	v6 := main.Family == knftables.IPv6Family
	var local []netip.Addr
	for _, a := range shardsLocal {
		if a.Is6() == v6 {
			local = append(local, a)
		}
	}
	outside := netip.MustParseAddr("203.0.113.77")
	if v6 {
		outside = netip.MustParseAddr("2001:db8:ffff::77")
	}
	srcs := []netip.Addr{outside}
	type dst struct {
		addr  netip.Addr
		proto v1.Protocol
		port  int
	}
	var dsts []dst
	add := func(a string, proto string, port string) {
		addr, err1 := netip.ParseAddr(a)
		p, err2 := strconv.Atoi(port)
		if err1 != nil || err2 != nil {
			return
		}
		pr := v1.Protocol(strings.ToUpper(proto))
		dsts = append(dsts, dst{addr, pr, p}, dst{addr, pr, p + 1})
	}
	for _, name := range []string{"service-ips", "no-endpoint-services"} {
		if m := main.Maps[name]; m != nil {
			for _, e := range m.Elements {
				if len(e.Key) == 3 {
					add(e.Key[0], e.Key[1], e.Key[2])
				}
			}
		}
	}
	for _, name := range []string{"service-nodeports", "no-endpoint-nodeports"} {
		if m := main.Maps[name]; m != nil {
			for _, e := range m.Elements {
				for _, l := range local {
					if len(e.Key) == 2 {
						add(l.String(), e.Key[0], e.Key[1])
					}
				}
			}
		}
	}
	// An endpoint as a client (pod traffic, hairpin): the first DNAT
	// target of kube-proxy's table.
	for _, line := range strings.Split(kp, "\n") {
		if _, rest, ok := strings.Cut(line, " dnat to "); ok {
			if ap, err := netip.ParseAddrPort(strings.Fields(rest)[0]); err == nil {
				srcs = append(srcs, ap.Addr())
				break
			}
		}
	}
	var diffs []string
	for _, d := range dsts {
		pkts := []proxy.TracePacket{}
		for _, s := range srcs {
			pkts = append(pkts, proxy.TracePacket{Src: s, Dst: d.addr, DPort: d.port, Protocol: d.proto})
		}
		for _, l := range local {
			pkts = append(pkts, proxy.TracePacket{Src: l, Dst: d.addr, DPort: d.port, Protocol: d.proto, FromLocalHost: true})
		}
		for _, pkt := range pkts {
			a, errA := (&nftables.Tracer{Fake: kf, LocalAddrs: local}).Trace(pkt)
			b, errB := (&nftables.Tracer{Fake: sf, LocalAddrs: local}).Trace(pkt)
			ka, kb := outcomes(a, errA), outcomes(b, errB)
			if ka != kb {
				diffs = append(diffs, fmt.Sprintf("%s -> %s %s:%d (local %v): kube-proxy %s, svcnet %s", pkt.Src, d.proto, d.addr, d.port, pkt.FromLocalHost, ka, kb))
			}
		}
	}
	return diffs
}

// outcomes renders a trace's outcomes in a stable order.
func outcomes(o []proxy.TraceOutcome, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	s := make([]string, len(o))
	for i, x := range o {
		s[i] = fmt.Sprint(x)
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}
