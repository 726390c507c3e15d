// Package netpol enforces Kubernetes NetworkPolicies on one node, as a policy
// agent such as kube-router's does: client-go informers for NetworkPolicies,
// Pods and Namespaces feed a bounded sync loop (the proxy core's
// BoundedFrequencyRunner) that programs the node's own nftables table, inet
// svcnet-netpol, separate from the proxy's, in one transaction per sync.
//
// What the table does (see Compile and baseChains):
//
//   - forward and input base chains (filter priority): established and
//     related packets pass; then a verdict-map lookup by source address
//     (egress-pods) and one by destination address (ingress-pods) jump to a
//     per-pod chain only for local pods that some policy of that type
//     selects. Unselected pods are not isolated and cost one map lookup.
//   - a per-pod chain jumps to the chains of exactly the policies selecting
//     that pod and then drops: default deny for selected pods, any policy
//     allowing is enough (ingress accepts; egress sets a mark bit, the pod
//     chain drops unmarked packets, and the packet goes on to the ingress
//     check of its destination).
//   - a policy chain has one line per rule and port; peers are interval
//     sets of addresses (selected pods' IPs and ipBlocks minus excepts,
//     merged), named ports are sets of (pod IP . protocol . port) resolved
//     from each destination pod's container ports, port ranges are
//     th dport ranges. Adding pods changes set elements, not rules.
//   - Service traffic is judged after the proxy's DNAT (prerouting), against
//     the backend pod; traffic the node itself sends (output) is not judged,
//     so kubelet probes and host-network clients always reach local pods.
//
// Both families are judged: each peer set and pod map has an IPv6 twin
// (a dual-stack pod's two addresses jump to its one chain), and ICMPv6
// neighbor discovery is always accepted (ARP never reaches these hooks
// either). Syncs are incremental (element and chain diffs
// against the last written state); a failed sync is retried as a full
// rewrite of the table.
package netpol

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
)

// NFT is the part of knftables the agent needs; proxy/nftables.ExecNFT (nft
// in a chosen network namespace) and knftables.Fake implement it.
type NFT interface {
	NewTransaction() *knftables.Transaction
	Run(ctx context.Context, tx *knftables.Transaction) error
}

// Config configures an Agent.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	NFT      NFT
	Logger   *slog.Logger
	Metrics  *Metrics
	// MinSyncPeriod bounds how often the table is written (default 1s in
	// the command; 0 here means every change syncs at once).
	MinSyncPeriod time.Duration
	// SyncPeriod is the longest time between syncs (default 30s).
	SyncPeriod time.Duration
}

// Agent is one node's NetworkPolicy enforcer.
type Agent struct {
	cfg     Config
	factory informers.SharedInformerFactory
	runner  *proxy.BoundedFrequencyRunner

	mu     sync.Mutex
	prev   *State // what the table holds; nil forces a full sync
	synced bool
	// started numbers syncs as they start; syncs is the number of the last
	// one that succeeded, so a caller can wait for a sync that began after
	// some point (Started, then Synced).
	started, syncs int
}

// Metrics are the agent's Prometheus metrics, in the proxy's style.
type Metrics struct {
	SyncDuration      prometheus.Histogram
	SyncLastTimestamp prometheus.Gauge
	SyncErrorsTotal   prometheus.Counter
	FullSyncsTotal    prometheus.Counter
	Policies          prometheus.Gauge
	IsolatedPods      *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		SyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "svcnet", Subsystem: "netpol",
			Name: "sync_duration_seconds", Help: "NetworkPolicy rule sync latency in seconds", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}),
		SyncLastTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "svcnet", Subsystem: "netpol",
			Name: "sync_last_timestamp_seconds", Help: "The last time the NetworkPolicy rules were successfully synced"}),
		SyncErrorsTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "svcnet", Subsystem: "netpol",
			Name: "sync_errors_total", Help: "Cumulative failed sync attempts"}),
		FullSyncsTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "svcnet", Subsystem: "netpol",
			Name: "full_syncs_total", Help: "Cumulative syncs that rewrote the whole table"}),
		Policies: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "svcnet", Subsystem: "netpol",
			Name: "policies", Help: "NetworkPolicies known"}),
		IsolatedPods: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "svcnet", Subsystem: "netpol",
			Name: "isolated_pods", Help: "Local pods isolated by some policy, by direction"}, []string{"direction"}),
	}
	if reg != nil {
		reg.MustRegister(m.SyncDuration, m.SyncLastTimestamp, m.SyncErrorsTotal, m.FullSyncsTotal, m.Policies, m.IsolatedPods)
	}
	return m
}

// New returns an agent; Run starts it.
func New(cfg Config) *Agent {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = 30 * time.Second
	}
	a := &Agent{cfg: cfg, factory: informers.NewSharedInformerFactory(cfg.Client, 0)}
	a.runner = proxy.NewBoundedFrequencyRunner("netpol", a.sync, cfg.MinSyncPeriod, cfg.SyncPeriod)
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.runner.Run() },
		UpdateFunc: func(any, any) { a.runner.Run() },
		DeleteFunc: func(any) { a.runner.Run() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		a.factory.Networking().V1().NetworkPolicies().Informer(),
		a.factory.Core().V1().Pods().Informer(),
		a.factory.Core().V1().Namespaces().Informer(),
	} {
		_, _ = inf.AddEventHandler(h)
	}
	return a
}

// Run starts the informers, waits for their caches, and syncs until ctx
// ends. The table is left in place on exit (policies stay enforced while
// the agent restarts); Cleanup removes it.
func (a *Agent) Run(ctx context.Context) error {
	a.factory.Start(ctx.Done())
	for typ, ok := range a.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("netpol: cache of %v did not sync", typ)
		}
	}
	a.runner.Loop(ctx)
	a.factory.Shutdown()
	return nil
}

// Started is the number of the last sync that started.
func (a *Agent) Started() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started
}

// Synced reports whether a sync has succeeded, and the number (as counted
// by Started) of the last one that did.
func (a *Agent) Synced() (bool, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.synced, a.syncs
}

func (a *Agent) sync() {
	start := time.Now()
	a.mu.Lock()
	a.started++
	n := a.started
	a.mu.Unlock()
	pols, err1 := a.factory.Networking().V1().NetworkPolicies().Lister().List(labels.Everything())
	pods, err2 := a.factory.Core().V1().Pods().Lister().List(labels.Everything())
	nss, err3 := a.factory.Core().V1().Namespaces().Lister().List(labels.Everything())
	if err := firstErr(err1, err2, err3); err != nil {
		a.fail(err)
		return
	}
	st, err := Compile(Input{Node: a.cfg.NodeName, Policies: pols, Pods: pods, Namespaces: nss})
	if err != nil {
		a.fail(err)
		return
	}
	a.mu.Lock()
	prev := a.prev
	a.mu.Unlock()
	tx := a.cfg.NFT.NewTransaction()
	if prev == nil {
		fullSync(tx, st)
		a.cfg.Metrics.FullSyncsTotal.Inc()
	} else if incrementalSync(tx, prev, st) == 0 {
		a.done(n, st, start, len(pols))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.cfg.NFT.Run(ctx, tx); err != nil {
		a.mu.Lock()
		a.prev = nil // the table's content is unknown: rewrite it next time
		a.mu.Unlock()
		a.fail(err)
		return
	}
	a.done(n, st, start, len(pols))
}

func (a *Agent) done(n int, st *State, start time.Time, policies int) {
	a.mu.Lock()
	a.prev, a.synced, a.syncs = st, true, n
	a.mu.Unlock()
	m := a.cfg.Metrics
	m.SyncDuration.Observe(time.Since(start).Seconds())
	m.SyncLastTimestamp.SetToCurrentTime()
	m.Policies.Set(float64(policies))
	// One chain per isolated pod, whatever its families.
	in, eg := 0, 0
	for name := range st.Chains {
		switch {
		case strings.HasPrefix(name, "in-"):
			in++
		case strings.HasPrefix(name, "eg-"):
			eg++
		}
	}
	m.IsolatedPods.WithLabelValues("ingress").Set(float64(in))
	m.IsolatedPods.WithLabelValues("egress").Set(float64(eg))
}

func (a *Agent) fail(err error) {
	a.cfg.Metrics.SyncErrorsTotal.Inc()
	a.cfg.Logger.Error("netpol sync failed", "err", err)
	a.runner.RetryAfter(time.Second)
}

// Cleanup deletes the table (nothing is enforced afterwards).
func Cleanup(ctx context.Context, nft NFT) error {
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	return nft.Run(ctx, tx)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
