package lb

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"sync"
)

// rr is IPVS's round robin: each Pick moves to the next backend with a
// non-zero weight after the one chosen last.
type rr struct {
	mu   sync.Mutex
	list []*Backend
	next int
}

func (s *rr) Name() string         { return RoundRobin }
func (s *rr) Backends() []*Backend { return s.list }

func (s *rr) Pick(_ Key, skip func(*Backend) bool) *Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.list)
	for i := 0; i < n; i++ {
		b := s.list[(s.next+i)%n]
		if usable(b, skip) {
			s.next = (s.next + i + 1) % n
			return b
		}
	}
	return nil
}

// wrr is IPVS's interleaved weighted round robin (ip_vs_wrr.c): a current
// weight cw starts at the largest weight and drops by the weights' gcd after
// each pass over the list; a pass picks every backend whose weight is at
// least cw. With weights 4,3,2 a cycle of 9 picks is a a b a b c a b c: every
// backend gets exactly its weight's share per cycle, heavier backends first.
// (nginx's "smooth" variant interleaves more evenly; we keep IPVS's order so
// that userspace and IPVS modes agree on what "wrr" means.)
type wrr struct {
	mu      sync.Mutex
	list    []*Backend
	weights []int // snapshot at build time
	maxW    int
	gcd     int
	cl      int // index of the last pick, -1 before the first
	cw      int
}

func newWRR(list []*Backend) *wrr {
	s := &wrr{list: list, cl: -1}
	for _, b := range list {
		w := b.Weight
		s.weights = append(s.weights, w)
		if w > s.maxW {
			s.maxW = w
		}
		if w > 0 {
			s.gcd = gcd(s.gcd, w)
		}
	}
	return s
}

func (s *wrr) Name() string         { return WeightedRoundRobin }
func (s *wrr) Backends() []*Backend { return s.list }

func (s *wrr) Pick(_ Key, skip func(*Backend) bool) *Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.list)
	if n == 0 || s.maxW == 0 {
		return nil
	}
	// One full cycle visits every (backend, weight level) pair once; if
	// nothing is usable within it, nothing will be.
	steps := n*(s.maxW/s.gcd) + n
	for i := 0; i < steps; i++ {
		s.cl = (s.cl + 1) % n
		if s.cl == 0 {
			s.cw -= s.gcd
			if s.cw <= 0 {
				s.cw = s.maxW
			}
		}
		b := s.list[s.cl]
		if s.weights[s.cl] >= s.cw && s.weights[s.cl] > 0 && (skip == nil || !skip(b)) {
			return b
		}
	}
	return nil
}

// connSched covers lc, wlc, sed and nq: pick the usable backend that
// minimises a cost computed from its active connections and weight; ties go
// to the earlier backend in the list, as in IPVS. nq first takes any idle
// backend (no active connections), then falls back to sed.
type connSched struct {
	name      string
	list      []*Backend
	less      func(aConns, aW, bConns, bW int64) bool
	idleFirst bool
}

// lc: fewer active connections wins (weights only exclude weight-0 backends).
func lcLess(a, _, b, _ int64) bool { return a < b }

// wlc: smaller active/weight wins, compared as a*wb < b*wa.
func wlcLess(a, aw, b, bw int64) bool { return a*bw < b*aw }

// sed: smaller (active+1)/weight wins — the expected delay if this
// connection were added.
func sedLess(a, aw, b, bw int64) bool { return (a+1)*bw < (b+1)*aw }

func (s *connSched) Name() string         { return s.name }
func (s *connSched) Backends() []*Backend { return s.list }

func (s *connSched) Pick(_ Key, skip func(*Backend) bool) *Backend {
	var best *Backend
	var bestC int64
	for _, b := range s.list {
		if !usable(b, skip) {
			continue
		}
		c := b.Active()
		if s.idleFirst && c == 0 {
			return b
		}
		if best == nil || s.less(c, int64(b.Weight), bestC, int64(best.Weight)) {
			best, bestC = b, c
		}
	}
	return best
}

// hashSched is IPVS's sh/dh: a table of buckets filled by cycling over the
// backends, each taking as many consecutive buckets per round as its weight;
// a key hashes to a bucket. When the bucket's backend is skipped, the next
// buckets are tried in order (IPVS's sh-fallback), so retries are stable.
type hashSched struct {
	name    string
	list    []*Backend
	buckets []*Backend
	key     func(Key) netip.Addr
}

func newHashSched(name string, list []*Backend, size int, key func(Key) netip.Addr) *hashSched {
	if size <= 0 {
		size = 256
	}
	s := &hashSched{name: name, list: list, key: key}
	var live []*Backend
	for _, b := range list {
		if b.Weight > 0 {
			live = append(live, b)
		}
	}
	if len(live) == 0 {
		return s
	}
	s.buckets = make([]*Backend, size)
	i, left := 0, live[0].Weight
	for j := range s.buckets {
		s.buckets[j] = live[i]
		if left--; left <= 0 {
			i = (i + 1) % len(live)
			left = live[i].Weight
		}
	}
	return s
}

func (s *hashSched) Name() string         { return s.name }
func (s *hashSched) Backends() []*Backend { return s.list }

func (s *hashSched) Pick(k Key, skip func(*Backend) bool) *Backend {
	if len(s.buckets) == 0 {
		return nil
	}
	h := int(hashAddr(s.key(k)) % uint64(len(s.buckets)))
	for i := 0; i < len(s.buckets); i++ {
		b := s.buckets[(h+i)%len(s.buckets)]
		if skip == nil || !skip(b) {
			return b
		}
	}
	return nil
}

// maglev is Maglev consistent hashing (Eisenbud et al., NSDI 2016; IPVS
// "mh"): every backend has a permutation of the M table slots given by
// offset = h1(ID) mod M and skip = h2(ID) mod (M-1) + 1; backends take turns
// claiming their next free preferred slot until the table is full. A backend
// with weight w takes w/gcd turns per round. Removing one of N backends
// moves about 1/N of the keys: only the removed backend's slots change hands
// (plus a few from the refill order). Keys hash the source address.
type maglev struct {
	list  []*Backend
	table []*Backend
}

// MaglevDefaultTableSize is the default lookup table size (a prime).
const MaglevDefaultTableSize = 65537

func newMaglev(list []*Backend, m int) (*maglev, error) {
	if m <= 0 {
		m = MaglevDefaultTableSize
	}
	if !isPrime(m) {
		return nil, fmt.Errorf("maglev table size %d is not a prime", m)
	}
	s := &maglev{list: list}
	var live []*Backend
	g := 0
	for _, b := range list {
		if b.Weight > 0 {
			live = append(live, b)
			g = gcd(g, b.Weight)
		}
	}
	if len(live) == 0 {
		return s, nil
	}
	if len(live) >= m {
		return nil, fmt.Errorf("maglev table size %d must exceed the number of backends %d", m, len(live))
	}
	offset := make([]uint64, len(live))
	step := make([]uint64, len(live))
	next := make([]uint64, len(live))
	turns := make([]int, len(live))
	for i, b := range live {
		offset[i] = hashString(b.ID, 0x9e3779b97f4a7c15) % uint64(m)
		step[i] = hashString(b.ID, 0xc2b2ae3d27d4eb4f)%uint64(m-1) + 1
		turns[i] = b.Weight / g
	}
	s.table = make([]*Backend, m)
	filled := 0
	for filled < m {
		for i, b := range live {
			for t := 0; t < turns[i] && filled < m; t++ {
				c := (offset[i] + next[i]*step[i]) % uint64(m)
				for s.table[c] != nil {
					next[i]++
					c = (offset[i] + next[i]*step[i]) % uint64(m)
				}
				s.table[c] = b
				next[i]++
				filled++
			}
		}
	}
	return s, nil
}

func (s *maglev) Name() string         { return Maglev }
func (s *maglev) Backends() []*Backend { return s.list }

// Table returns the lookup table (backend per slot), for modes that program
// it into the kernel (nftables). It is nil when no backend has a weight.
func (s *maglev) Table() []*Backend { return s.table }

func (s *maglev) Pick(k Key, skip func(*Backend) bool) *Backend {
	if len(s.table) == 0 {
		return nil
	}
	h := int(hashAddr(k.Src) % uint64(len(s.table)))
	for i := 0; i < len(s.table); i++ {
		b := s.table[(h+i)%len(s.table)]
		if skip == nil || !skip(b) {
			return b
		}
	}
	return nil
}

// MaglevTable builds just the Maglev lookup table for backends, for modes
// that install it in the kernel. Slot i holds the backend that keys hashing
// to i (HashAddr(src) mod m) go to.
func MaglevTable(backends []*Backend, m int) ([]*Backend, error) {
	s, err := newMaglev(backends, m)
	if err != nil {
		return nil, err
	}
	return s.table, nil
}

// random picks uniformly among usable backends (what iptables and nftables
// modes do by default).
type random struct{ list []*Backend }

func (s *random) Name() string         { return Random }
func (s *random) Backends() []*Backend { return s.list }

func (s *random) Pick(_ Key, skip func(*Backend) bool) *Backend {
	var c []*Backend
	for _, b := range s.list {
		if usable(b, skip) {
			c = append(c, b)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[rand.IntN(len(c))]
}

// HashAddr is the key hash used by sh, dh and mh: FNV-1a over the 16-byte
// form of the address, finished with a 64-bit mixer. It is stable across
// processes and machines, so every node's proxy sends one client to the same
// backend.
func HashAddr(a netip.Addr) uint64 { return hashAddr(a) }

func hashAddr(a netip.Addr) uint64 {
	b := a.Unmap().As16()
	h := fnv.New64a()
	h.Write(b[:])
	return mix64(h.Sum64())
}

func hashString(s string, seed uint64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return mix64(h.Sum64() ^ seed)
}

// mix64 is the splitmix64 finaliser; FNV alone spreads near-identical
// strings like "10.0.0.1:80" and "10.0.0.2:80" poorly.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}
