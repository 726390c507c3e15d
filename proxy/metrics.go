package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// Metrics are the proxy's Prometheus metrics, under kube-proxy 1.37's names,
// labels and buckets (subsystem "kubeproxy"; pkg/proxy/metrics of
// k8s.io/kubernetes v1.37.2) so existing dashboards and queries keep
// working. As there, the sync metrics carry an ip_family label ("IPv4",
// "IPv6"). kube-proxy runs one proxier per family, each with its own sync;
// svcnet programs every family in one sync, so that sync's duration and
// timestamps are recorded under each family the proxy programs, and the
// per-family figures a mode reports (rules, Services without local
// endpoints) under their own family.
type Metrics struct {
	SyncProxyRulesLatency        *prometheus.HistogramVec
	SyncFullProxyRulesLatency    *prometheus.HistogramVec
	SyncPartialProxyRulesLatency *prometheus.HistogramVec
	NetworkProgrammingLatency    *prometheus.HistogramVec
	SyncProxyRulesLastTimestamp  *prometheus.GaugeVec
	SyncProxyRulesLastQueued     *prometheus.GaugeVec
	EndpointChangesPending       prometheus.Gauge
	EndpointChangesTotal         prometheus.Counter
	ServiceChangesPending        prometheus.Gauge
	ServiceChangesTotal          prometheus.Counter
	IPTablesRestoreFailuresTotal *prometheus.CounterVec
	IPTablesPartialRestoreFails  *prometheus.CounterVec
	IPTablesRulesTotal           *prometheus.GaugeVec
	IPTablesRulesLastSync        *prometheus.GaugeVec
	NoLocalEndpointsTotal        *prometheus.GaugeVec
	SyncProxyRulesErrorsTotal    prometheus.Counter
	// NFTablesSyncFailuresTotal counts failed nftables sync transactions,
	// NFTablesCleanupFailuresTotal failed deletions of stale chains (per
	// family, as kube-proxy's nftables proxier).
	NFTablesSyncFailuresTotal    *prometheus.CounterVec
	NFTablesCleanupFailuresTotal *prometheus.CounterVec
	// ProxyHealthzTotal and ProxyLivezTotal count /healthz and /livez
	// answers by HTTP status code.
	ProxyHealthzTotal *prometheus.CounterVec
	ProxyLivezTotal   *prometheus.CounterVec
	// svcnet's own (namespace "svcnet_proxy"), which split network
	// programming latency into its parts: TriggerDelivery is the time from
	// an EndpointSlice's last-change-trigger-time to the moment this
	// proxy's informer delivered the slice (node agent, API server,
	// EndpointSlice controller, watch); SyncQueueWait the time from the
	// first change queued after a sync began to the start of the sync that
	// programs it (--min-sync-period, a sync still running). With
	// sync_proxy_rules_duration_seconds they add up to an observation of
	// network_programming_duration_seconds.
	TriggerDelivery *prometheus.HistogramVec
	SyncQueueWait   prometheus.Histogram
}

const metricsSubsystem = "kubeproxy"

// LabelIPFamily is kube-proxy's label for the IP family of a sync metric;
// its values are the v1.IPFamily strings "IPv4" and "IPv6".
const LabelIPFamily = "ip_family"

// Family returns the ip_family label value of a family (ipv6 true for IPv6).
func Family(ipv6 bool) string {
	if ipv6 {
		return string(v1.IPv6Protocol)
	}
	return string(v1.IPv4Protocol)
}

// NewMetrics creates the metrics and registers them with reg (skipped if
// reg is nil, which tests use).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	var npBuckets []float64
	npBuckets = append(npBuckets, prometheus.LinearBuckets(0.25, 0.25, 2)...)
	npBuckets = append(npBuckets, prometheus.LinearBuckets(1, 1, 59)...)
	npBuckets = append(npBuckets, prometheus.LinearBuckets(60, 5, 12)...)
	npBuckets = append(npBuckets, prometheus.LinearBuckets(120, 30, 7)...)
	fam := []string{LabelIPFamily}
	m := &Metrics{
		SyncProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds", Buckets: syncBuckets}, fam),
		SyncFullProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: metricsSubsystem,
			Name: "sync_full_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: syncBuckets}, fam),
		SyncPartialProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: metricsSubsystem,
			Name: "sync_partial_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: syncBuckets}, fam),
		NetworkProgrammingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: metricsSubsystem,
			Name: "network_programming_duration_seconds", Help: "In Cluster Network Programming Latency in seconds", Buckets: npBuckets}, fam),
		SyncProxyRulesLastTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_last_timestamp_seconds", Help: "The last time proxy rules were successfully synced"}, fam),
		SyncProxyRulesLastQueued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_last_queued_timestamp_seconds", Help: "The last time a sync of proxy rules was queued"}, fam),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_endpoint_changes_pending", Help: "Pending proxy rules Endpoint changes"}),
		EndpointChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_endpoint_changes_total", Help: "Cumulative proxy rules Endpoint changes"}),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_service_changes_pending", Help: "Pending proxy rules Service changes"}),
		ServiceChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_service_changes_total", Help: "Cumulative proxy rules Service changes"}),
		IPTablesRestoreFailuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_iptables_restore_failures_total", Help: "Cumulative proxy iptables restore failures"}, fam),
		IPTablesPartialRestoreFails: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_iptables_partial_restore_failures_total", Help: "Cumulative proxy iptables partial restore failures"}, fam),
		IPTablesRulesTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_iptables_total", Help: "Total number of iptables rules owned by kube-proxy"}, []string{"table", LabelIPFamily}),
		IPTablesRulesLastSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_iptables_last", Help: "Number of iptables rules written by kube-proxy in last sync"}, []string{"table", LabelIPFamily}),
		NoLocalEndpointsTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_no_local_endpoints_total", Help: "Number of services with a Local traffic policy and no endpoints"}, []string{"traffic_policy", LabelIPFamily}),
		SyncProxyRulesErrorsTotal: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_errors_total", Help: "Cumulative failed sync attempts (svcnet)"}),
		NFTablesSyncFailuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_nftables_sync_failures_total", Help: "Cumulative proxy nftables sync failures"}, fam),
		NFTablesCleanupFailuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "sync_proxy_rules_nftables_cleanup_failures_total", Help: "Cumulative proxy nftables cleanup failures"}, fam),
		ProxyHealthzTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "proxy_healthz_total", Help: "Cumulative proxy healthz HTTP status"}, []string{"code"}),
		ProxyLivezTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: metricsSubsystem,
			Name: "proxy_livez_total", Help: "Cumulative proxy livez HTTP status"}, []string{"code"}),
		TriggerDelivery: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "svcnet", Subsystem: "proxy",
			Name: "trigger_delivery_seconds", Help: "Time from an EndpointSlice's last-change-trigger-time to its delivery to this proxy",
			Buckets: syncBuckets}, fam),
		SyncQueueWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "svcnet", Subsystem: "proxy",
			Name: "sync_queue_wait_seconds", Help: "Time from the first change queued to the start of the sync that programs it",
			Buckets: syncBuckets}),
	}
	if reg != nil {
		reg.MustRegister(m.SyncProxyRulesLatency, m.SyncFullProxyRulesLatency, m.SyncPartialProxyRulesLatency,
			m.NetworkProgrammingLatency, m.SyncProxyRulesLastTimestamp, m.SyncProxyRulesLastQueued,
			m.EndpointChangesPending, m.EndpointChangesTotal, m.ServiceChangesPending, m.ServiceChangesTotal,
			m.IPTablesRestoreFailuresTotal, m.IPTablesPartialRestoreFails, m.IPTablesRulesTotal, m.IPTablesRulesLastSync,
			m.NoLocalEndpointsTotal, m.SyncProxyRulesErrorsTotal, m.NFTablesSyncFailuresTotal, m.NFTablesCleanupFailuresTotal,
			m.ProxyHealthzTotal, m.ProxyLivezTotal, m.TriggerDelivery, m.SyncQueueWait)
	}
	return m
}

// sinceSeconds returns the seconds elapsed since t.
func sinceSeconds(t time.Time) float64 { return time.Since(t).Seconds() }
