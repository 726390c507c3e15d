package lbipam

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
)

// Range is an inclusive address range of one family.
type Range struct {
	From, To netip.Addr
	// Text is the pool entry it came from.
	Text string
}

// Contains reports whether ip is inside r.
func (r Range) Contains(ip netip.Addr) bool {
	return ip.BitLen() == r.From.BitLen() && r.From.Compare(ip) <= 0 && ip.Compare(r.To) <= 0
}

func (r Range) overlaps(o Range) bool {
	return r.From.BitLen() == o.From.BitLen() && r.From.Compare(o.To) <= 0 && o.From.Compare(r.To) <= 0
}

// Pool is a parsed IPAddressPool.
type Pool struct {
	Name          string
	Ranges        []Range
	AutoAssign    bool
	AvoidBuggyIPs bool
	Priority      int
	Namespaces    []string
}

// ParseRange parses one spec.addresses entry: a CIDR or an inclusive
// "from-to" range of one family.
func ParseRange(s string) (Range, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Range{}, fmt.Errorf("invalid CIDR %q: %w", s, err)
		}
		p = p.Masked()
		return Range{From: p.Addr(), To: lastAddr(p), Text: s}, nil
	}
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return Range{}, fmt.Errorf("invalid IP range %q: not a CIDR or a from-to range", s)
		}
		return Range{From: ip.Unmap(), To: ip.Unmap(), Text: s}, nil
	}
	a, err := netip.ParseAddr(strings.TrimSpace(from))
	if err != nil {
		return Range{}, fmt.Errorf("invalid IP range %q: invalid start IP %q", s, strings.TrimSpace(from))
	}
	b, err := netip.ParseAddr(strings.TrimSpace(to))
	if err != nil {
		return Range{}, fmt.Errorf("invalid IP range %q: invalid end IP %q", s, strings.TrimSpace(to))
	}
	a, b = a.Unmap(), b.Unmap()
	if a.BitLen() != b.BitLen() {
		return Range{}, fmt.Errorf("invalid IP range %q: start and end IPs are of different address families", s)
	}
	if b.Less(a) {
		return Range{}, fmt.Errorf("invalid IP range %q: start IP %s is after the end IP %s", s, a, b)
	}
	return Range{From: a, To: b, Text: s}, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 1 << (7 - j)
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// ParsePool validates an IPAddressPool and returns its parsed form. Errors
// name the pool and the offending entry.
func ParsePool(p *metallbv1beta1.IPAddressPool) (*Pool, error) {
	if len(p.Spec.Addresses) == 0 {
		return nil, fmt.Errorf("pool %q has no addresses", p.Name)
	}
	out := &Pool{Name: p.Name, AutoAssign: true, AvoidBuggyIPs: p.Spec.AvoidBuggyIPs}
	if p.Spec.AutoAssign != nil {
		out.AutoAssign = *p.Spec.AutoAssign
	}
	if a := p.Spec.AllocateTo; a != nil {
		out.Priority = a.Priority
		out.Namespaces = a.Namespaces
	}
	for _, s := range p.Spec.Addresses {
		r, err := ParseRange(s)
		if err != nil {
			return nil, fmt.Errorf("pool %q: %w", p.Name, err)
		}
		for _, o := range out.Ranges {
			if r.overlaps(o) {
				return nil, fmt.Errorf("pool %q: range %q overlaps with range %q", p.Name, s, o.Text)
			}
		}
		out.Ranges = append(out.Ranges, r)
	}
	return out, nil
}

// ValidatePool is the admission check for an IPAddressPool: it returns a
// user-facing error for an invalid range, and for a range that overlaps
// another pool's (others are the existing pools; one with the same
// namespace/name is skipped).
func ValidatePool(p *metallbv1beta1.IPAddressPool, others []metallbv1beta1.IPAddressPool) error {
	pp, err := ParsePool(p)
	if err != nil {
		return err
	}
	for i := range others {
		o := &others[i]
		if o.Name == p.Name && o.Namespace == p.Namespace {
			continue
		}
		op, err := ParsePool(o)
		if err != nil {
			continue
		}
		if msg := overlap(pp, op); msg != "" {
			return errors.New(msg)
		}
	}
	return nil
}

func overlap(a, b *Pool) string {
	for _, r := range a.Ranges {
		for _, o := range b.Ranges {
			if r.overlaps(o) {
				return fmt.Sprintf("CIDR %q in pool %q overlaps with already defined CIDR %q in pool %q", r.Text, a.Name, o.Text, b.Name)
			}
		}
	}
	return ""
}

// Port is a service port for sharing checks.
type Port struct {
	Protocol string
	Port     int32
}

// Allocation is what one Service holds.
type Allocation struct {
	IPs        []netip.Addr
	Pool       string
	Ports      []Port
	SharingKey string
}

// Allocator hands out LoadBalancer IPs from pools. It does no I/O; it
// would rather fail an allocation than give one address to two Services
// that may not share it.
type Allocator struct {
	pools []*Pool
	bySvc map[string]*Allocation
	byIP  map[netip.Addr][]string

	metrics *Metrics
	usage   map[string]*poolUsage // pool name -> what its Services hold
}

// NewAllocator returns an allocator with no pools.
func NewAllocator() *Allocator {
	return &Allocator{bySvc: map[string]*Allocation{}, byIP: map[netip.Addr][]string{}, usage: map[string]*poolUsage{}}
}

// SetMetrics makes the allocator keep MetalLB's allocator gauges in m
// (nil: none), starting with the pools it has now.
func (a *Allocator) SetMetrics(m *Metrics) {
	a.metrics = m
	for _, p := range a.pools {
		m.set(p, a.usage[p.Name])
	}
}

// StopMetrics deletes every pool's series and records no more.
func (a *Allocator) StopMetrics() {
	for _, p := range a.pools {
		a.metrics.forget(p.Name)
	}
	a.metrics = nil
}

// account adds (d = 1) or removes (d = -1) an allocation from the per-pool
// usage, attributing each address to the pool containing it now, and
// publishes the pools it touched.
func (a *Allocator) account(al *Allocation, d int) {
	touched := map[*Pool]bool{}
	var svcPool *Pool
	for i, ip := range al.IPs {
		p := a.PoolFor(ip)
		if i == 0 {
			svcPool = p
		} else if p != svcPool {
			svcPool = nil
		}
		if p == nil {
			continue
		}
		touched[p] = true
		u := a.usage[p.Name]
		if u == nil {
			u = &poolUsage{ips: map[netip.Addr]int{}}
			a.usage[p.Name] = u
		}
		before := u.ips[ip]
		if after := before + d; after > 0 {
			u.ips[ip] = after
		} else {
			delete(u.ips, ip)
		}
		delta := 0
		switch {
		case before == 0 && d > 0:
			delta = 1
		case before == 1 && d < 0:
			delta = -1
		}
		if ip.Is4() {
			u.v4 += delta
		} else {
			u.v6 += delta
		}
	}
	if svcPool != nil {
		a.usage[svcPool.Name].services += d
	}
	for p := range touched {
		a.metrics.set(p, a.usage[p.Name])
	}
}

// SetPools replaces the pools. Overlapping pools are reported: the later
// one (by name) is dropped and an error returned for each. Allocations
// whose addresses left every pool are kept until the owner resyncs.
func (a *Allocator) SetPools(pools []*Pool) []error {
	sorted := slices.Clone(pools)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var kept []*Pool
	var errs []error
	for _, p := range sorted {
		bad := ""
		for _, k := range kept {
			if msg := overlap(p, k); msg != "" {
				bad = msg
				break
			}
		}
		if bad != "" {
			errs = append(errs, errors.New(bad))
			continue
		}
		kept = append(kept, p)
	}
	// Priority order: explicit priorities (lower first), then unset, by name.
	sort.SliceStable(kept, func(i, j int) bool {
		pi, pj := kept[i].Priority, kept[j].Priority
		if (pi == 0) != (pj == 0) {
			return pi != 0
		}
		return pi < pj
	})
	for _, p := range a.pools {
		if !slices.ContainsFunc(kept, func(k *Pool) bool { return k.Name == p.Name }) {
			a.metrics.forget(p.Name)
		}
	}
	a.pools = kept
	// An address may have changed pools: count again.
	a.usage = map[string]*poolUsage{}
	for _, al := range a.bySvc {
		a.account(al, 1)
	}
	for _, p := range a.pools {
		a.metrics.set(p, a.usage[p.Name])
	}
	return errs
}

// PoolFor returns the pool containing ip, or nil.
func (a *Allocator) PoolFor(ip netip.Addr) *Pool {
	for _, p := range a.pools {
		for _, r := range p.Ranges {
			if r.Contains(ip) {
				return p
			}
		}
	}
	return nil
}

func (a *Allocator) pool(name string) *Pool {
	for _, p := range a.pools {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Get returns what svc holds, or nil.
func (a *Allocator) Get(svc string) *Allocation { return a.bySvc[svc] }

// canUse reports whether svc may take ip given the other holders.
func (a *Allocator) canUse(svc string, ip netip.Addr, ports []Port, key string) error {
	for _, other := range a.byIP[ip] {
		if other == svc {
			continue
		}
		o := a.bySvc[other]
		if key == "" || o.SharingKey != key {
			return fmt.Errorf("can't change sharing key for %q, address also in use by %s", svc, other)
		}
		for _, p := range ports {
			if slices.Contains(o.Ports, p) {
				return fmt.Errorf("port %s/%d is already in use on %q", p.Protocol, p.Port, ip)
			}
		}
	}
	return nil
}

// Assign gives svc exactly ips (all must lie in one pool, and be shareable
// with their current holders), replacing what it held.
func (a *Allocator) Assign(svc string, ips []netip.Addr, ports []Port, key string) error {
	var pool *Pool
	for _, ip := range ips {
		p := a.PoolFor(ip)
		if p == nil {
			return fmt.Errorf("%q is not allowed in config", ip)
		}
		if pool != nil && pool != p {
			return fmt.Errorf("requested IPs %v are in different pools", ips)
		}
		pool = p
		if err := a.canUse(svc, ip, ports, key); err != nil {
			return err
		}
	}
	a.Unassign(svc)
	al := &Allocation{IPs: ips, Pool: pool.Name, Ports: ports, SharingKey: key}
	a.bySvc[svc] = al
	for _, ip := range ips {
		a.byIP[ip] = append(a.byIP[ip], svc)
	}
	a.account(al, 1)
	return nil
}

// Unassign releases what svc holds.
func (a *Allocator) Unassign(svc string) {
	old := a.bySvc[svc]
	if old == nil {
		return
	}
	for _, ip := range old.IPs {
		users := slices.DeleteFunc(a.byIP[ip], func(s string) bool { return s == svc })
		if len(users) == 0 {
			delete(a.byIP, ip)
		} else {
			a.byIP[ip] = users
		}
	}
	delete(a.bySvc, svc)
	a.account(old, -1)
}

// ErrNoAvailableIPs is returned when no pool has a usable address.
var ErrNoAvailableIPs = errors.New("no available IPs")

// Allocate picks one address per requested family (4 or 6) for svc from
// poolName, or from the auto-assign pools in priority order when poolName
// is "". namespace restricts pools with a namespace list. Dual-stack
// requests take both addresses from one pool.
func (a *Allocator) Allocate(svc, namespace, poolName string, families []int, ports []Port, key string) ([]netip.Addr, error) {
	var candidates []*Pool
	if poolName != "" {
		p := a.pool(poolName)
		if p == nil {
			return nil, fmt.Errorf("unknown pool %q", poolName)
		}
		candidates = []*Pool{p}
	} else {
		for _, p := range a.pools {
			if p.AutoAssign && (len(p.Namespaces) == 0 || slices.Contains(p.Namespaces, namespace)) {
				candidates = append(candidates, p)
			}
		}
	}
	for _, p := range candidates {
		var ips []netip.Addr
		for _, fam := range families {
			ip, ok := a.free(svc, p, fam, ports, key)
			if !ok {
				ips = nil
				break
			}
			ips = append(ips, ip)
		}
		if len(ips) == len(families) && len(ips) > 0 {
			if err := a.Assign(svc, ips, ports, key); err != nil {
				return nil, err
			}
			return ips, nil
		}
	}
	return nil, ErrNoAvailableIPs
}

// maxScan bounds the addresses examined per range, so an IPv6 /64 pool
// does not take forever when full.
const maxScan = 1 << 20

func (a *Allocator) free(svc string, p *Pool, family int, ports []Port, key string) (netip.Addr, bool) {
	bits := 32
	if family == 6 {
		bits = 128
	}
	// Prefer sharing an address already used under the same key.
	if key != "" {
		for ip := range a.byIP {
			if ip.BitLen() == bits && a.PoolFor(ip) == p && a.canUse(svc, ip, ports, key) == nil {
				return ip, true
			}
		}
	}
	for _, r := range p.Ranges {
		if r.From.BitLen() != bits {
			continue
		}
		n := 0
		for ip := r.From; ip.IsValid() && ip.Compare(r.To) <= 0 && n < maxScan; ip = ip.Next() {
			n++
			if p.AvoidBuggyIPs && ip.Is4() {
				if last := ip.As4()[3]; last == 0 || last == 255 {
					continue
				}
			}
			if len(a.byIP[ip]) == 0 {
				return ip, true
			}
		}
	}
	return netip.Addr{}, false
}
