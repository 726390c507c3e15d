package userspace

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Chain names: the ones kube-proxy's userspace mode used, so that people who
// knew that mode find what they expect.
const (
	ChainPortalsContainer  = "KUBE-PORTALS-CONTAINER"
	ChainPortalsHost       = "KUBE-PORTALS-HOST"
	ChainNodePortContainer = "KUBE-NODEPORT-CONTAINER"
	ChainNodePortHost      = "KUBE-NODEPORT-HOST"
	// ChainReject (filter table) rejects connections to Services without
	// endpoints, as kube-proxy's iptables mode does; it is our own chain so
	// that it never collides with an iptables-mode KUBE-SERVICES.
	ChainReject = "KUBE-PORTALS-REJECT"
)

// Jump is one rule in a built-in nat chain that sends traffic into one of our
// chains. Jumps are inserted once (checked with -C first) and removed on
// cleanup; everything else lives in our own chains and is rewritten whole by
// iptables-restore --noflush.
type Jump struct {
	Table string   // nat or filter
	Chain string   // PREROUTING, OUTPUT, INPUT or FORWARD
	Args  []string // match arguments, then "-j", target
}

// Jumps returns the jump rules, in kube-proxy's userspace order: the portal
// (ClusterIP, externalIP, LB IP) chains before the NodePort chains, then the
// filter-table reject chain.
func Jumps() []Jump {
	return []Jump{
		{"nat", "PREROUTING", []string{"-m", "comment", "--comment", "handle ClusterIPs; NOTE: this must be before the NodePort rules", "-j", ChainPortalsContainer}},
		{"nat", "OUTPUT", []string{"-m", "comment", "--comment", "handle ClusterIPs; NOTE: this must be before the NodePort rules", "-j", ChainPortalsHost}},
		{"nat", "PREROUTING", []string{"-m", "addrtype", "--dst-type", "LOCAL", "-m", "comment", "--comment", "handle service NodePorts; NOTE: this must be the last rule in the chain", "-j", ChainNodePortContainer}},
		{"nat", "OUTPUT", []string{"-m", "addrtype", "--dst-type", "LOCAL", "-m", "comment", "--comment", "handle service NodePorts; NOTE: this must be the last rule in the chain", "-j", ChainNodePortHost}},
		{"filter", "INPUT", []string{"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", "reject services without endpoints", "-j", ChainReject}},
		{"filter", "FORWARD", []string{"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", "reject services without endpoints", "-j", ChainReject}},
		{"filter", "OUTPUT", []string{"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", "reject services without endpoints", "-j", ChainReject}},
	}
}

// Portal is one listener of the proxy and the addresses redirected to it.
type Portal struct {
	Name      string // ServicePortName string, used as the rule comment
	Protocol  string // "tcp" or "udp"
	ProxyPort int    // the local port the proxy listens on
	Port      int    // the Service port
	// Addrs are the ClusterIPs, externalIPs and LoadBalancer IPs.
	Addrs    []netip.Addr
	NodePort int
	// NodePortAddrs restricts NodePort redirection to local addresses in
	// these CIDRs (--nodeport-addresses); empty means every local address.
	// The jump into the NodePort chains already requires a local
	// destination (addrtype LOCAL).
	NodePortAddrs []netip.Prefix
	// NoEndpoints marks a portal whose Service has no endpoints: its
	// traffic is rejected in the filter table instead of being redirected.
	NoEndpoints bool
}

// BuildRules returns the iptables-restore --noflush input (nat table, and a
// filter table section for Services without endpoints) for one IP family.
// It is a pure function of its arguments; portals are emitted sorted by name
// so that equal inputs give byte-identical output.
func BuildRules(portals []Portal, ipv6 bool) string {
	ps := append([]Portal(nil), portals...)
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Name != ps[j].Name {
			return ps[i].Name < ps[j].Name
		}
		return ps[i].Protocol < ps[j].Protocol
	})
	host := "/32"
	if ipv6 {
		host = "/128"
	}
	var nat, filter strings.Builder
	nat.WriteString("*nat\n")
	for _, c := range []string{ChainPortalsContainer, ChainPortalsHost, ChainNodePortContainer, ChainNodePortHost} {
		fmt.Fprintf(&nat, ":%s - [0:0]\n", c)
	}
	filter.WriteString("*filter\n")
	fmt.Fprintf(&filter, ":%s - [0:0]\n", ChainReject)
	for _, p := range ps {
		comment := fmt.Sprintf("-m comment --comment %q", p.Name)
		for _, a := range p.Addrs {
			if a.Is6() != ipv6 {
				continue
			}
			if p.NoEndpoints {
				// TCP gets a reset: the kernel rate-limits ICMP
				// unreachables per client (1/s), and a client's
				// first SYN would otherwise often just time out.
				with := ""
				if p.Protocol == "tcp" {
					with = " --reject-with tcp-reset"
				}
				fmt.Fprintf(&filter, "-A %s -m comment --comment %q -p %s -d %s%s --dport %d -j REJECT%s\n",
					ChainReject, p.Name+" has no endpoints", p.Protocol, a, host, p.Port, with)
				continue
			}
			for _, c := range []string{ChainPortalsContainer, ChainPortalsHost} {
				fmt.Fprintf(&nat, "-A %s %s -p %s -d %s%s --dport %d -j REDIRECT --to-ports %d\n",
					c, comment, p.Protocol, a, host, p.Port, p.ProxyPort)
			}
		}
		if p.NodePort == 0 || p.NoEndpoints {
			continue
		}
		var dsts []string
		for _, a := range p.NodePortAddrs {
			if a.Addr().Is6() == ipv6 {
				dsts = append(dsts, "-d "+a.Masked().String()+" ")
			}
		}
		if len(p.NodePortAddrs) > 0 && len(dsts) == 0 {
			continue // no NodePort addresses in this family
		}
		if len(dsts) == 0 {
			dsts = []string{""}
		}
		for _, d := range dsts {
			for _, c := range []string{ChainNodePortContainer, ChainNodePortHost} {
				fmt.Fprintf(&nat, "-A %s %s -p %s %s--dport %d -j REDIRECT --to-ports %d\n",
					c, comment, p.Protocol, d, p.NodePort, p.ProxyPort)
			}
		}
	}
	nat.WriteString("COMMIT\n")
	filter.WriteString("COMMIT\n")
	return nat.String() + filter.String()
}
