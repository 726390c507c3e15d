package allocator

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
)

// Errors with kube-apiserver's wording. The registry wraps them as
// "failed to allocate IP <ip>: <err>" on spec.clusterIPs.
var (
	// ErrFull: no free value left in the range.
	ErrFull = errors.New("range is full")
	// ErrIPAllocated: the requested IP is taken.
	ErrIPAllocated = errors.New("provided IP is already allocated")
	// ErrPortAllocated: the requested port is taken.
	ErrPortAllocated = errors.New("provided port is already allocated")
	// ErrMismatchedNetwork: the requested IP is outside every configured range.
	ErrMismatchedNetwork = errors.New("the provided network does not match the current range")
)

// ErrIPNotInRange is returned for a requested address inside the Service
// CIDR that is never allocatable (the network address, the IPv4 broadcast
// address, or beyond the 65536 addresses an IPv6 bitmap covers).
type ErrIPNotInRange struct {
	IP         netip.Addr
	ValidRange string
}

func (e *ErrIPNotInRange) Error() string {
	return fmt.Sprintf("the provided IP (%v) is not in the valid range. The range of valid IPs is %s", e.IP, e.ValidRange)
}

// ErrPortNotInRange is returned for a requested port outside the node-port range.
type ErrPortNotInRange struct{ ValidRange string }

func (e *ErrPortNotInRange) Error() string {
	return "provided port is not in the valid range. The range of valid ports is " + e.ValidRange
}

// IPRange maps the allocatable addresses of a Service CIDR to bitmap offsets.
type IPRange struct {
	prefix netip.Prefix
	base   *big.Int // first allocatable address as an integer
	size   int      // number of allocatable addresses (bitmap size)
	offset int      // static band size
}

// NewIPRange returns the range for a Service CIDR such as 10.96.0.0/16 or
// fd00:10:96::/112. The first address (network / subnet-router anycast) is
// never allocatable, nor the IPv4 broadcast address; IPv6 ranges are capped
// at 65536 addresses as in Kubernetes. A range with fewer than one
// allocatable address is an error.
func NewIPRange(prefix netip.Prefix) (*IPRange, error) {
	prefix = prefix.Masked()
	if !prefix.IsValid() {
		return nil, fmt.Errorf("invalid service CIDR %v", prefix)
	}
	hostBits := prefix.Addr().BitLen() - prefix.Bits()
	total := new(big.Int).Lsh(big.NewInt(1), uint(hostBits))
	max := total
	if prefix.Addr().Is6() {
		if max.Cmp(big.NewInt(65536)) > 0 {
			max = big.NewInt(65536)
		}
	} else {
		max = new(big.Int).Sub(max, big.NewInt(1)) // broadcast
	}
	max = new(big.Int).Sub(max, big.NewInt(1)) // network address
	if max.Sign() <= 0 {
		return nil, fmt.Errorf("service CIDR %v is too small: no allocatable address", prefix)
	}
	base := new(big.Int).Add(new(big.Int).SetBytes(prefix.Addr().AsSlice()), big.NewInt(1))
	return &IPRange{prefix: prefix, base: base, size: int(max.Int64()), offset: ipStaticBand(total)}, nil
}

// ipStaticBand is kube-apiserver's min(max(16, cidrSize/16), 256), and 0
// for CIDRs of 16 addresses or fewer.
func ipStaticBand(cidrSize *big.Int) int {
	const lo, hi, step = 16, 256, 16
	if cidrSize.Cmp(big.NewInt(lo)) <= 0 {
		return 0
	}
	off := new(big.Int).Div(cidrSize, big.NewInt(step))
	if off.Cmp(big.NewInt(lo)) < 0 {
		return lo
	}
	if off.Cmp(big.NewInt(hi)) > 0 {
		return hi
	}
	return int(off.Int64())
}

// Prefix is the Service CIDR.
func (r *IPRange) Prefix() netip.Prefix { return r.prefix }

// Size is the number of allocatable addresses.
func (r *IPRange) Size() int { return r.size }

// StaticBand is the number of low offsets that automatic allocation uses
// only when the rest of the range is full.
func (r *IPRange) StaticBand() int { return r.offset }

// Offset returns the bitmap offset of ip, or ok=false when ip is not an
// allocatable address of the range.
func (r *IPRange) Offset(ip netip.Addr) (int, bool) {
	ip = ip.Unmap()
	if !r.prefix.Contains(ip) {
		return 0, false
	}
	d := new(big.Int).Sub(new(big.Int).SetBytes(ip.AsSlice()), r.base)
	if d.Sign() < 0 || d.Cmp(big.NewInt(int64(r.size))) >= 0 {
		return 0, false
	}
	return int(d.Int64()), true
}

// containsAllocatable reports whether ip is in the prefix and is neither its
// network address nor, for IPv4, its broadcast address (the addresses a
// ServiceCIDR never hands out).
func (r *IPRange) containsAllocatable(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !r.prefix.Contains(ip) || ip == r.prefix.Addr() {
		return false
	}
	if ip.Is4() {
		v := new(big.Int).SetBytes(ip.AsSlice())
		last := new(big.Int).Add(new(big.Int).SetBytes(r.prefix.Addr().AsSlice()),
			new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(32-r.prefix.Bits())), big.NewInt(1)))
		return v.Cmp(last) != 0
	}
	return true
}

// Addr returns the address at bitmap offset i.
func (r *IPRange) Addr(i int) netip.Addr {
	v := new(big.Int).Add(r.base, big.NewInt(int64(i)))
	n := r.prefix.Addr().BitLen() / 8
	buf := make([]byte, n)
	v.FillBytes(buf)
	a, _ := netip.AddrFromSlice(buf)
	return a
}

// NewBitmap returns an empty bitmap sized for this range.
func (r *IPRange) NewBitmap() *Bitmap { return NewBitmap(r.size, r.offset) }

// String is the CIDR, as stored in the range allocation.
func (r *IPRange) String() string { return r.prefix.String() }

// PortRange is a node-port range such as 30000-32767 (both ends included).
type PortRange struct {
	Base, Size int
}

// ParsePortRange parses "30000-32767" (or a single port "30000").
func ParsePortRange(s string) (PortRange, error) {
	s = strings.TrimSpace(s)
	lo, hi, found := strings.Cut(s, "-")
	b, err := strconv.Atoi(lo)
	if err != nil {
		return PortRange{}, fmt.Errorf("invalid port range %q: %w", s, err)
	}
	e := b
	if found {
		if e, err = strconv.Atoi(hi); err != nil {
			return PortRange{}, fmt.Errorf("invalid port range %q: %w", s, err)
		}
	}
	if b < 1 || e > 65535 || e < b {
		return PortRange{}, fmt.Errorf("invalid port range %q: must be within 1-65535 with start <= end", s)
	}
	return PortRange{Base: b, Size: e - b + 1}, nil
}

// String renders the range as "30000-32767".
func (r PortRange) String() string {
	if r.Size == 0 {
		return ""
	}
	return fmt.Sprintf("%d-%d", r.Base, r.Base+r.Size-1)
}

// Contains reports whether port is in the range.
func (r PortRange) Contains(port int) bool { return port >= r.Base && port < r.Base+r.Size }

// StaticBand is kube-apiserver's min(max(16, size/32), 128), and 0 for
// ranges of 16 ports or fewer.
func (r PortRange) StaticBand() int {
	const lo, hi, step = 16, 128, 32
	if r.Size <= lo {
		return 0
	}
	off := r.Size / step
	if off < lo {
		return lo
	}
	if off > hi {
		return hi
	}
	return off
}

// NewBitmap returns an empty bitmap sized for this range.
func (r PortRange) NewBitmap() *Bitmap { return NewBitmap(r.Size, r.StaticBand()) }
