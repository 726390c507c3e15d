package server

import (
	"context"
	"fmt"
	"io"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/dns/dnstest"
	"github.com/svcnet/svcnet/dns/forward"
	"github.com/svcnet/svcnet/dns/index"
	"github.com/svcnet/svcnet/dns/zone"
)

// upstream is a stub resolver on 127.0.0.1 standing in for the internet.
type upstream struct {
	addr  string
	count atomic.Int32
}

func startUpstream(t testing.TB) *upstream {
	t.Helper()
	u := &upstream{}
	pc, ln := dnstest.ListenUDPAndTCP(t)
	u.addr = pc.LocalAddr().String()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.count.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		q := r.Question[0]
		switch {
		case strings.EqualFold(q.Name, "www.example.com.") && q.Qtype == dns.TypeA:
			m.Answer = []dns.RR{dnstest.A(q.Name + " 300 IN A 93.184.215.14")}
		case strings.HasSuffix(strings.ToLower(q.Name), ".in-addr.arpa."):
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{dnstest.SOA("in-addr.arpa. 60 IN SOA b.in-addr-servers.arpa. nstld.iana.org. 1 1800 900 604800 60")}
		default:
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{dnstest.SOA("com. 60 IN SOA a.gtld-servers.net. nstld.verisign-grs.com. 1 1800 900 604800 60")}
		}
		_ = w.WriteMsg(m)
	})
	us := &dns.Server{PacketConn: pc, Handler: h}
	ts := &dns.Server{Listener: ln, Handler: h}
	go func() { _ = us.ActivateAndServe() }()
	go func() { _ = ts.ActivateAndServe() }()
	t.Cleanup(func() { _ = us.Shutdown(); _ = ts.Shutdown() })
	return u
}

// bigHeadless is a headless Service with more endpoints than fit in 512 bytes.
func bigHeadless() []runtime.Object {
	var eps []dnstest.EP
	for i := 1; i <= 60; i++ {
		eps = append(eps, dnstest.EP{IP: fmt.Sprintf("10.244.50.%d", i), Ready: true})
	}
	return []runtime.Object{
		dnstest.Svc("default", "big", []string{"None"}, dnstest.Port("http", corev1.ProtocolTCP, 80)),
		dnstest.Slice("default", "big-1", "big", discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{dnstest.SlicePort("http", corev1.ProtocolTCP, 80)}, eps...),
	}
}

type testServer struct {
	srv     *Server
	addr    string // DNS host:port
	metrics string // metrics host:port
	up      *upstream
	client  *fake.Clientset
}

func startServer(t testing.TB) *testServer {
	t.Helper()
	up := startUpstream(t)
	client := fake.NewSimpleClientset(append(dnstest.Cluster(), bigHeadless()...)...)
	idx, synced := dnstest.SyncedIndex(t, client, false)
	m := NewMetrics(ServerLabel("127.0.0.1:0"))
	fwd, err := forward.New([]string{up.addr}, time.Second, 100, m)
	if err != nil {
		t.Fatal(err)
	}
	z := zone.New(zone.Config{Zone: "cluster.local.", TTL: 5, Reverse: true, LocalIPs: []netip.Addr{netip.MustParseAddr("10.244.0.53")}},
		idx, synced, fwd)
	h := &Handler{Zone: z, Forward: fwd, Metrics: m}
	srv := New(Config{Listen: []string{"127.0.0.1:0"}, HealthListen: "127.0.0.1:0", ReadyListen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0"},
		h, synced, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		defer c()
		srv.Shutdown(sctx)
	})
	return &testServer{srv: srv, addr: srv.DNSAddrs()[0], metrics: srv.HTTPAddr("127.0.0.1:0"), up: up, client: client}
}

func exchange(t *testing.T, addr, netw, name string, qtype uint16, edns uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	c := &dns.Client{Net: netw, Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], netw, err)
	}
	return r
}

func TestServeUDPAndTCP(t *testing.T) {
	ts := startServer(t)
	for _, netw := range []string{"udp", "tcp"} {
		r := exchange(t, ts.addr, netw, "myapp.default.svc.cluster.local.", dns.TypeA, 0)
		c := dnstest.Case{Qname: "myapp.default.svc.cluster.local.", Answer: []dns.RR{dnstest.A("myapp.default.svc.cluster.local. 5 IN A 10.96.3.215")}}
		if d := c.Check(r); d != "" || !r.Authoritative {
			t.Errorf("%s: aa=%v %s", netw, r.Authoritative, d)
		}
	}
}

func TestForwardedThroughServer(t *testing.T) {
	ts := startServer(t)
	for i := 0; i < 2; i++ {
		r := exchange(t, ts.addr, "udp", "www.example.com.", dns.TypeA, 0)
		if len(r.Answer) != 1 || r.Authoritative || r.IsEdns0() != nil {
			t.Fatalf("forwarded answer: %v", r)
		}
	}
	if n := ts.up.count.Load(); n != 1 {
		t.Errorf("upstream asked %d times, want 1 (second from cache)", n)
	}
	// Reverse names the cluster does not own go upstream too.
	if r := exchange(t, ts.addr, "udp", "8.8.8.8.in-addr.arpa.", dns.TypePTR, 0); r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
		t.Errorf("unknown PTR not forwarded: %v", r)
	}
	// EDNS0 is echoed.
	r := exchange(t, ts.addr, "udp", "www.example.com.", dns.TypeA, 1232)
	if o := r.IsEdns0(); o == nil || o.UDPSize() != 1232 {
		t.Errorf("EDNS0 not echoed: %v", r)
	}
}

func TestTruncationAndTCPRetry(t *testing.T) {
	ts := startServer(t)
	r := exchange(t, ts.addr, "udp", "big.default.svc.cluster.local.", dns.TypeA, 0)
	if !r.Truncated || len(r.Answer) >= 60 {
		t.Errorf("UDP without EDNS0: tc=%v answers=%d, want truncated", r.Truncated, len(r.Answer))
	}
	r = exchange(t, ts.addr, "udp", "big.default.svc.cluster.local.", dns.TypeA, 4096)
	if r.Truncated || len(r.Answer) != 60 {
		t.Errorf("UDP with 4096 EDNS0: tc=%v answers=%d, want all 60", r.Truncated, len(r.Answer))
	}
	r = exchange(t, ts.addr, "tcp", "big.default.svc.cluster.local.", dns.TypeA, 0)
	if r.Truncated || len(r.Answer) != 60 {
		t.Errorf("TCP: tc=%v answers=%d, want all 60", r.Truncated, len(r.Answer))
	}
}

func TestMalformedPackets(t *testing.T) {
	ts := startServer(t)
	conn, err := net.Dial("udp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bad := [][]byte{
		{},
		{0x12},
		{0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f},                         // label runs off the end
		{0x12, 0x34, 0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1}, // two questions
		{0x12, 0x34, 0x81, 0x80, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0, 0, 1, 0, 1},                // a response
		[]byte(strings.Repeat("\xff", 600)),
	}
	buf := make([]byte, 65535)
	for i, b := range bad {
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := conn.Read(buf)
		if err != nil {
			continue // dropped: fine
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf[:n]); err != nil {
			t.Errorf("packet %d: unparseable reply: %v", i, err)
			continue
		}
		if m.Rcode != dns.RcodeFormatError && m.Rcode != dns.RcodeNotImplemented {
			t.Errorf("packet %d: rcode %s, want FORMERR or drop", i, dns.RcodeToString[m.Rcode])
		}
	}
	// Still serving.
	if r := exchange(t, ts.addr, "udp", "myapp.default.svc.cluster.local.", dns.TypeA, 0); len(r.Answer) != 1 {
		t.Fatalf("server stopped answering after malformed packets: %v", r)
	}
}

func TestProtocolErrors(t *testing.T) {
	h := &Handler{}
	m := new(dns.Msg)
	m.SetQuestion("x.", dns.TypeA)
	m.Opcode = dns.OpcodeUpdate
	if r, _ := h.Answer(m, false); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("UPDATE: %s", dns.RcodeToString[r.Rcode])
	}
	m = new(dns.Msg)
	m.SetQuestion("x.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	r, _ := h.Answer(m, false)
	b, err := r.Pack()
	if err != nil {
		t.Fatal(err)
	}
	r2 := new(dns.Msg)
	if err := r2.Unpack(b); err != nil || r2.Rcode != dns.RcodeBadVers {
		t.Errorf("EDNS version 1: rcode %v err %v", r2.Rcode, err)
	}
}

// TestLargeRequests: as CoreDNS (the DNS library's 512-byte UDP buffer), a
// UDP request longer than 512 bytes is cut there (here: inside its OPT
// record, so FORMERR), while over TCP it is answered.
func TestLargeRequests(t *testing.T) {
	ts := startServer(t)
	m := new(dns.Msg)
	m.SetQuestion("myapp.default.svc.cluster.local.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_PADDING{Padding: make([]byte, 5000)})
	for _, netw := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: netw, Timeout: 5 * time.Second}
		r, _, err := c.Exchange(m, ts.addr)
		if err != nil {
			t.Fatalf("%s: %v", netw, err)
		}
		want := dns.RcodeSuccess
		if netw == "udp" {
			want = dns.RcodeFormatError
		}
		if r.Rcode != want || netw == "tcp" && len(r.Answer) != 1 {
			t.Errorf("%s: %s with %d answers, want %s", netw, dns.RcodeToString[r.Rcode], len(r.Answer), dns.RcodeToString[want])
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealthReadyMetrics(t *testing.T) {
	ts := startServer(t)
	exchange(t, ts.addr, "udp", "myapp.default.svc.cluster.local.", dns.TypeA, 0)
	exchange(t, ts.addr, "udp", "nosuch.default.svc.cluster.local.", dns.TypeA, 0)
	exchange(t, ts.addr, "udp", "www.example.com.", dns.TypeA, 0)
	exchange(t, ts.addr, "udp", "www.example.com.", dns.TypeA, 0)
	base := "http://" + ts.metrics
	if code, body := get(t, base+"/health"); code != 200 || body != "OK" {
		t.Errorf("/health: %d %q", code, body)
	}
	if code, body := get(t, base+"/ready"); code != 200 || body != "OK" {
		t.Errorf("/ready: %d %q", code, body)
	}
	_, body := get(t, base+"/metrics")
	for _, want := range []string{
		`coredns_dns_requests_total{family="1",proto="udp",server="dns://127.0.0.1:0",type="A",view="",zone="."} 4`,
		`coredns_dns_responses_total{plugin="kubernetes",rcode="NOERROR",server="dns://127.0.0.1:0",view="",zone="."} 1`,
		`coredns_dns_responses_total{plugin="kubernetes",rcode="NXDOMAIN",server="dns://127.0.0.1:0",view="",zone="."} 1`,
		`coredns_dns_responses_total{plugin="cache",rcode="NOERROR",server="dns://127.0.0.1:0",view="",zone="."} 1`,
		`coredns_dns_request_duration_seconds_count{server="dns://127.0.0.1:0",type="A",view="",zone="."} 4`,
		`coredns_cache_hits_total{server="dns://127.0.0.1:0",type="success",view="",zones="."} 1`,
		`coredns_cache_misses_total{server="dns://127.0.0.1:0",view="",zones="."} 1`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestGracefulShutdown(t *testing.T) {
	ts := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	ts.srv.Shutdown(ctx)
	if time.Since(start) > 1500*time.Millisecond {
		t.Errorf("shutdown took %v", time.Since(start))
	}
	c := &dns.Client{Net: "tcp", Timeout: 300 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion("myapp.default.svc.cluster.local.", dns.TypeA)
	if _, _, err := c.Exchange(m, ts.addr); err == nil {
		t.Error("still answering over TCP after shutdown")
	}
}

// TestSeparateHTTPListeners checks that /health, /ready and /metrics land on
// their own addresses when those differ.
func TestSeparateHTTPListeners(t *testing.T) {
	var ready atomic.Bool
	cfg := Config{Listen: []string{"127.0.0.1:0"}, HealthListen: "127.0.0.1:0", ReadyListen: "127.0.0.2:0", MetricsListen: "127.0.0.3:0"}
	srv := New(cfg, &Handler{Metrics: NewMetrics("x")}, ready.Load, nil)
	if err := srv.Start(); err != nil {
		t.Skipf("cannot bind 127.0.0.2/127.0.0.3: %v", err)
	}
	defer srv.Shutdown(context.Background())
	h, r, m := "http://"+srv.HTTPAddr(cfg.HealthListen), "http://"+srv.HTTPAddr(cfg.ReadyListen), "http://"+srv.HTTPAddr(cfg.MetricsListen)
	for _, c := range []struct {
		url  string
		code int
	}{
		{h + "/health", 200}, {h + "/ready", 404}, {h + "/metrics", 404},
		{r + "/ready", 503}, {r + "/health", 404},
		{m + "/metrics", 200}, {m + "/health", 404},
	} {
		if code, _ := get(t, c.url); code != c.code {
			t.Errorf("GET %s: %d, want %d", c.url, code, c.code)
		}
	}
	ready.Store(true)
	if code, _ := get(t, r+"/ready"); code != 200 {
		t.Errorf("/ready after sync: %d", code)
	}
}

// TestUDPAnswerCacheFollowsIndex: repeated UDP questions are answered from
// each reader's packed-answer cache, with the asker's ID, and a change in
// the cluster replaces the cached answer.
func TestUDPAnswerCacheFollowsIndex(t *testing.T) {
	ts := startServer(t)
	ask := func(id uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("myapp.default.svc.cluster.local.", dns.TypeA)
		m.Id = id
		r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Id != id {
			t.Fatalf("answer ID %d, want %d", r.Id, id)
		}
		return r
	}
	// Several times, so that every reader has it cached.
	for i := range 20 {
		if r := ask(uint16(100 + i)); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.96.3.215" {
			t.Fatalf("before: %v", r)
		}
	}
	ctx := context.Background()
	if err := ts.client.CoreV1().Services("default").Delete(ctx, "myapp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		nx := 0
		for i := range 20 {
			if ask(uint16(200+i)).Rcode == dns.RcodeNameError {
				nx++
			}
		}
		if nx == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deleting the Service, %d of 20 answers were NXDOMAIN", nx)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWildcardListenRepliesFromAskedAddress: on a wildcard address the UDP
// readers send each reply from the address the question went to (the
// client's socket is connected to it, so a reply from elsewhere would not
// arrive).
func TestWildcardListenRepliesFromAskedAddress(t *testing.T) {
	idx := index.New()
	idx.SetNamespace("default")
	z := zone.New(zone.Config{Zone: "cluster.local.", TTL: 5}, idx, func() bool { return true }, nil)
	srv := New(Config{Listen: []string{":0"}}, &Handler{Zone: z}, nil, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	_, port, _ := net.SplitHostPort(srv.DNSAddrs()[0])
	for _, host := range []string{"127.0.0.1", "::1"} {
		addr := net.JoinHostPort(host, port)
		m := new(dns.Msg)
		m.SetQuestion("default.svc.cluster.local.", dns.TypeA)
		r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
		if err != nil {
			if host == "::1" {
				t.Logf("no IPv6 loopback: %v", err)
				continue
			}
			t.Fatalf("%s: %v", addr, err)
		}
		if r.Rcode != dns.RcodeSuccess || !r.Authoritative {
			t.Errorf("%s: %v", addr, r)
		}
	}
}

// TestOpcodesAndMissingQuestion: as CoreDNS's server (behind the DNS
// library's accept function), NOTIFY is answered like a query and keeps its
// opcode (RD not echoed), other opcodes are NOTIMP, and a header that
// counts one question but carries none gets SERVFAIL.
func TestOpcodesAndMissingQuestion(t *testing.T) {
	ts := startServer(t)
	conn, err := net.Dial("udp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(b []byte) *dns.Msg {
		t.Helper()
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 65535)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatalf("unparseable answer: %v", err)
		}
		return m
	}
	pack := func(opcode int) []byte {
		m := new(dns.Msg)
		m.SetQuestion("myapp.default.svc.cluster.local.", dns.TypeA)
		m.Opcode = opcode
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	r := send(pack(dns.OpcodeNotify))
	c := dnstest.Case{Qname: "myapp.default.svc.cluster.local.", Answer: []dns.RR{dnstest.A("myapp.default.svc.cluster.local. 5 IN A 10.96.3.215")}}
	if d := c.Check(r); d != "" || r.Opcode != dns.OpcodeNotify || !r.Authoritative || r.RecursionDesired {
		t.Errorf("NOTIFY: opcode %s aa=%v rd=%v %s", dns.OpcodeToString[r.Opcode], r.Authoritative, r.RecursionDesired, d)
	}
	if r := send(pack(dns.OpcodeStatus)); r.Rcode != dns.RcodeNotImplemented || r.Opcode != dns.OpcodeStatus {
		t.Errorf("STATUS: %s opcode %s, want NOTIMP", dns.RcodeToString[r.Rcode], dns.OpcodeToString[r.Opcode])
	}
	hdr := []byte{0x43, 0x21, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0}
	if r := send(hdr); r.Rcode != dns.RcodeServerFailure || r.Id != 0x4321 || len(r.Question) != 0 || !r.RecursionDesired {
		t.Errorf("QDCOUNT 1 without a question: %v, want SERVFAIL with the ID and RD echoed", r)
	}
}

// TestForwardFailureHasNoRA: a forward that fails is SERVFAIL without RA,
// as CoreDNS's server writes it.
func TestForwardFailureHasNoRA(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close() // nothing answers there
	fwd, err := forward.New([]string{dead}, 200*time.Millisecond, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Forward: fwd}
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	r, _ := h.Answer(m, false)
	if r.Rcode != dns.RcodeServerFailure || r.RecursionAvailable || !r.RecursionDesired {
		t.Errorf("failed forward: %s ra=%v rd=%v, want SERVFAIL, no RA, RD echoed", dns.RcodeToString[r.Rcode], r.RecursionAvailable, r.RecursionDesired)
	}
}

// TestSilentUpstreamStallsNoOne: a question that waits on an upstream that
// never answers (forwarded, or an ExternalName target outside the zone)
// must not hold up the questions behind it on the same socket. With one
// UDP socket, every client shares it; before, the socket's loop answered
// each question itself and in-zone lookups timed out behind the stalled
// one (a pod's DNS failed for as long as something queried a dead
// upstream).
func TestSilentUpstreamStallsNoOne(t *testing.T) {
	hole, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close() // reads nothing, answers nothing
	client := fake.NewSimpleClientset(dnstest.Cluster()...)
	idx, synced := dnstest.SyncedIndex(t, client, false)
	fwd, err := forward.New([]string{hole.LocalAddr().String()}, 3*time.Second, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	z := zone.New(zone.Config{Zone: "cluster.local.", TTL: 5}, idx, synced, fwd)
	srv := New(Config{Listen: []string{"127.0.0.1:0"}, UDPReaders: 1}, &Handler{Zone: z, Forward: fwd}, synced, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, c := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer c()
		srv.Shutdown(sctx)
	}()
	conn, err := net.Dial("udp", srv.DNSAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(id uint16, name string, qtype uint16) {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.Id = id
		b, _ := m.Pack()
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	// Two stalled questions first, from the same client socket.
	send(1, "www.dead-upstream.test.", dns.TypeA)
	send(2, "svc-external-name.default.svc.cluster.local.", dns.TypeA)
	start := time.Now()
	for i := range 3 {
		send(uint16(10+i), "myapp.default.svc.cluster.local.", dns.TypeA)
	}
	got := map[uint16]bool{}
	buf := make([]byte, 4096)
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	for len(got) < 3 {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("in-zone answers %v after %v: %v", got, time.Since(start), err)
		}
		r := new(dns.Msg)
		if err := r.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		if r.Id < 10 {
			t.Fatalf("the stalled question %d was answered: %v", r.Id, r)
		}
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.96.3.215" {
			t.Fatalf("answer %v", r)
		}
		got[r.Id] = true
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("in-zone answers took %v behind the stalled ones", d)
	}
}
