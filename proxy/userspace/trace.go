package userspace

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/proxy"
)

// Tracer follows a packet through a listener table (Plan's result), for the
// shared behaviour table (proxytest.RunSelection): the listener that
// accepts the destination picks among its endpoints; a listener without
// endpoints refuses the connection. NodeAddrs are the node's addresses
// (where NodePort listeners accept).
type Tracer struct {
	Configs   []ServiceConfig
	NodeAddrs []netip.Addr
}

var _ proxy.Tracer = (*Tracer)(nil)

// Trace implements proxy.Tracer. The connection to the endpoint always
// comes from the node (Masquerade true), as in any user-space proxy.
func (t *Tracer) Trace(pkt proxy.TracePacket) ([]proxy.TraceOutcome, error) {
	proto := strings.ToLower(string(pkt.Protocol))
	for _, c := range t.Configs {
		if c.Protocol != proto {
			continue
		}
		hit := c.Port == pkt.DPort && slices.Contains(c.Addrs, pkt.Dst)
		hit = hit || (c.NodePort != 0 && c.NodePort == pkt.DPort && slices.Contains(t.NodeAddrs, pkt.Dst))
		if !hit {
			continue
		}
		if len(c.Endpoints) == 0 {
			return []proxy.TraceOutcome{{Verdict: proxy.VerdictReject}}, nil
		}
		var out []proxy.TraceOutcome
		for _, ep := range c.Endpoints {
			if ep.Weight == 0 {
				continue
			}
			out = append(out, proxy.TraceOutcome{Endpoint: ep.Addr.String(), Masquerade: true, Verdict: proxy.VerdictAccept})
		}
		return out, nil
	}
	// No listener: the packet is not the proxy's business.
	return []proxy.TraceOutcome{{Verdict: proxy.VerdictAccept}}, nil
}
