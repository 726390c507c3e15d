package ipvs

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/proxy"
)

// Tracer follows a packet through one family's Plan, for the shared
// behaviour table (proxytest.RunSelection): the loadBalancerSourceRanges
// firewall as its ipsets express it (KUBE-LOAD-BALANCER-FW, then the
// allowed source CIDRs and source IPs, else DROP, as KUBE-SOURCE-RANGES-
// FIREWALL does), then the virtual server of the destination and its real
// servers (weight 0 takes no new connections). A virtual server without
// real servers refuses the connection.
type Tracer struct {
	Plan *Plan
	IPv6 bool
}

var _ proxy.Tracer = (*Tracer)(nil)

// Trace implements proxy.Tracer. Masquerading is not traced (it lives in
// the iptables rules of Plan.IPTables).
func (t *Tracer) Trace(pkt proxy.TracePacket) ([]proxy.TraceOutcome, error) {
	entry := ipPortEntry(pkt.Dst, pkt.Protocol, pkt.DPort)
	if slices.Contains(t.Plan.IPSets[SetName(SetLoadBalancerFW, t.IPv6)], entry) && !t.allowed(entry, pkt.Src) {
		return []proxy.TraceOutcome{{Verdict: proxy.VerdictDrop}}, nil
	}
	for _, s := range t.Plan.Services {
		if s.VS.Addr != pkt.Dst || s.VS.Protocol != pkt.Protocol || int(s.VS.Port) != pkt.DPort {
			continue
		}
		var out []proxy.TraceOutcome
		for _, d := range s.Dests {
			if d.Weight > 0 {
				out = append(out, proxy.TraceOutcome{Endpoint: netip.AddrPortFrom(d.Addr, d.Port).String(), Verdict: proxy.VerdictAccept})
			}
		}
		if len(out) == 0 {
			return []proxy.TraceOutcome{{Verdict: proxy.VerdictReject}}, nil
		}
		return out, nil
	}
	return []proxy.TraceOutcome{{Verdict: proxy.VerdictAccept}}, nil
}

func (t *Tracer) allowed(entry string, src netip.Addr) bool {
	for _, e := range t.Plan.IPSets[SetName(SetLoadBalancerSrcCIDR, t.IPv6)] {
		rest, ok := strings.CutPrefix(e, entry+",")
		if p, err := netip.ParsePrefix(rest); ok && err == nil && p.Contains(src) {
			return true
		}
	}
	return slices.Contains(t.Plan.IPSets[SetName(SetLoadBalancerSourceIP, t.IPv6)], entry+","+src.String())
}
