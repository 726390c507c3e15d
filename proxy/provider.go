package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Provider is one data-plane mode. The Proxier calls Sync serially (never
// concurrently with itself) from its bounded-frequency loop.
type Provider interface {
	// Sync makes the data plane match req. When req.Full is false the mode
	// may rewrite only what belongs to req.ChangedServices(); it may also
	// decide on its own that a full sync is needed (e.g. a flushed canary).
	// An error makes the Proxier retry soon with Full set.
	Sync(ctx context.Context, req *SyncRequest) error
	// Cleanup removes everything the mode ever installed. It must succeed
	// when nothing is installed.
	Cleanup(ctx context.Context) error
}

// DefaultFullSyncPeriod is how often the iptables and nftables modes
// rewrite everything when nothing forces it (kube-proxy 1.37's
// FullSyncPeriod). Between full syncs the sync loop still runs at least
// every --sync-period, as a partial sync: a mode checks its canaries then,
// and a sync with nothing changed costs next to nothing.
const DefaultFullSyncPeriod = time.Hour

// FullSyncScheduler is implemented by modes whose periodic full sync
// differs from DefaultFullSyncPeriod (IPVS rewrites everything every
// --sync-period, as kube-proxy's IPVS proxier does; iptables skips the
// periodic full sync in large clusters). Modes without it get a full sync
// once per DefaultFullSyncPeriod.
type FullSyncScheduler interface {
	// FullSyncDue reports whether the next sync must be full, given the
	// time since the last full sync and the configured --sync-period.
	FullSyncDue(sinceLastFull, syncPeriod time.Duration) bool
}

// fullSyncDue applies prov's FullSyncScheduler, or DefaultFullSyncPeriod.
func fullSyncDue(prov Provider, sinceLastFull, syncPeriod time.Duration) bool {
	if s, ok := prov.(FullSyncScheduler); ok {
		return s.FullSyncDue(sinceLastFull, syncPeriod)
	}
	return sinceLastFull >= DefaultFullSyncPeriod
}

// Dumper is implemented by modes that can show their programmed state
// (`svcnet proxy --dump`), e.g. `ipvsadm -Ln` form.
type Dumper interface {
	Dump(ctx context.Context) (string, error)
}

// SyncRequest is a consistent snapshot handed to Provider.Sync. The maps
// must not be modified by the mode.
type SyncRequest struct {
	// Full is true on the first sync, after a failure, when this node's
	// facts change, and when the mode's periodic full sync is due (see
	// FullSyncScheduler); otherwise the sync is partial.
	Full bool
	// Services and Endpoints are the complete current state.
	Services  ServicePortMap
	Endpoints EndpointsMap
	// ServiceResult and EndpointsResult say what changed since the last
	// successful sync.
	ServiceResult   ServiceUpdateResult
	EndpointsResult EndpointsUpdateResult
	// Node holds this node's facts.
	Node NodeInfo
	// ServiceCIDRs are the ranges of the cluster's ServiceCIDR objects
	// when the proxy watches them (sorted; empty when there are none), nil
	// when it does not (modes then keep their configured ranges). The sync
	// after a change is full.
	ServiceCIDRs []netip.Prefix
	// Stats is filled in by the mode (optional) for metrics.
	Stats SyncStats

	// policies caches the PortPolicies (see Policy); the Proxier passes
	// its own, kept across syncs.
	policies *PolicyCache
}

// SyncStats are optional figures a mode reports about one sync.
type SyncStats struct {
	// NoLocalEndpoints counts, per IP family (index 0 IPv4, 1 IPv6; see
	// FamilyIndex), the Services with a Local policy and no local
	// endpoints, as kube-proxy's per-family
	// sync_proxy_rules_no_local_endpoints_total.
	NoLocalEndpoints [2]NoLocalCount
	// Partial is true when the mode actually did a partial sync.
	Partial bool
}

// NoLocalCount counts Services with a Local traffic policy and no local
// endpoint, by the kind of traffic whose policy is Local.
type NoLocalCount struct {
	Internal, External int
}

// AddNoLocal adds one family's counts (ipv6 true for IPv6).
func (s *SyncStats) AddNoLocal(ipv6 bool, internal, external int) {
	c := &s.NoLocalEndpoints[FamilyIndex(ipv6)]
	c.Internal += internal
	c.External += external
}

// FamilyIndex is 0 for IPv4 and 1 for IPv6: the index of per-family arrays.
func FamilyIndex(ipv6 bool) int {
	if ipv6 {
		return 1
	}
	return 0
}

// ChangedServices returns the Services whose ports or endpoints changed.
func (r *SyncRequest) ChangedServices() sets.Set[types.NamespacedName] {
	out := sets.New[types.NamespacedName]()
	if r.ServiceResult.UpdatedServices != nil {
		out = out.Union(r.ServiceResult.UpdatedServices)
	}
	if r.EndpointsResult.UpdatedServices != nil {
		out = out.Union(r.EndpointsResult.UpdatedServices)
	}
	return out
}

// ChangedPorts returns the current ports of the Services whose ports or
// endpoints changed, by Service (a deleted Service has none). It reads the
// service tracker's index when ServiceResult carries it, so its cost
// follows the change; otherwise it scans Services.
func (r *SyncRequest) ChangedPorts() map[types.NamespacedName][]ServicePortName {
	changed := r.ChangedServices()
	out := make(map[types.NamespacedName][]ServicePortName, len(changed))
	if idx := r.ServiceResult.Ports; idx != nil {
		for nn := range changed {
			if ps := idx[nn]; len(ps) > 0 {
				out[nn] = ps
			}
		}
		return out
	}
	if len(changed) == 0 {
		return out
	}
	for name := range r.Services {
		if changed.Has(name.NamespacedName) {
			out[name.NamespacedName] = append(out[name.NamespacedName], name)
		}
	}
	return out
}

// SortedServicePorts returns the ServicePortNames of m in a stable order
// (namespace, name, port, protocol), so plans are deterministic.
func SortedServicePorts(m ServicePortMap) []ServicePortName {
	out := make([]ServicePortName, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.SortFunc(out, ServicePortName.Compare)
	return out
}

// NodeInfo is what the proxy knows about its own node.
type NodeInfo struct {
	Name string
	// IPs are the Node's InternalIP/ExternalIP addresses (from the Node
	// object, or --bind-address style overrides).
	IPs []netip.Addr
	// Labels are the Node's labels (topology zone etc.).
	Labels map[string]string
	// PodCIDRs is the Node's spec.podCIDRs.
	PodCIDRs []netip.Prefix
}

// ModeConfig is the configuration every mode constructor receives.
type ModeConfig struct {
	Log *slog.Logger
	// Exec runs the mode's programs (inside a network namespace if the
	// proxy was told to).
	Exec     Executor
	NodeName string
	// NodeIPs are the node's addresses, known at start-up.
	NodeIPs []netip.Addr
	// IPv4 and IPv6 select the families to program (both for a dual-stack
	// node); when neither is set, modes program IPv4.
	IPv4, IPv6 bool
	// ClusterCIDRs are --cluster-cidr; traffic from outside them to a
	// ClusterIP is masqueraded. Empty means "no local-traffic detection".
	ClusterCIDRs []netip.Prefix
	// NodePortAddresses are --nodeport-addresses; empty means every local
	// address.
	NodePortAddresses []netip.Prefix
	// LocalAddrs, when set, replaces reading the node's addresses from its
	// links (tests; see ListLocalAddrs).
	LocalAddrs func(ctx context.Context) ([]LinkAddr, error)
	// ServiceCIDRs are the Service IP ranges (svcnet's
	// --service-cluster-ip-range); modes that can drop traffic to
	// unallocated ClusterIPs inside them do so. Empty disables that.
	ServiceCIDRs  []netip.Prefix
	MasqueradeAll bool
	// ConntrackTCPLiberal is --conntrack-tcp-be-liberal: the kernel accepts
	// out-of-window TCP packets, so modes need not drop INVALID ones.
	ConntrackTCPLiberal bool
	// MasqueradeBit is the fwmark bit, 0-31 (--iptables-masquerade-bit);
	// nil means kube-proxy's default, DefaultMasqueradeBit. Use
	// MasqueradeValue.
	MasqueradeBit *int
	// IPTablesDispatch is --iptables-dispatch, the iptables mode's layout
	// of nat KUBE-SERVICES: "linear" (kube-proxy's, the default when
	// empty) or "tree". Other modes ignore it.
	IPTablesDispatch string
	// IPTablesBackend is --iptables-backend, the variant of the iptables
	// programs the iptables and IPVS modes run: "auto" (the default when
	// empty: the one kubelet's hint chain is in, else the system's),
	// "nft", "legacy" or "system". Other modes ignore it.
	IPTablesBackend string
	// NFTablesEndpointChoice is --nftables-endpoint-choice, how the
	// nftables mode picks an endpoint: "map" (kube-proxy's anonymous map in
	// each Service's chain, the default when empty) or "rules" (one rule
	// per endpoint, no set). Other modes ignore it.
	NFTablesEndpointChoice string
	// NFTablesShards is --nftables-shards (a svcnet extension): the
	// number of Service dispatch tables beside the kube-proxy table; 0 is
	// kube-proxy's single table.
	NFTablesShards int
	SyncPeriod     time.Duration
	MinSyncPeriod  time.Duration
	// Scheduler is --ipvs-scheduler (default "rr"); modes that balance in
	// other ways ignore it.
	Scheduler string
	// IPVSStrictARP is --ipvs-strict-arp (kube-proxy's ipvs.strictARP):
	// the IPVS mode sets net.ipv4.conf.all.arp_ignore=1 and arp_announce=2.
	IPVSStrictARP bool
	Metrics       *Metrics
	// Events, when set, receives Service events a mode wants users to see
	// (for example a scheduler it cannot honour: see SchedulerReporter).
	Events EventSink
}

// DefaultMasqueradeBit is kube-proxy's default --iptables-masquerade-bit
// (mark 0x4000).
const DefaultMasqueradeBit = 14

// MasqueradeValue is the masquerade fwmark, 1<<bit. Bit 0 is a valid
// choice (mark 0x1), as in kube-proxy; only an unset or out-of-range bit
// falls back to DefaultMasqueradeBit (svcnet proxy rejects out-of-range
// flags before this).
func (c ModeConfig) MasqueradeValue() uint32 {
	if c.MasqueradeBit == nil || *c.MasqueradeBit < 0 || *c.MasqueradeBit > 31 {
		return 1 << DefaultMasqueradeBit
	}
	return 1 << uint(*c.MasqueradeBit)
}

// Validate reports configuration no mode can use (NewMode, the ipvs and
// nftables constructors call it).
func (c *ModeConfig) Validate() error {
	if c.MasqueradeBit != nil && (*c.MasqueradeBit < 0 || *c.MasqueradeBit > 31) {
		return fmt.Errorf("masquerade bit must be within the range [0, 31], got %d", *c.MasqueradeBit)
	}
	return nil
}

// NewModeFunc constructs a mode. It must not start goroutines.
type NewModeFunc func(cfg ModeConfig) (Provider, error)

var (
	modesMu sync.Mutex
	modes   = map[string]NewModeFunc{}
)

// RegisterMode makes a mode available to `svcnet proxy --proxy-mode=name`.
// It is meant to be called from init; registering a name twice panics.
func RegisterMode(name string, fn NewModeFunc) {
	modesMu.Lock()
	defer modesMu.Unlock()
	if _, dup := modes[name]; dup {
		panic("proxy: mode registered twice: " + name)
	}
	modes[name] = fn
}

// NewMode constructs the named mode, or returns an error naming the known
// modes.
func NewMode(name string, cfg ModeConfig) (Provider, error) {
	modesMu.Lock()
	fn, ok := modes[name]
	modesMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown proxy mode %q (known: %v)", name, Modes())
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return fn(cfg)
}

// Modes lists the registered mode names, sorted.
func Modes() []string {
	modesMu.Lock()
	defer modesMu.Unlock()
	out := make([]string, 0, len(modes))
	for n := range modes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
