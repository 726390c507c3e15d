package lbipam

import (
	"math"
	"math/big"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are MetalLB's allocator gauges (metallb_allocator_*), each with
// the label pool (the IPAddressPool's name). Names, types, labels and the
// meaning of the help texts are MetalLB v0.16's, so that its dashboards and
// alerts work unchanged. A nil *Metrics records nothing.
type Metrics struct {
	addresses, ipv4Addresses, ipv6Addresses *prometheus.GaugeVec
	inUse, ipv4InUse, ipv6InUse             *prometheus.GaugeVec
	services                                *prometheus.GaugeVec
}

// NewMetrics creates the gauges and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "metallb", Subsystem: "allocator", Name: name, Help: help}, []string{"pool"})
	}
	m := &Metrics{
		addresses:     g("addresses_total", "Number of usable IP addresses, per pool"),
		ipv4Addresses: g("ipv4_addresses_total", "Number of usable IPV4 addresses, per pool"),
		ipv6Addresses: g("ipv6_addresses_total", "Number of usable IPV6 addresses, per pool"),
		inUse:         g("addresses_in_use_total", "Number of IP addresses in use, per pool"),
		ipv4InUse:     g("ipv4_addresses_in_use_total", "Number of IPV4 addresses in use, per pool"),
		ipv6InUse:     g("ipv6_addresses_in_use_total", "Number of IPV6 addresses in use, per pool"),
		services:      g("services_allocated_total", "Number of services allocated, per pool"),
	}
	reg.MustRegister(m.all()...)
	return m
}

func (m *Metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.addresses, m.ipv4Addresses, m.ipv6Addresses, m.inUse, m.ipv4InUse, m.ipv6InUse, m.services}
}

// poolUsage is what the allocator counts per pool: the distinct addresses
// held by Services (an address shared by several Services counts once)
// and the Services holding addresses.
type poolUsage struct {
	ips      map[netip.Addr]int // address -> Services holding it
	v4, v6   int                // distinct addresses of each family
	services int
}

func (m *Metrics) set(p *Pool, u *poolUsage) {
	if m == nil {
		return
	}
	total, v4, v6 := PoolCapacity(p)
	m.addresses.WithLabelValues(p.Name).Set(total)
	m.ipv4Addresses.WithLabelValues(p.Name).Set(v4)
	m.ipv6Addresses.WithLabelValues(p.Name).Set(v6)
	var n, n4, n6, svcs int
	if u != nil {
		n, n4, n6, svcs = len(u.ips), u.v4, u.v6, u.services
	}
	m.inUse.WithLabelValues(p.Name).Set(float64(n))
	m.ipv4InUse.WithLabelValues(p.Name).Set(float64(n4))
	m.ipv6InUse.WithLabelValues(p.Name).Set(float64(n6))
	m.services.WithLabelValues(p.Name).Set(float64(svcs))
}

// forget deletes the pool's series.
func (m *Metrics) forget(pool string) {
	if m == nil {
		return
	}
	for _, c := range m.all() {
		c.(*prometheus.GaugeVec).DeleteLabelValues(pool)
	}
}

// PoolCapacity is the number of usable addresses of a pool, in total and
// per family, counted as MetalLB counts them: every range is cut into CIDR
// blocks; a block with 62 host bits or more (an IPv6 range that cannot run
// out) makes the total and the IPv6 count math.MaxInt64; with
// avoidBuggyIPs the IPv4 addresses ending in .0 or .255 do not count.
// Counts stop at math.MaxInt64.
func PoolCapacity(p *Pool) (total, ipv4, ipv6 float64) {
	t, v4, v6 := poolCapacity(p)
	return float64(t), float64(v4), float64(v6)
}

func poolCapacity(p *Pool) (t, v4, v6 int64) {
	for _, r := range p.Ranges {
		for _, b := range rangeBlocks(r.From, r.To) {
			host := b.Addr().BitLen() - b.Bits()
			if host >= 62 {
				t, v6 = math.MaxInt64, math.MaxInt64
				continue
			}
			n := int64(1) << host
			if p.AvoidBuggyIPs && b.Addr().Is4() {
				n -= buggyInBlock(b)
			}
			t = addCapped(t, n)
			if b.Addr().Is4() {
				v4 += n
			} else {
				v6 = addCapped(v6, n)
			}
		}
	}
	return t, v4, v6
}

func addCapped(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// buggyInBlock counts the IPv4 addresses ending in .0 or .255 in b.
func buggyInBlock(b netip.Prefix) int64 {
	if b.Bits() <= 24 {
		return (int64(1) << (24 - b.Bits())) * 2
	}
	var n int64
	first, last := b.Addr().As4(), lastAddr(b).As4()
	if first[3] == 0 || first[3] == 255 {
		n++
	}
	if last != first && (last[3] == 0 || last[3] == 255) {
		n++
	}
	return n
}

// rangeBlocks splits the inclusive range from-to (one family) into the
// fewest CIDR blocks covering it exactly.
func rangeBlocks(from, to netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	bits := from.BitLen()
	end := new(big.Int).SetBytes(to.AsSlice())
	for cur := from; cur.IsValid(); {
		c := new(big.Int).SetBytes(cur.AsSlice())
		if c.Cmp(end) > 0 {
			break
		}
		// The largest block starting at cur that is aligned and ends by to.
		size := 0
		for size < bits {
			next := size + 1
			p := netip.PrefixFrom(cur, bits-next)
			if p.Masked().Addr() != cur || new(big.Int).SetBytes(lastAddr(p).AsSlice()).Cmp(end) > 0 {
				break
			}
			size = next
		}
		p := netip.PrefixFrom(cur, bits-size)
		out = append(out, p)
		cur = lastAddr(p).Next()
	}
	return out
}
