package ingress

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the controller's Prometheus metrics. Request series are
// labelled by the Ingress (namespace, name), the backend Service and the
// status code; the series of an Ingress are deleted when it stops being
// served, so their number stays bounded by the served Ingresses.
type Metrics struct {
	Requests        *prometheus.CounterVec
	RequestDuration *prometheus.HistogramVec
	UpstreamLatency *prometheus.HistogramVec
	UpstreamRetries prometheus.Counter
	ConfigSyncs     prometheus.Counter
	LastConfigSync  prometheus.Gauge
	ServedIngresses prometheus.Gauge
	Leader          prometheus.Gauge
	StatusUpdates   *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns, sub = "svcnet", "ingress"
	lat := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5ms .. 16s
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "HTTP requests answered, by Ingress, backend Service and status code (499: the client went away)"},
			[]string{"namespace", "ingress", "service", "status"}),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "request_duration_seconds",
			Help: "Time from a request's headers to the end of its response", Buckets: lat},
			[]string{"namespace", "ingress", "service"}),
		UpstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "upstream_latency_seconds",
			Help: "Time from sending a request to an endpoint to receiving its response headers", Buckets: lat},
			[]string{"namespace", "ingress", "service"}),
		UpstreamRetries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "upstream_retries_total",
			Help: "Requests sent to another endpoint after a connection to one failed"}),
		ConfigSyncs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "config_syncs_total",
			Help: "Routing tables built and swapped in"}),
		LastConfigSync: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "config_last_sync_timestamp_seconds",
			Help: "When the routing table was last built"}),
		ServedIngresses: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "served_ingresses",
			Help: "Ingresses of this controller's class"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "leader",
			Help: "1 while this instance holds the status Lease (writes Ingress status and events)"}),
		StatusUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "status_updates_total",
			Help: "Ingress status writes, by result"}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.RequestDuration, m.UpstreamLatency, m.UpstreamRetries, m.ConfigSyncs, m.LastConfigSync,
			m.ServedIngresses, m.Leader, m.StatusUpdates)
	}
	return m
}

func (m *Metrics) observeRequest(rt *route, status int, d time.Duration) {
	if status == 0 {
		status = 502
	}
	m.Requests.WithLabelValues(rt.ingress.Namespace, rt.ingress.Name, rt.service, strconv.Itoa(status)).Inc()
	m.RequestDuration.WithLabelValues(rt.ingress.Namespace, rt.ingress.Name, rt.service).Observe(d.Seconds())
}

func (m *Metrics) observeUpstream(rt *route, d time.Duration) {
	m.UpstreamLatency.WithLabelValues(rt.ingress.Namespace, rt.ingress.Name, rt.service).Observe(d.Seconds())
}

// forget deletes the series of an Ingress no longer served.
func (m *Metrics) forget(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "ingress": name}
	m.Requests.DeletePartialMatch(l)
	m.RequestDuration.DeletePartialMatch(l)
	m.UpstreamLatency.DeletePartialMatch(l)
}
