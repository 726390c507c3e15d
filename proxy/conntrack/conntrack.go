// Package conntrack removes stale UDP conntrack entries after a proxy sync
// through netlink (github.com/vishvananda/netlink), as kube-proxy 1.37's
// conntrack reconciler does: for each IP family it lists the conntrack
// table and deletes exactly the UDP entries whose original destination is a
// UDP Service frontend (a cluster IP, external IP or LoadBalancer IP with
// the Service port, or the NodePort when the Service has serving endpoints)
// and whose reply source is not one of that Service port's serving
// endpoints. A deleted endpoint's flows therefore move to a live endpoint at
// their next packet, and a Service without endpoints loses its cached flows;
// entries to serving endpoints are never touched, so a restarted proxy,
// whose first sync sees every Service as new, breaks no established UDP
// flow (e2e/faults). Like kube-proxy 1.37, only UDP is reconciled: TCP and
// SCTP have connection ends, and their entries to a removed endpoint die
// with the connection (kube-proxy's reconciler skips every non-UDP entry).
//
// In userspace mode the flows are not DNATed to endpoints but REDIRECTed to
// the proxy's own port for the Service port; their entries reply from that
// port and are live as long as the proxy serves it there (the proxy picks
// the endpoint per client, after conntrack). Judged like the others, every
// such entry would be stale, and deleting them breaks the flows in flight:
// the proxy's reply then reaches the client from the node's address, not the
// Service's, and is dropped (a pod's DNS lookups through a userspace proxy
// timed out for as long as the broken entries lived).
//
// UDP has no connection end, so without this a client that keeps sending
// keeps hitting the old endpoint (or nothing) forever.
package conntrack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netwire"
	"github.com/svcnet/svcnet/proxy"
)

// Cleaner implements proxy.ConntrackCleaner through netlink.
type Cleaner struct {
	// NetNS names the network namespace whose conntrack table is cleaned
	// (the proxy's --netns); empty means the proxy's own.
	NetNS string
}

var _ proxy.ConntrackCleaner = (*Cleaner)(nil)

// Entry is a UDP conntrack entry: its original tuple and its reply source
// (the endpoint a DNATed flow goes to).
type Entry struct {
	OrigSrc, OrigDst     netip.Addr
	OrigSport, OrigDport int
	ReplySrc             netip.Addr
	ReplySport           int
}

// entryOf is the Entry of a UDP flow; ok is false for other protocols and
// flows without addresses.
func entryOf(f *netlink.ConntrackFlow) (e Entry, ok bool) {
	if f.Forward.Protocol != unix.IPPROTO_UDP {
		return Entry{}, false
	}
	addr := func(ip net.IP) netip.Addr {
		a, _ := netip.AddrFromSlice(ip)
		return a.Unmap()
	}
	e = Entry{OrigSrc: addr(f.Forward.SrcIP), OrigDst: addr(f.Forward.DstIP), OrigSport: int(f.Forward.SrcPort),
		OrigDport: int(f.Forward.DstPort), ReplySrc: addr(f.Reverse.SrcIP), ReplySport: int(f.Reverse.SrcPort)}
	return e, e.OrigDst.IsValid() && e.ReplySrc.IsValid()
}

// entryFilter matches the flows whose Entry is in the set: the entries
// StaleEntries chose, and nothing else (a flow that changed meanwhile, for
// example a new one on the same ports to a live endpoint, is kept).
type entryFilter map[Entry]bool

func (f entryFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	e, ok := entryOf(flow)
	return ok && f[e]
}

type hostPort struct {
	addr netip.Addr
	port int
}

// StaleEntries returns the entries to delete for the current Services and
// endpoints (see the package comment). It is pure, so it is tested without
// a kernel.
func StaleEntries(entries []Entry, svcs proxy.ServicePortMap, eps proxy.EndpointsMap, redirect func(proxy.ServicePortName) int) []Entry {
	type live struct {
		serving  map[hostPort]bool
		redirect int // the local port the mode redirects to, or 0
	}
	frontends := map[hostPort]live{}
	nodePorts := map[int]live{}
	for name, svc := range svcs {
		if svc.Protocol != v1.ProtocolUDP {
			continue
		}
		serving := map[hostPort]bool{}
		for _, ep := range eps[name] {
			if ep.Serving {
				serving[hostPort{ep.Addr, ep.Port}] = true
			}
		}
		l := live{serving: serving}
		if redirect != nil {
			l.redirect = redirect(name)
		}
		for _, ip := range svcAddrs(svc) {
			frontends[hostPort{ip, svc.Port}] = l
		}
		// Matched on the port alone, so only with serving endpoints (an
		// empty set would remove unrelated flows to that port number).
		if svc.NodePort != 0 && len(serving) > 0 {
			nodePorts[svc.NodePort] = l
		}
	}
	stale := func(l live, reply hostPort) bool {
		return !l.serving[reply] && (l.redirect == 0 || reply.port != l.redirect)
	}
	var out []Entry
	for _, e := range entries {
		reply := hostPort{e.ReplySrc, e.ReplySport}
		if l, ok := frontends[hostPort{e.OrigDst, e.OrigDport}]; ok && stale(l, reply) {
			out = append(out, e)
			continue
		}
		if l, ok := nodePorts[e.OrigDport]; ok && stale(l, reply) {
			out = append(out, e)
		}
	}
	return out
}

func svcAddrs(svc *proxy.ServicePort) []netip.Addr {
	out := append([]netip.Addr{}, svc.ClusterIPs...)
	out = append(out, svc.ExternalIPs...)
	return append(out, svc.LoadBalancerVIPs...)
}

// CleanStaleEntries implements proxy.ConntrackCleaner: per family, one
// netlink dump of the conntrack table and, when some entry is stale, one
// delete pass matching exactly the stale entries.
func (c *Cleaner) CleanStaleEntries(ctx context.Context, svcs proxy.ServicePortMap, eps proxy.EndpointsMap, redirect func(proxy.ServicePortName) int) error {
	hasUDP := false
	for _, svc := range svcs {
		hasUDP = hasUDP || svc.Protocol == v1.ProtocolUDP
	}
	if !hasUDP {
		return nil
	}
	h, err := c.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	var errs []error
	for _, family := range []netlink.InetFamily{unix.AF_INET, unix.AF_INET6} {
		flows, err := h.ConntrackTableList(netlink.ConntrackTable, family)
		// An interrupted dump (the table changed during it) still has
		// usable entries; the next sync sees the rest.
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			errs = append(errs, fmt.Errorf("list conntrack entries (family %d): %w", family, err))
			continue
		}
		var entries []Entry
		for _, f := range flows {
			if e, ok := entryOf(f); ok {
				entries = append(entries, e)
			}
		}
		stale := StaleEntries(entries, svcs, eps, redirect)
		if len(stale) == 0 {
			continue
		}
		filter := entryFilter{}
		for _, e := range stale {
			filter[e] = true
		}
		// An entry that expired meanwhile is simply not matched.
		if _, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, family, filter); err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			errs = append(errs, fmt.Errorf("delete stale conntrack entries (family %d): %w", family, err))
		}
	}
	return errors.Join(errs...)
}

// handle is a netlink handle in the cleaner's network namespace.
func (c *Cleaner) handle() (*netlink.Handle, error) {
	h, err := netwire.HandleIn(c.NetNS, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("conntrack: %w", err)
	}
	return h, nil
}
