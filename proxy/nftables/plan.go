package nftables

import (
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
)

// This file is the pure plan: from the shared policy (proxy.PortPolicy)
// and what the kernel is known to hold, the desired state of each Service
// port (its chains, rules, affinity sets and map elements, as data) and the
// operations that take the table there. It does no I/O; apply.go programs
// the result (through netlink, or as an nft script for the fake and for
// --dump), and the rule text written here is the only form of a rule.

// verb is what an op does to its object.
type verb uint8

const (
	opAdd verb = iota
	opFlush
	opDelete
)

// op is one step of a transaction, in nft's vocabulary.
type op struct {
	verb verb
	obj  knftables.Object
}

// tobj names a chain or set of one of the proxy's tables: "" is TableName,
// else a dispatch table of --nftables-shards.
type tobj struct{ table, name string }

// elemID names one element of one set or map: the table, the set and the
// key as nft writes it ("10.96.0.1 . tcp . 80").
type elemID struct{ table, set, key string }

// desiredElem is one element a Service port wants.
type desiredElem struct {
	id      elemID
	value   string
	comment string
}

// desiredPort is the desired state of one Service port in one family.
type desiredPort struct {
	// chains in creation order (endpoint chains before the chains that
	// jump to them); sets are the affinity sets.
	chains []tobj
	sets   []*knftables.Set
	maps   []mapUse // shared endpoint maps the rules use
	rules  []*knftables.Rule
	elems  []desiredElem
	// noLocalInternal/External: a Local policy without local endpoints
	// (metrics).
	noLocalInternal, noLocalExternal bool
	// direct: the port has no chain of its own (planner.direct).
	direct bool
}

// mapUse is a shared endpoint map a Service port uses and, for the maps
// of direct ClusterIP choices, the rule that looks it up (written once,
// with the map).
type mapUse struct {
	m    *knftables.Map
	rule *knftables.Rule
}

// known is the kernel state after the last successful sync, kept small:
// the PortPolicies last programmed for each Service (the core's
// PolicyCache holds the same pointers, so this shares rather than copies;
// a changed Service's old chains and elements are derived from its old
// policies when it changes) and how many Services hold each element (two
// Services may select the same local endpoint, hence share a hairpin
// element). A plan consumes it and leaves the new state in place (no
// per-sync copy of the whole state); when applying fails the Proxier drops
// it, and the next sync is full.
type known struct {
	services map[types.NamespacedName][]*proxy.PortPolicy
	refs     map[elemID]int32
	// stale chains were flushed at the given time and are deleted a
	// second later (kernels before 6.2 free map references late).
	stale map[tobj]time.Time
	// noLocalInternal/External are the totals over ports.
	noLocalInternal, noLocalExternal int
	// maps are the shared endpoint maps added since the last full sync,
	// spans the key ranges of each (--nftables-endpoint-choice=shared).
	maps  map[tobj]bool
	spans map[tobj]*spanAlloc
}

func newKnown() *known {
	return &known{services: map[types.NamespacedName][]*proxy.PortPolicy{}, refs: map[elemID]int32{}, stale: map[tobj]time.Time{},
		maps: map[tobj]bool{}, spans: map[tobj]*spanAlloc{}}
}

// spansOf returns the key ranges of shared map m.
func (k *known) spansOf(m tobj) *spanAlloc {
	a := k.spans[m]
	if a == nil {
		a = newSpanAlloc()
		k.spans[m] = a
	}
	return a
}

func newSpanAlloc() *spanAlloc {
	return &spanAlloc{byChain: map[chainKey]span{}, free: map[uint32][]uint32{}}
}

// span is a range of keys of the shared endpoints map: a chain with n
// endpoints uses keys off .. off+n-1 of its span's size keys.
type span struct{ off, size uint32 }

// spanAlloc gives each Service chain of the shared layout a range of keys:
// the smallest power of two (at least minSpan) that holds its endpoints,
// kept while its endpoints fit. A range given up becomes free at the next
// sync, after the transaction that deletes its elements (if that
// transaction fails, the next sync is full and starts afresh).
type spanAlloc struct {
	byChain map[chainKey]span
	next    uint32
	free    map[uint32][]uint32 // offsets of free ranges, by size
	pending []span              // given up in this sync
}

const minSpan = 4

// of returns the span chain holds.
func (a *spanAlloc) of(chain chainKey) span { return a.byChain[chain] }

// alloc returns chain's span for n endpoints: its own if it fits, else a
// new one (its old span is given up).
func (a *spanAlloc) alloc(chain chainKey, n int) span {
	if sp, ok := a.byChain[chain]; ok {
		if uint32(n) <= sp.size {
			return sp
		}
		a.pending = append(a.pending, sp)
	}
	size := uint32(minSpan)
	for size < uint32(n) {
		size *= 2
	}
	sp := span{size: size}
	if offs := a.free[size]; len(offs) > 0 {
		sp.off, a.free[size] = offs[len(offs)-1], offs[:len(offs)-1]
	} else {
		sp.off, a.next = a.next, a.next+size
	}
	a.byChain[chain] = sp
	return sp
}

// release gives up chain's span.
func (a *spanAlloc) release(chain chainKey) {
	if sp, ok := a.byChain[chain]; ok {
		a.pending = append(a.pending, sp)
		delete(a.byChain, chain)
	}
}

// reuse makes the spans given up by earlier syncs free.
func (a *spanAlloc) reuse() {
	for _, sp := range a.pending {
		a.free[sp.size] = append(a.free[sp.size], sp.off)
	}
	a.pending = a.pending[:0]
}

// spanFunc gives the span of a Service chain with n endpoints in shared
// endpoint map m (the old state's, or the new one's).
type spanFunc func(m tobj, chain chainKey, n int) span

// chainKey names a Service port's cluster or local policy chain by the
// strings its policy holds already: the chain's name, made anew by each
// sync among the sync's garbage, would keep that garbage's memory pages
// in use for as long as the name is kept.
type chainKey struct {
	port  proxy.ServicePortName
	local bool
}

// planner holds one family's constant facts; its methods are pure.
type planner struct {
	cfg      Config
	ipX      string // "ip" or "ip6"
	addrType string // "ipv4_addr" or "ipv6_addr"
	// directMaps are the declarations and rules of the direct choice
	// maps made so far (constant: see directMap).
	directMaps map[directKey]mapUse
}

// shardOf returns the table that dispatches Service nn: "" (TableName)
// without --nftables-shards, else a dispatch table chosen by a hash of the
// Service's namespace and name, so that all its ports share one.
func (pl *planner) shardOf(nn types.NamespacedName) string {
	if pl.cfg.Shards <= 0 {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(nn.Namespace))
	h.Write([]byte{'/'})
	h.Write([]byte(nn.Name))
	return shardTable(int(h.Sum32() % uint32(pl.cfg.Shards)))
}

// txn collects the ops of one transaction. ports holds the index in ops
// where each Service's ops begin (a full sync's ops may be applied in
// parts at these boundaries, see Proxier.applyTx).
type txn struct {
	ops   []op
	ports []int
	// late are ops a full sync writes after everything else: the
	// elements of the shared endpoint maps. A rule that looks a map up
	// makes the kernel check every element the map has at that point
	// (nf_tables_bind_set; one walk per chain, as each chain binds the map
	// anew), so the maps are filled once their rules are in: the walks
	// then see empty maps, where interleaved they cost O(Services ×
	// elements per map).
	late []op
	// early are the element deletions of a partial sync, written before
	// its other ops: an element that moves from one Service to another
	// (an external address whose winner changed, see proxy/claims.go) is
	// then released by the one before the other adds it, whichever of the
	// two the sync plans first.
	early   []op
	partial bool
}

func (t *txn) add(o knftables.Object)    { t.ops = append(t.ops, op{opAdd, o}) }
func (t *txn) flush(o knftables.Object)  { t.ops = append(t.ops, op{opFlush, o}) }
func (t *txn) delete(o knftables.Object) { t.ops = append(t.ops, op{opDelete, o}) }

// deleteElem deletes an element: in a partial sync, ahead of the other
// ops (see early).
func (t *txn) deleteElem(id elemID, isMap bool) {
	o := op{opDelete, elementObject(id, "", "", isMap)}
	if t.partial {
		t.early = append(t.early, o)
	} else {
		t.ops = append(t.ops, o)
	}
}

// elementObject rebuilds the knftables element of id with value and
// comment.
func elementObject(id elemID, value, comment string, isMap bool) *knftables.Element {
	e := &knftables.Element{Table: id.table, Key: strings.Split(id.key, " . ")}
	if isMap {
		e.Map = id.set
		if value != "" {
			e.Value = []string{value}
		}
	} else {
		e.Set = id.set
	}
	if comment != "" {
		e.Comment = ptrTo(comment)
	}
	return e
}

// isMapName reports whether a dispatch object is a map (the others are
// sets).
func isMapName(name string) bool {
	return name != clusterIPsSet && name != hairpinConnectionsSet && name != directNodePortsSet && name != directExternalIPsSet
}

// isSharedMap reports whether name is a shared endpoint map.
func isSharedMap(name string) bool {
	return strings.HasPrefix(name, sharedEndpointsMap+"-") || strings.HasPrefix(name, clusterIPEndpointsChain+"-") ||
		strings.HasPrefix(name, nodePortEndpointsChain+"-")
}

// desired computes the desired state of one Service port from its policy
// (and, in the shared layout, the key ranges spans gives it).
// ext decides, for a port that may be direct and has external addresses,
// whether they may be direct too (see planner.direct).
func (pl *planner) desired(name proxy.ServicePortName, pol *proxy.PortPolicy, spans spanFunc) *desiredPort {
	sp := pol.Port
	d := &desiredPort{}
	n := pl.names(name, pol)
	affinity := sp.SessionAffinity == v1.ServiceAffinityClientIP
	direct := pl.direct(pol)
	d.direct = direct
	chain := func(c string) { d.chains = append(d.chains, tobj{n.table, c}) }
	for _, ep := range pol.Reachable {
		if affinity {
			chain(n.epChain(ep))
		}
		if ep.IsLocal {
			a := ep.Addr.String()
			d.elems = append(d.elems, desiredElem{id: elemID{"", hairpinConnectionsSet, a + " . " + a + " . " + n.protocol + " . " + strconv.Itoa(ep.Port)}})
		}
	}
	if pol.UsesCluster && !direct {
		chain(n.cluster)
	}
	if pol.UsesLocal {
		chain(n.local)
	}
	if pol.Externally && !direct {
		chain(n.external)
	}
	if pol.Firewall {
		// The firewall dispatch (filter, before DNAT) stays in the main
		// table with its chains.
		d.chains = append(d.chains, tobj{"", n.firewall})
	}
	pl.dispatchElements(d, n, pol, direct)
	if !direct {
		pl.externalRules(d, n, pol)
	}
	pl.firewallRule(d, n, pol)
	if affinity {
		for _, ep := range pol.Reachable {
			d.sets = append(d.sets, &knftables.Set{Table: n.table, Name: n.affSet(ep), Type: pl.addrType,
				Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
				Timeout: ptrTo(time.Duration(sp.StickyMaxAgeSeconds) * time.Second)})
		}
	}
	if pol.UsesCluster && !direct {
		pl.endpointChoice(d, sp, n, n.cluster, pol.Cluster, spans)
	}
	if pol.UsesLocal {
		pl.endpointChoice(d, sp, n, n.local, pol.Local, spans)
	}
	if affinity {
		for _, ep := range pol.Reachable {
			c := n.epChain(ep)
			d.rules = append(d.rules,
				&knftables.Rule{Table: n.table, Chain: c, Rule: knftables.Concat("update", "@", n.affSet(ep), "{", pl.ipX, "saddr }")},
				&knftables.Rule{Table: n.table, Chain: c, Rule: knftables.Concat("meta l4proto", n.protocol, "dnat to", ep.String())})
		}
	}
	return d
}

// portNames are the object names of one Service port.
type portNames struct {
	protocol, port, comment                  string
	cluster, local, external, firewall, base string
	svc                                      proxy.ServicePortName
	// table holds the port's chains and dispatch elements (the firewall
	// chain and the filter-side elements are always TableName's).
	table string
}

func (pl *planner) names(name proxy.ServicePortName, pol *proxy.PortPolicy) *portNames {
	protocol := strings.ToLower(string(pol.Port.Protocol))
	base := servicePortChainBase(name, protocol)
	return &portNames{protocol: protocol, port: strconv.Itoa(pol.Port.Port), comment: name.String(), base: base, svc: name, table: pl.shardOf(name.NamespacedName),
		cluster: clusterChainPrefix + base, local: localChainPrefix + base, external: externalChainPrefix + base, firewall: firewallChainPrefix + base}
}

func (n *portNames) epChain(ep *proxy.Endpoint) string {
	return endpointChainPrefix + endpointChainBase(n.svc, n.protocol, ep)
}

func (n *portNames) affSet(ep *proxy.Endpoint) string {
	return affinitySetPrefix + endpointChainBase(n.svc, n.protocol, ep)
}

// dispatchElements adds the port's elements of the dispatch maps and sets
// (cluster-ips, service-ips, no-endpoint-*, firewall-ips,
// service-nodeports), or with direct (see planner.direct) the ClusterIPs'
// keys of a direct choice map in place of their service-ips elements.
func (pl *planner) dispatchElements(d *desiredPort, n *portNames, pol *proxy.PortPolicy, direct bool) {
	sp := pol.Port
	internalChain, hasInternal := n.cluster, pol.Internal.Verdict == proxy.VerdictAccept
	if pol.Internal.Local {
		internalChain = n.local
	}
	hasExternal := pol.External.Verdict == proxy.VerdictAccept
	var internalVerdict, externalVerdict string
	if !pol.HasEndpoints {
		internalVerdict, externalVerdict = "goto "+rejectChain, "goto "+rejectChain
	} else {
		if !hasInternal {
			internalVerdict, d.noLocalInternal = "drop", true
		}
		if !hasExternal {
			externalVerdict, d.noLocalExternal = "drop", true
		}
	}
	add := func(set, key, value, comment string) {
		table := ""
		if set == serviceIPsMap || set == serviceNodePortsMap {
			table = n.table
		}
		d.elems = append(d.elems, desiredElem{id: elemID{table, set, key}, value: value, comment: comment})
	}
	suffix := " . " + n.protocol + " . " + n.port
	for _, cip := range sp.ClusterIPs {
		add(clusterIPsSet, cip.String(), "", "")
		if n.table != "" {
			// The dispatch table's copy, for its masquerade rule.
			d.elems = append(d.elems, desiredElem{id: elemID{n.table, clusterIPsSet, cip.String()}})
		}
		switch {
		case direct:
			pl.directElements(d, n, pol, cip)
		case hasInternal:
			add(serviceIPsMap, cip.String()+suffix, "goto "+internalChain, "")
		default:
			add(noEndpointServicesMap, cip.String()+suffix, internalVerdict, n.comment)
		}
	}
	external := func(ip string, lb bool) {
		if direct {
			pl.directExternalElements(d, n, pol, ip)
			return
		}
		if pol.HasEndpoints {
			add(serviceIPsMap, ip+suffix, "goto "+n.external, "")
		}
		if lb && pol.Firewall {
			add(firewallIPsMap, ip+suffix, "goto "+n.firewall, "")
		}
		if !hasExternal {
			add(noEndpointServicesMap, ip+suffix, externalVerdict, n.comment)
		}
	}
	for _, ip := range sp.ExternalIPs {
		external(ip.String(), false)
	}
	for _, ip := range sp.LoadBalancerVIPs {
		external(ip.String(), true)
	}
	if sp.NodePort != 0 {
		key := n.protocol + " . " + strconv.Itoa(sp.NodePort)
		switch {
		case direct:
			pl.directNodePortElements(d, n, pol)
		case pol.HasEndpoints:
			add(serviceNodePortsMap, key, "goto "+n.external, "")
		}
		if !hasExternal {
			add(noEndpointNodePortsMap, key, externalVerdict, n.comment)
		}
	}
}

// externalRules writes the external chain: masquerade (Cluster policy) or
// the short-circuits of pod and node traffic (Local), then the policy
// chain.
func (pl *planner) externalRules(d *desiredPort, n *portNames, pol *proxy.PortPolicy) {
	if !pol.Externally {
		return
	}
	rule := func(text, comment string) {
		r := &knftables.Rule{Table: n.table, Chain: n.external, Rule: text}
		if comment != "" {
			r.Comment = ptrTo(comment)
		}
		d.rules = append(d.rules, r)
	}
	if pol.MasqueradeExternal {
		rule(pl.masqueradeRule(), "masquerade")
	} else {
		if m := pl.podMatch(false); m != "" {
			rule(knftables.Concat(m, "goto", n.cluster), "short-circuit pod traffic")
		}
		rule("fib saddr type local "+pl.masqueradeRule(), "masquerade local traffic")
		rule("fib saddr type local goto "+n.cluster, "short-circuit local traffic")
	}
	if pol.External.Verdict == proxy.VerdictAccept {
		policy := n.cluster
		if pol.External.Local {
			policy = n.local
		}
		rule("goto "+policy, "")
	}
}

// firewallRule drops LoadBalancer traffic from outside the source ranges
// (and the node's own VIP traffic when a range holds the node).
func (pl *planner) firewallRule(d *desiredPort, n *portNames, pol *proxy.PortPolicy) {
	if !pol.Firewall {
		return
	}
	var src []string
	for _, r := range pol.SourceRanges {
		src = append(src, r.String())
	}
	if pol.FirewallAllowsNode {
		for _, ip := range pol.Port.LoadBalancerVIPs {
			src = append(src, ip.String())
		}
	}
	d.rules = append(d.rules, &knftables.Rule{Chain: n.firewall, Rule: knftables.Concat(pl.ipX, "saddr != {", strings.Join(src, " , "), "} drop")})
}

// masqueradeRule sets the masquerade mark, which the masquerading chain
// turns into SNAT when the packet leaves.
func (pl *planner) masqueradeRule() string {
	return "mark set mark or " + pl.cfg.MasqueradeMark
}

// podMatch returns the "ip saddr X" / "ip saddr != X" expression of the
// local-traffic detector, or "" when no pod CIDR is known.
func (pl *planner) podMatch(negate bool) string {
	if len(pl.cfg.PodCIDRs) == 0 {
		return ""
	}
	op := ""
	if negate {
		op = "!= "
	}
	if len(pl.cfg.PodCIDRs) == 1 {
		return pl.ipX + " saddr " + op + pl.cfg.PodCIDRs[0].Masked().String()
	}
	return pl.ipX + " saddr " + op + "{ " + cidrList(pl.cfg.PodCIDRs) + " }"
}
