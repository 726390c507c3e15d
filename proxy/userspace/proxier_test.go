package userspace

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var update = flag.Bool("update", false, "rewrite golden files")

// tcpBackend serves on a loopback port: it writes its name and a newline on
// accept, then echoes.
type tcpBackend struct {
	name string
	ln   net.Listener
	addr netip.AddrPort
}

func startTCPBackend(t *testing.T, host, name string) *tcpBackend {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	b := &tcpBackend{name: name, ln: ln, addr: ln.Addr().(*net.TCPAddr).AddrPort()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "%s\n", name)
				io.Copy(c, c)
			}()
		}
	}()
	return b
}

func startUDPBackend(t *testing.T, host, name string) netip.AddrPort {
	t.Helper()
	return startSlowUDPBackend(t, host, name, 0)
}

// startSlowUDPBackend is startUDPBackend answering each datagram delay
// after it arrived.
func startSlowUDPBackend(t *testing.T, host, name string, delay time.Duration) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			time.Sleep(delay)
			pc.WriteTo([]byte(name+":"+string(buf[:n])), from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t *testing.T) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	return a
}

func dialName(t *testing.T, addr string) (string, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		c.Close()
		t.Fatalf("read from %s: %v", addr, err)
	}
	return strings.TrimSpace(line), c
}

func ask(t *testing.T, addr string) string {
	name, c := dialName(t, addr)
	c.Close()
	return name
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestProxier(t *testing.T, opt Options) (*Proxier, *FakeNetfilter) {
	t.Helper()
	nf := &FakeNetfilter{}
	opt.IPv4 = nf
	if opt.ListenHost == "" {
		opt.ListenHost = "127.0.0.1"
	}
	p := New(opt)
	t.Cleanup(p.Close)
	return p, nf
}

func eps(addrs ...netip.AddrPort) []Endpoint {
	var out []Endpoint
	for _, a := range addrs {
		out = append(out, Endpoint{Addr: a, Weight: 1})
	}
	return out
}

func svc(name, proto string, e []Endpoint) ServiceConfig {
	return ServiceConfig{Name: name, Protocol: proto, Port: 80, Addrs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, Endpoints: e}
}

func proxyAddr(p *Proxier, name, proto string) string {
	return fmt.Sprintf("127.0.0.1:%d", p.ProxyPort(name, proto))
}

func TestTCPRoundRobinSpread(t *testing.T) {
	ctx := context.Background()
	a, b, c := startTCPBackend(t, "127.0.0.1", "a"), startTCPBackend(t, "127.0.0.1", "b"), startTCPBackend(t, "127.0.0.1", "c")
	p, nf := newTestProxier(t, Options{})
	if err := p.Sync(ctx, []ServiceConfig{svc("default/web:http", "TCP", eps(a.addr, b.addr, c.addr))}); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for i := 0; i < 30; i++ {
		counts[ask(t, proxyAddr(p, "default/web:http", "tcp"))]++
	}
	for _, n := range []string{"a", "b", "c"} {
		if counts[n] != 10 {
			t.Errorf("rr spread %v, want 10 each", counts)
		}
	}
	if !strings.Contains(nf.LastRules(), "--dport 80 -j REDIRECT --to-ports") {
		t.Errorf("no redirect rule installed:\n%s", nf.LastRules())
	}
}

func TestTCPRetriesDeadEndpoint(t *testing.T) {
	ctx := context.Background()
	live := startTCPBackend(t, "127.0.0.1", "live")
	dead1, dead2 := deadAddr(t), deadAddr(t)
	p, _ := newTestProxier(t, Options{})
	if err := p.Sync(ctx, []ServiceConfig{svc("default/web", "tcp", eps(dead1, live.addr, dead2))}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ {
		if got := ask(t, proxyAddr(p, "default/web", "tcp")); got != "live" {
			t.Fatalf("connection %d reached %q", i, got)
		}
	}
	// With every endpoint dead, the client is reset instead of hanging.
	if err := p.Sync(ctx, []ServiceConfig{svc("default/web", "tcp", eps(dead1, dead2))}); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", proxyAddr(p, "default/web", "tcp"))
	if err != nil {
		if strings.Contains(err.Error(), "reset") {
			return // the reset won the race with connect's completion
		}
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("read from a service with only dead endpoints: %v, want reset/EOF", err)
	}
}

func TestSessionAffinityExpires(t *testing.T) {
	ctx := context.Background()
	a, b := startTCPBackend(t, "127.0.0.1", "a"), startTCPBackend(t, "127.0.0.1", "b")
	clock := &fakeClock{t: time.Unix(1000, 0)}
	p, _ := newTestProxier(t, Options{Now: clock.Now})
	cfg := svc("default/sticky", "tcp", eps(a.addr, b.addr))
	cfg.AffinityTimeout = 10 * time.Second
	if err := p.Sync(ctx, []ServiceConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	addr := proxyAddr(p, "default/sticky", "tcp")
	first := ask(t, addr)
	for i := 0; i < 5; i++ {
		clock.Advance(9 * time.Second) // each connection refreshes the timer
		if got := ask(t, addr); got != first {
			t.Fatalf("affinity broken after %d refreshes: %s then %s", i, first, got)
		}
	}
	clock.Advance(11 * time.Second)
	second := ask(t, addr)
	if second == first {
		t.Fatalf("affinity did not expire: still %s (rr would move on)", first)
	}
	if got := ask(t, addr); got != second {
		t.Fatalf("new affinity not kept: %s then %s", second, got)
	}
	// Without affinity, rr alternates.
	cfg.AffinityTimeout = 0
	if err := p.Sync(ctx, []ServiceConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	if ask(t, addr) == ask(t, addr) {
		t.Fatal("rr without affinity sent two connections to the same endpoint")
	}
}

// TestTCPAcceptLoopsShareOnePort: with four accept loops the port has four
// SO_REUSEPORT listeners; every connection is served and balanced as with
// one, and removing the Service closes all of them (a listener left open
// would still take its share of new connections).
func TestTCPAcceptLoopsShareOnePort(t *testing.T) {
	ctx := context.Background()
	a, b := startTCPBackend(t, "127.0.0.1", "a"), startTCPBackend(t, "127.0.0.1", "b")
	p, _ := newTestProxier(t, Options{AcceptLoops: 4})
	if err := p.Sync(ctx, []ServiceConfig{svc("default/web", "tcp", eps(a.addr, b.addr))}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	lfds := p.services["default/web/tcp"].lfds
	p.mu.Unlock()
	if len(lfds) != 4 {
		t.Fatalf("%d listeners, want 4", len(lfds))
	}
	port := p.ProxyPort("default/web", "tcp")
	for _, fd := range lfds {
		sa, err := unix.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		if got := sa.(*unix.SockaddrInet4).Port; got != port {
			t.Fatalf("listener on port %d, want %d", got, port)
		}
	}
	addr := proxyAddr(p, "default/web", "tcp")
	counts := map[string]int{}
	for i := 0; i < 40; i++ {
		counts[ask(t, addr)]++
	}
	if counts["a"] != 20 || counts["b"] != 20 {
		t.Errorf("rr spread over four accept loops %v, want 20 each", counts)
	}
	if err := p.Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
			c.Close()
			t.Fatalf("connection %d to a removed Service's port was accepted", i)
		}
	}
}

// TestTCPBulkAndHalfClose moves more than the copy buffer in both
// directions (so the copy switches from read/write to splice), then
// half-closes: every byte must come back in order, and the backend's own
// close must reach the client as EOF after the last byte.
func TestTCPBulkAndHalfClose(t *testing.T) {
	ctx := context.Background()
	a := startTCPBackend(t, "127.0.0.1", "a")
	p, _ := newTestProxier(t, Options{})
	if err := p.Sync(ctx, []ServiceConfig{svc("default/bulk", "tcp", eps(a.addr))}); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", proxyAddr(p, "default/bulk", "tcp"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	// A small first exchange (read/write path), then bulk.
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || line != "a\n" {
		t.Fatalf("greeting: %q %v", line, err)
	}
	payload := make([]byte, 4<<20+123)
	for i := range payload {
		payload[i] = byte(i*7 + i>>11)
	}
	werr := make(chan error, 1)
	go func() {
		if _, err := c.Write([]byte("hi\n")); err != nil {
			werr <- err
			return
		}
		if _, err := c.Write(payload); err != nil {
			werr <- err
			return
		}
		werr <- c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read echo: %v (after %d bytes)", err, len(got))
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	want := append([]byte("hi\n"), payload...)
	if len(got) != len(want) {
		t.Fatalf("echo: got %d bytes, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("echo differs at byte %d", i)
		}
	}
}

// TestTCPShortExchangesWithFIN: many connections whose last data and FIN
// arrive together in both directions (the client writes and shuts its side
// at once, the backend echoes and closes). Each must get every byte and
// then the EOF: the relay passes a FIN on right behind the data it read
// last, and must never pass it before.
func TestTCPShortExchangesWithFIN(t *testing.T) {
	ctx := context.Background()
	a := startTCPBackend(t, "127.0.0.1", "a")
	p, _ := newTestProxier(t, Options{})
	if err := p.Sync(ctx, []ServiceConfig{svc("default/short", "tcp", eps(a.addr))}); err != nil {
		t.Fatal(err)
	}
	addr := proxyAddr(p, "default/short", "tcp")
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		go func(w int) {
			for i := 0; i < 50; i++ {
				msg := fmt.Sprintf("message %d of %d, %s", i, w, strings.Repeat("x", (i*w*37)%3000))
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					errs <- err
					return
				}
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := c.Write([]byte(msg)); err != nil {
					errs <- err
					return
				}
				c.(*net.TCPConn).CloseWrite()
				got, err := io.ReadAll(c)
				c.Close()
				if err != nil || string(got) != "a\n"+msg {
					errs <- fmt.Errorf("connection %d/%d: got %d bytes (%v), want %d", w, i, len(got), err, len(msg)+2)
					return
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < 8; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestEndpointRemovalLetsEstablishedConnectionsFinish(t *testing.T) {
	ctx := context.Background()
	a, b := startTCPBackend(t, "127.0.0.1", "a"), startTCPBackend(t, "127.0.0.1", "b")
	p, _ := newTestProxier(t, Options{})
	if err := p.Sync(ctx, []ServiceConfig{svc("default/web", "tcp", eps(a.addr, b.addr))}); err != nil {
		t.Fatal(err)
	}
	addr := proxyAddr(p, "default/web", "tcp")
	name, conn := dialName(t, addr)
	defer conn.Close()
	var keep, other *tcpBackend = a, b
	if name == "b" {
		keep, other = b, a
	}
	// Remove the endpoint this connection uses.
	if err := p.Sync(ctx, []ServiceConfig{svc("default/web", "tcp", eps(other.addr))}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		if got := ask(t, addr); got != other.name {
			t.Fatalf("new connection went to removed endpoint %s", keep.name)
		}
	}
	r := bufio.NewReader(conn)
	for i := 0; i < 3; i++ {
		fmt.Fprintf(conn, "ping%d\n", i)
		line, err := r.ReadString('\n')
		if err != nil || line != fmt.Sprintf("ping%d\n", i) {
			t.Fatalf("established connection to removed endpoint broke: %q %v", line, err)
		}
	}
}

func TestLeastConnectionCountsLiveConnections(t *testing.T) {
	ctx := context.Background()
	a, b, c := startTCPBackend(t, "127.0.0.1", "a"), startTCPBackend(t, "127.0.0.1", "b"), startTCPBackend(t, "127.0.0.1", "c")
	p, _ := newTestProxier(t, Options{})
	cfg := svc("default/lc", "tcp", eps(a.addr, b.addr, c.addr))
	cfg.Scheduler = "lc"
	if err := p.Sync(ctx, []ServiceConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	addr := proxyAddr(p, "default/lc", "tcp")
	// Three held connections land on three different endpoints (each
	// pick avoids the busy ones); with all equal, ties go to the first in
	// the proxy's order (sorted by address), so a new connection after one
	// held connection ends goes exactly to that endpoint.
	seen := map[string]bool{}
	held := map[string]net.Conn{}
	for i := 0; i < 3; i++ {
		n, c := dialName(t, addr)
		defer c.Close()
		seen[n] = true
		held[n] = c
	}
	if len(seen) != 3 {
		t.Fatalf("lc put held connections on %v", seen)
	}
	held["b"].Close()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.Dump(), "active 0") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := ask(t, addr); got != "b" {
		t.Fatalf("after b's connection ended lc picked %s\n%s", got, p.Dump())
	}
}

func udpAsk(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("udp reply to %q: %v", msg, err)
	}
	return string(buf[:n])
}

func TestUDPSessionsAndIdleTimeout(t *testing.T) {
	ctx := context.Background()
	a, b := startUDPBackend(t, "127.0.0.1", "a"), startUDPBackend(t, "127.0.0.1", "b")
	p, _ := newTestProxier(t, Options{UDPIdleTimeout: 100 * time.Millisecond})
	if err := p.Sync(ctx, []ServiceConfig{svc("kube-system/dns:dns", "udp", eps(a, b))}); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", proxyAddr(p, "kube-system/dns:dns", "udp"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := udpAsk(t, c, "x")
	backendOf := func(reply string) string { return strings.SplitN(reply, ":", 2)[0] }
	for i := 0; i < 5; i++ {
		if got := udpAsk(t, c, "y"); backendOf(got) != backendOf(first) || got != backendOf(first)+":y" {
			t.Fatalf("one client's datagrams left its session: %q then %q", first, got)
		}
	}
	// After the idle timeout the session is gone: the client's next
	// datagram is balanced again (rr → the other endpoint).
	time.Sleep(300 * time.Millisecond)
	second := udpAsk(t, c, "w")
	if backendOf(second) == backendOf(first) {
		t.Fatalf("session survived the idle timeout: %q", second)
	}
	// Another client gets its own session (rr → back to the first endpoint).
	c2, err := net.Dial("udp", proxyAddr(p, "kube-system/dns:dns", "udp"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := udpAsk(t, c2, "z"); backendOf(got) != backendOf(first) {
		t.Fatalf("second client got %q, want endpoint %s", got, backendOf(first))
	}
	if got := udpAsk(t, c, "v"); backendOf(got) != backendOf(second) {
		t.Fatalf("first client's new session moved: %q", got)
	}
}

// A reply later than the idle timeout still reaches the client while its
// datagram awaits it (a DNS server answering slowly on a loaded node); once
// answered, the session ends after the idle timeout as before.
func TestUDPLateReply(t *testing.T) {
	ctx := context.Background()
	slow := startSlowUDPBackend(t, "127.0.0.1", "slow", 400*time.Millisecond) // four idle timeouts
	p, _ := newTestProxier(t, Options{UDPIdleTimeout: 100 * time.Millisecond})
	if err := p.Sync(ctx, []ServiceConfig{svc("kube-system/dns:dns", "udp", eps(slow))}); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", proxyAddr(p, "kube-system/dns:dns", "udp"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := udpAsk(t, c, "q"); got != "slow:q" {
		t.Fatalf("late reply: %q", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.Dump(), "active 0") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if d := p.Dump(); !strings.Contains(d, "active 0") {
		t.Errorf("answered session not closed after the idle timeout:\n%s", d)
	}
}

func TestUDPFollowsEndpointChange(t *testing.T) {
	ctx := context.Background()
	a, b := startUDPBackend(t, "127.0.0.1", "a"), startUDPBackend(t, "127.0.0.1", "b")
	p, _ := newTestProxier(t, Options{UDPIdleTimeout: time.Minute})
	if err := p.Sync(ctx, []ServiceConfig{svc("default/u", "udp", eps(a))}); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", proxyAddr(p, "default/u", "udp"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := udpAsk(t, c, "1"); got != "a:1" {
		t.Fatalf("got %q", got)
	}
	if err := p.Sync(ctx, []ServiceConfig{svc("default/u", "udp", eps(b))}); err != nil {
		t.Fatal(err)
	}
	if got := udpAsk(t, c, "2"); got != "b:2" {
		t.Fatalf("after the endpoint change the session still goes to %q", got)
	}
}

func TestNoEndpointsRulesAndReset(t *testing.T) {
	ctx := context.Background()
	p, nf := newTestProxier(t, Options{})
	cfg := svc("default/empty", "tcp", nil)
	cfg.NodePort = 30080
	if err := p.Sync(ctx, []ServiceConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	rules := nf.LastRules()
	if !strings.Contains(rules, `-A KUBE-PORTALS-REJECT -m comment --comment "default/empty has no endpoints" -p tcp -d 10.96.0.10/32 --dport 80 -j REJECT --reject-with tcp-reset`) {
		t.Errorf("no reject rule:\n%s", rules)
	}
	if strings.Contains(rules, "REDIRECT") {
		t.Errorf("redirect for a service without endpoints:\n%s", rules)
	}
	if err := p.Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if p.ProxyPort("default/empty", "tcp") != 0 || strings.Contains(nf.LastRules(), "default/empty") {
		t.Errorf("removed service still present:\n%s", nf.LastRules())
	}
}

func TestRulesGolden(t *testing.T) {
	portals := []Portal{
		{Name: "default/web:http", Protocol: "tcp", ProxyPort: 40001, Port: 80,
			Addrs: []netip.Addr{netip.MustParseAddr("10.96.0.20"), netip.MustParseAddr("fd00:10:96::20"), netip.MustParseAddr("192.0.2.50")}, NodePort: 30080},
		{Name: "kube-system/kube-dns:dns", Protocol: "udp", ProxyPort: 40002, Port: 53,
			Addrs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}},
		{Name: "default/local-np", Protocol: "tcp", ProxyPort: 40003, Port: 8080, NodePort: 30081,
			Addrs:         []netip.Addr{netip.MustParseAddr("10.96.0.30")},
			NodePortAddrs: []netip.Prefix{netip.MustParsePrefix("172.18.0.0/24")}},
		{Name: "default/empty", Protocol: "tcp", ProxyPort: 40004, Port: 80, NodePort: 30082,
			Addrs: []netip.Addr{netip.MustParseAddr("10.96.0.40")}, NoEndpoints: true},
	}
	for _, fam := range []struct {
		name string
		v6   bool
	}{{"ipv4", false}, {"ipv6", true}} {
		got := BuildRules(portals, fam.v6)
		path := filepath.Join("testdata", "rules-"+fam.name+".golden")
		if *update {
			os.MkdirAll("testdata", 0o755)
			os.WriteFile(path, []byte(got), 0o644)
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s rules differ from %s:\n%s", fam.name, path, got)
		}
	}
}
