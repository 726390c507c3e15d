// Package metallbmetrics holds the metrics that MetalLB's controller and
// speaker both export about their Kubernetes client (metallb_k8s_client_*),
// so that svcnet's lbipam controller and speaker, which stand in for them,
// export the same series.
package metallbmetrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// K8sClient is MetalLB's k8s_client metric family. A nil *K8sClient
// records nothing.
type K8sClient struct {
	updates, updateErrors prometheus.Counter
	loaded, stale         prometheus.Gauge

	mu         sync.Mutex
	staleParts map[string]bool
}

// NewK8sClient creates the metrics and registers them with reg.
func NewK8sClient(reg prometheus.Registerer) *K8sClient {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "metallb", Subsystem: "k8s_client", Name: name, Help: help}
	}
	m := &K8sClient{
		updates:      prometheus.NewCounter(prometheus.CounterOpts(opts("updates_total", "Number of k8s object updates that have been processed."))),
		updateErrors: prometheus.NewCounter(prometheus.CounterOpts(opts("update_errors_total", "Number of k8s object updates that failed for some reason."))),
		loaded:       prometheus.NewGauge(prometheus.GaugeOpts(opts("config_loaded_bool", "1 if the MetalLB configuration was successfully loaded at least once."))),
		stale:        prometheus.NewGauge(prometheus.GaugeOpts(opts("config_stale_bool", "1 if running on a stale configuration, because the latest config failed to load."))),
		staleParts:   map[string]bool{},
	}
	reg.MustRegister(m.updates, m.updateErrors, m.loaded, m.stale)
	return m
}

// Processed counts one processed update (a Service, or the configuration,
// synced once), and an error if it failed.
func (m *K8sClient) Processed(err error) {
	if m == nil {
		return
	}
	m.updates.Inc()
	if err != nil {
		m.updateErrors.Inc()
	}
}

// ConfigLoaded records that a part of the configuration (part names it:
// "pools", "bgp", ...) was loaded; stale says that some of its objects
// could not be used, so that what runs is not what was applied. The
// configuration is stale while any part is, and counts as loaded once no
// part was stale after a load.
func (m *K8sClient) ConfigLoaded(part string, stale bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if stale {
		m.staleParts[part] = true
	} else {
		delete(m.staleParts, part)
	}
	if len(m.staleParts) > 0 {
		m.stale.Set(1)
		return
	}
	m.stale.Set(0)
	m.loaded.Set(1)
}
