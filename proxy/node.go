package proxy

import (
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// NodeAddresses returns a Node's InternalIP addresses, then its ExternalIP
// addresses, each once, skipping unparsable ones.
func NodeAddresses(node *v1.Node) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, t := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type != t {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil || seen[ip.Unmap()] {
				continue
			}
			seen[ip.Unmap()] = true
			out = append(out, ip.Unmap())
		}
	}
	return out
}

func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, err
	}
	return p.Masked(), nil
}

// NodePortCIDRs selects the --nodeport-addresses CIDRs of one family as
// kube-proxy does: CIDRs of the other family are ignored; if none of this
// family remain, or one of them is the zero CIDR (0.0.0.0/0, ::/0), NodePorts
// match every local address (matchAll). v4Loopback reports whether an IPv4
// CIDR covers the loopback range (or the list is empty); without it
// localhost NodePorts are off, as kube-proxy forces
// --iptables-localhost-nodeports=false when --nodeport-addresses excludes
// 127.0.0.0/8.
func NodePortCIDRs(all []netip.Prefix, v6 bool) (cidrs []netip.Prefix, matchAll, v4Loopback bool) {
	for _, c := range all {
		if c.Addr().Is6() != v6 {
			continue
		}
		cidrs = append(cidrs, c)
	}
	if len(cidrs) == 0 {
		return nil, true, !v6
	}
	for _, c := range cidrs {
		if !v6 && (c.Addr().IsLoopback() || c.Contains(netip.AddrFrom4([4]byte{127, 0, 0, 0}))) {
			v4Loopback = true
		}
		if c.Bits() == 0 {
			return nil, true, v4Loopback
		}
	}
	return cidrs, false, v4Loopback
}

// NodePortIPs returns the addresses of local that accept NodePort traffic:
// all of them when matchAll, else those in one of cidrs (see
// NodePortCIDRs), in the order given.
func NodePortIPs(local []netip.Addr, cidrs []netip.Prefix, matchAll bool) []netip.Addr {
	var out []netip.Addr
	for _, a := range local {
		if matchAll || slices.ContainsFunc(cidrs, func(c netip.Prefix) bool { return c.Contains(a) }) {
			out = append(out, a)
		}
	}
	return out
}
