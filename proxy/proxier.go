package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ConntrackCleaner removes conntrack entries made stale by a sync (see
// package proxy/conntrack). Errors are logged, never fatal.
// redirect, when not nil, gives the local port a Service port's traffic is
// redirected to (see Redirector).
type ConntrackCleaner interface {
	CleanStaleEntries(ctx context.Context, svcs ServicePortMap, eps EndpointsMap, redirect func(ServicePortName) int) error
}

// Redirector is implemented by modes that REDIRECT a Service port's traffic
// to a port of their own on the node instead of DNATing it to an endpoint
// (userspace): the conntrack entry of such a UDP flow replies from that
// port, and is live, not stale.
type Redirector interface {
	// RedirectPort returns the local port serving name, or 0.
	RedirectPort(name ServicePortName) int
}

// Config configures a Proxier.
type Config struct {
	Log      *slog.Logger
	Provider Provider
	Node     NodeInfo
	// MinSyncPeriod and SyncPeriod bound the sync frequency (kube-proxy
	// defaults 1s and 30s): the loop runs at least every SyncPeriod. A
	// periodic sync is full only when the mode's full-sync period has
	// passed (see FullSyncScheduler; an hour for iptables and nftables, as
	// in kube-proxy 1.37), else partial.
	MinSyncPeriod time.Duration
	SyncPeriod    time.Duration
	Metrics       *Metrics
	Health        *ProxyHealth
	// ServiceHealth serves healthCheckNodePorts (optional).
	ServiceHealth *ServiceHealthServer
	Conntrack     ConntrackCleaner
	// Families lists the IP families the mode programs (false IPv4, true
	// IPv6); the sync metrics are recorded under each of them (their
	// ip_family label). Empty means IPv4 only.
	Families []bool
	// AfterFirstSync, if set, runs once, from the sync loop, right after
	// the first successful sync (svcnet proxy returns the memory the
	// initial lists and the first full sync used to the kernel then).
	AfterFirstSync func()
}

// Proxier is the mode-independent part of the proxy: it receives
// Service/EndpointSlice/Node events (OnService*, OnEndpointSlice*, OnNode),
// records them in the change trackers, and runs the provider's Sync from one
// bounded-frequency loop. It implements the informer handler side of
// kube-proxy's config package.
type Proxier struct {
	cfg       Config
	svcTrack  *ServiceChangeTracker
	epTrack   *EndpointsChangeTracker
	runner    *BoundedFrequencyRunner
	log       *slog.Logger
	syncedMu  sync.Mutex
	svcSynced bool
	epSynced  bool

	// Owned by the sync loop.
	svcMap ServicePortMap
	// udp holds the Services with a UDP port (the conntrack cleaner has
	// nothing to do without one), kept from the changed Services only.
	udp          map[types.NamespacedName]bool
	epMap        EndpointsMap
	policies     *PolicyCache
	needFull     bool
	synced       bool // a sync succeeded
	lastFullSync time.Time
	nodeMu       sync.Mutex
	node         NodeInfo
	// svcCIDRs are the ServiceCIDR objects' ranges (nil until
	// OnServiceCIDRs; guarded by nodeMu); sentCIDRs those of the last
	// successful sync.
	svcCIDRs, sentCIDRs []netip.Prefix
	runCtx              context.Context
	// queuedAt is when the first change since the last sync began was
	// queued (zero: none; guarded by queueMu).
	queueMu  sync.Mutex
	queuedAt time.Time
}

// NewProxier returns a Proxier; call Run to start syncing.
func NewProxier(cfg Config) *Proxier {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = 30 * time.Second
	}
	if cfg.MinSyncPeriod < 0 {
		cfg.MinSyncPeriod = 0
	}
	if cfg.Health == nil {
		cfg.Health = NewProxyHealth(2 * cfg.SyncPeriod)
	}
	if len(cfg.Families) == 0 {
		cfg.Families = []bool{false}
	}
	p := &Proxier{
		cfg:      cfg,
		log:      cfg.Log,
		svcTrack: NewServiceChangeTracker(),
		epTrack:  NewEndpointsChangeTracker(cfg.Node.Name),
		svcMap:   ServicePortMap{},
		epMap:    EndpointsMap{},
		policies: NewPolicyCache(),
		needFull: true,
		node:     cfg.Node,
	}
	p.runner = NewBoundedFrequencyRunner("sync-runner", p.syncOnce, cfg.MinSyncPeriod, cfg.SyncPeriod)
	// One change often arrives as two EndpointSlice updates a moment apart
	// (a new pod's address, then its readiness; a deleted pod terminating,
	// then not ready). A burst of 2 programs the second at once instead of
	// up to --min-sync-period later, which was most of the network
	// programming latency in svcnet up; sustained churn is still held to
	// one sync per period.
	p.runner.Burst = 2
	return p
}

// Health returns the proxier's health tracker (for /healthz).
func (p *Proxier) Health() *ProxyHealth { return p.cfg.Health }

func (p *Proxier) requestSync() {
	p.queueMu.Lock()
	if p.queuedAt.IsZero() {
		p.queuedAt = time.Now()
	}
	p.queueMu.Unlock()
	p.cfg.Health.QueuedUpdate()
	for _, v6 := range p.cfg.Families {
		p.cfg.Metrics.SyncProxyRulesLastQueued.WithLabelValues(Family(v6)).SetToCurrentTime()
	}
	if p.isInitialized() {
		p.runner.Run()
	}
}

// OnServiceAdd, OnServiceUpdate and OnServiceDelete record Service events.
func (p *Proxier) OnServiceAdd(svc *v1.Service) { p.OnServiceUpdate(nil, svc) }

// OnServiceUpdate records a Service change.
func (p *Proxier) OnServiceUpdate(old, svc *v1.Service) {
	if p.svcTrack.Update(old, svc) {
		p.cfg.Metrics.ServiceChangesTotal.Inc()
		p.cfg.Metrics.ServiceChangesPending.Set(float64(p.svcTrack.Pending()))
		p.requestSync()
	}
}

// OnServiceDelete records a Service deletion.
func (p *Proxier) OnServiceDelete(svc *v1.Service) { p.OnServiceUpdate(svc, nil) }

// OnServiceSynced records that the Service informer has synced.
func (p *Proxier) OnServiceSynced() { p.setSynced(true, false) }

// OnEndpointSliceAdd records an EndpointSlice add or update.
func (p *Proxier) OnEndpointSliceAdd(s *discovery.EndpointSlice) { p.onSlice(s, false) }

// OnEndpointSliceUpdate records an EndpointSlice update.
func (p *Proxier) OnEndpointSliceUpdate(_, s *discovery.EndpointSlice) { p.onSlice(s, false) }

// OnEndpointSliceDelete records an EndpointSlice deletion.
func (p *Proxier) OnEndpointSliceDelete(s *discovery.EndpointSlice) { p.onSlice(s, true) }

func (p *Proxier) onSlice(s *discovery.EndpointSlice, removed bool) {
	if v, ok := s.Annotations[AnnotationLastChangeTriggerTime]; ok && !removed {
		if ts, err := time.Parse(time.RFC3339Nano, v); err == nil && ts.After(p.epTrack.Started()) {
			p.log.Debug("endpoint slice with a trigger time", "slice", s.Namespace+"/"+s.Name, "trigger", ts, "delivery", time.Since(ts))
			p.cfg.Metrics.TriggerDelivery.WithLabelValues(Family(s.AddressType == discovery.AddressTypeIPv6)).Observe(sinceSeconds(ts))
		}
	}
	if p.epTrack.EndpointSliceUpdate(s, removed) {
		p.cfg.Metrics.EndpointChangesTotal.Inc()
		p.cfg.Metrics.EndpointChangesPending.Set(float64(p.epTrack.Pending()))
		p.requestSync()
	}
}

// OnEndpointSlicesSynced records that the EndpointSlice informer has synced.
func (p *Proxier) OnEndpointSlicesSynced() { p.setSynced(false, true) }

// OnNode records the local Node (nil when it was deleted). A sync is
// requested only when its labels, addresses or pod CIDRs changed.
func (p *Proxier) OnNode(node *v1.Node) {
	p.nodeMu.Lock()
	info := p.node
	if node != nil {
		info.Labels = node.Labels
		info.IPs = NodeAddresses(node)
		info.PodCIDRs = nil
		for _, c := range node.Spec.PodCIDRs {
			if pf, err := parsePrefix(c); err == nil {
				info.PodCIDRs = append(info.PodCIDRs, pf)
			}
		}
		p.cfg.Health.SetNodeEligible(node.DeletionTimestamp == nil)
	} else {
		p.cfg.Health.SetNodeEligible(false)
	}
	changed := !maps.Equal(p.node.Labels, info.Labels) || !slices.Equal(p.node.IPs, info.IPs) || !slices.Equal(p.node.PodCIDRs, info.PodCIDRs)
	p.node = info
	p.nodeMu.Unlock()
	// Node status heartbeats change nothing the data plane uses.
	if changed || node == nil {
		p.requestSync()
	}
}

// OnServiceCIDRs records the ranges of the cluster's ServiceCIDR objects
// (networking.k8s.io/v1), as kube-proxy watches them: modes that drop
// traffic to unallocated ClusterIPs use them (SyncRequest.ServiceCIDRs). A
// change triggers a full sync.
func (p *Proxier) OnServiceCIDRs(cidrs []netip.Prefix) {
	cidrs = slices.Clone(cidrs)
	slices.SortFunc(cidrs, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	cidrs = slices.Compact(cidrs)
	if cidrs == nil {
		cidrs = []netip.Prefix{}
	}
	p.nodeMu.Lock()
	changed := p.svcCIDRs == nil || !slices.Equal(p.svcCIDRs, cidrs)
	p.svcCIDRs = cidrs
	p.nodeMu.Unlock()
	if changed {
		p.requestSync()
	}
}

func (p *Proxier) setSynced(svc, ep bool) {
	p.syncedMu.Lock()
	p.svcSynced = p.svcSynced || svc
	p.epSynced = p.epSynced || ep
	p.syncedMu.Unlock()
	if p.isInitialized() {
		p.runner.Run()
	}
}

// udpChanged reports whether a Service whose ports or endpoints changed
// has a UDP port as p.udp records it (call it before and after trackUDP:
// a Service that had one counts too).
func (p *Proxier) udpChanged(sr ServiceUpdateResult, er EndpointsUpdateResult) bool {
	for _, set := range []sets.Set[types.NamespacedName]{sr.UpdatedServices, er.UpdatedServices} {
		for nn := range set {
			if p.udp[nn] {
				return true
			}
		}
	}
	return false
}

// trackUDP updates p.udp from the Services sr says changed (the first
// time, from every Service).
func (p *Proxier) trackUDP(sr ServiceUpdateResult) {
	if p.udp == nil || sr.Ports == nil {
		p.udp = map[types.NamespacedName]bool{}
		for name := range p.svcMap {
			if name.Protocol == v1.ProtocolUDP {
				p.udp[name.NamespacedName] = true
			}
		}
		return
	}
	for nn := range sr.UpdatedServices {
		delete(p.udp, nn)
		for _, name := range sr.Ports[nn] {
			if name.Protocol == v1.ProtocolUDP {
				p.udp[nn] = true
			}
		}
	}
}

func (p *Proxier) isInitialized() bool {
	p.syncedMu.Lock()
	defer p.syncedMu.Unlock()
	return p.svcSynced && p.epSynced
}

// Run runs the sync loop until ctx ends. The first sync happens once both
// OnServiceSynced and OnEndpointSlicesSynced were called.
func (p *Proxier) Run(ctx context.Context) {
	for !p.isInitialized() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.runCtx = ctx
	p.runner.Loop(ctx)
	if p.cfg.ServiceHealth != nil {
		p.cfg.ServiceHealth.Close()
	}
}

// SyncNow runs one sync synchronously (tests and benchmarks). It must not be
// called while Run is running.
func (p *Proxier) SyncNow(ctx context.Context) error {
	p.runCtx = ctx
	return p.sync(ctx)
}

func (p *Proxier) syncOnce() {
	ctx := p.runCtx
	if ctx == nil {
		ctx = context.Background()
	}
	if err := p.sync(ctx); err != nil {
		p.log.Error("sync failed, will retry", "err", err)
		p.cfg.Metrics.SyncProxyRulesErrorsTotal.Inc()
		p.runner.RetryAfter(p.cfg.MinSyncPeriod + time.Second)
	}
}

func (p *Proxier) sync(ctx context.Context) error {
	start := time.Now()
	var waited time.Duration
	p.queueMu.Lock()
	if !p.queuedAt.IsZero() {
		waited = start.Sub(p.queuedAt)
		p.cfg.Metrics.SyncQueueWait.Observe(waited.Seconds())
		p.queuedAt = time.Time{}
	}
	p.queueMu.Unlock()
	if fullSyncDue(p.cfg.Provider, time.Since(p.lastFullSync), p.cfg.SyncPeriod) {
		p.needFull = true
	}
	sr := p.svcTrack.Apply(p.svcMap)
	er := p.epTrack.Apply(p.epMap)
	udpChanged := p.udpChanged(sr, er)
	p.trackUDP(sr) // here: a failing sync consumes the changes too
	udpChanged = udpChanged || p.udpChanged(sr, er)
	p.cfg.Metrics.ServiceChangesPending.Set(0)
	p.cfg.Metrics.EndpointChangesPending.Set(0)
	p.nodeMu.Lock()
	node := p.node
	cidrs := p.svcCIDRs
	p.nodeMu.Unlock()
	if cidrs != nil && !slices.Equal(cidrs, p.sentCIDRs) {
		p.needFull = true
	}
	// This node's name, labels and addresses feed every Service's policy
	// (topology hints, the source-range exception): when they change,
	// every Service is reprogrammed.
	if !sameNodeFacts(p.policies.node, node) {
		p.needFull = true
	}
	req := &SyncRequest{Full: p.needFull, Services: p.svcMap, Endpoints: p.epMap, ServiceResult: sr, EndpointsResult: er, Node: node,
		ServiceCIDRs: cidrs}
	p.policies.UpdatePorts(node, req.ChangedPorts(), sr.Deleted)
	req.policies = p.policies
	if req.Full {
		// The policies are built before the mode plans, which would
		// otherwise build them one by one among its own working data: they
		// are kept and that data is not, and built together they share
		// memory pages instead of keeping pages of garbage in use.
		for name := range p.svcMap {
			for _, v6 := range p.cfg.Families {
				req.Policy(name, v6)
			}
		}
	}
	modeStart := time.Now()
	if err := p.cfg.Provider.Sync(ctx, req); err != nil {
		p.needFull = true
		// The changes were consumed from the trackers; a full sync will
		// program them next time.
		return fmt.Errorf("sync proxy rules: %w", err)
	}
	modeEnd := time.Now()
	d := modeEnd.Sub(start).Seconds()
	if req.Full {
		p.lastFullSync = start
	}
	p.sentCIDRs = cidrs
	p.needFull = false
	// One sync programs every family: its duration is each family's sync
	// duration (kube-proxy's per-family proxiers each observe their own).
	m := p.cfg.Metrics
	for _, v6 := range p.cfg.Families {
		fam := Family(v6)
		m.SyncProxyRulesLatency.WithLabelValues(fam).Observe(d)
		if req.Full {
			m.SyncFullProxyRulesLatency.WithLabelValues(fam).Observe(d)
		} else {
			m.SyncPartialProxyRulesLatency.WithLabelValues(fam).Observe(d)
		}
		nl := req.Stats.NoLocalEndpoints[FamilyIndex(v6)]
		m.NoLocalEndpointsTotal.WithLabelValues("internal", fam).Set(float64(nl.Internal))
		m.NoLocalEndpointsTotal.WithLabelValues("external", fam).Set(float64(nl.External))
		for _, times := range er.LastChangeTriggerTimes[FamilyIndex(v6)] {
			for _, t := range times {
				m.NetworkProgrammingLatency.WithLabelValues(fam).Observe(sinceSeconds(t))
			}
		}
	}
	p.cfg.Health.Updated()
	for _, v6 := range p.cfg.Families {
		m.SyncProxyRulesLastTimestamp.WithLabelValues(Family(v6)).SetToCurrentTime()
	}
	if p.cfg.ServiceHealth != nil {
		hc := p.svcMap.HealthCheckNodePorts()
		if err := p.cfg.ServiceHealth.SyncServices(hc); err != nil {
			p.log.Error("syncing health check services", "err", err)
		}
		p.cfg.ServiceHealth.SyncEndpoints(p.epMap.LocalReadyEndpoints(hc, sr.Ports))
	}
	healthEnd := time.Now()
	// Stale UDP conntrack entries (DNATed to an endpoint that is gone, or
	// cached as unreachable before a Service had endpoints) only arise
	// from changes to UDP Services and their endpoints, so the cleaner,
	// which dumps the conntrack table (a walk of the kernel's whole hash
	// table, tens of milliseconds), runs after full syncs, after syncs
	// that changed a UDP Service, and on the periodic syncs that carry no
	// change, as a safety net. kube-proxy runs it after every sync.
	nothingChanged := len(sr.UpdatedServices) == 0 && len(er.UpdatedServices) == 0
	if p.cfg.Conntrack != nil && len(p.udp) > 0 && (req.Full || udpChanged || nothingChanged) {
		var redirect func(ServicePortName) int
		if r, ok := p.cfg.Provider.(Redirector); ok {
			redirect = r.RedirectPort
		}
		if err := p.cfg.Conntrack.CleanStaleEntries(ctx, p.svcMap, p.epMap, redirect); err != nil {
			p.log.Warn("clearing stale conntrack entries", "err", err)
		}
	}
	end := time.Now()
	p.log.Debug("synced proxy rules", "full", req.Full, "services", len(p.svcMap), "waited", waited, "took", end.Sub(start),
		"prepare", modeStart.Sub(start), "mode", modeEnd.Sub(modeStart), "health", healthEnd.Sub(modeEnd), "conntrack", end.Sub(healthEnd))
	if !p.synced {
		p.synced = true
		if p.cfg.AfterFirstSync != nil {
			p.cfg.AfterFirstSync()
		}
	}
	return nil
}
