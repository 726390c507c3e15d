package service

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/networking"
)

// Errors of the IPAddress allocator, with kube-apiserver's texts.
var (
	ErrAllocated         = errors.New("provided IP is already allocated")
	ErrFull              = errors.New("range is full")
	ErrMismatchedNetwork = errors.New("the provided network does not match the current range")
)

// IPAddressAllocator allocates ClusterIPs as Kubernetes does since 1.33:
// an address is taken by creating the IPAddress object named by it (the
// object's existence is the allocation; creation is atomic in etcd, so
// apiservers sharing one etcd never hand out an address twice), inside any
// ready ServiceCIDR of the address's family. Creating a ServiceCIDR extends
// the range at once; a ServiceCIDR being deleted, or whose Ready condition
// is False, gives no new addresses.
type IPAddressAllocator struct {
	IPAddresses  *registry.Store
	ServiceCIDRs *registry.Store
}

// serviceCIDRReady is the allocator's readiness rule: no Ready condition
// counts as ready (a cluster without the servicecidrs controller), and a
// ServiceCIDR being deleted is not.
func serviceCIDRReady(c *networkingv1.ServiceCIDR) bool {
	if c.DeletionTimestamp != nil {
		return false
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == networkingv1.ServiceCIDRConditionReady {
			return cond.Status == metav1.ConditionTrue
		}
	}
	return true
}

// Prefixes returns the CIDRs of family of the ServiceCIDRs, sorted by
// ServiceCIDR name (the default "kubernetes" is not special); readyOnly
// keeps those that may allocate.
func (a *IPAddressAllocator) Prefixes(ctx context.Context, fam corev1.IPFamily, readyOnly bool) ([]netip.Prefix, error) {
	l, err := a.ServiceCIDRs.List(ctx, "", registry.ListOptions{})
	if err != nil {
		return nil, err
	}
	items := l.(*networkingv1.ServiceCIDRList).Items
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	var out []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for i := range items {
		if readyOnly && !serviceCIDRReady(&items[i]) {
			continue
		}
		for _, c := range items[i].Spec.CIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil || familyOf(p.Addr()) != fam || seen[p.Masked()] {
				continue
			}
			seen[p.Masked()] = true
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

func familyOf(ip netip.Addr) corev1.IPFamily {
	if ip.Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// bounds are the first and last allocatable addresses of p: not the
// network address, and for IPv4 not the broadcast address either.
func bounds(p netip.Prefix) (first, last netip.Addr) {
	first = p.Masked().Addr().Next()
	b := p.Masked().Addr().AsSlice()
	host := len(b)*8 - p.Bits()
	for i := len(b) - 1; i >= 0 && host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	last, _ = netip.AddrFromSlice(b)
	if p.Addr().Is4() {
		last = last.Prev()
	}
	return first, last
}

// prefixContains is Kubernetes' rule for "a ServiceCIDR contains an
// address": never its network address, nor an IPv4 broadcast address.
func prefixContains(p netip.Prefix, ip netip.Addr) bool {
	first, last := bounds(p)
	return !ip.Less(first) && !last.Less(ip)
}

func addrInt(ip netip.Addr) *big.Int { return new(big.Int).SetBytes(ip.AsSlice()) }

func intAddr(i *big.Int, v4 bool) netip.Addr {
	n := 16
	if v4 {
		n = 4
	}
	b := i.FillBytes(make([]byte, n))
	ip, _ := netip.AddrFromSlice(b)
	return ip
}

// staticBand is the size of the range's lower band kept for static
// allocation (KEP-3070): size/16 clamped to [16, 256], none below 16.
func staticBand(size *big.Int) *big.Int {
	lo, hi := big.NewInt(16), big.NewInt(256)
	if size.Cmp(lo) < 0 {
		return big.NewInt(0)
	}
	o := new(big.Int).Div(size, lo)
	if o.Cmp(lo) < 0 {
		return lo
	}
	if o.Cmp(hi) > 0 {
		return hi
	}
	return o
}

func newIPAddress(ip netip.Addr, svc *corev1.Service) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: ip.String(), Labels: map[string]string{
			networkingv1.LabelIPAddressFamily: string(familyOf(ip)),
			networkingv1.LabelManagedBy:       networking.ManagedByIPAllocator,
		}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{
			Group: "", Resource: "services", Namespace: svc.Namespace, Name: svc.Name}},
	}
}

func (a *IPAddressAllocator) create(ctx context.Context, ip netip.Addr, svc *corev1.Service) error {
	_, err := a.IPAddresses.Create(ctx, "", newIPAddress(ip, svc), registry.WriteOptions{FieldManager: "kube-apiserver"})
	if apierrors.IsAlreadyExists(err) {
		return ErrAllocated
	}
	return err
}

// Allocate takes ip for svc.
func (a *IPAddressAllocator) Allocate(ctx context.Context, svc *corev1.Service, ip netip.Addr, dryRun bool) error {
	prefixes, err := a.Prefixes(ctx, familyOf(ip), true)
	if err != nil {
		return err
	}
	for _, p := range prefixes {
		if !prefixContains(p, ip) {
			continue
		}
		if dryRun {
			return nil
		}
		return a.create(ctx, ip, svc)
	}
	return ErrMismatchedNetwork
}

// AllocateNext takes a free address of family fam for svc: a random
// start in the upper (dynamic) band of each ready range, then the lower
// band, as kube-apiserver. A dry run finds nothing and returns the first
// range's network address, as kube-apiserver's dry-run allocator does.
func (a *IPAddressAllocator) AllocateNext(ctx context.Context, svc *corev1.Service, fam corev1.IPFamily, dryRun bool) (netip.Addr, error) {
	prefixes, err := a.Prefixes(ctx, fam, true)
	if err != nil {
		return netip.Addr{}, err
	}
	if dryRun && len(prefixes) > 0 {
		return prefixes[0].Masked().Addr(), nil
	}
	// Fast path: in a sparsely used range a random address of the upper
	// band is almost always free, and creating its IPAddress is the whole
	// allocation (one etcd write). Only when randomTries picks in a row
	// are taken is the used set listed below; listing (and decoding) every
	// IPAddress on each allocation made concurrent creates quadratic.
	for _, p := range prefixes {
		first, last := bounds(p)
		lo, hi := addrInt(first), addrInt(last)
		size := new(big.Int).Add(new(big.Int).Sub(hi, lo), big.NewInt(1))
		if size.Sign() <= 0 {
			continue
		}
		upper := new(big.Int).Add(lo, staticBand(size))
		n := new(big.Int).Add(new(big.Int).Sub(hi, upper), big.NewInt(1))
		if n.Sign() <= 0 {
			continue
		}
		for range randomTries {
			off := new(big.Int)
			if n.IsInt64() {
				off.SetInt64(rand.Int64N(n.Int64()))
			} else {
				// 128 random bits modulo n: an IPv6 range larger than an int64.
				off.SetUint64(rand.Uint64()).Lsh(off, 64).Or(off, new(big.Int).SetUint64(rand.Uint64())).Mod(off, n)
			}
			ip := intAddr(off.Add(off, upper), p.Addr().Is4())
			err := a.create(ctx, ip, svc)
			if err == nil {
				return ip, nil
			}
			if !errors.Is(err, ErrAllocated) {
				return netip.Addr{}, err
			}
		}
	}
	used := map[netip.Addr]bool{}
	if len(prefixes) > 0 {
		l, err := a.IPAddresses.List(ctx, "", registry.ListOptions{})
		if err != nil {
			return netip.Addr{}, err
		}
		for _, it := range l.(*networkingv1.IPAddressList).Items {
			if ip, err := netip.ParseAddr(it.Name); err == nil {
				used[ip] = true
			}
		}
	}
	for _, p := range prefixes {
		first, last := bounds(p)
		lo, hi := addrInt(first), addrInt(last)
		size := new(big.Int).Add(new(big.Int).Sub(hi, lo), big.NewInt(1))
		if size.Sign() <= 0 {
			continue
		}
		band := staticBand(size)
		upperStart := new(big.Int).Add(lo, band)
		for _, r := range [][2]*big.Int{{upperStart, hi}, {lo, new(big.Int).Sub(upperStart, big.NewInt(1))}} {
			ip, err := a.scan(ctx, svc, r[0], r[1], p.Addr().Is4(), used)
			if err == nil {
				return ip, nil
			}
			if !errors.Is(err, ErrFull) {
				return netip.Addr{}, err
			}
		}
	}
	return netip.Addr{}, ErrFull
}

// randomTries is how many random addresses AllocateNext tries per range
// before it lists the used ones: at a range 90% full, 16 tries still
// succeed 81% of the time, and a failed try (a create refused by etcd's
// transaction) costs far less than listing and decoding tens of thousands
// of IPAddresses.
const randomTries = 16

// scan tries the addresses of [from, to] from a random one on, wrapping
// around, skipping those known used; creation decides (another apiserver
// may have taken one since the list).
func (a *IPAddressAllocator) scan(ctx context.Context, svc *corev1.Service, from, to *big.Int, v4 bool, used map[netip.Addr]bool) (netip.Addr, error) {
	n := new(big.Int).Add(new(big.Int).Sub(to, from), big.NewInt(1))
	if n.Sign() <= 0 {
		return netip.Addr{}, ErrFull
	}
	start := new(big.Int)
	if n.IsInt64() {
		start.SetInt64(rand.Int64N(n.Int64()))
	} else {
		start.SetUint64(rand.Uint64())
	}
	// Only as many tries as there are addresses (bounded for huge IPv6
	// ranges, whose free space is effectively never exhausted).
	tries := int64(1 << 20)
	if n.IsInt64() && n.Int64() < tries {
		tries = n.Int64()
	}
	one := big.NewInt(1)
	cur := new(big.Int).Add(from, start)
	for i := int64(0); i < tries; i++ {
		ip := intAddr(cur, v4)
		if !used[ip] {
			err := a.create(ctx, ip, svc)
			if err == nil {
				return ip, nil
			}
			if !errors.Is(err, ErrAllocated) {
				return netip.Addr{}, err
			}
			used[ip] = true
		}
		cur.Add(cur, one)
		if cur.Cmp(to) > 0 {
			cur.Set(from)
		}
	}
	return netip.Addr{}, ErrFull
}

// Release deletes the IPAddress of ip (gone already is fine).
func (a *IPAddressAllocator) Release(ctx context.Context, ip netip.Addr) error {
	_, _, err := a.IPAddresses.Delete(ctx, "", ip.String(), registry.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release %s: %w", ip, err)
	}
	return nil
}
