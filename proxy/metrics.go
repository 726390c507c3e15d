package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the proxy's Prometheus metrics, under kube-proxy's names
// (subsystem "kubeproxy") so existing dashboards keep working.
type Metrics struct {
	SyncProxyRulesLatency        prometheus.Histogram
	SyncFullProxyRulesLatency    prometheus.Histogram
	SyncPartialProxyRulesLatency prometheus.Histogram
	NetworkProgrammingLatency    prometheus.Histogram
	SyncProxyRulesLastTimestamp  prometheus.Gauge
	SyncProxyRulesLastQueued     prometheus.Gauge
	EndpointChangesPending       prometheus.Gauge
	EndpointChangesTotal         prometheus.Counter
	ServiceChangesPending        prometheus.Gauge
	ServiceChangesTotal          prometheus.Counter
	IPTablesRestoreFailuresTotal prometheus.Counter
	IPTablesPartialRestoreFails  prometheus.Counter
	IPTablesRulesTotal           *prometheus.GaugeVec
	IPTablesRulesLastSync        *prometheus.GaugeVec
	NoLocalEndpointsTotal        *prometheus.GaugeVec
	SyncProxyRulesErrorsTotal    prometheus.Counter
}

const metricsSubsystem = "kubeproxy"

// NewMetrics creates the metrics and registers them with reg (skipped if
// reg is nil, which tests use).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	var npBuckets []float64
	npBuckets = append(npBuckets, prometheus.LinearBuckets(0.25, 0.25, 2)...)
	npBuckets = append(npBuckets, prometheus.LinearBuckets(1, 1, 59)...)
	npBuckets = append(npBuckets, prometheus.LinearBuckets(60, 5, 12)...)
	npBuckets = append(npBuckets, prometheus.LinearBuckets(120, 30, 7)...)
	m := &Metrics{
		SyncProxyRulesLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds", Buckets: syncBuckets}),
		SyncFullProxyRulesLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: metricsSubsystem,
			Name: "sync_full_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: syncBuckets}),
		SyncPartialProxyRulesLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: metricsSubsystem,
			Name: "sync_partial_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: syncBuckets}),
		NetworkProgrammingLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: metricsSubsystem,
			Name: "network_programming_duration_seconds", Help: "In Cluster Network Programming Latency in seconds", Buckets: npBuckets}),
		SyncProxyRulesLastTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_last_timestamp_seconds", Help: "The last time proxy rules were successfully synced"}),
		SyncProxyRulesLastQueued: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_last_queued_timestamp_seconds", Help: "The last time a sync of proxy rules was queued"}),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_endpoint_changes_pending", Help: "Pending proxy rules Endpoint changes"}),
		EndpointChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_endpoint_changes_total", Help: "Cumulative proxy rules Endpoint changes"}),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_service_changes_pending", Help: "Pending proxy rules Service changes"}),
		ServiceChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_service_changes_total", Help: "Cumulative proxy rules Service changes"}),
		IPTablesRestoreFailuresTotal: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_iptables_restore_failures_total", Help: "Cumulative proxy iptables restore failures"}),
		IPTablesPartialRestoreFails: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_iptables_partial_restore_failures_total", Help: "Cumulative proxy iptables partial restore failures"}),
		IPTablesRulesTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_iptables_total", Help: "Total number of iptables rules owned by kube-proxy"}, []string{"table"}),
		IPTablesRulesLastSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_iptables_last", Help: "Number of iptables rules written by kube-proxy in last sync"}, []string{"table"}),
		NoLocalEndpointsTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_no_local_endpoints_total", Help: "Number of services with a Local traffic policy and no endpoints"}, []string{"traffic_policy"}),
		SyncProxyRulesErrorsTotal: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_errors_total", Help: "Cumulative failed sync attempts (svcnet)"}),
	}
	if reg != nil {
		reg.MustRegister(m.SyncProxyRulesLatency, m.SyncFullProxyRulesLatency, m.SyncPartialProxyRulesLatency,
			m.NetworkProgrammingLatency, m.SyncProxyRulesLastTimestamp, m.SyncProxyRulesLastQueued,
			m.EndpointChangesPending, m.EndpointChangesTotal, m.ServiceChangesPending, m.ServiceChangesTotal,
			m.IPTablesRestoreFailuresTotal, m.IPTablesPartialRestoreFails, m.IPTablesRulesTotal, m.IPTablesRulesLastSync,
			m.NoLocalEndpointsTotal, m.SyncProxyRulesErrorsTotal)
	}
	return m
}

// sinceSeconds returns the seconds elapsed since t.
func sinceSeconds(t time.Time) float64 { return time.Since(t).Seconds() }
