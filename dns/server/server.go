// Package server is svcnet's cluster DNS server: it answers the cluster zone
// from a zone.Zone, forwards everything else through a forward.Forwarder,
// and serves health, readiness and Prometheus metrics over HTTP.
//
// Each --listen address gets a UDP and a TCP socket. Requests are handled as
// follows:
//   - packets that do not parse are answered FORMERR by the DNS library;
//     requests with other than one question are FORMERR (SERVFAIL when the
//     question count is one but the question is missing), opcodes other
//     than QUERY and NOTIFY are NOTIMP (NOTIFY is answered like a query),
//     and EDNS versions other than 0 are BADVERS; UDP requests are read
//     into 512 bytes, as by the DNS library's server (longer ones are cut
//     and, when the rest does not unpack, FORMERR);
//   - answers larger than the client can take (512 bytes, the EDNS0 buffer
//     capped at 4096, or 64 KiB over TCP) are truncated with TC set;
//   - a panic while answering becomes SERVFAIL, counted in
//     coredns_panics_total, and never stops the server.
//
// Shutdown is graceful: on cancellation the listeners stop accepting and
// in-flight requests get ShutdownTimeout to finish.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svcnet/svcnet/dns/forward"
	"github.com/svcnet/svcnet/dns/zone"
	"github.com/svcnet/svcnet/internal/reuseport"
)

// Limits.
const (
	requestTimeout  = 5 * time.Second
	ShutdownTimeout = 5 * time.Second
)

// Handler answers DNS requests. It is safe for concurrent use.
type Handler struct {
	Zone    *zone.Zone         // may be nil: forward everything
	Forward *forward.Forwarder // may be nil: REFUSED for names outside the zone
	Metrics *Metrics           // may be nil
	Log     *slog.Logger
}

// ServeDNS answers r for a listener whose metrics server label is server.
func (h *Handler) ServeDNS(server string, w dns.ResponseWriter, r *dns.Msg) {
	start := time.Now()
	proto := "udp"
	if _, ok := w.LocalAddr().(*net.TCPAddr); ok {
		proto = "tcp"
	}
	family := "1"
	var ip net.IP
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.TCPAddr:
		ip = a.IP
	}
	if ip != nil && ip.To4() == nil {
		family = "2"
	}
	resp, plugin, wire := h.answer(r, proto == "tcp")
	if _, err := w.Write(wire); err != nil && h.Log != nil {
		h.Log.Debug("write dns response", "err", err)
	}
	if h.Metrics != nil {
		var qtype uint16
		if len(r.Question) > 0 {
			qtype = r.Question[0].Qtype
		}
		h.Metrics.observe(server, proto, family, qtype, r.Len(), len(wire), resp.Rcode, plugin, time.Since(start).Seconds())
	}
}

// Answer returns the response to r as it would be sent (truncated to what
// the client accepts) and the name of the part that produced it, CoreDNS
// style: "kubernetes", "forward", "cache", or "" for protocol errors. It
// never panics.
func (h *Handler) Answer(r *dns.Msg, tcp bool) (*dns.Msg, string) {
	resp, plugin, _ := h.answer(r, tcp)
	return resp, plugin
}

// answer also returns the packed response, packed once.
func (h *Handler) answer(r *dns.Msg, tcp bool) (*dns.Msg, string, []byte) {
	resp, plugin := h.respond(r, tcp)
	wire, err := fit(r, resp, tcp)
	if err != nil {
		if h.Log != nil {
			h.Log.Error("pack dns response", "err", err)
		}
		resp, plugin = errorReply(r, dns.RcodeServerFailure), ""
		wire, _ = fit(r, resp, tcp)
	}
	return resp, plugin, wire
}

func (h *Handler) respond(r *dns.Msg, tcp bool) (resp *dns.Msg, plugin string) {
	defer func() {
		if p := recover(); p != nil {
			panicCount.Add(1)
			if h.Metrics != nil {
				h.Metrics.panics.Inc()
			}
			if h.Log != nil {
				h.Log.Error("panic answering dns request", "panic", fmt.Sprint(p))
			}
			resp = errorReply(r, dns.RcodeServerFailure)
			plugin = ""
		}
	}()
	switch {
	case r.Response:
		return errorReply(r, dns.RcodeFormatError), ""
	case r.Opcode != dns.OpcodeQuery && r.Opcode != dns.OpcodeNotify:
		// NOTIFY passes the DNS library's accept function and CoreDNS's
		// server, and is answered like a query (with its opcode).
		return errorReply(r, dns.RcodeNotImplemented), ""
	case len(r.Question) == 0:
		// QDCOUNT 1 with the question missing unpacks to none: CoreDNS's
		// server answers SERVFAIL.
		return errorReply(r, dns.RcodeServerFailure), ""
	case len(r.Question) != 1:
		return errorReply(r, dns.RcodeFormatError), ""
	}
	opt := r.IsEdns0()
	if opt != nil && opt.Version() != 0 {
		m := errorReply(r, dns.RcodeBadVers)
		m.Rcode = dns.RcodeBadVers
		return m, ""
	}

	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if h.Zone != nil {
		resp = h.Zone.Serve(ctx, r)
		plugin = "kubernetes"
	}
	if resp == nil {
		if h.Forward == nil {
			resp, plugin = errorReply(r, dns.RcodeRefused), ""
		} else {
			var cached bool
			var err error
			resp, cached, err = h.Forward.Exchange(ctx, r, tcp)
			plugin = "forward"
			if cached {
				plugin = "cache"
			}
			if err != nil {
				if h.Log != nil {
					h.Log.Debug("forward failed", "name", r.Question[0].Name, "err", err)
				}
				// As CoreDNS's server writes a failed forward: SERVFAIL
				// without RA.
				resp = errorReply(r, dns.RcodeServerFailure)
			}
		}
	}
	resp.Id = r.Id
	return resp, plugin
}

// fit sets the response's EDNS0 record from the request's, truncates the
// response to what the client can receive, and packs it.
func fit(r, resp *dns.Msg, tcp bool) ([]byte, error) {
	size := dns.MinMsgSize
	extra := resp.Extra[:0]
	for _, rr := range resp.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	resp.Extra = extra
	// As CoreDNS: echo the client's OPT (its buffer size and DO bit, no
	// options) and fit the answer into that buffer, at least 512 bytes.
	if opt := r.IsEdns0(); opt != nil && resp.Rcode != dns.RcodeBadVers {
		size = max(dns.MinMsgSize, int(opt.UDPSize()))
		resp.SetEdns0(opt.UDPSize(), opt.Do())
	} else if resp.Rcode == dns.RcodeBadVers {
		resp.SetEdns0(0, false)
	}
	if tcp {
		size = dns.MaxMsgSize
	}
	resp.Compress = true
	b, err := resp.Pack()
	if err != nil || len(b) <= size {
		return b, err
	}
	resp.Truncate(size)
	return resp.Pack()
}

func errorReply(r *dns.Msg, rcode int) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	if len(r.Question) != 1 {
		m.Question = nil
	}
	return m
}

// Config is where the server listens.
type Config struct {
	// Listen are the DNS addresses (host:port); each gets UDP and TCP.
	Listen []string
	// HealthListen serves /health, ReadyListen /ready, MetricsListen
	// /metrics; an empty address disables it, and equal addresses share one
	// HTTP server.
	HealthListen, ReadyListen, MetricsListen string
	// UDPReaders is the number of UDP sockets (and reading goroutines) per
	// listen address; 0 means one per CPU (GOMAXPROCS).
	UDPReaders int
}

// Server runs the listeners.
type Server struct {
	cfg     Config
	h       *Handler
	ready   func() bool
	log     *slog.Logger
	dns     []*dns.Server
	udp     []*udpReader
	udpDone sync.WaitGroup
	dnsAddr []string
	http    []*http.Server
	httpLn  map[string]net.Listener
}

// New returns a server; ready reports readiness for /ready (the index has
// synced).
func New(cfg Config, h *Handler, ready func() bool, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{cfg: cfg, h: h, ready: ready, log: log, httpLn: map[string]net.Listener{}}
}

// ServerLabel is the metrics server label of a listen address, as CoreDNS
// writes it ("dns://:53").
func ServerLabel(listen string) string { return "dns://" + listen }

// listenUDPAndTCP binds the UDP sockets and a TCP listener on the same port.
// With port 0 the kernel picks a free UDP port whose TCP twin may be taken by
// another process; then it tries again with a new port (a few times) instead
// of failing.
func listenUDPAndTCP(addr string, readers int) ([]*net.UDPConn, net.Listener, error) {
	_, port, _ := net.SplitHostPort(addr)
	for attempt := 0; ; attempt++ {
		pcs, err := reuseport.ListenUDP(addr, readers)
		if err != nil {
			return nil, nil, fmt.Errorf("listen udp %s: %w", addr, err)
		}
		ln, err := net.Listen("tcp", pcs[0].LocalAddr().String())
		if err == nil {
			return pcs, ln, nil
		}
		for _, pc := range pcs {
			pc.Close()
		}
		if port != "0" || attempt >= 9 || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, fmt.Errorf("listen tcp %s: %w", addr, err)
		}
	}
}

// Start binds every socket; on any failure it closes what it opened and
// returns the error. Serving starts in the background.
func (s *Server) Start() error {
	var closers []func()
	fail := func(err error) error {
		for _, c := range closers {
			c()
		}
		return err
	}
	readers := s.cfg.UDPReaders
	if readers <= 0 {
		readers = runtime.GOMAXPROCS(0)
	}
	for _, addr := range s.cfg.Listen {
		pcs, ln, err := listenUDPAndTCP(addr, readers)
		if err != nil {
			return fail(err)
		}
		for _, pc := range pcs {
			closers = append(closers, func() { pc.Close() })
		}
		closers = append(closers, func() { ln.Close() })
		label := ServerLabel(addr)
		handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) { s.h.ServeDNS(label, w, r) })
		s.dns = append(s.dns,
			&dns.Server{Listener: ln, Handler: handler, ReadTimeout: 10 * time.Second, IdleTimeout: func() time.Duration { return 10 * time.Second }})
		for _, pc := range pcs {
			s.udp = append(s.udp, newUDPReader(pc, s.h, label))
		}
		s.dnsAddr = append(s.dnsAddr, pcs[0].LocalAddr().String())
	}
	muxes := map[string]*http.ServeMux{}
	mux := func(addr string) *http.ServeMux {
		if m := muxes[addr]; m != nil {
			return m
		}
		muxes[addr] = http.NewServeMux()
		return muxes[addr]
	}
	if a := s.cfg.HealthListen; a != "" {
		mux(a).HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("OK")) })
	}
	if a := s.cfg.ReadyListen; a != "" {
		mux(a).HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
			if s.ready != nil && !s.ready() {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("kubernetes"))
				return
			}
			_, _ = w.Write([]byte("OK"))
		})
	}
	if a := s.cfg.MetricsListen; a != "" && s.h.Metrics != nil {
		mux(a).Handle("/metrics", promhttp.HandlerFor(s.h.Metrics.Registry, promhttp.HandlerOpts{}))
	}
	var serve []func()
	for addr, m := range muxes {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fail(fmt.Errorf("listen http %s: %w", addr, err))
		}
		closers = append(closers, func() { ln.Close() })
		s.httpLn[addr] = ln
		hs := &http.Server{Handler: m, ReadHeaderTimeout: 5 * time.Second}
		s.http = append(s.http, hs)
		serve = append(serve, func() {
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("http listener stopped", "err", err)
			}
		})
	}
	// Wait until every DNS server runs, so that a Shutdown right after
	// Start cannot miss one that has not started yet.
	var started sync.WaitGroup
	for _, d := range s.dns {
		started.Add(1)
		d.NotifyStartedFunc = started.Done
		go func() {
			if err := d.ActivateAndServe(); err != nil {
				s.log.Error("dns listener stopped", "err", err)
			}
		}()
	}
	started.Wait()
	for _, u := range s.udp {
		s.udpDone.Add(1)
		go func() {
			defer s.udpDone.Done()
			u.serve()
		}()
	}
	for _, f := range serve {
		go f()
	}
	s.log.Info("dns serving", "listen", s.dnsAddr)
	return nil
}

// DNSAddrs returns the bound DNS addresses (UDP and TCP share each port).
func (s *Server) DNSAddrs() []string { return append([]string(nil), s.dnsAddr...) }

// HTTPAddr returns the bound address for a configured HTTP address.
func (s *Server) HTTPAddr(configured string) string {
	if ln := s.httpLn[configured]; ln != nil {
		return ln.Addr().String()
	}
	return ""
}

// Shutdown stops every listener, letting in-flight requests finish within
// ctx.
func (s *Server) Shutdown(ctx context.Context) {
	var wg sync.WaitGroup
	for _, d := range s.dns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = d.ShutdownContext(ctx)
		}()
	}
	// UDP: stop reading, let the answers in flight go out (within ctx),
	// then close.
	for _, u := range s.udp {
		u.stop()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.udpDone.Wait()
		flushed := make(chan struct{})
		go func() {
			for _, u := range s.udp {
				u.inFlight.Wait()
			}
			close(flushed)
		}()
		select {
		case <-flushed:
		case <-ctx.Done():
		}
		for _, u := range s.udp {
			_ = u.conn.Close()
		}
	}()
	for _, hs := range s.http {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = hs.Shutdown(ctx)
		}()
	}
	wg.Wait()
}

// Run starts the server and blocks until ctx is done, then shuts down
// gracefully.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	s.Shutdown(sctx)
	s.log.Info("dns stopped")
	return nil
}
