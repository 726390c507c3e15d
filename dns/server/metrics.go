package server

import (
	"strconv"
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are CoreDNS's metrics, with CoreDNS's names and label sets, so that
// dashboards built for CoreDNS work unchanged. The zone label is always "."
// (svcnet serves one server block) and view is always "".
type Metrics struct {
	Registry *prometheus.Registry

	requests     *prometheus.CounterVec
	responses    *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	requestSize  *prometheus.HistogramVec
	responseSize *prometheus.HistogramVec
	panics       prometheus.Counter

	cacheHits     *prometheus.CounterVec
	cacheMisses   *prometheus.CounterVec
	cacheRequests *prometheus.CounterVec
	cacheEntries  *prometheus.GaugeVec

	// cacheServer is the server label of the cache metrics.
	cacheServer string
}

const (
	metricsZone = "."
	metricsView = ""
)

var sizeBuckets = []float64{0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16e3, 32e3, 48e3, 64e3}

// NewMetrics registers the metrics in a fresh registry together with the Go
// runtime and process collectors (process_resident_memory_bytes is how RSS is
// read in the benchmark). cacheServer labels the cache metrics.
func NewMetrics(cacheServer string) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), cacheServer: cacheServer}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "coredns", Subsystem: "dns", Name: "requests_total",
		Help: "Counter of DNS requests made per zone, protocol and family.",
	}, []string{"server", "zone", "view", "proto", "family", "type"})
	m.responses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "coredns", Subsystem: "dns", Name: "responses_total",
		Help: "Counter of response status codes.",
	}, []string{"server", "zone", "view", "rcode", "plugin"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "coredns", Subsystem: "dns", Name: "request_duration_seconds",
		Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		Help:    "Histogram of the time (in seconds) each request took per zone.",
	}, []string{"server", "zone", "view", "type"})
	m.requestSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "coredns", Subsystem: "dns", Name: "request_size_bytes",
		Help: "Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and protocol.", Buckets: sizeBuckets,
	}, []string{"server", "zone", "view", "proto"})
	m.responseSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "coredns", Subsystem: "dns", Name: "response_size_bytes",
		Help: "Size of the returned response in bytes.", Buckets: sizeBuckets,
	}, []string{"server", "zone", "view", "proto"})
	m.panics = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "coredns", Name: "panics_total", Help: "A metrics that counts the number of panics.",
	})
	m.cacheHits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "coredns", Subsystem: "cache", Name: "hits_total", Help: "The count of cache hits.",
	}, []string{"server", "type", "zones", "view"})
	m.cacheMisses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "coredns", Subsystem: "cache", Name: "misses_total",
		Help: "The count of cache misses. Deprecated, derive misses from cache hits/requests counters.",
	}, []string{"server", "zones", "view"})
	m.cacheRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "coredns", Subsystem: "cache", Name: "requests_total", Help: "The count of cache requests.",
	}, []string{"server", "zones", "view"})
	m.cacheEntries = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "coredns", Subsystem: "cache", Name: "entries", Help: "The number of elements in the cache.",
	}, []string{"server", "type", "zones", "view"})
	m.Registry.MustRegister(m.requests, m.responses, m.duration, m.requestSize, m.responseSize, m.panics,
		m.cacheHits, m.cacheMisses, m.cacheRequests, m.cacheEntries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// CacheHit implements forward.CacheObserver.
func (m *Metrics) CacheHit(kind string) {
	m.cacheRequests.WithLabelValues(m.cacheServer, metricsZone, metricsView).Inc()
	m.cacheHits.WithLabelValues(m.cacheServer, kind, metricsZone, metricsView).Inc()
}

// CacheMiss implements forward.CacheObserver.
func (m *Metrics) CacheMiss() {
	m.cacheRequests.WithLabelValues(m.cacheServer, metricsZone, metricsView).Inc()
	m.cacheMisses.WithLabelValues(m.cacheServer, metricsZone, metricsView).Inc()
}

// monitoredTypes are the query types CoreDNS reports by name; others are
// "other".
var monitoredTypes = map[uint16]bool{
	dns.TypeA: true, dns.TypeAAAA: true, dns.TypeMX: true, dns.TypeSOA: true, dns.TypeCNAME: true,
	dns.TypePTR: true, dns.TypeTXT: true, dns.TypeNS: true, dns.TypeSRV: true, dns.TypeDS: true,
	dns.TypeDNSKEY: true, dns.TypeRRSIG: true, dns.TypeNSEC: true, dns.TypeNSEC3: true,
	dns.TypeHTTPS: true, dns.TypeSVCB: true, dns.TypeIXFR: true, dns.TypeAXFR: true, dns.TypeANY: true,
}

func typeLabel(t uint16) string {
	if monitoredTypes[t] {
		return dns.TypeToString[t]
	}
	return "other"
}

func rcodeLabel(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return strconv.Itoa(rc)
}

// observe records one answered request.
// observers are the metric children one kind of request updates, resolved
// once so that a cached answer costs a few atomic adds, not label lookups.
type observers struct {
	requests, responses         prometheus.Counter
	duration, reqSize, respSize prometheus.Observer
}

func (m *Metrics) observers(server, proto, family string, qtype uint16, rcode int, plugin string) *observers {
	t := typeLabel(qtype)
	return &observers{
		requests:  m.requests.WithLabelValues(server, metricsZone, metricsView, proto, family, t),
		responses: m.responses.WithLabelValues(server, metricsZone, metricsView, rcodeLabel(rcode), plugin),
		duration:  m.duration.WithLabelValues(server, metricsZone, metricsView, t),
		reqSize:   m.requestSize.WithLabelValues(server, metricsZone, metricsView, proto),
		respSize:  m.responseSize.WithLabelValues(server, metricsZone, metricsView, proto),
	}
}

func (o *observers) observe(reqSize, respSize int, seconds float64) {
	o.requests.Inc()
	o.responses.Inc()
	o.duration.Observe(seconds)
	o.reqSize.Observe(float64(reqSize))
	o.respSize.Observe(float64(respSize))
}

func (m *Metrics) observe(server, proto, family string, qtype uint16, reqSize, respSize int, rcode int, plugin string, seconds float64) {
	m.observers(server, proto, family, qtype, rcode, plugin).observe(reqSize, respSize, seconds)
}

var panicCount atomic.Int64

func panicsSeen() int64 { return panicCount.Load() }
