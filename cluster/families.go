package cluster

import (
	"fmt"
	"net/netip"
	"strings"
)

// IP families of `svcnet up --ip-family`. A dual-stack cluster has IPv4 as
// its primary family (first in every list: node addresses, pod CIDRs,
// Service CIDRs), as kind's and kubeadm's dual-stack clusters do.
const (
	IPv4 = "ipv4"
	IPv6 = "ipv6"
	Dual = "dual"
)

// familyNet is the addressing of one IP family of the cluster.
type familyNet struct {
	v6 bool
	// bridge is the host side of the node network (the namespace svcnet up
	// runs in); node i is the address after bridge+i-1 in nodeNet.
	bridge  netip.Addr
	nodeNet netip.Prefix
	// clusterCIDR holds every node's pod CIDR; serviceCIDR the ClusterIPs.
	clusterCIDR netip.Prefix
	serviceCIDR netip.Prefix
	// dnsIP is the kube-dns Service's ClusterIP in serviceCIDR.
	dnsIP netip.Addr
}

// Defaults per family: kind's IPv6 ranges (fd00:10:244::/56 for pods,
// fd00:10:96::/112 for Services) and a ULA node network mirroring 172.18.0.0/24.
var familyDefaults = map[bool]struct{ bridge, nodeNet, clusterCIDR, serviceCIDR string }{
	false: {"172.18.0.1", "172.18.0.0/24", "10.244.0.0/16", "10.96.0.0/16"},
	true:  {"fd00:172:18::1", "fd00:172:18::/64", "fd00:10:244::/56", "fd00:10:96::/112"},
}

// nodeIP is node i's (1-based) address on the node network.
func (f familyNet) nodeIP(i int) netip.Addr {
	a := f.bridge
	for ; i > 0; i-- {
		a = a.Next()
	}
	return a
}

// podCIDR is node i's pod range: the i-th /24 of an IPv4 cluster CIDR
// (10.244.i.0/24), the i-th /64 of an IPv6 one (fd00:10:244:i::/64).
func (f familyNet) podCIDR(i int) netip.Prefix {
	if !f.v6 {
		b := f.clusterCIDR.Addr().As4()
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{b[0], b[1], byte(i), 0}), 24)
	}
	b := f.clusterCIDR.Addr().As16()
	b[7] = byte(i)
	return netip.PrefixFrom(netip.AddrFrom16(b), 64)
}

// families returns the cluster's families, primary first, from
// --ip-family and the comma-separated --cluster-cidr and
// --service-cluster-ip-range (each: empty for the defaults, or one CIDR per
// family in the family order).
func families(ipFamily, clusterCIDRs, serviceCIDRs string) ([]familyNet, error) {
	var v6s []bool
	switch ipFamily {
	case IPv4, "":
		v6s = []bool{false}
	case IPv6:
		v6s = []bool{true}
	case Dual:
		v6s = []bool{false, true}
	default:
		return nil, fmt.Errorf("--ip-family %q: must be ipv4, ipv6 or dual", ipFamily)
	}
	split := func(flag, list string) ([]netip.Prefix, error) {
		if list == "" {
			return nil, nil
		}
		parts := strings.Split(list, ",")
		if len(parts) != len(v6s) {
			return nil, fmt.Errorf("%s %q: need %d CIDRs for --ip-family %s, one per family (IPv4 first)", flag, list, len(v6s), ipFamily)
		}
		var out []netip.Prefix
		for i, s := range parts {
			p, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			if p.Addr().Is6() != v6s[i] || p.Addr().Is4In6() {
				return nil, fmt.Errorf("%s %q: CIDR %d must be %s", flag, list, i+1, map[bool]string{false: "IPv4", true: "IPv6"}[v6s[i]])
			}
			out = append(out, p.Masked())
		}
		return out, nil
	}
	cc, err := split("--cluster-cidr", clusterCIDRs)
	if err != nil {
		return nil, err
	}
	sc, err := split("--service-cluster-ip-range", serviceCIDRs)
	if err != nil {
		return nil, err
	}
	var out []familyNet
	for i, v6 := range v6s {
		d := familyDefaults[v6]
		f := familyNet{v6: v6, bridge: netip.MustParseAddr(d.bridge), nodeNet: netip.MustParsePrefix(d.nodeNet),
			clusterCIDR: netip.MustParsePrefix(d.clusterCIDR), serviceCIDR: netip.MustParsePrefix(d.serviceCIDR)}
		if cc != nil {
			f.clusterCIDR = cc[i]
		}
		if sc != nil {
			f.serviceCIDR = sc[i]
		}
		if !v6 && f.clusterCIDR.Bits() > 16 {
			return nil, fmt.Errorf("--cluster-cidr %s: need an IPv4 /16 or larger", f.clusterCIDR)
		}
		if v6 && f.clusterCIDR.Bits() > 56 {
			return nil, fmt.Errorf("--cluster-cidr %s: need an IPv6 /56 or larger (node i gets the i-th /64)", f.clusterCIDR)
		}
		// The tenth address, as kubeadm puts cluster DNS (10.96.0.10).
		f.dnsIP = f.serviceCIDR.Addr()
		for range 10 {
			f.dnsIP = f.dnsIP.Next()
		}
		if !f.serviceCIDR.Contains(f.dnsIP) {
			return nil, fmt.Errorf("--service-cluster-ip-range %s: too small for the cluster DNS address", f.serviceCIDR)
		}
		out = append(out, f)
	}
	return out, nil
}

// joinFamilies formats one value per family, comma-separated.
func joinFamilies(fams []familyNet, f func(familyNet) string) string {
	var out []string
	for _, fam := range fams {
		out = append(out, f(fam))
	}
	return strings.Join(out, ",")
}
