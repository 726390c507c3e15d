package validation

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
)

// ParseAddresses parses one entry of an IPAddressPool's addresses: a CIDR
// (its network: "10.0.0.5/24" is 10.0.0.0/24) or an inclusive range
// "first-last", which is summarized into the smallest list of CIDRs
// covering exactly the range. Errors carry MetalLB's messages.
func ParseAddresses(s string) ([]netip.Prefix, error) {
	if !strings.Contains(s, "-") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("invalid CIDR %q", s)
		}
		return []netip.Prefix{p.Masked()}, nil
	}
	first, last, _ := strings.Cut(s, "-")
	start, err := netip.ParseAddr(strings.TrimSpace(first))
	if err != nil {
		return nil, fmt.Errorf("invalid IP range %q: invalid start IP %q", s, first)
	}
	end, err := netip.ParseAddr(strings.TrimSpace(last))
	if err != nil {
		return nil, fmt.Errorf("invalid IP range %q: invalid end IP %q", s, last)
	}
	start, end = start.Unmap(), end.Unmap()
	if start.Is4() != end.Is4() || start.Compare(end) > 0 {
		return nil, fmt.Errorf("invalid IP range %q: start IP %q is after the end IP %q", s, start, end)
	}
	return summarize(start, end), nil
}

// summarize returns the CIDRs covering [start, end] exactly, largest
// first at each step.
func summarize(start, end netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for {
		bits := start.BitLen()
		// The largest aligned block starting at start that ends at or
		// before end.
		for bits > 0 {
			p := netip.PrefixFrom(start, bits-1)
			if p.Masked().Addr() != start || lastAddr(p).Compare(end) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(start, bits)
		out = append(out, p)
		last := lastAddr(p)
		if last.Compare(end) >= 0 {
			return out
		}
		start = last.Next()
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(a)*8; i++ {
		a[i/8] |= 0x80 >> (i % 8)
	}
	r, _ := netip.AddrFromSlice(a)
	return r
}

// PoolCIDRs parses a pool's addresses (MetalLB's "parsing address pool"
// rules), keyed by the entry they come from, in order.
func PoolCIDRs(p *metallbv1beta1.IPAddressPool) ([][]netip.Prefix, error) {
	if p.Name == "" {
		return nil, errors.New("missing pool name")
	}
	if len(p.Spec.Addresses) == 0 {
		return nil, errors.New("pool has no prefixes defined")
	}
	out := make([][]netip.Prefix, 0, len(p.Spec.Addresses))
	for _, a := range p.Spec.Addresses {
		nets, err := ParseAddresses(a)
		if err != nil {
			return nil, fmt.Errorf("invalid CIDR %q in pool %q: %s", a, p.Name, err)
		}
		out = append(out, nets)
	}
	if a := p.Spec.AllocateTo; a != nil {
		if err := validateDuplicate(a.Namespaces, "namespaces"); err != nil {
			return nil, errors.New("duplicate definition in namespaces field")
		}
	}
	return out, nil
}

// Pools is MetalLB's IPAddressPool webhook: pools (the existing ones with
// the new or updated one replacing its namesake, in that order) must each
// parse and no CIDR may overlap one of an earlier pool.
func Pools(pools []metallbv1beta1.IPAddressPool) error {
	var seen []netip.Prefix
	names := map[string]bool{}
	for i := range pools {
		p := &pools[i]
		cidrs, err := PoolCIDRs(p)
		if err != nil {
			return fmt.Errorf("parsing address pool %s: %s", p.Name, err)
		}
		key := p.Namespace + "/" + p.Name
		if names[key] {
			return fmt.Errorf("duplicate definition of pool %q", p.Name)
		}
		names[key] = true
		for _, entry := range cidrs {
			for _, c := range entry {
				for _, m := range seen {
					if c.Overlaps(m) {
						return fmt.Errorf("CIDR %q in pool %q overlaps with already defined CIDR %q", c, p.Name, m)
					}
				}
				seen = append(seen, c)
			}
		}
	}
	return nil
}

// WithUpdate returns existing with obj replacing the item of the same
// namespace and name, or appended: the list MetalLB's webhooks validate.
func WithUpdate[T any](existing []T, obj T, key func(*T) string) []T {
	out := make([]T, 0, len(existing)+1)
	k := key(&obj)
	replaced := false
	for i := range existing {
		if key(&existing[i]) == k {
			out = append(out, obj)
			replaced = true
			continue
		}
		out = append(out, existing[i])
	}
	if !replaced {
		out = append(out, obj)
	}
	return out
}

func validateDuplicate(s []string, what string) error {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[i] == s[j] {
				return fmt.Errorf("duplicate definition of %s %q", what, s[i])
			}
		}
	}
	return nil
}
