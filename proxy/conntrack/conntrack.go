// Package conntrack removes stale UDP conntrack entries after a proxy sync,
// through the `conntrack` tool, as kube-proxy 1.37's conntrack reconciler
// does: it lists the UDP entries and deletes exactly those whose original
// destination is a UDP Service frontend (a cluster IP, external IP or
// LoadBalancer IP with the Service port, or the NodePort when the Service
// has serving endpoints) and whose reply source is not one of that Service
// port's serving endpoints. A deleted endpoint's flows therefore move to a
// live endpoint at their next packet, and a Service without endpoints loses
// its cached flows; entries to serving endpoints are never touched, so a
// restarted proxy, whose first sync sees every Service as new, breaks no
// established UDP flow (e2e/faults).
//
// UDP has no connection end, so without this a client that keeps sending
// keeps hitting the old endpoint (or nothing) forever.
package conntrack

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/proxy"
)

// Cleaner implements proxy.ConntrackCleaner with the conntrack tool.
type Cleaner struct {
	Exec proxy.Executor
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

// ParseEntries parses `conntrack -L -p udp` output lines such as
//
//	udp 17 29 src=10.1.0.1 dst=10.96.0.100 sport=33699 dport=53 src=10.1.0.2 dst=10.1.0.1 sport=8053 dport=33699 mark=0 use=1
//
// (the first src/dst/sport/dport are the original tuple, the second the
// reply tuple). Lines that do not parse are skipped.
func ParseEntries(out string) []Entry {
	var entries []Entry
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "udp" {
			continue
		}
		var src, dst, sport, dport []string
		for _, f := range fields {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			switch k {
			case "src":
				src = append(src, v)
			case "dst":
				dst = append(dst, v)
			case "sport":
				sport = append(sport, v)
			case "dport":
				dport = append(dport, v)
			}
		}
		if len(src) < 2 || len(dst) < 1 || len(sport) < 2 || len(dport) < 1 {
			continue
		}
		var e Entry
		var err1, err2, err3, err4, err5, err6 error
		e.OrigSrc, err1 = netip.ParseAddr(src[0])
		e.OrigDst, err2 = netip.ParseAddr(dst[0])
		e.OrigSport, err3 = strconv.Atoi(sport[0])
		e.OrigDport, err4 = strconv.Atoi(dport[0])
		e.ReplySrc, err5 = netip.ParseAddr(src[1])
		e.ReplySport, err6 = strconv.Atoi(sport[1])
		if errors.Join(err1, err2, err3, err4, err5, err6) != nil {
			continue
		}
		entries = append(entries, e)
	}
	return entries
}

// DeleteArgs is the conntrack command line deleting exactly this entry.
func (e Entry) DeleteArgs() []string {
	args := []string{"-D"}
	if e.OrigDst.Is6() {
		args = append(args, "-f", "ipv6")
	}
	return append(args, "-p", "udp", "-s", e.OrigSrc.String(), "-d", e.OrigDst.String(),
		"--sport", strconv.Itoa(e.OrigSport), "--dport", strconv.Itoa(e.OrigDport))
}

type hostPort struct {
	addr netip.Addr
	port int
}

// StaleEntries returns the entries to delete for the current Services and
// endpoints (see the package comment). It is pure, so it is tested without
// a kernel.
func StaleEntries(entries []Entry, svcs proxy.ServicePortMap, eps proxy.EndpointsMap) []Entry {
	frontends := map[hostPort]map[hostPort]bool{}
	nodePorts := map[int]map[hostPort]bool{}
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
		for _, ip := range svcAddrs(svc) {
			frontends[hostPort{ip, svc.Port}] = serving
		}
		// Matched on the port alone, so only with serving endpoints (an
		// empty set would remove unrelated flows to that port number).
		if svc.NodePort != 0 && len(serving) > 0 {
			nodePorts[svc.NodePort] = serving
		}
	}
	var out []Entry
	for _, e := range entries {
		reply := hostPort{e.ReplySrc, e.ReplySport}
		if serving, ok := frontends[hostPort{e.OrigDst, e.OrigDport}]; ok && !serving[reply] {
			out = append(out, e)
			continue
		}
		if serving, ok := nodePorts[e.OrigDport]; ok && !serving[reply] {
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

// CleanStaleEntries implements proxy.ConntrackCleaner.
func (c *Cleaner) CleanStaleEntries(ctx context.Context, svcs proxy.ServicePortMap, eps proxy.EndpointsMap) error {
	hasUDP := false
	for _, svc := range svcs {
		hasUDP = hasUDP || svc.Protocol == v1.ProtocolUDP
	}
	if !hasUDP {
		return nil
	}
	ex := c.Exec
	if ex == nil {
		ex = proxy.OSExecutor{}
	}
	var entries []Entry
	var errs []error
	for _, family := range [][]string{{"-L", "-p", "udp"}, {"-L", "-f", "ipv6", "-p", "udp"}} {
		out, err := ex.Run(ctx, nil, "conntrack", family...)
		if err != nil {
			errs = append(errs, fmt.Errorf("list conntrack entries: %w", err))
			continue
		}
		entries = append(entries, ParseEntries(string(out))...)
	}
	for _, e := range StaleEntries(entries, svcs, eps) {
		// An entry that expired meanwhile is not an error.
		if _, err := ex.Run(ctx, nil, "conntrack", e.DeleteArgs()...); err != nil && !strings.Contains(err.Error(), "0 flow entries") {
			errs = append(errs, fmt.Errorf("clear conntrack entry: %w", err))
		}
	}
	return errors.Join(errs...)
}
