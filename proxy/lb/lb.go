// Package lb holds the load-balancing algorithms shared by every proxy mode
// that can use them: the IPVS schedulers rr, wrr, lc, wlc, sh, dh, sed and nq,
// Maglev consistent hashing (IPVS calls it mh), and random.
//
// The package is pure: no I/O, no clocks, no goroutines. A mode builds one
// Scheduler per Service port from the current endpoint set with New, and asks
// it for a backend per new connection with Pick. Connection-counting
// schedulers (lc, wlc, sed, nq) read the active-connection counters that the
// caller keeps on each Backend with Acquire and Release; because the counters
// live on the Backend, a mode that rebuilds the Scheduler after an endpoint
// change keeps the counts by reusing the same *Backend values.
//
// Weights follow IPVS: the default weight is 1 (as in Kubernetes, which sets
// every IPVS real server to weight 1), weight 0 means "quiesced" — the backend
// gets no new connections but its established ones are untouched — and a
// scheduler whose backends all have weight 0 picks nothing. Only wrr, wlc,
// sed, nq, sh, dh and mh look at weights; rr and lc treat every backend with a
// non-zero weight alike, as IPVS does.
//
// Scheduler names are the IPVS ones, as given in the Service annotation
// service.kubernetes.io/ipvs-scheduler or the --ipvs-scheduler flag. Resolve
// maps an unknown name to the default and says so, so that the caller can
// emit an Event.
package lb

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Scheduler names, spelled as IPVS spells them.
const (
	RoundRobin                = "rr"
	WeightedRoundRobin        = "wrr"
	LeastConnection           = "lc"
	WeightedLeastConnection   = "wlc"
	SourceHashing             = "sh"
	DestinationHashing        = "dh"
	ShortestExpectedDelay     = "sed"
	NeverQueue                = "nq"
	Maglev                    = "mh"
	Random                    = "random"
	DefaultScheduler          = RoundRobin
	SchedulerAnnotation       = "service.kubernetes.io/ipvs-scheduler"
	WeightAnnotation          = "svcnet.io/weight"
	EndpointWeightsAnnotation = "svcnet.io/endpoint-weights"
	// MaxWeight is the largest weight IPVS accepts for a real server.
	MaxWeight = 65535
)

// Names lists every scheduler New accepts, sorted.
func Names() []string {
	n := []string{RoundRobin, WeightedRoundRobin, LeastConnection, WeightedLeastConnection,
		SourceHashing, DestinationHashing, ShortestExpectedDelay, NeverQueue, Maglev, Random}
	sort.Strings(n)
	return n
}

// Known reports whether name is a scheduler New accepts. "maglev" is an
// accepted alias of "mh".
func Known(name string) bool {
	switch canonical(name) {
	case RoundRobin, WeightedRoundRobin, LeastConnection, WeightedLeastConnection,
		SourceHashing, DestinationHashing, ShortestExpectedDelay, NeverQueue, Maglev, Random:
		return true
	}
	return false
}

// Canonical is name as the schedulers spell it: lower case, without
// surrounding blanks, "maglev" as "mh".
func Canonical(name string) string { return canonical(name) }

// UsesWeights reports whether the (canonical) scheduler name balances by
// endpoint weight: wrr, wlc, sed, nq, sh, dh and mh here, and IPVS's own
// weighted schedulers lblc, lblcr, fo, ovf and twos. The others (rr, lc,
// random) only skip weight 0.
func UsesWeights(name string) bool {
	switch name {
	case WeightedRoundRobin, WeightedLeastConnection, ShortestExpectedDelay, NeverQueue,
		SourceHashing, DestinationHashing, Maglev, "lblc", "lblcr", "fo", "ovf", "twos":
		return true
	}
	return false
}

func canonical(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "maglev" {
		return Maglev
	}
	return name
}

// Resolve picks the scheduler for a Service: the annotation value if it names
// a known scheduler, else def (itself resolved to rr if unknown or empty). If
// annotation is non-empty but unknown, fellBack is true and the caller should
// report it (kube-proxy-style Event reason "UnknownScheduler" or similar).
func Resolve(annotation, def string) (name string, fellBack bool) {
	if !Known(def) {
		def = DefaultScheduler
	}
	def = canonical(def)
	if annotation == "" {
		return def, false
	}
	if Known(annotation) {
		return canonical(annotation), false
	}
	return def, true
}

// Backend is one endpoint as the schedulers see it. Its identity is ID (by
// convention "ip:port"); Addr is used by nothing here but kept for the
// caller's convenience. The active-connection counter is safe for concurrent
// use.
type Backend struct {
	ID     string
	Addr   netip.AddrPort
	Weight int

	active atomic.Int64
}

// NewBackend returns a Backend for addr with the given weight; a weight below
// zero is treated as the default 1.
func NewBackend(addr netip.AddrPort, weight int) *Backend {
	if weight < 0 {
		weight = 1
	}
	if weight > MaxWeight {
		weight = MaxWeight
	}
	return &Backend{ID: addr.String(), Addr: addr, Weight: weight}
}

// Acquire records one more active connection on b.
func (b *Backend) Acquire() { b.active.Add(1) }

// Release records the end of one active connection on b. It never lets the
// count go below zero.
func (b *Backend) Release() {
	for {
		v := b.active.Load()
		if v <= 0 || b.active.CompareAndSwap(v, v-1) {
			return
		}
	}
}

// Active returns the number of active connections recorded on b.
func (b *Backend) Active() int64 { return b.active.Load() }

// Key is what a connection offers to the hashing schedulers: sh and mh hash
// Src, dh hashes Dst (the original destination address, which for a Service
// is its ClusterIP/NodeIP/external IP, so every client of one address lands
// on the same backend — IPVS's dh is meant for caches addressed by many
// destination IPs). Non-hashing schedulers ignore it.
type Key struct {
	Src netip.Addr
	Dst netip.Addr
}

// Scheduler chooses a backend for a new connection. Implementations are safe
// for concurrent use.
type Scheduler interface {
	// Name returns the IPVS name of the algorithm.
	Name() string
	// Pick returns the backend for a new connection with key k, skipping
	// every backend for which skip returns true (skip may be nil). It returns
	// nil when no backend with a non-zero weight is left. Hashing schedulers
	// fall back to the next backend in their table order when the hashed one
	// is skipped, so a retry stays deterministic for a given key.
	Pick(k Key, skip func(*Backend) bool) *Backend
	// Backends returns the backends the scheduler was built from, in order.
	Backends() []*Backend
}

// Options tune schedulers; the zero value gives the defaults.
type Options struct {
	// MaglevTableSize is the lookup table size M of mh; it must be a prime
	// larger than the number of backends (65537 by default, as in Google's
	// Maglev paper for small sets; tests use 251).
	MaglevTableSize int
	// HashBuckets is the number of buckets of sh and dh (256 by default, as
	// IPVS).
	HashBuckets int
}

// New builds the named scheduler over backends (order matters for
// tie-breaking and for rr's cycle; callers should sort by ID for stable
// results across rebuilds). It returns an error for an unknown name.
func New(name string, backends []*Backend, opt Options) (Scheduler, error) {
	bs := append([]*Backend(nil), backends...)
	switch canonical(name) {
	case RoundRobin:
		return &rr{list: bs}, nil
	case WeightedRoundRobin:
		return newWRR(bs), nil
	case LeastConnection:
		return &connSched{name: LeastConnection, list: bs, less: lcLess}, nil
	case WeightedLeastConnection:
		return &connSched{name: WeightedLeastConnection, list: bs, less: wlcLess}, nil
	case ShortestExpectedDelay:
		return &connSched{name: ShortestExpectedDelay, list: bs, less: sedLess}, nil
	case NeverQueue:
		return &connSched{name: NeverQueue, list: bs, less: sedLess, idleFirst: true}, nil
	case SourceHashing:
		return newHashSched(SourceHashing, bs, opt.HashBuckets, func(k Key) netip.Addr { return k.Src }), nil
	case DestinationHashing:
		return newHashSched(DestinationHashing, bs, opt.HashBuckets, func(k Key) netip.Addr { return k.Dst }), nil
	case Maglev:
		return newMaglev(bs, opt.MaglevTableSize)
	case Random:
		return &random{list: bs}, nil
	}
	return nil, fmt.Errorf("unknown scheduler %q (known: %s)", name, strings.Join(Names(), ", "))
}

// ParseWeight parses a svcnet.io/weight annotation value: an integer 0..65535.
// An empty value means the default weight 1.
func ParseWeight(v string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 1, nil
	}
	w, err := strconv.Atoi(v)
	if err != nil {
		return 1, fmt.Errorf("%s: %q is not an integer", WeightAnnotation, v)
	}
	if w < 0 || w > MaxWeight {
		return 1, fmt.Errorf("%s: %d is out of range 0..%d", WeightAnnotation, w, MaxWeight)
	}
	return w, nil
}

// ParseEndpointWeights parses the svcnet.io/endpoint-weights annotation that
// the EndpointSlice controller copies onto a slice from its pods'
// svcnet.io/weight annotations: a comma-separated list of "IP=weight"
// entries, for example "10.244.1.5=3,10.244.2.7=0". Endpoints not listed have
// weight 1. Malformed entries are skipped and reported together in the error;
// the well-formed entries are still returned.
func ParseEndpointWeights(v string) (map[netip.Addr]int, error) {
	out := map[netip.Addr]int{}
	var bad []string
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		ip, w, ok := strings.Cut(item, "=")
		if !ok {
			bad = append(bad, item)
			continue
		}
		addr, err := netip.ParseAddr(strings.TrimSpace(ip))
		if err != nil {
			bad = append(bad, item)
			continue
		}
		weight, err := ParseWeight(w)
		if err != nil {
			bad = append(bad, item)
			continue
		}
		out[addr.Unmap()] = weight
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%s: malformed entries %q", EndpointWeightsAnnotation, bad)
	}
	return out, nil
}

// FormatEndpointWeights is the inverse of ParseEndpointWeights, with entries
// sorted by address; weights equal to 1 are left out. It returns "" when no
// entry is needed.
func FormatEndpointWeights(w map[netip.Addr]int) string {
	addrs := make([]netip.Addr, 0, len(w))
	for a, v := range w {
		if v != 1 {
			addrs = append(addrs, a)
		}
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = a.String() + "=" + strconv.Itoa(w[a])
	}
	return strings.Join(parts, ",")
}

func usable(b *Backend, skip func(*Backend) bool) bool {
	return b.Weight > 0 && (skip == nil || !skip(b))
}
