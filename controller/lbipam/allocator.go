package lbipam

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
	// Allocation is spec.serviceAllocation; nil when the pool has none.
	Allocation *ServiceAllocation
}

// ServiceAllocation restricts a pool to some Services, as MetalLB reads
// spec.serviceAllocation: the namespaces listed and those the namespace
// selectors select (resolved by ResolveNamespaces), and Services matching
// one of the service selectors. A serviceAllocation that names neither
// namespaces nor selectors admits every Service (it only sets a priority).
type ServiceAllocation struct {
	Priority         int
	Namespaces       map[string]bool
	ServiceSelectors []labels.Selector

	listed             []string
	namespaceSelectors []labels.Selector
}

// ResolveNamespaces recomputes the namespaces the pool's namespace
// selectors select among ns (name -> labels).
func (p *Pool) ResolveNamespaces(ns map[string]map[string]string) {
	a := p.Allocation
	if a == nil {
		return
	}
	a.Namespaces = map[string]bool{}
	for _, n := range a.listed {
		a.Namespaces[n] = true
	}
	for _, sel := range a.namespaceSelectors {
		for name, l := range ns {
			if sel.Matches(labels.Set(l)) {
				a.Namespaces[name] = true
			}
		}
	}
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
		sa := &ServiceAllocation{Priority: a.Priority, listed: a.Namespaces, Namespaces: map[string]bool{}}
		for _, n := range a.Namespaces {
			if sa.Namespaces[n] {
				return nil, fmt.Errorf("pool %q: duplicate definition in namespaces field", p.Name)
			}
			sa.Namespaces[n] = true
		}
		if len(a.Namespaces)+len(a.NamespaceSelectors)+len(a.ServiceSelectors) == 0 {
			sa.ServiceSelectors = []labels.Selector{labels.Everything()}
		}
		for i := range a.NamespaceSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&a.NamespaceSelectors[i])
			if err != nil {
				return nil, fmt.Errorf("pool %q: invalid namespace label selector: %w", p.Name, err)
			}
			sa.namespaceSelectors = append(sa.namespaceSelectors, sel)
		}
		for i := range a.ServiceSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&a.ServiceSelectors[i])
			if err != nil {
				return nil, fmt.Errorf("pool %q: invalid service label selector: %w", p.Name, err)
			}
			sa.ServiceSelectors = append(sa.ServiceSelectors, sel)
		}
		out.Allocation = sa
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

func (p Port) String() string { return fmt.Sprintf("%s/%d", p.Protocol, p.Port) }

// Family is the address family a Service asks for: that of its
// ClusterIPs.
type Family string

// The families, as MetalLB names them in its messages.
const (
	IPv4      Family = "ipv4"
	IPv6      Family = "ipv6"
	DualStack Family = "dual"
)

func familyOf(ip netip.Addr) Family {
	if ip.Is4() {
		return IPv4
	}
	return IPv6
}

// familyOfIPs is the family of one or two addresses ("" when they are
// neither one address nor one of each family).
func familyOfIPs(ips []netip.Addr) Family {
	switch {
	case len(ips) == 1 && ips[0].IsValid():
		return familyOf(ips[0])
	case len(ips) == 2 && ips[0].IsValid() && ips[1].IsValid() && familyOf(ips[0]) != familyOf(ips[1]):
		return DualStack
	}
	return ""
}

// Request is what the allocator needs to know of a Service.
type Request struct {
	Key       string // namespace/name
	Namespace string
	Labels    map[string]string
	Ports     []Port
	// SharingKey is the allow-shared-ip annotation; BackendKey the
	// selector of an externalTrafficPolicy: Local Service (two Services
	// share an address only with equal keys of both kinds).
	SharingKey, BackendKey string
	Policy                 corev1.IPFamilyPolicy
	// V6First: the Service's first IP family is IPv6 (a PreferDualStack
	// Service that gets one address prefers that family).
	V6First bool
}

type sharing struct{ sharing, backend string }

func (k sharing) compatible(n sharing) error {
	switch {
	case k.sharing == "":
		return errors.New("existing service does not allow sharing")
	case n.sharing == "":
		return errors.New("new service does not allow sharing")
	case k.sharing != n.sharing:
		return fmt.Errorf("sharing key %q does not match existing sharing key %q", n.sharing, k.sharing)
	case k.backend != n.backend:
		return fmt.Errorf("backend key %q does not match existing sharing key %q", n.backend, k.backend)
	}
	return nil
}

// Allocation is what one Service holds.
type Allocation struct {
	IPs   []netip.Addr
	Pool  string
	Ports []Port
	key   sharing
}

// Key is the allocation's sharing and backend keys together (a change of
// it makes the controller look at every Service again, as MetalLB).
func (al *Allocation) Key() string { return al.key.backend + al.key.sharing }

// Allocator hands out LoadBalancer IPs from pools as MetalLB's allocator
// does. It does no I/O; it would rather fail an allocation than give one
// address to two Services that may not share it.
type Allocator struct {
	pools []*Pool // by name
	bySvc map[string]*Allocation
	// Per address: the sharing keys of its last holder, its ports and
	// their holders, and its holders.
	keyOf   map[netip.Addr]sharing
	portsOn map[netip.Addr]map[Port]string
	svcsOn  map[netip.Addr]map[string]bool

	metrics *Metrics
	usage   map[string]*poolUsage // pool name -> what its Services hold
	// changed, when set, is told the pools whose counts changed.
	changed func(pool string)
}

// NewAllocator returns an allocator with no pools.
func NewAllocator() *Allocator {
	return &Allocator{
		bySvc:   map[string]*Allocation{},
		keyOf:   map[netip.Addr]sharing{},
		portsOn: map[netip.Addr]map[Port]string{},
		svcsOn:  map[netip.Addr]map[string]bool{},
		usage:   map[string]*poolUsage{},
	}
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

// account adds (d = 1) or removes (d = -1) an allocation from its pool's
// usage and publishes the pool.
func (a *Allocator) account(al *Allocation, d int) {
	u := a.usage[al.Pool]
	if u == nil {
		u = &poolUsage{ips: map[netip.Addr]int{}}
		a.usage[al.Pool] = u
	}
	for _, ip := range al.IPs {
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
	u.services += d
	if p := a.pool(al.Pool); p != nil {
		a.metrics.set(p, u)
		if a.changed != nil {
			a.changed(p.Name)
		}
	}
}

// Counters are a pool's status: addresses held and left, per family.
type Counters struct {
	AssignedIPv4, AssignedIPv6, AvailableIPv4, AvailableIPv6 int64
}

// Counters returns the pool's counts, and false for an unknown pool.
func (a *Allocator) Counters(pool string) (Counters, bool) {
	p := a.pool(pool)
	if p == nil {
		return Counters{}, false
	}
	_, v4, v6 := poolCapacity(p)
	var c Counters
	if u := a.usage[pool]; u != nil {
		c.AssignedIPv4, c.AssignedIPv6 = int64(u.v4), int64(u.v6)
	}
	c.AvailableIPv4, c.AvailableIPv6 = v4-c.AssignedIPv4, v6-c.AssignedIPv6
	return c, true
}

// Fingerprint describes the pools as the allocator uses them (ranges,
// flags, resolved serviceAllocation); equal fingerprints, equal decisions.
func (a *Allocator) Fingerprint() string {
	var b strings.Builder
	for _, p := range a.pools {
		fmt.Fprintf(&b, "%s %v %v %v", p.Name, p.AutoAssign, p.AvoidBuggyIPs, p.Ranges)
		if al := p.Allocation; al != nil {
			fmt.Fprintf(&b, " prio=%d ns=%v sel=%v", al.Priority, slices.Sorted(maps.Keys(al.Namespaces)), al.ServiceSelectors)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Pools returns the pools' names.
func (a *Allocator) Pools() []string {
	out := make([]string, len(a.pools))
	for i, p := range a.pools {
		out[i] = p.Name
	}
	return out
}

// SetPools replaces the pools. Overlapping pools are reported: the later
// one (by name) is dropped and an error returned for each. An allocation
// whose addresses are in no pool any more is released; one whose
// addresses moved to another pool now counts there.
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
	var gone []string
	for _, p := range a.pools {
		if !slices.ContainsFunc(kept, func(k *Pool) bool { return k.Name == p.Name }) {
			gone = append(gone, p.Name)
		}
	}
	a.pools = kept
	for svc, al := range a.bySvc {
		p := a.PoolFor(al.IPs)
		switch {
		case p == nil:
			a.Unassign(svc)
		case p.Name != al.Pool:
			a.Unassign(svc)
			moved := *al
			moved.Pool = p.Name
			a.assign(svc, &moved)
		}
	}
	for _, name := range gone {
		a.metrics.forget(name)
		delete(a.usage, name)
	}
	for _, p := range a.pools {
		a.metrics.set(p, a.usage[p.Name])
	}
	return errs
}

func (a *Allocator) pool(name string) *Pool {
	for _, p := range a.pools {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// PoolFor returns the pool holding every one of ips, or nil. An address
// ending in .0 or .255 is in no pool that avoids buggy IPs.
func (a *Allocator) PoolFor(ips []netip.Addr) *Pool {
	for _, p := range a.pools {
		n := 0
		for _, ip := range ips {
			if p.AvoidBuggyIPs && buggy(ip) {
				continue
			}
			if slices.ContainsFunc(p.Ranges, func(r Range) bool { return r.Contains(ip) }) {
				n++
			}
		}
		if n == len(ips) {
			return p
		}
	}
	return nil
}

func buggy(ip netip.Addr) bool {
	if !ip.Is4() {
		return false
	}
	last := ip.As4()[3]
	return last == 0 || last == 255
}

// compatible reports whether the pool's serviceAllocation admits r.
func (p *Pool) compatible(r Request) bool {
	a := p.Allocation
	if a == nil {
		return true
	}
	if len(a.Namespaces) > 0 && !a.Namespaces[r.Namespace] {
		return false
	}
	if len(a.ServiceSelectors) > 0 {
		return slices.ContainsFunc(a.ServiceSelectors, func(s labels.Selector) bool { return s.Matches(labels.Set(r.Labels)) })
	}
	return true
}

// Get returns what svc holds, or nil.
func (a *Allocator) Get(svc string) *Allocation { return a.bySvc[svc] }

// checkSharing reports whether svc may hold ip beside its other holders.
func (a *Allocator) checkSharing(svc string, ip netip.Addr, ports []Port, k sharing) error {
	existing, held := a.keyOf[ip]
	if !held {
		return nil
	}
	if err := existing.compatible(k); err != nil {
		var others []string
		for o := range a.svcsOn[ip] {
			if o != svc {
				others = append(others, o)
			}
		}
		if len(others) > 0 {
			sort.Strings(others)
			return fmt.Errorf("can't change sharing key for %q, address also in use by %s", svc, strings.Join(others, ","))
		}
	}
	for _, p := range ports {
		if holder, ok := a.portsOn[ip][p]; ok && holder != svc {
			return fmt.Errorf("port %s is already in use on %q", p, ip)
		}
	}
	return nil
}

// quoteIPs formats addresses as MetalLB's messages do (%q of a []net.IP).
func quoteIPs(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		if ip.IsValid() {
			s[i] = ip.String()
		} else {
			s[i] = "<nil>"
		}
	}
	return fmt.Sprintf("%q", s)
}

// Assign gives r exactly ips (one pool must hold them all, admit r, and
// they must be shareable with their current holders), replacing what it
// held.
func (a *Allocator) Assign(r Request, ips []netip.Addr) error {
	p := a.PoolFor(ips)
	if p == nil {
		return fmt.Errorf("%s is not allowed in config", quoteIPs(ips))
	}
	if !p.compatible(r) {
		return fmt.Errorf("pool %s not compatible for ip assignment", p.Name)
	}
	if len(ips) > 2 {
		return fmt.Errorf("more than two addresses %s", quoteIPs(ips))
	}
	if len(ips) == 2 && familyOf(ips[0]) == familyOf(ips[1]) {
		return fmt.Errorf("%q %q has the same family", ips[0], ips[1])
	}
	k := sharing{r.SharingKey, r.BackendKey}
	for _, ip := range ips {
		if err := a.checkSharing(r.Key, ip, r.Ports, k); err != nil {
			return err
		}
	}
	a.assign(r.Key, &Allocation{IPs: slices.Clone(ips), Pool: p.Name, Ports: slices.Clone(r.Ports), key: k})
	return nil
}

func (a *Allocator) assign(svc string, al *Allocation) {
	a.Unassign(svc)
	a.bySvc[svc] = al
	for _, ip := range al.IPs {
		a.keyOf[ip] = al.key
		if a.portsOn[ip] == nil {
			a.portsOn[ip] = map[Port]string{}
		}
		for _, p := range al.Ports {
			a.portsOn[ip][p] = svc
		}
		if a.svcsOn[ip] == nil {
			a.svcsOn[ip] = map[string]bool{}
		}
		a.svcsOn[ip][svc] = true
	}
	a.account(al, 1)
}

// Unassign releases what svc holds.
func (a *Allocator) Unassign(svc string) {
	al := a.bySvc[svc]
	if al == nil {
		return
	}
	delete(a.bySvc, svc)
	for _, ip := range al.IPs {
		for _, p := range al.Ports {
			if a.portsOn[ip][p] == svc {
				delete(a.portsOn[ip], p)
			}
		}
		delete(a.svcsOn[ip], svc)
		if len(a.svcsOn[ip]) == 0 {
			delete(a.svcsOn, ip)
			delete(a.portsOn, ip)
			delete(a.keyOf, ip)
		}
	}
	a.account(al, -1)
}

// ErrNoAvailableIPs is returned when no pool has a usable address.
var ErrNoAvailableIPs = errors.New("no available IPs")

// maxScan bounds the addresses examined per range, so an IPv6 /64 pool
// does not take forever when full.
const maxScan = 1 << 20

// freeIn returns the first address of each family in p that r may hold
// (free, or shareable under r's keys), scanning the ranges in order.
func (a *Allocator) freeIn(p *Pool, r Request) (v4, v6 netip.Addr) {
	k := sharing{r.SharingKey, r.BackendKey}
	for _, rg := range p.Ranges {
		if (rg.From.Is4() && v4.IsValid()) || (!rg.From.Is4() && v6.IsValid()) {
			continue
		}
		n := 0
		for ip := rg.From; ip.IsValid() && ip.Compare(rg.To) <= 0 && n < maxScan; ip = ip.Next() {
			n++
			if p.AvoidBuggyIPs && buggy(ip) {
				continue
			}
			if a.checkSharing(r.Key, ip, r.Ports, k) != nil {
				continue
			}
			if ip.Is4() {
				v4 = ip
			} else {
				v6 = ip
			}
			break
		}
	}
	return v4, v6
}

// pick chooses the addresses for family and policy from the free ones
// (an invalid address where the family has none, as MetalLB's nil IP).
func pick(pool string, v4, v6 netip.Addr, family Family, policy corev1.IPFamilyPolicy) ([]netip.Addr, error) {
	switch family {
	case IPv4:
		return []netip.Addr{v4}, nil
	case IPv6:
		return []netip.Addr{v6}, nil
	}
	switch policy {
	case corev1.IPFamilyPolicyRequireDualStack:
		if v4.IsValid() && v6.IsValid() {
			return []netip.Addr{v4, v6}, nil
		}
	case corev1.IPFamilyPolicyPreferDualStack:
		switch {
		case v4.IsValid() && v6.IsValid():
			return []netip.Addr{v4, v6}, nil
		case v4.IsValid():
			return []netip.Addr{v4}, nil
		case v6.IsValid():
			return []netip.Addr{v6}, nil
		}
	}
	return nil, fmt.Errorf("no available IPs in pool %s for %s IPFamily", pool, family)
}

// AllocateFromPool gives r addresses of family from the named pool.
func (a *Allocator) AllocateFromPool(r Request, family Family, pool string) ([]netip.Addr, error) {
	p := a.pool(pool)
	if p == nil {
		return nil, fmt.Errorf("unknown pool %q", pool)
	}
	v4, v6 := a.freeIn(p, r)
	ips, err := pick(p.Name, v4, v6, family, r.Policy)
	if err != nil {
		return nil, err
	}
	if err := a.Assign(r, ips); err != nil {
		return nil, err
	}
	return ips, nil
}

// AllocateAdditional gives a PreferDualStack Service that holds existing
// an address of the other family from the same pool.
func (a *Allocator) AllocateAdditional(r Request, existing netip.Addr, pool string) (netip.Addr, error) {
	p := a.pool(pool)
	if p == nil {
		return netip.Addr{}, fmt.Errorf("unknown pool %q", pool)
	}
	v4, v6 := a.freeIn(p, r)
	other := IPv6
	if !existing.Is4() {
		other = IPv4
	}
	ips, err := pick(p.Name, v4, v6, other, corev1.IPFamilyPolicySingleStack)
	if err != nil {
		return netip.Addr{}, err
	}
	if err := a.Assign(r, []netip.Addr{existing, ips[0]}); err != nil {
		return netip.Addr{}, err
	}
	return ips[0], nil
}

// Allocate gives r addresses of family from the pools that admit it: first
// the pools whose serviceAllocation names r's namespace or selects it, in
// priority order (a set priority before none, lower first; then by name),
// then the auto-assign pools without a serviceAllocation, by name.
func (a *Allocator) Allocate(r Request, family Family) ([]netip.Addr, error) {
	if al := a.bySvc[r.Key]; al != nil {
		if err := a.Assign(r, al.IPs); err != nil {
			return nil, err
		}
		return al.IPs, nil
	}
	// The pools naming r's namespace, then those with service selectors
	// (a pool with both is there twice), each list by name, ordered with
	// MetalLB's comparison: set priorities first, lower first; it ranks
	// two pools without a priority both ways, so the sort leaves them in
	// the order its algorithm does, which this reproduces by sorting the
	// same list the same way.
	var byNS, bySel, open []*Pool
	for _, p := range a.pools {
		switch {
		case !p.AutoAssign:
		case p.Allocation == nil:
			open = append(open, p)
		case p.compatible(r):
			if p.Allocation.Namespaces[r.Namespace] {
				byNS = append(byNS, p)
			}
			if len(p.Allocation.ServiceSelectors) > 0 {
				bySel = append(bySel, p)
			}
		}
	}
	pinned := append(byNS, bySel...)
	sort.Slice(pinned, func(i, j int) bool {
		pi, pj := pinned[i].Allocation.Priority, pinned[j].Allocation.Priority
		switch {
		case pi > 0 && pj > 0:
			return pi < pj
		case pi == 0 && pj > 0:
			return false
		}
		return true
	})
	for _, pools := range [][]*Pool{pinned, open} {
		if ips, ok := a.allocateFrom(pools, r, family); ok {
			return ips, nil
		}
	}
	return nil, ErrNoAvailableIPs
}

// allocateFrom takes the first pool of pools with the addresses family
// needs (for PreferDualStack, the first with both, else the first with
// the primary family, else the first with the other).
func (a *Allocator) allocateFrom(pools []*Pool, r Request, family Family) ([]netip.Addr, bool) {
	var chosen, primary, secondary *Pool
	var cv4, cv6, pv4, pv6, sv4, sv6 netip.Addr
	for _, p := range pools {
		v4, v6 := a.freeIn(p, r)
		if (family == IPv4 && v4.IsValid()) || (family == IPv6 && v6.IsValid()) || (v4.IsValid() && v6.IsValid()) {
			chosen, cv4, cv6 = p, v4, v6
			break
		}
		if family != DualStack || r.Policy != corev1.IPFamilyPolicyPreferDualStack {
			continue
		}
		first, second := v4, v6
		if r.V6First {
			first, second = v6, v4
		}
		if first.IsValid() && primary == nil {
			primary, pv4, pv6 = p, v4, v6
		}
		if second.IsValid() && secondary == nil {
			secondary, sv4, sv6 = p, v4, v6
		}
	}
	switch {
	case chosen != nil:
	case primary != nil:
		chosen, cv4, cv6 = primary, pv4, pv6
	case secondary != nil:
		chosen, cv4, cv6 = secondary, sv4, sv6
	default:
		return nil, false
	}
	ips, err := pick(chosen.Name, cv4, cv6, family, r.Policy)
	if err != nil || a.Assign(r, ips) != nil {
		return nil, false
	}
	return ips, true
}
