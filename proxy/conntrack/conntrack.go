// Package conntrack clears stale UDP conntrack entries after a proxy sync,
// through the `conntrack` tool, exactly where kube-proxy does and nowhere
// else (never a blanket flush):
//
//   - a UDP Service port was deleted: entries to its cluster IPs;
//   - a UDP endpoint was removed: entries DNATed to that endpoint from the
//     Service's cluster IP, external IPs, LoadBalancer IPs and NodePort, so
//     a one-way sender moves to a live endpoint at its next packet;
//   - a UDP Service went from no endpoints to some: entries to its IPs and
//     NodePort, which otherwise keep the "unreachable" verdict cached.
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

// Filter selects entries to delete; zero fields do not filter.
type Filter struct {
	Protocol v1.Protocol
	// OrigDst is the original destination (the Service IP).
	OrigDst netip.Addr
	// DstNAT is the address the entry was DNATed to (the endpoint).
	DstNAT netip.Addr
	// DPort is the original destination port (the NodePort).
	DPort int
	// IPv6 selects the family when no address is given.
	IPv6 bool
}

// Args returns the conntrack command line that deletes entries matching f.
func (f Filter) Args() []string {
	args := []string{"-D"}
	v6 := f.IPv6 || (f.OrigDst.IsValid() && f.OrigDst.Is6()) || (f.DstNAT.IsValid() && f.DstNAT.Is6())
	if v6 {
		args = append(args, "-f", "ipv6")
	}
	if f.OrigDst.IsValid() {
		args = append(args, "--orig-dst", f.OrigDst.String())
	}
	if f.DstNAT.IsValid() {
		args = append(args, "--dst-nat", f.DstNAT.String())
	}
	if f.Protocol != "" {
		args = append(args, "-p", strings.ToLower(string(f.Protocol)))
	}
	if f.DPort != 0 {
		args = append(args, "--dport", strconv.Itoa(f.DPort))
	}
	return args
}

// Delete deletes the entries matching f. Finding no entries is not an error.
func (c *Cleaner) Delete(ctx context.Context, f Filter) error {
	ex := c.Exec
	if ex == nil {
		ex = proxy.OSExecutor{}
	}
	_, err := ex.Run(ctx, nil, "conntrack", f.Args()...)
	if err != nil && !strings.Contains(err.Error(), "0 flow entries") {
		return fmt.Errorf("clear conntrack entries: %w", err)
	}
	return nil
}

// StaleFilters returns the deletions a sync calls for (see the package
// comment). It is pure, so it is tested without a kernel.
func StaleFilters(svcs proxy.ServicePortMap, sr proxy.ServiceUpdateResult, er proxy.EndpointsUpdateResult) []Filter {
	var out []Filter
	for ip := range sr.DeletedUDPClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			out = append(out, Filter{Protocol: v1.ProtocolUDP, OrigDst: a})
		}
	}
	for _, d := range er.DeletedUDPEndpoints {
		svc, ok := svcs[d.ServicePortName]
		if !ok {
			continue
		}
		for _, ip := range svcAddrs(svc) {
			if ip.Is6() == d.Addr.Is6() {
				out = append(out, Filter{Protocol: v1.ProtocolUDP, OrigDst: ip, DstNAT: d.Addr})
			}
		}
		if svc.NodePort != 0 {
			out = append(out, Filter{Protocol: v1.ProtocolUDP, DPort: svc.NodePort, DstNAT: d.Addr})
		}
	}
	for _, name := range er.NewlyActiveUDPServices {
		svc, ok := svcs[name]
		if !ok {
			continue
		}
		for _, ip := range svcAddrs(svc) {
			out = append(out, Filter{Protocol: v1.ProtocolUDP, OrigDst: ip})
		}
		if svc.NodePort != 0 {
			out = append(out, Filter{Protocol: v1.ProtocolUDP, DPort: svc.NodePort})
			out = append(out, Filter{Protocol: v1.ProtocolUDP, DPort: svc.NodePort, IPv6: true})
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
func (c *Cleaner) CleanStaleEntries(ctx context.Context, svcs proxy.ServicePortMap, sr proxy.ServiceUpdateResult, er proxy.EndpointsUpdateResult) error {
	var errs []error
	for _, f := range StaleFilters(svcs, sr, er) {
		if err := c.Delete(ctx, f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
