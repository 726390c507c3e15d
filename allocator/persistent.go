package allocator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// maxCASRetries bounds the read-modify-CAS loop; reaching it means the key
// is being rewritten faster than this client can keep up.
const maxCASRetries = 1000

// persistent is a bitmap kept in a Store and changed only by CAS.
type persistent struct {
	store     Store
	rangeSpec string
	empty     func() *Bitmap

	mu     sync.Mutex // serializes this process's writers (fewer CAS conflicts)
	cached *Bitmap    // last state read or written, nil = unknown
	rev    int64
}

func (p *persistent) decode(data []byte) (*Bitmap, error) {
	b := p.empty()
	if len(data) == 0 {
		return b, nil
	}
	var ra corev1.RangeAllocation
	if err := json.Unmarshal(data, &ra); err != nil {
		return nil, fmt.Errorf("decode range allocation: %w", err)
	}
	// A snapshot of a different range (the flag changed) is dropped: Repair
	// rebuilds the bitmap from the Services at start-up.
	if ra.Range == p.rangeSpec {
		b.Restore(ra.Data)
	}
	return b, nil
}

func (p *persistent) encode(b *Bitmap) []byte {
	ra := corev1.RangeAllocation{Range: p.rangeSpec, Data: b.Snapshot()}
	ra.Kind, ra.APIVersion = "RangeAllocation", "v1"
	data, _ := json.Marshal(&ra) // cannot fail for this type
	return data
}

func (p *persistent) load(ctx context.Context) error {
	data, rev, err := p.store.Get(ctx)
	if err != nil {
		return err
	}
	b, err := p.decode(data)
	if err != nil {
		return err
	}
	p.cached, p.rev = b, rev
	return nil
}

// update applies fn to the current bitmap and stores the result with CAS,
// retrying with fresh state on conflict. fn may be called several times.
// With dryRun, fn runs on the current state and nothing is written. If fn
// returns an error nothing is written and the error is returned; fn's
// verdict is always taken on state read from the store (or written by this
// process) at that revision, never on a guess.
func (p *persistent) update(ctx context.Context, dryRun bool, fn func(*Bitmap) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	fresh := false // p.cached was just read from the store
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		if p.cached == nil || dryRun {
			if err := p.load(ctx); err != nil {
				return err
			}
			fresh = true
		}
		b := p.cached.Clone()
		if err := fn(b); err != nil {
			if fresh {
				return err
			}
			// The cached copy may be stale (another apiserver released the
			// value): decide again on what the store holds now.
			p.cached = nil
			continue
		}
		if dryRun {
			return nil
		}
		data := p.encode(b)
		var (
			newRev int64
			ok     bool
			err    error
		)
		if rs, isRS := p.store.(RevisionStore); isRS {
			newRev, ok, err = rs.CASRev(ctx, p.rev, data)
		} else {
			ok, err = p.store.CAS(ctx, p.rev, data)
		}
		if err != nil {
			p.cached = nil
			return err
		}
		if ok {
			if newRev > 0 {
				p.cached, p.rev = b, newRev
			} else {
				p.cached = nil
			}
			return nil
		}
		p.cached, fresh = nil, false
	}
	return fmt.Errorf("range allocation %s: too many concurrent updates", p.rangeSpec)
}

// current returns a copy of the stored bitmap.
func (p *persistent) current(ctx context.Context) (*Bitmap, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.load(ctx); err != nil {
		return nil, err
	}
	return p.cached.Clone(), nil
}

// IPAllocator allocates addresses of one Service CIDR, persisted in a Store.
type IPAllocator struct {
	r *IPRange
	p *persistent
}

// NewIPAllocator returns an allocator for prefix whose state lives in store.
func NewIPAllocator(prefix netip.Prefix, store Store) (*IPAllocator, error) {
	r, err := NewIPRange(prefix)
	if err != nil {
		return nil, err
	}
	return &IPAllocator{r: r, p: &persistent{store: store, rangeSpec: r.String(), empty: r.NewBitmap}}, nil
}

// Range is the allocator's range.
func (a *IPAllocator) Range() *IPRange { return a.r }

// Allocate takes ip. Errors: ErrIPAllocated when it is taken;
// ErrMismatchedNetwork when ip is outside the Service CIDR or is its network
// address or (IPv4) broadcast address — kube-apiserver 1.36 (ServiceCIDR
// allocator, no bitmap dual-write) finds no range "containing" those and
// answers with this error, never with "not in the valid range";
// *ErrIPNotInRange only for an IPv6 address past the 65535 addresses this
// bitmap covers in a range larger than /112 (kube-apiserver would accept it).
// With dryRun the check runs but nothing is stored.
func (a *IPAllocator) Allocate(ctx context.Context, ip netip.Addr, dryRun bool) error {
	i, ok := a.r.Offset(ip)
	if !ok {
		if a.r.containsAllocatable(ip) {
			return &ErrIPNotInRange{IP: ip, ValidRange: a.r.String()}
		}
		return ErrMismatchedNetwork
	}
	return a.p.update(ctx, dryRun, func(b *Bitmap) error {
		if !b.Allocate(i) {
			return ErrIPAllocated
		}
		return nil
	})
}

// AllocateNext takes a random free address, preferring the dynamic band.
// It returns ErrFull when none is left. With dryRun the address is chosen
// but not stored (another request may then get the same one).
func (a *IPAllocator) AllocateNext(ctx context.Context, dryRun bool) (netip.Addr, error) {
	var got int
	err := a.p.update(ctx, dryRun, func(b *Bitmap) error {
		i, ok := b.AllocateNext()
		if !ok {
			return ErrFull
		}
		got = i
		return nil
	})
	if err != nil {
		return netip.Addr{}, err
	}
	return a.r.Addr(got), nil
}

// Release frees ip; releasing a free or foreign address is a no-op.
func (a *IPAllocator) Release(ctx context.Context, ip netip.Addr) error {
	i, ok := a.r.Offset(ip)
	if !ok {
		return nil
	}
	return a.p.update(ctx, false, func(b *Bitmap) error { b.Release(i); return nil })
}

// Has reports whether ip is currently allocated in the store.
func (a *IPAllocator) Has(ctx context.Context, ip netip.Addr) (bool, error) {
	i, ok := a.r.Offset(ip)
	if !ok {
		return false, nil
	}
	b, err := a.p.current(ctx)
	if err != nil {
		return false, err
	}
	return b.Has(i), nil
}

// Used returns the number of allocated addresses.
func (a *IPAllocator) Used(ctx context.Context) (int, error) {
	b, err := a.p.current(ctx)
	if err != nil {
		return 0, err
	}
	return b.Used(), nil
}

// Allocated lists the allocated addresses in increasing order.
func (a *IPAllocator) Allocated(ctx context.Context) ([]netip.Addr, error) {
	b, err := a.p.current(ctx)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	b.ForEach(func(i int) { out = append(out, a.r.Addr(i)) })
	return out, nil
}

// PortAllocator allocates node ports of one range, persisted in a Store.
type PortAllocator struct {
	r PortRange
	p *persistent
}

// NewPortAllocator returns an allocator for r whose state lives in store.
func NewPortAllocator(r PortRange, store Store) *PortAllocator {
	return &PortAllocator{r: r, p: &persistent{store: store, rangeSpec: r.String(), empty: r.NewBitmap}}
}

// Range is the allocator's range.
func (a *PortAllocator) Range() PortRange { return a.r }

// Allocate takes port. Errors: *ErrPortNotInRange, ErrPortAllocated.
func (a *PortAllocator) Allocate(ctx context.Context, port int, dryRun bool) error {
	if !a.r.Contains(port) {
		return &ErrPortNotInRange{ValidRange: a.r.String()}
	}
	i := port - a.r.Base
	return a.p.update(ctx, dryRun, func(b *Bitmap) error {
		if !b.Allocate(i) {
			return ErrPortAllocated
		}
		return nil
	})
}

// AllocateNext takes a random free port, preferring the dynamic band.
func (a *PortAllocator) AllocateNext(ctx context.Context, dryRun bool) (int, error) {
	var got int
	err := a.p.update(ctx, dryRun, func(b *Bitmap) error {
		i, ok := b.AllocateNext()
		if !ok {
			return ErrFull
		}
		got = i
		return nil
	})
	if err != nil {
		return 0, err
	}
	return a.r.Base + got, nil
}

// Release frees port; a free or out-of-range port is a no-op.
func (a *PortAllocator) Release(ctx context.Context, port int) error {
	if !a.r.Contains(port) {
		return nil
	}
	i := port - a.r.Base
	return a.p.update(ctx, false, func(b *Bitmap) error { b.Release(i); return nil })
}

// Has reports whether port is currently allocated in the store.
func (a *PortAllocator) Has(ctx context.Context, port int) (bool, error) {
	if !a.r.Contains(port) {
		return false, nil
	}
	b, err := a.p.current(ctx)
	if err != nil {
		return false, err
	}
	return b.Has(port - a.r.Base), nil
}

// Used returns the number of allocated ports.
func (a *PortAllocator) Used(ctx context.Context) (int, error) {
	b, err := a.p.current(ctx)
	if err != nil {
		return 0, err
	}
	return b.Used(), nil
}

// Allocated lists the allocated ports in increasing order.
func (a *PortAllocator) Allocated(ctx context.Context) ([]int, error) {
	b, err := a.p.current(ctx)
	if err != nil {
		return nil, err
	}
	var out []int
	b.ForEach(func(i int) { out = append(out, a.r.Base+i) })
	return out, nil
}
