package proxy

import (
	"net/netip"

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
