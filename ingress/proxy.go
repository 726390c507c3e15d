package ingress

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ProxyConfig tunes the connections to the backends. Zero values take the
// defaults, which are ingress-nginx's.
type ProxyConfig struct {
	// ConnectTimeout bounds a connection attempt to one endpoint
	// (proxy-connect-timeout, 5s).
	ConnectTimeout time.Duration
	// ReadTimeout bounds the wait for a backend's response headers
	// (proxy-read-timeout, 60s).
	ReadTimeout time.Duration
	// NextUpstreamTries is how many endpoints one request may try when
	// connecting fails (proxy-next-upstream-tries, 3).
	NextUpstreamTries int
	// KeepaliveConnections is the most idle connections kept per endpoint
	// (32).
	KeepaliveConnections int
	// KeepaliveTimeout closes idle backend connections after this long
	// (upstream-keepalive-timeout, 60s).
	KeepaliveTimeout time.Duration
	// HTTPSPort is the port redirects to HTTPS name (443, left out of the
	// URL, by default).
	HTTPSPort int
}

func (c *ProxyConfig) defaults() {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 60 * time.Second
	}
	if c.NextUpstreamTries <= 0 {
		c.NextUpstreamTries = 3
	}
	if c.KeepaliveConnections <= 0 {
		c.KeepaliveConnections = 32
	}
	if c.KeepaliveTimeout <= 0 {
		c.KeepaliveTimeout = 60 * time.Second
	}
	if c.HTTPSPort <= 0 {
		c.HTTPSPort = 443
	}
}

// Proxy is the L7 data path: an http.Handler routing each request by the
// current Table and proxying it to an endpoint of the chosen Service.
type Proxy struct {
	table     atomic.Pointer[Table]
	rp        *httputil.ReverseProxy
	transport *http.Transport
	cfg       ProxyConfig
	metrics   *Metrics
	log       *slog.Logger
}

// NewProxy returns a proxy with no table: it answers 503 until SetTable.
func NewProxy(cfg ProxyConfig, m *Metrics, log *slog.Logger) *Proxy {
	cfg.defaults()
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.Default()
	}
	p := &Proxy{cfg: cfg, metrics: m, log: log}
	p.transport = &http.Transport{
		// Never an environment proxy: backends are pod addresses.
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   cfg.ConnectTimeout,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   cfg.KeepaliveConnections,
		IdleConnTimeout:       cfg.KeepaliveTimeout,
		ResponseHeaderTimeout: cfg.ReadTimeout,
		ExpectContinueTimeout: time.Second,
		// A proxy passes Accept-Encoding and bodies through untouched.
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      &retryTransport{base: p.transport, tries: cfg.NextUpstreamTries, metrics: m},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		BufferPool:     bufferPool{},
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return p
}

// SetTable swaps the routing table in; requests already routed finish with
// the table they started with, and no connection is closed.
func (p *Proxy) SetTable(t *Table) { p.table.Store(t) }

// Table is the current routing table (nil before the first).
func (p *Proxy) Table() *Table { return p.table.Load() }

// CloseIdleConnections closes the idle backend connections.
func (p *Proxy) CloseIdleConnections() { p.transport.CloseIdleConnections() }

type stateKey struct{}

// reqState is one request's routing decision, shared by the handler, the
// reverse proxy's hooks and the retrying transport (all on the handler's
// goroutine).
type reqState struct {
	route     *route
	ep        *endpoint
	tried     []*endpoint
	setCookie *http.Cookie // sent with the response; nil for none
	rewritten bool
	path      string
	query     string
	status    int
	body      *guardBody
	hsts      bool // an HTTPS response of a host with TLS
}

func stateOf(r *http.Request) *reqState {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	return st
}

// ServeHTTP routes and proxies one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	t := p.table.Load()
	if t == nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, serviceUnavailableMessage)
		return
	}
	m := t.Route(r.Host, r.URL.Path)
	rt := m.route
	st := &reqState{route: rt}
	defer func() {
		p.metrics.observeRequest(rt, st.status, time.Since(start))
		if p.log.Enabled(r.Context(), slog.LevelDebug) {
			ep := ""
			if st.ep != nil {
				ep = st.ep.addr
			}
			p.log.Debug("request", "host", r.Host, "method", r.Method, "uri", r.RequestURI, "status", st.status,
				"ingress", rt.ingress.String(), "service", rt.service, "path", m.Path(), "endpoint", ep,
				"duration", time.Since(start))
		}
	}()
	hasTLS := t.HasTLS(r.Host)
	if r.TLS == nil && (rt.forceSSLRedirect || hasTLS && (rt.sslRedirect || rt.ingress == types.NamespacedName{})) &&
		!strings.HasPrefix(r.URL.Path, acmeChallengePath) {
		st.status = http.StatusPermanentRedirect
		p.redirectToHTTPS(w, r)
		return
	}
	if r.TLS != nil && hasTLS {
		st.hsts = true
		w.Header().Set("Strict-Transport-Security", hstsValue)
	}
	up := rt.upstream
	if up == nil || len(up.endpoints) == 0 {
		st.status = rt.status
		if up != nil {
			st.status = http.StatusServiceUnavailable
		}
		writeStatus(w, st.status)
		return
	}
	if af := rt.affinity; af != nil {
		st.ep = pickAffinity(af, up, r, st)
	} else {
		st.ep = up.next(nil)
	}
	if rt.rewrite != nil {
		st.rewritten, st.path, st.query = rewritePath(rt, cleanPath(r.URL.Path), r.URL.RawQuery)
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
	if st.status == 0 {
		st.status = http.StatusBadGateway
	}
}

// acmeChallengePath is never redirected to HTTPS (ingress-nginx leaves
// ACME HTTP-01 challenges on plain HTTP).
const acmeChallengePath = "/.well-known/acme-challenge/"

// redirectToHTTPS answers a plain HTTP request with a 308 to the same URI
// over HTTPS, as ingress-nginx's ssl-redirect does (its
// http-redirect-code).
func (p *Proxy) redirectToHTTPS(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if p.cfg.HTTPSPort != 443 || strings.Contains(host, ":") {
		host = net.JoinHostPort(host, strconv.Itoa(p.cfg.HTTPSPort))
		host = strings.TrimSuffix(host, ":443")
	}
	w.Header().Set("Location", "https://"+host+r.RequestURI)
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusPermanentRedirect)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, "<html>\r\n<head><title>308 Permanent Redirect</title></head>\r\n<body>\r\n<center><h1>308 Permanent Redirect</h1></center>\r\n</body>\r\n</html>\r\n")
	}
}

func writeStatus(w http.ResponseWriter, code int) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	switch code {
	case http.StatusNotFound:
		_, _ = io.WriteString(w, defaultBackendBody)
	case http.StatusServiceUnavailable:
		_, _ = io.WriteString(w, serviceUnavailableMessage)
	default:
		_, _ = io.WriteString(w, strconv.Itoa(code)+" "+http.StatusText(code)+"\n")
	}
}

// rewrite fills the outbound request: the endpoint, the rewritten path and
// the headers ingress-nginx sets (with its default use-forwarded-headers
// false: incoming X-Forwarded-* are replaced, not trusted).
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	st := stateOf(pr.In)
	out, in := pr.Out, pr.In
	out.URL.Scheme = "http"
	out.URL.Host = st.ep.addr
	if st.rewritten {
		out.URL.Path, out.URL.RawPath, out.URL.RawQuery = st.path, "", st.query
	}
	// The Host header goes through as the client sent it (ingress-nginx's
	// $best_http_host), unless upstream-vhost replaces it.
	out.Host = in.Host
	if st.route.upstreamVhost != "" {
		out.Host = st.route.upstreamVhost
	}
	client, _, err := net.SplitHostPort(in.RemoteAddr)
	if err != nil {
		client = in.RemoteAddr
	}
	port := "80"
	if la, ok := in.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, pt, err := net.SplitHostPort(la.String()); err == nil {
			port = pt
		}
	}
	h := out.Header
	h.Set("X-Real-IP", client)
	h.Set("X-Forwarded-For", client)
	h.Set("X-Forwarded-Host", in.Host)
	h.Set("X-Forwarded-Port", port)
	scheme := "http"
	if in.TLS != nil {
		scheme = "https"
	}
	h.Set("X-Forwarded-Proto", scheme)
	h.Set("X-Forwarded-Scheme", scheme)
	h.Set("X-Scheme", scheme)
	h.Set("X-Original-URI", in.RequestURI)
	if h.Get("X-Request-ID") == "" {
		h.Set("X-Request-ID", requestID())
	}
	// httpoxy: a Proxy request header must not reach CGI-like backends.
	h.Del("Proxy")
	if out.Body != nil && out.Body != http.NoBody {
		st.body = &guardBody{rc: out.Body}
		out.Body = st.body
	}
}

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (p *Proxy) modifyResponse(resp *http.Response) error {
	st := stateOf(resp.Request)
	if st == nil {
		return nil
	}
	st.status = resp.StatusCode
	if st.hsts {
		resp.Header.Set("Strict-Transport-Security", hstsValue)
	}
	if st.setCookie != nil {
		resp.Header.Add("Set-Cookie", st.setCookie.String())
	}
	return nil
}

// errorHandler answers a request no endpoint answered: 504 when the backend
// timed out, 502 otherwise; nothing when the client went away (counted as
// nginx's 499).
func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	st := stateOf(r)
	if r.Context().Err() != nil {
		st.status = 499
		return
	}
	code := http.StatusBadGateway
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		code = http.StatusGatewayTimeout
	}
	st.status = code
	ep := ""
	if st.ep != nil {
		ep = st.ep.addr
	}
	p.log.Debug("backend failed", "ingress", st.route.ingress.String(), "service", st.route.service, "endpoint", ep, "err", err)
	writeStatus(w, code)
}

// retryTransport sends a request to its chosen endpoint and, when the
// connection cannot be made (nothing was sent), to another endpoint, up to
// tries endpoints in all (ingress-nginx's proxy_next_upstream "error
// timeout" for connection errors).
type retryTransport struct {
	base    http.RoundTripper
	tries   int
	metrics *Metrics
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	st := stateOf(req)
	if st == nil {
		return t.base.RoundTrip(req)
	}
	for attempt := 1; ; attempt++ {
		start := time.Now()
		resp, err := t.base.RoundTrip(req)
		if err == nil {
			t.metrics.observeUpstream(st.route, time.Since(start))
			return resp, nil
		}
		if attempt >= t.tries || !isConnectError(err) || (st.body != nil && st.body.read.Load()) || req.Context().Err() != nil {
			return nil, err
		}
		next := st.retry()
		if next == nil {
			return nil, err
		}
		t.metrics.UpstreamRetries.Inc()
		r2 := req.WithContext(req.Context())
		u := *req.URL
		u.Host = next.addr
		r2.URL = &u
		req = r2
	}
}

// isConnectError reports whether err happened before the request was sent.
func isConnectError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// retry picks another endpoint after a failed connection: with cookie
// affinity and session-cookie-change-on-failure the session moves there
// (a new cookie), otherwise the cookie is left as it is.
func (st *reqState) retry() *endpoint {
	st.tried = append(st.tried, st.ep)
	up := st.route.upstream
	af := st.route.affinity
	var ep *endpoint
	if af != nil && af.ChangeOnFailure {
		var key uint64
		if af.Mode == AffinityBalanced {
			for range 20 {
				k := newSessionKey()
				if e := up.hrw(k, st.tried); e != nil {
					ep, key = e, k
					break
				}
			}
		} else if ep = up.next(st.tried); ep != nil {
			key = newSessionKey()
		}
		if ep != nil {
			st.setCookie = sessionCookie(af, st.route.cookiePath, key, ep)
		}
	} else {
		ep = up.next(st.tried)
	}
	if ep != nil {
		st.ep = ep
	}
	return ep
}

// next is the next endpoint in round-robin order that is not in exclude.
func (u *upstream) next(exclude []*endpoint) *endpoint {
	n := uint64(len(u.endpoints))
	for range n {
		ep := u.endpoints[(u.rr.Add(1)-1)%n]
		if !containsEndpoint(exclude, ep) {
			return ep
		}
	}
	return nil
}

func containsEndpoint(list []*endpoint, ep *endpoint) bool {
	for _, e := range list {
		if e == ep {
			return true
		}
	}
	return false
}

// rewritePath applies rewrite-target: the whole path becomes the target
// with $1..$9 replaced by the captures of the location's expression (nginx's
// rewrite ... break). A target with a query replaces the request's query
// when it ends in "?", else the request's query follows it.
func rewritePath(rt *route, path, query string) (bool, string, string) {
	idx := rt.rewrite.FindStringSubmatchIndex(path)
	if idx == nil {
		return false, "", ""
	}
	var b strings.Builder
	t := rt.rewriteTarget
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c == '$' && i+1 < len(t) && t[i+1] >= '0' && t[i+1] <= '9' {
			g := int(t[i+1] - '0')
			if 2*g+1 < len(idx) && idx[2*g] >= 0 {
				b.WriteString(path[idx[2*g]:idx[2*g+1]])
			}
			i++
			continue
		}
		b.WriteByte(c)
	}
	newPath := b.String()
	newQuery := query
	if i := strings.IndexByte(newPath, '?'); i >= 0 {
		q := newPath[i+1:]
		newPath = newPath[:i]
		switch {
		case strings.HasSuffix(q, "?"):
			newQuery = strings.TrimSuffix(q, "?")
		case q == "":
			newQuery = query
		case query != "":
			newQuery = q + "&" + query
		default:
			newQuery = q
		}
	}
	if !strings.HasPrefix(newPath, "/") {
		newPath = "/" + newPath
	}
	return true, newPath, newQuery
}

// guardBody is the outbound request body: it records whether anything was
// read (then a retry could not resend it) and ignores Close, so that a
// failed connection attempt (after which the transport closes the body)
// leaves it usable for the next endpoint. The server closes the inbound
// body when the handler returns.
type guardBody struct {
	rc   io.ReadCloser
	read atomic.Bool
}

func (g *guardBody) Read(p []byte) (int, error) {
	n, err := g.rc.Read(p)
	if n > 0 {
		g.read.Store(true)
	}
	return n, err
}

func (g *guardBody) Close() error { return nil }

// bufferPool recycles the reverse proxy's copy buffers.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}

func (bufferPool) Get() []byte  { return *(copyBuffers.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }
