package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ProxyHealth tracks whether the proxy keeps its data plane up to date. It is
// healthy unless an update has been queued for longer than Timeout without a
// successful sync (kube-proxy's rule), and serves /healthz and /livez.
type ProxyHealth struct {
	Timeout time.Duration
	// Metrics, when set, counts the answers of /healthz and /livez.
	Metrics *Metrics

	mu           sync.Mutex
	lastUpdated  time.Time
	oldestQueue  time.Time
	nodeEligible bool
}

// NewProxyHealth returns a tracker with the given unhealthy timeout
// (kube-proxy uses twice the sync period).
func NewProxyHealth(timeout time.Duration) *ProxyHealth {
	return &ProxyHealth{Timeout: timeout, nodeEligible: true}
}

// QueuedUpdate records that a sync was requested.
func (h *ProxyHealth) QueuedUpdate() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.oldestQueue.IsZero() {
		h.oldestQueue = time.Now()
	}
}

// Updated records a successful sync.
func (h *ProxyHealth) Updated() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUpdated = time.Now()
	h.oldestQueue = time.Time{}
}

// SetNodeEligible records whether this node should receive load-balancer
// traffic (false while the Node is being deleted).
func (h *ProxyHealth) SetNodeEligible(ok bool) {
	h.mu.Lock()
	h.nodeEligible = ok
	h.mu.Unlock()
}

// Healthy reports the current health and the last update time.
func (h *ProxyHealth) Healthy() (bool, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	healthy := h.oldestQueue.IsZero() || time.Since(h.oldestQueue) < h.Timeout
	return healthy, h.lastUpdated
}

// ServeHTTP answers /healthz (health and node eligibility) and /livez
// (health only) with kube-proxy's JSON body; 200 when healthy, 503 if not.
func (h *ProxyHealth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	healthy, last := h.Healthy()
	h.mu.Lock()
	eligible := h.nodeEligible
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	code := http.StatusOK
	if r.URL.Path == "/livez" {
		if !healthy {
			code = http.StatusServiceUnavailable
		}
		if h.Metrics != nil {
			h.Metrics.ProxyLivezTotal.WithLabelValues(strconv.Itoa(code)).Inc()
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"lastUpdated": %q,"currentTime": %q}`, last.String(), time.Now().String())
		return
	}
	if !healthy || !eligible {
		code = http.StatusServiceUnavailable
	}
	if h.Metrics != nil {
		h.Metrics.ProxyHealthzTotal.WithLabelValues(strconv.Itoa(code)).Inc()
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"lastUpdated": %q,"currentTime": %q, "nodeEligible": %v}`, last.String(), time.Now().String(), eligible)
}

// ServiceHealthServer runs one HTTP listener per healthCheckNodePort and
// answers, for its Service, 200 when this node has ready local endpoints and
// the proxy is healthy, 503 otherwise, with kube-proxy's JSON body.
type ServiceHealthServer struct {
	log    *slog.Logger
	proxy  *ProxyHealth
	listen func(port uint16) (net.Listener, error)

	mu        sync.Mutex
	services  map[types.NamespacedName]*hcService
	endpoints map[types.NamespacedName]int
}

type hcService struct {
	port uint16
	srv  *http.Server
	ln   net.Listener
}

// NewServiceHealthServer returns a server; listen opens the listener for a
// port (nil binds 0.0.0.0:port). proxy may be nil (always healthy).
func NewServiceHealthServer(log *slog.Logger, proxy *ProxyHealth, listen func(port uint16) (net.Listener, error)) *ServiceHealthServer {
	if listen == nil {
		listen = func(port uint16) (net.Listener, error) {
			return net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(int(port))))
		}
	}
	if log == nil {
		log = slog.Default()
	}
	return &ServiceHealthServer{log: log, proxy: proxy, listen: listen,
		services: map[types.NamespacedName]*hcService{}, endpoints: map[types.NamespacedName]int{}}
}

// SyncServices makes the set of listeners match want: new ports are opened,
// gone or changed ones closed. A port that cannot be opened is reported in
// the returned error and retried on the next call; the others still work.
func (s *ServiceHealthServer) SyncServices(want map[types.NamespacedName]uint16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, svc := range s.services {
		if p, ok := want[name]; !ok || p != svc.port {
			_ = svc.srv.Close()
			delete(s.services, name)
		}
	}
	var errs []error
	for name, port := range want {
		if _, ok := s.services[name]; ok {
			continue
		}
		ln, err := s.listen(port)
		if err != nil {
			errs = append(errs, fmt.Errorf("health check node port %d for %s: %w", port, name, err))
			continue
		}
		name := name
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(name, w) }),
			ReadHeaderTimeout: 5 * time.Second}
		s.services[name] = &hcService{port: port, srv: srv, ln: ln}
		go func() { _ = srv.Serve(ln) }()
	}
	return errors.Join(errs...)
}

// SyncEndpoints records the number of local ready endpoints per Service.
func (s *ServiceHealthServer) SyncEndpoints(counts map[types.NamespacedName]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = counts
}

// Close stops every listener.
func (s *ServiceHealthServer) Close() {
	_ = s.SyncServices(nil)
}

func (s *ServiceHealthServer) serve(name types.NamespacedName, w http.ResponseWriter) {
	s.mu.Lock()
	count := s.endpoints[name]
	s.mu.Unlock()
	healthy := true
	if s.proxy != nil {
		healthy, _ = s.proxy.Healthy()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
	if count != 0 && healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
		name.Namespace, name.Name, count, healthy)
}

// ServeHTTPOn serves h on addr until ctx ends.
func ServeHTTPOn(ctx context.Context, addr string, h http.Handler) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	return nil
}
