package proxy

import (
	"net/netip"
	"testing"
)

// --nodeport-addresses as kube-proxy reads them (found by hack/kpdiff).
func TestNodePortCIDRs(t *testing.T) {
	p := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, c := range s {
			out = append(out, netip.MustParsePrefix(c))
		}
		return out
	}
	cases := []struct {
		name       string
		in         []netip.Prefix
		v6         bool
		n          int
		all, loopb bool
	}{
		{"empty v4", nil, false, 0, true, true},
		{"empty v6", nil, true, 0, true, false},
		{"v4 without loopback", p("192.168.0.0/24"), false, 1, false, false},
		{"v4 with loopback", p("192.168.0.0/24", "127.0.0.0/8"), false, 2, false, true},
		{"only other family is match-all", p("192.168.0.0/24"), true, 0, true, false},
		{"zero cidr", p("192.168.0.0/24", "0.0.0.0/0"), false, 0, true, true},
		{"v6 cidr", p("2001:db8::/64", "10.0.0.0/8"), true, 1, false, false},
	}
	for _, c := range cases {
		got, all, lo := NodePortCIDRs(c.in, c.v6)
		if len(got) != c.n || all != c.all || lo != c.loopb {
			t.Errorf("%s: got %v matchAll=%v loopback=%v, want %d cidrs matchAll=%v loopback=%v", c.name, got, all, lo, c.n, c.all, c.loopb)
		}
	}
}
