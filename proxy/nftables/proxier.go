package nftables

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
)

// TableName is kube-proxy's table name; one table per family.
const TableName = "kube-proxy"

// ShardTablePrefix starts the names of the Service dispatch tables of
// --nftables-shards (a svcnet extension): "kube-proxy-s00", "kube-proxy-s01"…
const ShardTablePrefix = TableName + "-s"

// MaxShards bounds --nftables-shards.
const MaxShards = 64

// shardTables are the dispatch tables' names, made once (plans name a
// table for every Service port).
var shardTables = func() (names [MaxShards]string) {
	for i := range names {
		names[i] = fmt.Sprintf("%s%02d", ShardTablePrefix, i)
	}
	return names
}()

// shardTable is the name of dispatch table i.
func shardTable(i int) string { return shardTables[i] }

// shardIndex returns the number of dispatch table name, or -1 when name
// is not a dispatch table's.
func shardIndex(name string) int {
	rest, ok := strings.CutPrefix(name, ShardTablePrefix)
	if !ok || len(rest) != 2 {
		return -1
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// isShardTable reports whether name is a dispatch table's.
func isShardTable(name string) bool { return shardIndex(name) >= 0 }

// Object names, as kube-proxy names them.
const (
	servicesChain               = "services"
	serviceIPsMap               = "service-ips"
	serviceNodePortsMap         = "service-nodeports"
	nodePortIPsSet              = "nodeport-ips"
	clusterIPsSet               = "cluster-ips"
	serviceEndpointsCheckChain  = "service-endpoints-check"
	nodePortEndpointsCheckChain = "nodeport-endpoints-check"
	clusterIPsCheckChain        = "cluster-ips-check"
	noEndpointServicesMap       = "no-endpoint-services"
	noEndpointNodePortsMap      = "no-endpoint-nodeports"
	rejectChain                 = "reject-chain"
	firewallIPsMap              = "firewall-ips"
	firewallCheckChain          = "firewall-check"
	masqueradingChain           = "masquerading"
	hairpinConnectionsSet       = "hairpin-connections"
	// sharedEndpointsMap-PROTOCOL-GROUP are svcnet's
	// (--nftables-endpoint-choice=shared).
	sharedEndpointsMap = "service-endpoints"
	// clusterIPEndpointsChain holds the direct ClusterIP choices of the
	// shared layout, one rule per map clusterIPEndpointsChain-PROTOCOL-N
	// (see planner.direct).
	clusterIPEndpointsChain = "cluster-ip-endpoints"
	// nodePortEndpointsChain holds the direct NodePort choices, one rule
	// per map nodePortEndpointsChain-PROTOCOL-N after the masquerade mark;
	// directNodePortsSet lists the protocol . port of every direct
	// NodePort (see planner.direct).
	nodePortEndpointsChain = "node-port-endpoints"
	directNodePortsSet     = "direct-node-ports"
	// externalIPEndpointsChain marks for masquerading and goes on to
	// clusterIPEndpointsChain, whose maps also hold the keys of direct
	// externalIPs and LoadBalancer IPs; directExternalIPsSet lists their
	// address . protocol . port (see planner.direct).
	externalIPEndpointsChain = "external-ip-endpoints"
	directExternalIPsSet     = "direct-external-ips"

	filterPreroutingPreDNATChain = "filter-prerouting-pre-dnat"
	filterOutputPreDNATChain     = "filter-output-pre-dnat"
	filterForwardChain           = "filter-forward"
	filterInputChain             = "filter-input"
	filterOutputChain            = "filter-output"
	natPreroutingChain           = "nat-prerouting"
	natOutputChain               = "nat-output"
	natPostroutingChain          = "nat-postrouting"

	clusterChainPrefix  = "service-"
	localChainPrefix    = "local-"
	externalChainPrefix = "external-"
	endpointChainPrefix = "endpoint-"
	affinitySetPrefix   = "affinity-"
	firewallChainPrefix = "firewall-"

	// chainNameBaseLengthMax leaves room for the longest prefix within
	// nftables' 256-character name limit.
	chainNameBaseLengthMax = knftables.NameLengthMax - 16

	// hashSeed makes jhash-based schedulers (sh, dh, mh) stable across
	// rule rewrites; without a seed the kernel picks a random one per rule.
	hashSeed = "0x5f3759df"
	// maglevTableSize is the Maglev table size programmed into nftables (a
	// prime; small enough for one vmap, large enough for ≈1/N disruption
	// with tens of endpoints).
	maglevTableSize = 251
)

type baseChain struct {
	name     string
	typ      knftables.BaseChainType
	hook     knftables.BaseChainHook
	priority knftables.BaseChainPriority
}

// The filter chains that must see pre-DNAT destinations run before DNAT
// (-110); the endpoint and cluster-IP checks run after it (0), when only
// traffic that DNAT did not claim still goes to a service address.
var baseChains = []baseChain{
	{filterPreroutingPreDNATChain, knftables.FilterType, knftables.PreroutingHook, "-110"},
	{filterOutputPreDNATChain, knftables.FilterType, knftables.OutputHook, "-110"},
	{filterForwardChain, knftables.FilterType, knftables.ForwardHook, "0"},
	{filterInputChain, knftables.FilterType, knftables.InputHook, "0"},
	{filterOutputChain, knftables.FilterType, knftables.OutputHook, "0"},
	{natPreroutingChain, knftables.NATType, knftables.PreroutingHook, "-100"},
	{natOutputChain, knftables.NATType, knftables.OutputHook, "-100"},
	{natPostroutingChain, knftables.NATType, knftables.PostroutingHook, "100"},
}

type jumpChain struct{ dst, src, match string }

var jumpChains = []jumpChain{
	{firewallCheckChain, filterPreroutingPreDNATChain, "ct state new"},
	{firewallCheckChain, filterOutputPreDNATChain, "ct state new"},
	{serviceEndpointsCheckChain, filterForwardChain, "ct state new"},
	{clusterIPsCheckChain, filterForwardChain, "ct state new"},
	{nodePortEndpointsCheckChain, filterInputChain, "ct state new"},
	{serviceEndpointsCheckChain, filterInputChain, "ct state new"},
	{serviceEndpointsCheckChain, filterOutputChain, "ct state new"},
	{clusterIPsCheckChain, filterOutputChain, "ct state new"},
	{servicesChain, natOutputChain, ""},
	{servicesChain, natPreroutingChain, ""},
	{masqueradingChain, natPostroutingChain, ""},
}

// Config is one family's configuration.
type Config struct {
	IPv6          bool
	MasqueradeAll bool
	// MasqueradeMark is the fwmark bit as kube-proxy writes it (%#08x of
	// 1<<bit, "0x004000" for the default bit 14).
	MasqueradeMark string
	// PodCIDRs (--cluster-cidr of this family) detect pod traffic: traffic
	// to a ClusterIP from outside them is masqueraded, and pod traffic to
	// an external address of a Local-policy Service short-circuits to the
	// cluster endpoints. Empty disables both, as in kube-proxy.
	PodCIDRs []netip.Prefix
	// ServiceCIDRs of this family: traffic to an address in them that is
	// no Service's ClusterIP is dropped. Empty leaves such traffic alone.
	ServiceCIDRs []netip.Prefix
	// NodePortAddresses (--nodeport-addresses of this family) limit
	// NodePorts to local addresses in these CIDRs; empty means every
	// local address but loopback.
	NodePortAddresses []netip.Prefix
	// LocalAddrs lists the node's addresses (read on full syncs when
	// NodePortAddresses select some of them; nil: the Node's addresses).
	LocalAddrs func(context.Context) ([]proxy.LinkAddr, error)
	Log        *slog.Logger
	// UnsupportedScheduler, if set, is called when a Service asks for a
	// scheduler nftables cannot express (lc, wlc, sed, nq, or an unknown
	// name); the Service then gets kube-proxy's random choice.
	UnsupportedScheduler func(svc proxy.ServicePortName, scheduler string)
	// Metrics, when set, counts failed sync transactions and stale-chain
	// deletions.
	Metrics *proxy.Metrics
	// ChoiceRules (--nftables-endpoint-choice=rules, a svcnet extension)
	// picks endpoints with one rule per endpoint instead of kube-proxy's
	// anonymous map per Service chain: see plan_choice.go.
	ChoiceRules bool
	// ChoiceShared (--nftables-endpoint-choice=shared, a svcnet extension)
	// keeps the endpoints of every Service chain in one map, each chain
	// using a range of its keys: see plan_choice.go.
	ChoiceShared bool
	// Shards (--nftables-shards, a svcnet extension; 0 is kube-proxy's one
	// table) spreads the Services over this many dispatch tables: see
	// doc.go.
	Shards int
}

// Proxier programs one family's kube-proxy table: each sync plans (plan*.go,
// pure) and applies (apply.go) one transaction.
type Proxier struct {
	cfg  Config
	nft  NFT // nil when programming through netlink
	exec proxy.Executor
	// other builds the Proxier of the other family the same way (for
	// Mode.Cleanup).
	other   func(Config) *Proxier
	apply   applier
	planner *planner
	log     *slog.Logger
	family  knftables.Family

	// recreated is true once this process created the base chains.
	recreated bool
	// known is the kernel state after the last successful sync; nil
	// means unknown (the next sync is full and lists the table).
	known *known
	// staleChains aliases known.stale (tests look at it).
	staleChains map[tobj]time.Time
	// lastTopology is the node name and zone of the last sync (see Sync).
	lastTopology string
	now          func() time.Time
}

// localAddrs lists the node's addresses of this family that
// --nodeport-addresses may select, as kube-proxy reads them from the node's
// links; without a lister, or when it fails, the Node's addresses.
func (p *Proxier) localAddrs(ctx context.Context, node proxy.NodeInfo) []netip.Addr {
	if _, matchAll, _ := proxy.NodePortCIDRs(p.cfg.NodePortAddresses, p.cfg.IPv6); matchAll || p.cfg.LocalAddrs == nil {
		return node.IPs
	}
	all, err := p.cfg.LocalAddrs(ctx)
	if err != nil {
		p.log.Error("listing local addresses for --nodeport-addresses; using the Node's", "err", err)
		return node.IPs
	}
	out := make([]netip.Addr, 0, len(all))
	for _, a := range all {
		out = append(out, a.Addr)
	}
	return out
}

// NewProxier returns a Proxier writing through nft (a knftables.Fake, or
// ExecNFT running the nft binary). Nothing runs until Sync.
func NewProxier(cfg Config, nft NFT) *Proxier {
	p := newProxier(cfg)
	p.nft, p.apply = nft, &textApplier{nft: nft, family: p.family}
	if e, ok := nft.(*ExecNFT); ok {
		p.other = func(c Config) *Proxier {
			fam := knftables.IPv4Family
			if c.IPv6 {
				fam = knftables.IPv6Family
			}
			return NewProxier(c, NewExecNFT(fam, TableName, e.Exec))
		}
	}
	return p
}

// NewNetlinkProxier returns a Proxier that programs the table through
// netlink in network namespace netns (a name under /var/run/netns or a
// path; "" for this process's own). exec, if set, runs `nft list table`
// for Mode.Dump.
func NewNetlinkProxier(cfg Config, netns string, exec proxy.Executor) *Proxier {
	p := newProxier(cfg)
	p.apply, p.exec = newNetlinkApplier(cfg.IPv6, netns), exec
	p.other = func(c Config) *Proxier { return NewNetlinkProxier(c, netns, exec) }
	return p
}

func newProxier(cfg Config) *Proxier {
	if cfg.MasqueradeMark == "" {
		cfg.MasqueradeMark = fmt.Sprintf("%#08x", 1<<14)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cfg.Shards = min(max(cfg.Shards, 0), MaxShards) // NewMode refuses others (ValidateShards)
	p := &Proxier{cfg: cfg, family: knftables.IPv4Family, now: time.Now, staleChains: map[tobj]time.Time{}}
	pl := &planner{cfg: cfg, ipX: "ip", addrType: "ipv4_addr"}
	if cfg.IPv6 {
		pl.ipX, pl.addrType, p.family = "ip6", "ipv6_addr", knftables.IPv6Family
	}
	p.planner = pl
	p.log = cfg.Log.With("mode", "nftables", "family", string(p.family))
	pl.cfg.Log = p.log
	return p
}

// hashAndTruncate prefixes name with the first 8 characters of the base32
// of its SHA-256, as kube-proxy does, so names stay unique and visually
// distinct, and truncates very long names.
func hashAndTruncate(name string) string {
	h := sha256.Sum256([]byte(name))
	name = base32.StdEncoding.EncodeToString(h[:])[:8] + "-" + name
	if len(name) > chainNameBaseLengthMax {
		name = name[:chainNameBaseLengthMax-3] + "..."
	}
	return name
}

// servicePortChainBase is "HASH-namespace/name/protocol/port".
func servicePortChainBase(n proxy.ServicePortName, protocol string) string {
	return hashAndTruncate(fmt.Sprintf("%s/%s/%s/%s", n.Namespace, n.Name, protocol, n.Port))
}

// endpointChainBase is "HASH-namespace/name/protocol/port__ip/port", with
// IPv6 colons turned into dots (colons are not allowed in names).
func endpointChainBase(n proxy.ServicePortName, protocol string, ep *proxy.Endpoint) string {
	ip := strings.ReplaceAll(ep.Addr.String(), ":", ".")
	return hashAndTruncate(fmt.Sprintf("%s/%s/%s/%s__%s/%d", n.Namespace, n.Name, protocol, n.Port, ip, ep.Port))
}

func isServiceChainName(s string) bool { return strings.Contains(s, "/") }

func cidrList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Masked().String()
	}
	return strings.Join(s, ", ")
}

func ptrTo[T any](v T) *T { return &v }

// Sync makes the table match req for this family: one transaction. On a
// partial sync (req.Full false, the previous sync succeeded and this node's
// topology is unchanged) only the Services in req.ChangedServices() are
// planned, so its cost follows the change, not the number of Services.
func (p *Proxier) Sync(ctx context.Context, req *proxy.SyncRequest) error {
	start := p.now()
	// Topology hints depend on this node's name and zone: when they
	// change, every Service's endpoint choice may change.
	topo := req.Node.Name + "\x00" + req.Node.Labels[v1.LabelTopologyZone]
	partial := !req.Full && p.known != nil && topo == p.lastTopology
	p.lastTopology = topo
	// The ServiceCIDR objects' ranges, when the proxy watches them,
	// replace the configured ones (the drop rule is written on full syncs).
	if req.ServiceCIDRs != nil {
		if want := ofFamily(req.ServiceCIDRs, p.cfg.IPv6); !slices.Equal(want, p.cfg.ServiceCIDRs) {
			p.cfg.ServiceCIDRs, p.planner.cfg.ServiceCIDRs = want, want
			partial = false
		}
	}
	p.deleteStale(ctx, start)
	in := input{req: req, full: !partial, recreated: p.recreated, now: start}
	k := p.known
	if !partial {
		in.localAddrs = p.localAddrs(ctx, req.Node)
		var err error
		if in.listedChains, in.listedSets, err = p.apply.list(ctx); err != nil {
			p.log.Warn("listing the table failed; leftover chains stay", "err", err)
		}
		k = newKnown()
		if p.known != nil {
			k.stale = p.known.stale
		} else {
			k.stale = p.staleChains
		}
	}
	p.known = nil // until the transaction succeeds
	tx := p.planner.planSync(in, k)
	if err := p.applyTx(ctx, tx, !partial && len(in.listedChains) == 0); err != nil {
		clear(k.stale)
		p.staleChains = k.stale
		if p.cfg.Metrics != nil {
			p.cfg.Metrics.NFTablesSyncFailuresTotal.WithLabelValues(proxy.Family(p.cfg.IPv6)).Inc()
		}
		return fmt.Errorf("sync nftables %s: %w", p.family, err)
	}
	p.known, p.staleChains, p.recreated = k, k.stale, true
	req.Stats.Partial = req.Stats.Partial || partial
	req.Stats.AddNoLocal(p.cfg.IPv6, k.noLocalInternal, k.noLocalExternal)
	return nil
}

// freshTableAnonSets is about how many anonymous sets (inline sets and
// maps of rules) go in one transaction when a full sync creates the table
// from nothing, and freshTableParts how many parts such a sync is split
// into at least when it is large (freshTableMinOps).
// (Variables for the tests.)
var (
	freshTableAnonSets = 500
	freshTableParts    = 4
	freshTableMinOps   = 20000
)

// applyTx applies tx as one transaction, or, when the table did not exist
// (fresh), in parts of whole Services, so that Services become reachable
// part by part instead of all at the end (with no previous table there is
// nothing whose atomic replacement matters; in the shared layout the
// endpoints come in the last parts, txn.late):
//   - a part holds about freshTableAnonSets anonymous sets: the kernel
//     walks the whole transaction for every anonymous set a rule binds
//     (__nft_set_trans_bind), so one transaction of N Services, each with
//     its endpoint map, costs O(N²) there;
//   - a large table is split into at least freshTableParts parts, so that
//     the netlink applier encodes the next part while the kernel commits
//     the current one;
//   - not smaller, since every commit also validates the whole table
//     (nft_table_validate).
//
// A full sync of a table that exists (a restart, the hourly full sync) is
// written in parts too, in kube-proxy's layout (replaceParts): one
// transaction of N Services there costs O(N²) in the same kernel walk,
// 43 s at 10,000 Services against 5.7 s for the table written from
// nothing (`go test -run XXX -bench 'SyncRealNFT/apply=netlink/services=10000'
// -benchtime 1x ./proxy/nftables`, refull-sync-s and full-sync-s).
func (p *Proxier) applyTx(ctx context.Context, tx *txn, fresh bool) error {
	if len(tx.ports) == 0 {
		return p.apply.apply(ctx, tx.ops)
	}
	var parts [][]op
	switch {
	case fresh:
		parts = freshParts(tx)
	case !p.cfg.ChoiceShared && p.cfg.Shards <= 0 && !flushesServiceChains(tx.ops[:tx.ports[0]]):
		parts = replaceParts(tx)
	default:
		return p.apply.apply(ctx, tx.ops)
	}
	if pa, ok := p.apply.(partsApplier); ok && len(parts) > 1 {
		return pa.applyParts(ctx, parts)
	}
	for _, part := range parts {
		if err := p.apply.apply(ctx, part); err != nil {
			return err
		}
	}
	return nil
}

// freshParts splits a full sync's ops at Service boundaries (applyTx).
func freshParts(tx *txn) [][]op {
	maxOps := len(tx.ops)
	if maxOps >= freshTableMinOps {
		maxOps = (maxOps + freshTableParts - 1) / freshTableParts
	}
	var parts [][]op
	start, sets := 0, 0
	for i := range tx.ports {
		end := len(tx.ops)
		if i+1 < len(tx.ports) {
			end = tx.ports[i+1]
		}
		sets += anonSets(tx.ops[tx.ports[i]:end])
		if (sets >= freshTableAnonSets || end-start >= maxOps) && end < len(tx.ops) {
			parts = append(parts, tx.ops[start:end])
			start, sets = end, 0
		}
	}
	return append(parts, tx.ops[start:])
}

// replaceParts splits a full sync of a table that exists so that every
// transaction leaves a working ruleset: the parts of freshParts (the
// setup, then runs of whole Services: each chain is flushed and filled in
// one part, and a Service's chains keep their names, so the old dispatch
// elements still lead to them), without the element writes and the flushes
// of sets and maps (the dispatch maps, cluster-ips, nodeport-ips, the
// no-endpoint and firewall maps), which all come in one last part, in
// their order: until then the old elements stay, and new Services' chains
// exist before an element leads to them.
func replaceParts(tx *txn) [][]op {
	parts := freshParts(tx)
	if len(parts) < 2 {
		return parts
	}
	var last []op
	out := make([][]op, 0, len(parts)+1)
	for _, part := range parts {
		kept := make([]op, 0, len(part))
		for _, o := range part {
			if laterInReplace(o) {
				last = append(last, o)
			} else {
				kept = append(kept, o)
			}
		}
		if len(kept) > 0 {
			out = append(out, kept)
		}
	}
	return append(out, last)
}

// laterInReplace: an element op, or the flush of a set or map.
func laterInReplace(o op) bool {
	switch o.obj.(type) {
	case *knftables.Element:
		return true
	case *knftables.Set, *knftables.Map:
		return o.verb == opFlush
	}
	return false
}

// flushesServiceChains reports whether ops (a full sync's setup) flush
// Service chains: a full sync that changes the layout (the shared endpoint
// maps of an earlier run) flushes every chain first, and stays one
// transaction.
func flushesServiceChains(ops []op) bool {
	return slices.ContainsFunc(ops, func(o op) bool {
		c, ok := o.obj.(*knftables.Chain)
		return ok && o.verb == opFlush && isServiceChainName(c.Name)
	})
}

// anonSets counts the rules of ops with an inline set or map ("{ … }" is
// nft's syntax for nothing else in a rule).
func anonSets(ops []op) int {
	n := 0
	for _, o := range ops {
		if r, ok := o.obj.(*knftables.Rule); ok && strings.Contains(r.Rule, "{") {
			n++
		}
	}
	return n
}

// deleteStale deletes the chains that became unreferenced over a second
// ago (kernels before 6.2 notice a map element's removal late).
func (p *Proxier) deleteStale(ctx context.Context, now time.Time) {
	if p.known == nil || len(p.known.stale) == 0 {
		return
	}
	tx, gone := staleDeletes(p.known, now)
	if len(gone) == 0 {
		return
	}
	if err := p.apply.apply(ctx, tx.ops); err != nil {
		// They still exist: they stay stale and are retried.
		if p.cfg.Metrics != nil {
			p.cfg.Metrics.NFTablesCleanupFailuresTotal.WithLabelValues(proxy.Family(p.cfg.IPv6)).Inc()
		}
		p.log.Warn("deleting stale chains failed; will retry", "err", err)
		return
	}
	for _, c := range gone {
		delete(p.known.stale, c)
	}
}

// Cleanup deletes this family's table and dispatch tables
// (--nftables-shards); a missing table is not an error.
func (p *Proxier) Cleanup(ctx context.Context) error {
	tx := &txn{}
	tx.add(&knftables.Table{})
	tx.delete(&knftables.Table{})
	for _, t := range p.shardTables(ctx) {
		tx.add(&knftables.Table{Name: t})
		tx.delete(&knftables.Table{Name: t})
	}
	if err := p.apply.apply(ctx, tx.ops); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete table %s %s: %w", p.family, TableName, err)
	}
	p.recreated, p.known = false, nil
	clear(p.staleChains)
	return nil
}

// shardTables lists the dispatch tables (--nftables-shards) the kernel
// holds, whatever their number in this configuration.
func (p *Proxier) shardTables(ctx context.Context) []string {
	chains, _, err := p.apply.list(ctx)
	if err != nil {
		p.log.Warn("listing the dispatch tables failed", "err", err)
	}
	var out []string
	for _, c := range chains {
		if isShardTable(c.table) && !slices.Contains(out, c.table) {
			out = append(out, c.table)
		}
	}
	slices.Sort(out)
	return out
}
