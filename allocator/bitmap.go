// Package allocator hands out Service ClusterIPs and NodePorts the way
// kube-apiserver does, and keeps the allocation state in etcd.
//
// The pieces, from the bottom up:
//
//   - Bitmap: a pure, snapshot-able set of allocated offsets 0..max-1 with
//     Kubernetes' static/dynamic split: automatic allocation picks a random
//     free offset in the upper "dynamic" band first and only falls back to
//     the lower "static" band (left for users who pick values by hand) when
//     the upper band is full.
//   - IPRange and PortRange map addresses and ports to offsets (for IPv4 the
//     network and broadcast addresses are never allocatable; for IPv6 the
//     subnet-router address is not, and the bitmap covers at most 65536
//     addresses) and compute the static band size with kube-apiserver's
//     formulas.
//   - Store is one compare-and-swap primitive over a serialized bitmap
//     (EtcdStore on go.etcd.io/etcd/client/v3, MemoryStore for tests).
//   - IPAllocator and PortAllocator apply every change as read → modify →
//     CAS, retried on conflict, so several apiservers sharing one etcd never
//     hand out the same value. A crash between an allocation and the write of
//     the Service leaks the value (until Repair frees it), never
//     double-allocates it.
//   - Repair rebuilds the stored bitmap from the Services that exist, frees
//     leaks (after they were seen leaked on several consecutive runs, so an
//     allocation in flight on another apiserver is not freed) and reports
//     conflicts through a callback so the caller can emit Events.
package allocator

import (
	"math/big"
	"math/rand/v2"
)

// Bitmap is a set of allocated offsets in [0, max). It is not safe for
// concurrent use; the persistent allocators serialize access to it.
type Bitmap struct {
	max    int
	offset int // size of the static band at the bottom; 0 = no split
	count  int
	bits   *big.Int
}

// NewBitmap returns an empty bitmap of max offsets whose lowest offset
// values form the static band. offset is clamped to [0, max].
func NewBitmap(max, offset int) *Bitmap {
	if offset < 0 || offset > max {
		offset = 0
	}
	return &Bitmap{max: max, offset: offset, bits: new(big.Int)}
}

// Max is the number of offsets the bitmap covers.
func (b *Bitmap) Max() int { return b.max }

// Used is the number of allocated offsets.
func (b *Bitmap) Used() int { return b.count }

// Free is the number of unallocated offsets.
func (b *Bitmap) Free() int { return b.max - b.count }

// Has reports whether offset i is allocated (false when out of range).
func (b *Bitmap) Has(i int) bool {
	return i >= 0 && i < b.max && b.bits.Bit(i) == 1
}

// Allocate marks offset i allocated. It returns false if i is out of range
// or already allocated.
func (b *Bitmap) Allocate(i int) bool {
	if i < 0 || i >= b.max || b.bits.Bit(i) == 1 {
		return false
	}
	b.bits.SetBit(b.bits, i, 1)
	b.count++
	return true
}

// AllocateNext picks a random free offset, preferring the dynamic band
// [offset, max) and using the static band [0, offset) only when the dynamic
// band is full. It returns false when every offset is allocated.
func (b *Bitmap) AllocateNext() (int, bool) {
	if b.count >= b.max {
		return 0, false
	}
	if i, ok := b.scan(b.offset, b.max); ok {
		return i, true
	}
	return b.scan(0, b.offset)
}

// scan looks for a free offset in [lo, hi) starting at a random position
// and wrapping around, and allocates it.
func (b *Bitmap) scan(lo, hi int) (int, bool) {
	n := hi - lo
	if n <= 0 {
		return 0, false
	}
	start := rand.IntN(n)
	for k := 0; k < n; k++ {
		i := lo + (start+k)%n
		if b.bits.Bit(i) == 0 {
			b.bits.SetBit(b.bits, i, 1)
			b.count++
			return i, true
		}
	}
	return 0, false
}

// Release frees offset i. Releasing a free or out-of-range offset is a no-op.
func (b *Bitmap) Release(i int) {
	if !b.Has(i) {
		return
	}
	b.bits.SetBit(b.bits, i, 0)
	b.count--
}

// ForEach calls fn for every allocated offset in increasing order.
func (b *Bitmap) ForEach(fn func(int)) {
	for i := 0; i < b.bits.BitLen(); i++ {
		if b.bits.Bit(i) == 1 {
			fn(i)
		}
	}
}

// Snapshot returns the allocated set as bytes (big-endian bit vector, as
// Kubernetes' RangeAllocation.data).
func (b *Bitmap) Snapshot() []byte { return b.bits.Bytes() }

// Restore replaces the allocated set with a Snapshot's bytes. Offsets at or
// beyond Max (a snapshot of a larger range) are dropped.
func (b *Bitmap) Restore(data []byte) {
	bits := new(big.Int).SetBytes(data)
	b.bits = new(big.Int)
	b.count = 0
	for i := 0; i < bits.BitLen() && i < b.max; i++ {
		if bits.Bit(i) == 1 {
			b.bits.SetBit(b.bits, i, 1)
			b.count++
		}
	}
}

// Clone returns an independent copy.
func (b *Bitmap) Clone() *Bitmap {
	return &Bitmap{max: b.max, offset: b.offset, count: b.count, bits: new(big.Int).Set(b.bits)}
}
