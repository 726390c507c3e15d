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
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/lb"
)

// TableName is kube-proxy's table name; one table per family.
const TableName = "kube-proxy"

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
	Log               *slog.Logger
	// UnsupportedScheduler, if set, is called when a Service asks for a
	// scheduler nftables cannot express (lc, wlc, sed, nq, or an unknown
	// name); the Service then gets kube-proxy's random choice.
	UnsupportedScheduler func(svc proxy.ServicePortName, scheduler string)
}

// Proxier programs one family's kube-proxy table.
type Proxier struct {
	cfg      Config
	nft      NFT
	log      *slog.Logger
	ipX      string // "ip" or "ip6"
	addrType string // "ipv4_addr" or "ipv6_addr"
	family   knftables.Family

	needFull    bool
	recreated   bool
	staleChains map[string]time.Time
	// knownChains / knownAffinity are the Service chains and affinity sets
	// in the kernel after the last successful sync; partial syncs use them
	// instead of listing the table (listing 100k chains costs seconds). Nil
	// means unknown: the next sync lists.
	knownChains, knownAffinity sets.Set[string]
	// lastTopology is the node name and zone of the last sync (see Sync).
	lastTopology string
	now          func() time.Time

	clusterIPs, serviceIPs, firewallIPs, noEndpointServices, noEndpointNodePorts, serviceNodePorts, hairpin *elementStore
}

// NewProxier returns a Proxier writing through nft. Nothing runs until Sync.
func NewProxier(cfg Config, nft NFT) *Proxier {
	if cfg.MasqueradeMark == "" {
		cfg.MasqueradeMark = fmt.Sprintf("%#08x", 1<<14)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	p := &Proxier{
		cfg: cfg, nft: nft, ipX: "ip", addrType: "ipv4_addr", family: knftables.IPv4Family,
		needFull: true, staleChains: map[string]time.Time{}, now: time.Now,
		clusterIPs:          newElementStore(true, clusterIPsSet),
		serviceIPs:          newElementStore(false, serviceIPsMap),
		firewallIPs:         newElementStore(false, firewallIPsMap),
		noEndpointServices:  newElementStore(false, noEndpointServicesMap),
		noEndpointNodePorts: newElementStore(false, noEndpointNodePortsMap),
		serviceNodePorts:    newElementStore(false, serviceNodePortsMap),
		hairpin:             newElementStore(true, hairpinConnectionsSet),
	}
	if cfg.IPv6 {
		p.ipX, p.addrType, p.family = "ip6", "ipv6_addr", knftables.IPv6Family
	}
	p.log = cfg.Log.With("mode", "nftables", "family", string(p.family))
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

// podMatch returns the "ip saddr X" / "ip saddr != X" expression of the
// local-traffic detector, or "" when no pod CIDR is known.
func (p *Proxier) podMatch(negate bool) string {
	if len(p.cfg.PodCIDRs) == 0 {
		return ""
	}
	op := ""
	if negate {
		op = "!= "
	}
	if len(p.cfg.PodCIDRs) == 1 {
		return p.ipX + " saddr " + op + p.cfg.PodCIDRs[0].Masked().String()
	}
	return p.ipX + " saddr " + op + "{ " + cidrList(p.cfg.PodCIDRs) + " }"
}

func (p *Proxier) setup(tx *knftables.Transaction, node proxy.NodeInfo) {
	noLocalhost := "ip daddr != 127.0.0.0/8"
	if p.cfg.IPv6 {
		noLocalhost = "ip6 daddr != ::1"
	}
	tx.Add(&knftables.Table{Comment: ptrTo("rules for kube-proxy")})
	if !p.recreated {
		// Base chains are deleted once so that a table left by another
		// version with other priorities is replaced rather than refused.
		for _, bc := range baseChains {
			tx.Add(&knftables.Chain{Name: bc.name})
			tx.Delete(&knftables.Chain{Name: bc.name})
		}
	}
	for _, bc := range baseChains {
		c := &knftables.Chain{Name: bc.name, Type: ptrTo(bc.typ), Hook: ptrTo(bc.hook), Priority: ptrTo(bc.priority)}
		tx.Add(c)
		tx.Flush(c)
	}
	created := sets.New[string]()
	for _, j := range jumpChains {
		ensureChain(j.dst, tx, created, false)
		tx.Add(&knftables.Rule{Chain: j.src, Rule: knftables.Concat(j.match, "jump", j.dst)})
	}
	for _, c := range []string{servicesChain, clusterIPsCheckChain, masqueradingChain, firewallCheckChain} {
		ensureChain(c, tx, created, false)
	}
	// Marked connections (see masqueradeRule) and hairpin connections (a
	// local endpoint reaching itself through its Service: same source and
	// destination after DNAT) are masqueraded.
	mark := p.cfg.MasqueradeMark
	tx.Add(&knftables.Set{Name: hairpinConnectionsSet, Type: p.addrType + " . " + p.addrType + " . inet_proto . inet_service",
		Comment: ptrTo("service hairpin connections")})
	tx.Add(&knftables.Rule{Chain: masqueradingChain, Rule: knftables.Concat("mark and", mark, "!= 0 mark set mark xor", mark, "masquerade fully-random")})
	tx.Add(&knftables.Rule{Chain: masqueradingChain, Rule: knftables.Concat("ct status dnat",
		p.ipX, "saddr .", p.ipX, "daddr . meta l4proto . th dport", "@", hairpinConnectionsSet, "masquerade fully-random")})

	tx.Add(&knftables.Set{Name: clusterIPsSet, Type: p.addrType, Comment: ptrTo("Active ClusterIPs")})
	tx.Add(&knftables.Rule{Chain: clusterIPsCheckChain, Rule: knftables.Concat(p.ipX, "daddr", "@", clusterIPsSet, "reject"),
		Comment: ptrTo("Reject traffic to invalid ports of ClusterIPs")})
	if len(p.cfg.ServiceCIDRs) > 0 {
		tx.Add(&knftables.Rule{Chain: clusterIPsCheckChain, Rule: knftables.Concat(p.ipX, "daddr {", strings.ReplaceAll(cidrList(p.cfg.ServiceCIDRs), ", ", ","), "} drop"),
			Comment: ptrTo("Drop traffic to unallocated ClusterIPs")})
	}

	// As kube-proxy, a zero CIDR (0.0.0.0/0, ::/0; --nodeport-addresses
	// "all") means every local address, like no CIDR of this family.
	matchAll := len(p.cfg.NodePortAddresses) == 0 || slices.ContainsFunc(p.cfg.NodePortAddresses, func(c netip.Prefix) bool { return c.Bits() == 0 })
	tx.Add(&knftables.Set{Name: nodePortIPsSet, Type: p.addrType, Comment: ptrTo("IPs that accept NodePort traffic")})
	if matchAll {
		tx.Delete(&knftables.Set{Name: nodePortIPsSet})
	} else {
		tx.Flush(&knftables.Set{Name: nodePortIPsSet})
		for _, ip := range node.IPs {
			if ip.Is6() != p.cfg.IPv6 || ip.IsLoopback() {
				continue
			}
			for _, pr := range p.cfg.NodePortAddresses {
				if pr.Contains(ip) {
					tx.Add(&knftables.Element{Set: nodePortIPsSet, Key: []string{ip.String()}})
					break
				}
			}
		}
	}

	tx.Add(&knftables.Map{Name: noEndpointServicesMap, Type: p.addrType + " . inet_proto . inet_service : verdict",
		Comment: ptrTo("vmap to drop or reject packets to services with no endpoints")})
	tx.Add(&knftables.Map{Name: noEndpointNodePortsMap, Type: "inet_proto . inet_service : verdict",
		Comment: ptrTo("vmap to drop or reject packets to service nodeports with no endpoints")})
	tx.Add(&knftables.Chain{Name: rejectChain, Comment: ptrTo("helper for @no-endpoint-services / @no-endpoint-nodeports")})
	tx.Flush(&knftables.Chain{Name: rejectChain})
	tx.Add(&knftables.Rule{Chain: rejectChain, Rule: "reject"})
	tx.Add(&knftables.Rule{Chain: serviceEndpointsCheckChain,
		Rule: knftables.Concat(p.ipX, "daddr . meta l4proto . th dport vmap", "@", noEndpointServicesMap)})
	if matchAll {
		tx.Add(&knftables.Rule{Chain: nodePortEndpointsCheckChain,
			Rule: knftables.Concat(noLocalhost, "meta l4proto . th dport vmap", "@", noEndpointNodePortsMap)})
	} else {
		tx.Add(&knftables.Rule{Chain: nodePortEndpointsCheckChain,
			Rule: knftables.Concat(p.ipX, "daddr", "@", nodePortIPsSet, "meta l4proto . th dport vmap", "@", noEndpointNodePortsMap)})
	}

	tx.Add(&knftables.Map{Name: firewallIPsMap, Type: p.addrType + " . inet_proto . inet_service : verdict",
		Comment: ptrTo("destinations that are subject to LoadBalancerSourceRanges")})
	tx.Add(&knftables.Rule{Chain: firewallCheckChain,
		Rule: knftables.Concat(p.ipX, "daddr . meta l4proto . th dport vmap", "@", firewallIPsMap)})

	tx.Add(&knftables.Map{Name: serviceIPsMap, Type: p.addrType + " . inet_proto . inet_service : verdict",
		Comment: ptrTo("ClusterIP, ExternalIP and LoadBalancer IP traffic")})
	tx.Add(&knftables.Map{Name: serviceNodePortsMap, Type: "inet_proto . inet_service : verdict", Comment: ptrTo("NodePort traffic")})
	// ClusterIP traffic from outside the pod network (or all of it with
	// masquerade-all) is marked before dispatch: it may leave the node.
	if p.cfg.MasqueradeAll {
		tx.Add(&knftables.Rule{Chain: servicesChain, Rule: knftables.Concat(p.ipX, "daddr", "@", clusterIPsSet, p.masqueradeRule()),
			Comment: ptrTo("masquerade all clusterIP traffic")})
	} else if m := p.podMatch(true); m != "" {
		tx.Add(&knftables.Rule{Chain: servicesChain, Rule: knftables.Concat(p.ipX, "daddr", "@", clusterIPsSet, m, p.masqueradeRule()),
			Comment: ptrTo("masquerade clusterIP traffic from outside cluster")})
	}
	tx.Add(&knftables.Rule{Chain: servicesChain, Rule: knftables.Concat(p.ipX, "daddr . meta l4proto . th dport vmap", "@", serviceIPsMap)})
	if matchAll {
		tx.Add(&knftables.Rule{Chain: servicesChain,
			Rule: knftables.Concat("fib daddr type local", noLocalhost, "meta l4proto . th dport vmap", "@", serviceNodePortsMap)})
	} else {
		tx.Add(&knftables.Rule{Chain: servicesChain,
			Rule: knftables.Concat(p.ipX, "daddr", "@", nodePortIPsSet, "meta l4proto . th dport vmap", "@", serviceNodePortsMap)})
	}
	for _, s := range p.stores() {
		s.reset(tx)
	}
}

func (p *Proxier) stores() []*elementStore {
	return []*elementStore{p.clusterIPs, p.serviceIPs, p.firewallIPs, p.noEndpointServices, p.noEndpointNodePorts, p.serviceNodePorts, p.hairpin}
}

// masqueradeRule sets the masquerade mark, which the masquerading chain
// turns into SNAT when the packet leaves.
func (p *Proxier) masqueradeRule() string {
	return "mark set mark or " + p.cfg.MasqueradeMark
}

// ensureChain adds and flushes chain once per transaction; with skip it
// only records the chain as in use (partial syncs leave unchanged Services'
// chains alone).
func ensureChain(chain string, tx *knftables.Transaction, created sets.Set[string], skip bool) {
	if created.Has(chain) {
		return
	}
	created.Insert(chain)
	if skip {
		return
	}
	tx.Add(&knftables.Chain{Name: chain})
	tx.Flush(&knftables.Chain{Name: chain})
}

func ptrTo[T any](v T) *T { return &v }

// Sync makes the table match req for this family: one transaction, and on
// a partial sync (req.Full false, and the previous sync succeeded) only the
// chains of Services in req.ChangedServices() are rewritten, while the
// dispatch maps are updated element by element.
func (p *Proxier) Sync(ctx context.Context, req *proxy.SyncRequest) error {
	start := p.now()
	// Topology hints depend on this node's name and zone: when they
	// change, every Service's endpoint choice may change.
	topo := req.Node.Name + "\x00" + req.Node.Labels[v1.LabelTopologyZone]
	partial := !req.Full && !p.needFull && topo == p.lastTopology
	p.lastTopology = topo
	// Delete chains that became unreferenced over a second ago (kernels
	// before 6.2 notice a map element's removal late).
	if len(p.staleChains) > 0 {
		tx := p.nft.NewTransaction()
		var gone []string
		for c, t := range p.staleChains {
			if t.Before(start.Add(-time.Second)) {
				tx.Delete(&knftables.Chain{Name: c})
				delete(p.staleChains, c)
				gone = append(gone, c)
			}
		}
		if len(gone) > 0 {
			if err := p.nft.Run(ctx, tx); err != nil {
				// They still exist: this sync flushes them again and
				// marks them stale anew.
				p.log.Warn("deleting stale chains failed; will retry", "err", err)
			} else if p.knownChains != nil {
				p.knownChains.Delete(gone...)
			}
		}
	}
	tx := p.nft.NewTransaction()
	if !partial {
		p.setup(tx, req.Node)
	}
	changed := req.ChangedServices()
	active := sets.New[string]()
	activeAffinity := sets.New[string]()
	noLocalInternal, noLocalExternal := 0, 0

	for _, name := range proxy.SortedServicePorts(req.Services) {
		pol := req.Policy(name, p.cfg.IPv6)
		if pol == nil {
			continue
		}
		sp := pol.Port
		protocol := strings.ToLower(string(sp.Protocol))
		clusterEps, localEps, reachable, hasEndpoints := pol.Cluster, pol.Local, pol.Reachable, pol.HasEndpoints
		skip := partial && !changed.Has(name.NamespacedName)
		base := servicePortChainBase(name, protocol)
		epChain := func(ep *proxy.Endpoint) string { return endpointChainPrefix + endpointChainBase(name, protocol, ep) }
		affSet := func(ep *proxy.Endpoint) string { return affinitySetPrefix + endpointChainBase(name, protocol, ep) }
		affinity := sp.SessionAffinity == v1.ServiceAffinityClientIP
		for _, ep := range reachable {
			// Endpoint chains exist only for session affinity (they
			// record the client); otherwise the Service chain DNATs.
			if affinity {
				ensureChain(epChain(ep), tx, active, skip)
				activeAffinity.Insert(affSet(ep))
			}
			if ep.IsLocal {
				p.hairpin.ensure(tx, &knftables.Element{Set: hairpinConnectionsSet,
					Key: []string{ep.Addr.String(), ep.Addr.String(), protocol, strconv.Itoa(ep.Port)}})
			}
		}
		clusterChain := clusterChainPrefix + base
		usesCluster := pol.UsesCluster
		if usesCluster {
			ensureChain(clusterChain, tx, active, skip)
		}
		localChain := localChainPrefix + base
		usesLocal := pol.UsesLocal
		if usesLocal {
			ensureChain(localChain, tx, active, skip)
		}
		internalChain, hasInternal := clusterChain, pol.Internal.Verdict == proxy.VerdictAccept
		if pol.Internal.Local {
			internalChain = localChain
		}
		externalPolicyChain, hasExternal := clusterChain, pol.External.Verdict == proxy.VerdictAccept
		if pol.External.Local {
			externalPolicyChain = localChain
		}
		externalChain := externalChainPrefix + base
		usesExternal := pol.Externally
		if usesExternal {
			ensureChain(externalChain, tx, active, skip)
		}
		var internalVerdict, externalVerdict string
		if !hasEndpoints {
			internalVerdict, externalVerdict = "goto "+rejectChain, "goto "+rejectChain
		} else {
			if !hasInternal {
				internalVerdict = "drop"
				noLocalInternal++
			}
			if !hasExternal {
				externalVerdict = "drop"
				noLocalExternal++
			}
		}
		port := strconv.Itoa(sp.Port)
		comment := name.String()
		for _, cip := range sp.ClusterIPs {
			p.clusterIPs.ensure(tx, &knftables.Element{Set: clusterIPsSet, Key: []string{cip.String()}})
			if hasInternal {
				p.serviceIPs.ensure(tx, &knftables.Element{Map: serviceIPsMap, Key: []string{cip.String(), protocol, port},
					Value: []string{"goto " + internalChain}})
			} else {
				p.noEndpointServices.ensure(tx, &knftables.Element{Map: noEndpointServicesMap, Key: []string{cip.String(), protocol, port},
					Value: []string{internalVerdict}, Comment: &comment})
			}
		}
		for _, ip := range sp.ExternalIPs {
			if hasEndpoints {
				p.serviceIPs.ensure(tx, &knftables.Element{Map: serviceIPsMap, Key: []string{ip.String(), protocol, port},
					Value: []string{"goto " + externalChain}})
			}
			if !hasExternal {
				p.noEndpointServices.ensure(tx, &knftables.Element{Map: noEndpointServicesMap, Key: []string{ip.String(), protocol, port},
					Value: []string{externalVerdict}, Comment: &comment})
			}
		}
		usesFW := pol.Firewall
		fwChain := firewallChainPrefix + base
		if usesFW {
			ensureChain(fwChain, tx, active, skip)
		}
		for _, ip := range sp.LoadBalancerVIPs {
			if hasEndpoints {
				p.serviceIPs.ensure(tx, &knftables.Element{Map: serviceIPsMap, Key: []string{ip.String(), protocol, port},
					Value: []string{"goto " + externalChain}})
			}
			if usesFW {
				p.firewallIPs.ensure(tx, &knftables.Element{Map: firewallIPsMap, Key: []string{ip.String(), protocol, port},
					Value: []string{"goto " + fwChain}})
			}
			if !hasExternal {
				p.noEndpointServices.ensure(tx, &knftables.Element{Map: noEndpointServicesMap, Key: []string{ip.String(), protocol, port},
					Value: []string{externalVerdict}, Comment: &comment})
			}
		}
		if sp.NodePort != 0 {
			np := strconv.Itoa(sp.NodePort)
			if hasEndpoints {
				p.serviceNodePorts.ensure(tx, &knftables.Element{Map: serviceNodePortsMap, Key: []string{protocol, np},
					Value: []string{"goto " + externalChain}})
			}
			if !hasExternal {
				p.noEndpointNodePorts.ensure(tx, &knftables.Element{Map: noEndpointNodePortsMap, Key: []string{protocol, np},
					Value: []string{externalVerdict}, Comment: &comment})
			}
		}
		if skip {
			continue
		}

		if usesExternal {
			if pol.MasqueradeExternal {
				tx.Add(&knftables.Rule{Chain: externalChain, Rule: p.masqueradeRule(), Comment: ptrTo("masquerade")})
			} else {
				if m := p.podMatch(false); m != "" {
					tx.Add(&knftables.Rule{Chain: externalChain, Rule: knftables.Concat(m, "goto", clusterChain),
						Comment: ptrTo("short-circuit pod traffic")})
				}
				tx.Add(&knftables.Rule{Chain: externalChain, Rule: "fib saddr type local " + p.masqueradeRule(),
					Comment: ptrTo("masquerade local traffic")})
				tx.Add(&knftables.Rule{Chain: externalChain, Rule: "fib saddr type local goto " + clusterChain,
					Comment: ptrTo("short-circuit local traffic")})
			}
			if hasExternal {
				tx.Add(&knftables.Rule{Chain: externalChain, Rule: "goto " + externalPolicyChain})
			}
		}
		if usesFW {
			var src []string
			for _, r := range pol.SourceRanges {
				src = append(src, r.String())
			}
			if pol.FirewallAllowsNode {
				for _, ip := range sp.LoadBalancerVIPs {
					src = append(src, ip.String())
				}
			}
			tx.Add(&knftables.Rule{Chain: fwChain, Rule: knftables.Concat(p.ipX, "saddr != {", strings.Join(src, " , "), "} drop")})
		}
		if affinity {
			for _, ep := range reachable {
				tx.Add(&knftables.Set{Name: affSet(ep), Type: p.addrType,
					Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
					Timeout: ptrTo(time.Duration(sp.StickyMaxAgeSeconds) * time.Second)})
			}
		}
		if usesCluster {
			p.writeEndpointChoice(tx, sp, protocol, clusterChain, clusterEps, epChain, affSet)
		}
		if usesLocal {
			p.writeEndpointChoice(tx, sp, protocol, localChain, localEps, epChain, affSet)
		}
		if affinity {
			for _, ep := range reachable {
				c := epChain(ep)
				tx.Add(&knftables.Rule{Chain: c, Rule: knftables.Concat("update", "@", affSet(ep), "{", p.ipX, "saddr }")})
				tx.Add(&knftables.Rule{Chain: c, Rule: knftables.Concat("meta l4proto", protocol, "dnat to", ep.String())})
			}
		}
	}

	// Chains no longer used are flushed now and deleted a little later;
	// unused affinity sets go at once.
	chains, affinitySets := p.knownChains, p.knownAffinity
	if !partial || chains == nil || affinitySets == nil {
		chains, affinitySets = sets.New[string](), sets.New[string]()
		if l, err := p.nft.List(ctx, "chains"); err == nil {
			chains.Insert(l...)
		} else if !knftables.IsNotFound(err) {
			p.log.Warn("listing chains failed; stale chains stay", "err", err)
		}
		if l, err := p.nft.List(ctx, "sets"); err == nil {
			affinitySets.Insert(l...)
		}
	}
	for c := range chains {
		if !isServiceChainName(c) {
			continue
		}
		if !active.Has(c) {
			if _, pending := p.staleChains[c]; !pending {
				tx.Flush(&knftables.Chain{Name: c})
				p.staleChains[c] = start
			}
		} else {
			delete(p.staleChains, c)
		}
	}
	for s := range affinitySets {
		if strings.HasPrefix(s, affinitySetPrefix) && !activeAffinity.Has(s) {
			tx.Delete(&knftables.Set{Name: s})
		}
	}
	for _, s := range p.stores() {
		s.cleanup(tx)
	}
	if err := p.nft.Run(ctx, tx); err != nil {
		p.needFull = true
		p.knownChains, p.knownAffinity = nil, nil
		clear(p.staleChains)
		for _, s := range p.stores() {
			s.invalidate()
		}
		return fmt.Errorf("sync nftables %s: %w", p.family, err)
	}
	p.needFull = false
	p.recreated = true
	p.knownChains = active.Clone()
	for c := range p.staleChains {
		p.knownChains.Insert(c)
	}
	p.knownAffinity = activeAffinity
	req.Stats.Partial = req.Stats.Partial || partial
	req.Stats.NoLocalEndpointsInternal += noLocalInternal
	req.Stats.NoLocalEndpointsExternal += noLocalExternal
	return nil
}

// writeEndpointChoice writes the rules of a Service policy chain that pick
// an endpoint for a new connection. Without session affinity the chain
// DNATs directly, as kube-proxy 1.36 does: `meta l4proto P dnat ip addr .
// port to numgen random mod N map { 0 : IP . PORT , ... }`. With ClientIP
// affinity it first sends clients found in an endpoint's affinity set to
// that endpoint's chain, then picks an endpoint chain with `numgen random
// mod N vmap { 0 : goto CHAIN , ... }`; the endpoint chain records the
// client and DNATs.
//
// Per-Service schedulers (annotation service.kubernetes.io/ipvs-scheduler)
// replace the numgen expression and keep the same targets: rr (`numgen
// inc`), wrr (weighted `numgen random` intervals), sh / dh (weighted
// `jhash` of the source / destination address) and mh (a Maglev table of
// 251 slots indexed by `jhash ip saddr`). Others (lc, wlc, sed, nq, or an
// unknown name) fall back to random and are reported through
// Config.UnsupportedScheduler.
func (p *Proxier) writeEndpointChoice(tx *knftables.Transaction, sp *proxy.ServicePort, protocol, chain string, eps []*proxy.Endpoint,
	epChain, affSet func(*proxy.Endpoint) string) {
	affinity := sp.SessionAffinity == v1.ServiceAffinityClientIP
	if affinity {
		for _, ep := range eps {
			tx.Add(&knftables.Rule{Chain: chain, Rule: knftables.Concat(p.ipX, "saddr", "@", affSet(ep), "goto", epChain(ep))})
		}
	}
	// target is one map value; emit writes the rule around the generator.
	target := func(ep *proxy.Endpoint) string { return ep.Addr.String() + " . " + strconv.Itoa(ep.Port) }
	emit := func(gen string, parts []string) {
		tx.Add(&knftables.Rule{Chain: chain, Rule: knftables.Concat("meta l4proto", protocol, "dnat", p.ipX, "addr . port to",
			gen, "map {", strings.Join(parts, " , "), "}")})
	}
	if affinity {
		target = func(ep *proxy.Endpoint) string { return "goto " + epChain(ep) }
		emit = func(gen string, parts []string) {
			tx.Add(&knftables.Rule{Chain: chain, Rule: knftables.Concat(gen, "vmap {", strings.Join(parts, " , "), "}")})
		}
	}
	even := func(eps []*proxy.Endpoint) []string {
		parts := make([]string, len(eps))
		for i, ep := range eps {
			parts[i] = strconv.Itoa(i) + " : " + target(ep)
		}
		return parts
	}
	random := func() { emit("numgen random mod "+strconv.Itoa(len(eps)), even(eps)) }

	sched := strings.ToLower(strings.TrimSpace(sp.Scheduler))
	if sched == "maglev" {
		sched = lb.Maglev
	}
	if !affinity && len(eps) == 1 {
		// kube-proxy 1.37: one endpoint is a plain DNAT, without a map
		// (whatever the scheduler: there is nothing to choose, but one
		// nftables cannot express is still reported).
		switch sched {
		case "", lb.Random, lb.RoundRobin, lb.WeightedRoundRobin, lb.SourceHashing, lb.DestinationHashing, lb.Maglev:
		default:
			if p.cfg.UnsupportedScheduler != nil {
				p.cfg.UnsupportedScheduler(sp.Name, sp.Scheduler)
			}
		}
		tx.Add(&knftables.Rule{Chain: chain, Rule: knftables.Concat("meta l4proto", protocol, "dnat to", eps[0].AddrPort().String())})
		return
	}
	// Quiesced endpoints (weight 0) never reach here: the core's policy
	// leaves them out.
	weighted := eps
	weight := proxy.EffectiveWeight
	switch sched {
	case "", lb.Random:
		random()
	case lb.RoundRobin:
		emit("numgen inc mod "+strconv.Itoa(len(weighted)), even(weighted))
	case lb.WeightedRoundRobin, lb.SourceHashing, lb.DestinationHashing:
		total := 0
		var parts []string
		for _, ep := range weighted {
			w := weight(ep)
			parts = append(parts, rangeKey(total, total+w-1)+" : "+target(ep))
			total += w
		}
		gen := "numgen random mod " + strconv.Itoa(total)
		switch sched {
		case lb.SourceHashing:
			gen = fmt.Sprintf("jhash %s saddr mod %d seed %s", p.ipX, total, hashSeed)
		case lb.DestinationHashing:
			gen = fmt.Sprintf("jhash %s daddr mod %d seed %s", p.ipX, total, hashSeed)
		}
		emit(gen, parts)
	case lb.Maglev:
		var bs []*lb.Backend
		byID := map[string]*proxy.Endpoint{}
		for _, ep := range weighted {
			b := lb.NewBackend(ep.AddrPort(), weight(ep))
			bs = append(bs, b)
			byID[b.ID] = ep
		}
		table, err := lb.MaglevTable(bs, maglevTableSize)
		if err != nil {
			p.log.Warn("maglev table failed; using random", "service", sp.Name.String(), "err", err)
			random()
			return
		}
		var parts []string
		for i := 0; i < len(table); {
			j := i
			for j+1 < len(table) && table[j+1] == table[i] {
				j++
			}
			parts = append(parts, rangeKey(i, j)+" : "+target(byID[table[i].ID]))
			i = j + 1
		}
		emit(fmt.Sprintf("jhash %s saddr mod %d seed %s", p.ipX, len(table), hashSeed), parts)
	default:
		if p.cfg.UnsupportedScheduler != nil {
			p.cfg.UnsupportedScheduler(sp.Name, sp.Scheduler)
		}
		random()
	}
}

func rangeKey(a, b int) string {
	if a == b {
		return strconv.Itoa(a)
	}
	return strconv.Itoa(a) + "-" + strconv.Itoa(b)
}

// Cleanup deletes this family's table; a missing table is not an error.
func (p *Proxier) Cleanup(ctx context.Context) error {
	tx := p.nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	if err := p.nft.Run(ctx, tx); err != nil && !knftables.IsNotFound(err) {
		return fmt.Errorf("delete table %s %s: %w", p.family, TableName, err)
	}
	p.needFull, p.recreated = true, false
	p.knownChains, p.knownAffinity = nil, nil
	clear(p.staleChains)
	for _, s := range p.stores() {
		s.invalidate()
	}
	return nil
}

// elementStore remembers what a map or set holds, so that a partial sync
// adds, replaces and deletes single elements instead of rewriting the map.
type elementStore struct {
	isSet    bool
	name     string
	elements map[string]string
	leftover sets.Set[string]
}

func newElementStore(isSet bool, name string) *elementStore {
	return &elementStore{isSet: isSet, name: name, elements: map[string]string{}, leftover: sets.New[string]()}
}

func (s *elementStore) reset(tx *knftables.Transaction) {
	clear(s.elements)
	if s.isSet {
		tx.Flush(&knftables.Set{Name: s.name})
	} else {
		tx.Flush(&knftables.Map{Name: s.name})
	}
	s.leftover = sets.New[string]()
}

func (s *elementStore) invalidate() {
	clear(s.elements)
	s.leftover = sets.New[string]()
}

func (s *elementStore) ensure(tx *knftables.Transaction, e *knftables.Element) {
	k, v := strings.Join(e.Key, " . "), strings.Join(e.Value, " . ")
	if old, ok := s.elements[k]; ok {
		if old != v {
			tx.Delete(e)
			tx.Add(e)
			s.elements[k] = v
		}
		s.leftover.Delete(k)
		return
	}
	tx.Add(e)
	s.elements[k] = v
	s.leftover.Delete(k)
}

func (s *elementStore) cleanup(tx *knftables.Transaction) {
	for k := range s.leftover {
		e := &knftables.Element{Key: strings.Split(k, " . ")}
		if s.isSet {
			e.Set = s.name
		} else {
			e.Map = s.name
		}
		tx.Delete(e)
		delete(s.elements, k)
	}
	s.leftover = sets.New[string]()
	for k := range s.elements {
		s.leftover.Insert(k)
	}
}
