package forward

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/dns/dnstest"
)

// stub is an upstream resolver on 127.0.0.1 answering from a function; it
// counts queries per transport.
type stub struct {
	addr     string
	udp, tcp atomic.Int32
}

func startStub(t *testing.T, answer func(r *dns.Msg, tcp bool) *dns.Msg) *stub {
	t.Helper()
	s := &stub{}
	pc, ln := dnstest.ListenUDPAndTCP(t)
	s.addr = pc.LocalAddr().String()
	h := func(tcp bool) dns.HandlerFunc {
		return func(w dns.ResponseWriter, r *dns.Msg) {
			if tcp {
				s.tcp.Add(1)
			} else {
				s.udp.Add(1)
			}
			m := answer(r, tcp)
			m.Id = r.Id
			_ = w.WriteMsg(m)
		}
	}
	u := &dns.Server{PacketConn: pc, Handler: h(false)}
	tc := &dns.Server{Listener: ln, Handler: h(true)}
	go func() { _ = u.ActivateAndServe() }()
	go func() { _ = tc.ActivateAndServe() }()
	t.Cleanup(func() { _ = u.Shutdown(); _ = tc.Shutdown() })
	return s
}

func aAnswer(r *dns.Msg, n int, ttl uint32) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	for i := 0; i < n; i++ {
		rr, _ := dns.NewRR(r.Question[0].Name + " 30 IN A 192.0.2." + string(rune('0'+i%10)))
		rr.Header().Ttl = ttl
		m.Answer = append(m.Answer, rr)
	}
	return m
}

func TestForwardAndCache(t *testing.T) {
	s := startStub(t, func(r *dns.Msg, _ bool) *dns.Msg { return aAnswer(r, 1, 30) })
	var hits, misses atomic.Int32
	f, err := New([]string{s.addr}, time.Second, 100, obs{&hits, &misses})
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	r, cached, err := f.Exchange(context.Background(), m, false)
	if err != nil || cached || len(r.Answer) != 1 || r.Id != m.Id {
		t.Fatalf("first exchange: %v cached=%v %v", err, cached, r)
	}
	if r.IsEdns0() != nil {
		t.Errorf("OPT added upstream leaked to a client that sent none")
	}
	m2 := new(dns.Msg)
	m2.SetQuestion("WWW.example.com.", dns.TypeA)
	r, cached, err = f.Exchange(context.Background(), m2, false)
	if err != nil || !cached || r.Id != m2.Id || r.Question[0].Name != "WWW.example.com." {
		t.Fatalf("second exchange should hit the cache with the client's id/case: %v %v %v", err, cached, r)
	}
	if got := s.udp.Load(); got != 1 {
		t.Errorf("upstream asked %d times, want 1", got)
	}
	if hits.Load() != 1 || misses.Load() != 1 {
		t.Errorf("hits=%d misses=%d, want 1/1", hits.Load(), misses.Load())
	}
}

func TestTruncatedRetriesOverTCP(t *testing.T) {
	s := startStub(t, func(r *dns.Msg, tcp bool) *dns.Msg {
		m := aAnswer(r, 3, 30)
		if !tcp {
			m.Answer = nil
			m.Truncated = true
		}
		return m
	})
	f, err := New([]string{s.addr}, time.Second, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion("big.example.com.", dns.TypeA)
	r, _, err := f.Exchange(context.Background(), m, false)
	if err != nil || r.Truncated || len(r.Answer) != 3 {
		t.Fatalf("want full answer over TCP, got %v %v", err, r)
	}
	if s.udp.Load() != 1 || s.tcp.Load() != 1 {
		t.Errorf("udp=%d tcp=%d, want 1/1", s.udp.Load(), s.tcp.Load())
	}
}

func TestFailover(t *testing.T) {
	dead, err := net.ListenPacket("udp", "127.0.0.1:0") // never answers
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	s := startStub(t, func(r *dns.Msg, _ bool) *dns.Msg { return aAnswer(r, 1, 30) })
	f, err := New([]string{dead.LocalAddr().String(), s.addr}, 200*time.Millisecond, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion("x.example.com.", dns.TypeA)
	if r, _, err := f.Exchange(context.Background(), m, false); err != nil || len(r.Answer) != 1 {
		t.Fatalf("failover: %v %v", err, r)
	}
}

func TestAllUpstreamsDown(t *testing.T) {
	dead, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	f, _ := New([]string{dead.LocalAddr().String()}, 100*time.Millisecond, 10, nil)
	m := new(dns.Msg)
	m.SetQuestion("x.example.com.", dns.TypeA)
	if _, _, err := f.Exchange(context.Background(), m, false); err == nil {
		t.Fatal("want an error")
	}
}

func TestCacheDenialAndAging(t *testing.T) {
	c := NewCache(2)
	now := time.Unix(1000, 0)
	m := new(dns.Msg)
	m.SetQuestion("nx.example.com.", dns.TypeA)
	m.Rcode = dns.RcodeNameError
	soa, _ := dns.NewRR("example.com. 60 IN SOA ns. host. 1 2 3 4 10")
	m.Ns = []dns.RR{soa}
	c.Put("nx", m, now)
	got, kind, ok := c.Get("nx", now.Add(4*time.Second))
	if !ok || kind != "denial" || got.Ns[0].Header().Ttl != 56 {
		t.Fatalf("denial entry: ok=%v kind=%s %v", ok, kind, got)
	}
	if _, _, ok := c.Get("nx", now.Add(10*time.Second)); ok {
		t.Error("denial entry outlived the SOA minimum (10s)")
	}
	sf := new(dns.Msg)
	sf.Rcode = dns.RcodeServerFailure
	c.Put("sf", sf, now)
	if _, _, ok := c.Get("sf", now); ok {
		t.Error("SERVFAIL was cached")
	}
	// Bounded size.
	for _, k := range []string{"a", "b", "c"} {
		a := aAnswer(m, 1, 30)
		a.Rcode = dns.RcodeSuccess
		c.Put(k, a, now)
	}
	if c.Len() > 2 {
		t.Errorf("cache holds %d entries, max 2", c.Len())
	}
}

func TestFromResolvConf(t *testing.T) {
	p := t.TempDir() + "/resolv.conf"
	if err := writeFile(p, "search svc.cluster.local\nnameserver 127.0.0.53\nnameserver ::1\noptions ndots:5\n"); err != nil {
		t.Fatal(err)
	}
	got, err := FromResolvConf(p)
	if err != nil || len(got) != 2 || got[0] != "127.0.0.53:53" || got[1] != "[::1]:53" {
		t.Fatalf("got %v %v", got, err)
	}
}

type obs struct{ hits, misses *atomic.Int32 }

func (o obs) CacheHit(string) { o.hits.Add(1) }
func (o obs) CacheMiss()      { o.misses.Add(1) }

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o644) }

// TestTTLCapBelongsToTheCache: with the cache on, forwarded TTLs leave capped
// at 30 s (kubeadm's "cache 30"); with it off they pass unchanged.
func TestTTLCapBelongsToTheCache(t *testing.T) {
	s := startStub(t, func(r *dns.Msg, _ bool) *dns.Msg { return aAnswer(r, 1, 3600) })
	for _, c := range []struct {
		size int
		want uint32
	}{{100, 30}, {0, 3600}} {
		f, err := New([]string{s.addr}, time.Second, c.size, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := new(dns.Msg)
		m.SetQuestion("www.example.com.", dns.TypeA)
		r, _, err := f.Exchange(context.Background(), m, false)
		if err != nil || len(r.Answer) != 1 {
			t.Fatalf("cache size %d: %v %v", c.size, err, r)
		}
		if got := r.Answer[0].Header().Ttl; got != c.want {
			t.Errorf("cache size %d: TTL %d, want %d", c.size, got, c.want)
		}
	}
}
