// Package forward sends questions outside the cluster zone to upstream
// resolvers and caches their answers.
//
// A question goes to the upstreams in order until one answers: over UDP
// first (or TCP when the client asked over TCP), and again over TCP when the
// UDP answer comes back truncated. The request is forwarded with its EDNS0
// options; a request without EDNS0 is given a 1232-byte EDNS0 buffer
// upstream so that most answers fit in one datagram, and the OPT record is
// removed again before the answer goes back.
//
// The cache keeps positive answers for their smallest TTL (at most MaxTTL)
// and NXDOMAIN/NODATA answers for the SOA minimum (at most MaxDenialTTL);
// SERVFAIL, REFUSED and truncated answers are not cached. Cached answers are
// served with their TTLs decreased by the time spent in the cache. Like
// kubeadm's CoreDNS ("cache 30"), with the cache on every forwarded answer
// leaves with its TTLs capped at 30 seconds, cached or not; with the cache
// off (size 0) answers keep the upstream's TTLs.
package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Defaults.
const (
	DefaultTimeout      = 2 * time.Second
	DefaultCacheSize    = 10000
	MaxTTL              = 30 * time.Second
	MaxDenialTTL        = 30 * time.Second
	upstreamEDNSBufSize = 1232
)

// ErrNoUpstream is returned when no upstream answered.
var ErrNoUpstream = errors.New("no upstream answered")

// CacheObserver is told about every cache lookup (for metrics). kind is
// "success" or "denial" for hits.
type CacheObserver interface {
	CacheHit(kind string)
	CacheMiss()
}

// Forwarder is safe for concurrent use.
type Forwarder struct {
	upstreams []string
	timeout   time.Duration
	cache     *Cache
	obs       CacheObserver
}

// New returns a Forwarder for upstreams (host:port; a bare host gets port
// 53). cacheSize 0 disables the cache. obs may be nil.
func New(upstreams []string, timeout time.Duration, cacheSize int, obs CacheObserver) (*Forwarder, error) {
	if len(upstreams) == 0 {
		return nil, errors.New("forward: no upstream resolvers")
	}
	f := &Forwarder{timeout: timeout, obs: obs}
	if f.timeout <= 0 {
		f.timeout = DefaultTimeout
	}
	for _, u := range upstreams {
		if _, _, err := net.SplitHostPort(u); err != nil {
			u = net.JoinHostPort(strings.Trim(u, "[]"), "53")
		}
		if _, _, err := net.SplitHostPort(u); err != nil {
			return nil, fmt.Errorf("forward: bad upstream %q: %w", u, err)
		}
		f.upstreams = append(f.upstreams, u)
	}
	if cacheSize > 0 {
		f.cache = NewCache(cacheSize)
	}
	return f, nil
}

// Upstreams returns the upstream addresses in use.
func (f *Forwarder) Upstreams() []string { return append([]string(nil), f.upstreams...) }

// FromResolvConf returns the nameservers of a resolv.conf file.
func FromResolvConf(path string) ([]string, error) {
	cc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var out []string
	for _, s := range cc.Servers {
		out = append(out, net.JoinHostPort(s, cc.Port))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no nameserver", path)
	}
	return out, nil
}

// Exchange answers req from the cache or the upstreams. tcp says the client
// asked over TCP. The answer carries req's ID. Cache hits report cached=true.
func (f *Forwarder) Exchange(ctx context.Context, req *dns.Msg, tcp bool) (resp *dns.Msg, cached bool, err error) {
	if len(req.Question) != 1 {
		return nil, false, errors.New("forward: need exactly one question")
	}
	var k string
	if f.cache != nil {
		k = cacheKey(req)
		if m, kind, ok := f.cache.Get(k, time.Now()); ok {
			if f.obs != nil {
				f.obs.CacheHit(kind)
			}
			m.Id = req.Id
			m.Question = req.Question
			return m, true, nil
		}
		if f.obs != nil {
			f.obs.CacheMiss()
		}
	}
	up := req.Copy()
	hadEDNS := up.IsEdns0() != nil
	if !hadEDNS {
		up.SetEdns0(upstreamEDNSBufSize, false)
	}
	resp, err = f.exchange(ctx, up, tcp)
	if err != nil {
		return nil, false, err
	}
	if !hadEDNS {
		stripOPT(resp)
	}
	resp.Id = req.Id
	if f.cache != nil {
		// The cap belongs to the cache (CoreDNS's "cache 30"): without
		// one, upstream answers pass with their own TTLs.
		capTTL(resp, uint32(MaxTTL/time.Second))
		f.cache.Put(k, resp, time.Now())
	}
	return resp, false, nil
}

func (f *Forwarder) exchange(ctx context.Context, req *dns.Msg, tcp bool) (*dns.Msg, error) {
	var errs []error
	for _, u := range f.upstreams {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		proto := "udp"
		if tcp {
			proto = "tcp"
		}
		r, err := f.once(ctx, req, u, proto)
		if err == nil && r.Truncated && proto == "udp" {
			r, err = f.once(ctx, req, u, "tcp")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		return r, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrNoUpstream, errors.Join(errs...))
}

func (f *Forwarder) once(ctx context.Context, req *dns.Msg, addr, proto string) (*dns.Msg, error) {
	c := &dns.Client{Net: proto, Timeout: f.timeout, UDPSize: 65535}
	r, _, err := c.ExchangeContext(ctx, req, addr)
	if err != nil {
		return nil, err
	}
	if r.Id != req.Id {
		return nil, errors.New("answer ID mismatch")
	}
	return r, nil
}

// Lookup resolves name/qtype through the upstreams (and the cache), as a
// recursive client would ask; it implements zone.Upstream.
func (f *Forwarder) Lookup(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := f.Exchange(ctx, m, false)
	return r, err
}

// capTTL lowers every TTL above max to max.
func capTTL(m *dns.Msg, max uint32) {
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if h := rr.Header(); h.Rrtype != dns.TypeOPT && h.Ttl > max {
				h.Ttl = max
			}
		}
	}
}

func stripOPT(m *dns.Msg) {
	out := m.Extra[:0]
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	m.Extra = out
}

func cacheKey(req *dns.Msg) string {
	q := req.Question[0]
	do := false
	if o := req.IsEdns0(); o != nil {
		do = o.Do()
	}
	return fmt.Sprintf("%s/%d/%d/%t/%t", strings.ToLower(q.Name), q.Qtype, q.Qclass, do, req.CheckingDisabled)
}

// Cache is a bounded response cache; when full, an arbitrary entry is
// evicted. Safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	max   int
	items map[string]cacheItem
}

type cacheItem struct {
	msg     *dns.Msg
	stored  time.Time
	expires time.Time
	denial  bool
}

// NewCache returns a cache holding at most size answers.
func NewCache(size int) *Cache { return &Cache{max: size, items: map[string]cacheItem{}} }

// Len returns how many answers are cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// Put caches m under k if it is cacheable.
func (c *Cache) Put(k string, m *dns.Msg, now time.Time) {
	if m.Truncated || (m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError) {
		return
	}
	var ttl time.Duration
	denial := m.Rcode == dns.RcodeNameError || len(m.Answer) == 0
	if denial {
		var soa *dns.SOA
		for _, rr := range m.Ns {
			if s, ok := rr.(*dns.SOA); ok {
				soa = s
			}
		}
		if soa == nil {
			return
		}
		ttl = min(time.Duration(min(soa.Hdr.Ttl, soa.Minttl))*time.Second, MaxDenialTTL)
	} else {
		minTTL := uint32(1<<32 - 1)
		for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
			for _, rr := range sec {
				if rr.Header().Rrtype == dns.TypeOPT {
					continue
				}
				minTTL = min(minTTL, rr.Header().Ttl)
			}
		}
		ttl = min(time.Duration(minTTL)*time.Second, MaxTTL)
	}
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; !ok && len(c.items) >= c.max {
		for old := range c.items {
			delete(c.items, old)
			break
		}
	}
	c.items[k] = cacheItem{msg: m.Copy(), stored: now, expires: now.Add(ttl), denial: denial}
}

// Get returns a copy of the answer cached under k with TTLs aged, and whether
// it is a "success" or "denial" entry.
func (c *Cache) Get(k string, now time.Time) (*dns.Msg, string, bool) {
	c.mu.Lock()
	it, ok := c.items[k]
	if ok && !now.Before(it.expires) {
		delete(c.items, k)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return nil, "", false
	}
	m := it.msg.Copy()
	age := uint32(now.Sub(it.stored) / time.Second)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			if h.Rrtype == dns.TypeOPT {
				continue
			}
			if h.Ttl > age {
				h.Ttl -= age
			} else {
				h.Ttl = 0
			}
		}
	}
	kind := "success"
	if it.denial {
		kind = "denial"
	}
	return m, kind, true
}

// DefaultResolvConf is where upstreams come from when none are given.
const DefaultResolvConf = "/etc/resolv.conf"

// ReadableResolvConf reports whether path exists, for clearer flag errors.
func ReadableResolvConf(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
