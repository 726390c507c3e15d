package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// ErrPoolFull is returned when the pod CIDR has no free address left.
var ErrPoolFull = errors.New("no free pod IP left in the node's pod CIDR")

// IPAM hands out pod addresses from one node's pod CIDR of one family (a
// dual-stack node has one IPAM per family). The network address, the IPv4
// broadcast address and the gateway (the first host address, held by the
// bridge) are never handed out. Assignments are saved to a JSON file after
// every change, so a restarted node agent gives each pod the address it had.
// A pod asking again gets its existing address.
type IPAM struct {
	mu      sync.Mutex
	prefix  netip.Prefix
	gateway netip.Addr
	path    string // empty: in memory only
	byOwner map[string]netip.Addr
	next    netip.Addr
}

// NewIPAM loads (or starts) the assignments for prefix kept in path. An
// empty path keeps them in memory.
func NewIPAM(prefix netip.Prefix, path string) (*IPAM, error) {
	prefix = prefix.Masked()
	if (prefix.Addr().Is4() && prefix.Bits() > 30) || (prefix.Addr().Is6() && prefix.Bits() > 126) || prefix.Addr().Is4In6() {
		return nil, fmt.Errorf("pod CIDR %s: need an IPv4 prefix of /30 or larger or an IPv6 prefix of /126 or larger", prefix)
	}
	m := &IPAM{prefix: prefix, gateway: prefix.Addr().Next(), path: path, byOwner: map[string]netip.Addr{}}
	m.next = m.gateway.Next()
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("read IPAM state: %w", err)
		default:
			var saved map[string]string
			if err := json.Unmarshal(b, &saved); err != nil {
				return nil, fmt.Errorf("parse IPAM state %s: %w", path, err)
			}
			for owner, s := range saved {
				a, err := netip.ParseAddr(s)
				if err == nil && prefix.Contains(a) {
					m.byOwner[owner] = a
				}
			}
		}
	}
	return m, nil
}

// Gateway is the bridge's address in the pod CIDR.
func (m *IPAM) Gateway() netip.Addr { return m.gateway }

// Prefix is the pod CIDR.
func (m *IPAM) Prefix() netip.Prefix { return m.prefix }

// broadcast is the IPv4 broadcast address; IPv6 has none (the zero Addr).
func (m *IPAM) broadcast() netip.Addr {
	if !m.prefix.Addr().Is4() {
		return netip.Addr{}
	}
	a := m.prefix.Addr().As4()
	host := 32 - m.prefix.Bits()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= (1 << host) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Allocate returns owner's address, assigning a free one if it has none.
// Addresses are handed out round-robin so a freed one is not reused at once.
func (m *IPAM) Allocate(owner string) (netip.Addr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.byOwner[owner]; ok {
		return a, nil
	}
	used := map[netip.Addr]bool{}
	for _, a := range m.byOwner {
		used[a] = true
	}
	bc := m.broadcast()
	first := m.gateway.Next()
	a := m.next
	// One lap over the range; an IPv6 /64 is never full in practice, so
	// the search stops after 1<<20 addresses.
	for i := 0; i < 1<<min(m.prefix.Addr().BitLen()-m.prefix.Bits(), 20); i++ {
		if !m.prefix.Contains(a) || a == bc {
			a = first
		}
		if !used[a] {
			m.byOwner[owner] = a
			m.next = a.Next()
			if err := m.save(); err != nil {
				delete(m.byOwner, owner)
				return netip.Addr{}, err
			}
			return a, nil
		}
		a = a.Next()
	}
	return netip.Addr{}, ErrPoolFull
}

// Release frees owner's address; releasing an owner without one is a no-op.
func (m *IPAM) Release(owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byOwner[owner]; !ok {
		return nil
	}
	delete(m.byOwner, owner)
	return m.save()
}

// ReleaseUnused frees owner's address when nothing used it yet (setting the
// sandbox up failed before its network existed, say while a volume's
// ConfigMap is not there yet): if it was the last one handed out, the
// round-robin steps back, so the owner's next attempt gets the same address
// again. Without that, a pod whose first attempt failed took the next
// address, and the node's first pods got addresses that depended on the
// timing of their start.
func (m *IPAM) ReleaseUnused(owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.byOwner[owner]
	if !ok {
		return nil
	}
	delete(m.byOwner, owner)
	if a.Next() == m.next {
		m.next = a
	}
	return m.save()
}

// Owners lists the owners holding an address, sorted.
func (m *IPAM) Owners() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.byOwner))
	for o := range m.byOwner {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

func (m *IPAM) save() error {
	if m.path == "" {
		return nil
	}
	out := map[string]string{}
	for o, a := range m.byOwner {
		out[o] = a.String()
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	if err := os.MkdirAll(filepath.Dir(m.path), 0o755); err != nil {
		return fmt.Errorf("save IPAM state: %w", err)
	}
	tmp := m.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("save IPAM state: %w", err)
	}
	if err := os.Rename(tmp, m.path); err != nil {
		return fmt.Errorf("save IPAM state: %w", err)
	}
	return nil
}
