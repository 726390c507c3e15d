package nftables

import (
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
)

// setup writes the table, its base chains and jumps, and the fixed sets,
// maps and rules every full sync rewrites; the dispatch maps and sets are
// flushed (every Service's elements follow) and the shared endpoint maps
// replaced (replaceSharedMaps). recreated says the base
// chains were created by this process already; listedChains and listedSets
// are the chains, sets and maps the tables hold. With --nftables-shards the
// dispatch tables are written too (setupShard), and dispatch tables beyond
// their number deleted.
func (pl *planner) setup(tx *txn, local []netip.Addr, recreated bool, listedChains, listedSets []tobj) {
	tx.add(&knftables.Table{Comment: ptrTo("rules for kube-proxy")})
	pl.replaceSharedMaps(tx, "", listedChains, listedSets)
	if !recreated {
		// Base chains are deleted once so that a table left by another
		// version with other priorities is replaced rather than refused.
		for _, bc := range baseChains {
			tx.add(&knftables.Chain{Name: bc.name})
			tx.delete(&knftables.Chain{Name: bc.name})
		}
	}
	for _, bc := range baseChains {
		c := &knftables.Chain{Name: bc.name, Type: ptrTo(bc.typ), Hook: ptrTo(bc.hook), Priority: ptrTo(bc.priority)}
		tx.add(c)
		tx.flush(c)
	}
	created := sets.New[string]()
	ensure := func(c string) {
		if !created.Has(c) {
			created.Insert(c)
			tx.add(&knftables.Chain{Name: c})
			tx.flush(&knftables.Chain{Name: c})
		}
	}
	for _, j := range jumpChains {
		ensure(j.dst)
		tx.add(&knftables.Rule{Chain: j.src, Rule: knftables.Concat(j.match, "jump", j.dst)})
	}
	for _, c := range []string{servicesChain, clusterIPsCheckChain, masqueradingChain, firewallCheckChain} {
		ensure(c)
	}
	pl.dropDirectChain(tx, "", listedChains, listedSets)
	pl.setupMasquerading(tx)
	matchAll := pl.setupNodePorts(tx, "", local)
	pl.setupChecks(tx, matchAll)
	for _, s := range []string{clusterIPsSet, hairpinConnectionsSet} {
		tx.flush(&knftables.Set{Name: s})
	}
	for _, m := range []string{firewallIPsMap, noEndpointServicesMap, noEndpointNodePortsMap} {
		tx.flush(&knftables.Map{Name: m})
	}
	if pl.cfg.Shards <= 0 {
		pl.setupServices(tx, "", matchAll)
	} else {
		// The dispatch tables dispatch; the main table's services chain
		// (flushed above) stays empty and its maps of an earlier run go.
		pl.dispatchMaps(tx, "")
		tx.delete(&knftables.Map{Name: serviceIPsMap})
		tx.delete(&knftables.Map{Name: serviceNodePortsMap})
	}
	for i := range max(pl.cfg.Shards, 0) {
		pl.setupShard(tx, shardTable(i), local, recreated, matchAll, listedChains, listedSets)
	}
	gone := sets.New[string]()
	for _, o := range slices.Concat(listedChains, listedSets) {
		if isShardTable(o.table) && !pl.keepsTable(o.table) && !gone.Has(o.table) {
			gone.Insert(o.table)
			tx.add(&knftables.Table{Name: o.table})
			tx.delete(&knftables.Table{Name: o.table})
		}
	}
}

// keepsTable reports whether table ("" for TableName) is one this
// configuration writes.
func (pl *planner) keepsTable(table string) bool {
	if table == "" || table == TableName {
		return true
	}
	i := shardIndex(table)
	return i >= 0 && i < pl.cfg.Shards
}

// replaceSharedMaps deletes table's shared endpoint maps
// (--nftables-endpoint-choice=shared) of an earlier run or sync: they are
// added anew, empty, when a chain first uses them, and filled after the
// rules (txn.late). Flushed instead, they would keep their old elements
// in the kernel until the commit, and every rule that binds a map walks
// them (nf_tables_bind_set): a full sync of a table that exists cost
// O(Services × elements per map). A map can go only once no rule uses it,
// so every chain the table lists is flushed first, before the table's
// setup writes any rule (a full sync rewrites them all, or drops them).
func (pl *planner) replaceSharedMaps(tx *txn, table string, listedChains, listedSets []tobj) {
	in := func(o tobj) bool { return o.table == table || (table == "" && o.table == TableName) }
	var maps []string
	for _, m := range listedSets {
		if in(m) && isSharedMap(m.name) {
			maps = append(maps, m.name)
		}
	}
	if len(maps) == 0 {
		return
	}
	for _, c := range listedChains {
		if in(c) {
			tx.flush(&knftables.Chain{Table: table, Name: c.name})
		}
	}
	for _, m := range maps {
		tx.delete(&knftables.Map{Table: table, Name: m})
	}
}

// dropDirectChain deletes table's chains of direct choices and its sets of
// direct NodePorts and external addresses (see planner.direct) when the
// table lists them and no longer dispatches that way (another endpoint
// choice, or the main table under --nftables-shards). The table's services
// chain, which refers to them, is flushed by then; they are all flushed
// before any goes, as one refers to another.
func (pl *planner) dropDirectChain(tx *txn, table string, listedChains, listedSets []tobj) {
	if pl.cfg.ChoiceShared && (table != "" || pl.cfg.Shards <= 0) {
		return
	}
	in := func(o tobj) bool { return o.table == table || (table == "" && o.table == TableName) }
	var drop []*knftables.Chain
	for _, c := range listedChains {
		if (c.name == clusterIPEndpointsChain || c.name == nodePortEndpointsChain || c.name == externalIPEndpointsChain) && in(c) {
			ch := &knftables.Chain{Table: table, Name: c.name}
			tx.flush(ch)
			drop = append(drop, ch)
		}
	}
	for _, ch := range drop {
		tx.delete(ch)
	}
	for _, s := range listedSets {
		if (s.name == directNodePortsSet || s.name == directExternalIPsSet) && in(s) {
			tx.delete(&knftables.Set{Table: table, Name: s.name})
		}
	}
}

// shardChains are the base chains of a dispatch table: the NAT hooks,
// where only a connection's first packet goes, so that the tables cost
// nothing per packet of an established connection. The first table to
// DNAT a connection ends the hook's NAT chains for it.
var shardChains = []baseChain{
	{natPreroutingChain, knftables.NATType, knftables.PreroutingHook, "-100"},
	{natOutputChain, knftables.NATType, knftables.OutputHook, "-100"},
}

// setupShard writes dispatch table t (--nftables-shards): its NAT base
// chains jumping to its services chain, which marks ClusterIP traffic for
// masquerading and dispatches through the table's own service-ips and
// service-nodeports maps to the chains of its Services; cluster-ips and
// nodeport-ips are copies of the main table's for the table's rules.
func (pl *planner) setupShard(tx *txn, t string, local []netip.Addr, recreated, matchAll bool, listedChains, listedSets []tobj) {
	tx.add(&knftables.Table{Name: t, Comment: ptrTo("Service dispatch for kube-proxy (svcnet --nftables-shards)")})
	pl.replaceSharedMaps(tx, t, listedChains, listedSets)
	if !recreated {
		for _, bc := range shardChains {
			tx.add(&knftables.Chain{Table: t, Name: bc.name})
			tx.delete(&knftables.Chain{Table: t, Name: bc.name})
		}
	}
	for _, bc := range shardChains {
		c := &knftables.Chain{Table: t, Name: bc.name, Type: ptrTo(bc.typ), Hook: ptrTo(bc.hook), Priority: ptrTo(bc.priority)}
		tx.add(c)
		tx.flush(c)
	}
	tx.add(&knftables.Chain{Table: t, Name: servicesChain})
	tx.flush(&knftables.Chain{Table: t, Name: servicesChain})
	pl.dropDirectChain(tx, t, listedChains, listedSets)
	for _, bc := range shardChains {
		tx.add(&knftables.Rule{Table: t, Chain: bc.name, Rule: "jump " + servicesChain})
	}
	tx.add(&knftables.Set{Table: t, Name: clusterIPsSet, Type: pl.addrType, Comment: ptrTo("Active ClusterIPs")})
	tx.flush(&knftables.Set{Table: t, Name: clusterIPsSet})
	pl.setupNodePorts(tx, t, local)
	pl.setupServices(tx, t, matchAll)
}

// setupMasquerading: marked connections (see masqueradeRule) and hairpin
// connections (a local endpoint reaching itself through its Service: same
// source and destination after DNAT) are masqueraded.
func (pl *planner) setupMasquerading(tx *txn) {
	mark := pl.cfg.MasqueradeMark
	tx.add(&knftables.Set{Name: hairpinConnectionsSet, Type: pl.addrType + " . " + pl.addrType + " . inet_proto . inet_service",
		Comment: ptrTo("service hairpin connections")})
	tx.add(&knftables.Rule{Chain: masqueradingChain, Rule: knftables.Concat("mark and", mark, "!= 0 mark set mark xor", mark, "masquerade fully-random")})
	tx.add(&knftables.Rule{Chain: masqueradingChain, Rule: knftables.Concat("ct status dnat",
		pl.ipX, "saddr .", pl.ipX, "daddr . meta l4proto . th dport", "@", hairpinConnectionsSet, "masquerade fully-random")})

	tx.add(&knftables.Set{Name: clusterIPsSet, Type: pl.addrType, Comment: ptrTo("Active ClusterIPs")})
	tx.add(&knftables.Rule{Chain: clusterIPsCheckChain, Rule: knftables.Concat(pl.ipX, "daddr", "@", clusterIPsSet, "reject"),
		Comment: ptrTo("Reject traffic to invalid ports of ClusterIPs")})
	if len(pl.cfg.ServiceCIDRs) > 0 {
		tx.add(&knftables.Rule{Chain: clusterIPsCheckChain, Rule: knftables.Concat(pl.ipX, "daddr {", strings.ReplaceAll(cidrList(pl.cfg.ServiceCIDRs), ", ", ","), "} drop"),
			Comment: ptrTo("Drop traffic to unallocated ClusterIPs")})
	}
}

// setupNodePorts writes the nodeport-ips set and reports whether NodePorts
// match every local address: as kube-proxy, a zero CIDR (0.0.0.0/0, ::/0;
// --nodeport-addresses "all") means every local address, like no CIDR of
// this family.
func (pl *planner) setupNodePorts(tx *txn, table string, local []netip.Addr) bool {
	cidrs, matchAll, _ := proxy.NodePortCIDRs(pl.cfg.NodePortAddresses, pl.cfg.IPv6)
	tx.add(&knftables.Set{Table: table, Name: nodePortIPsSet, Type: pl.addrType, Comment: ptrTo("IPs that accept NodePort traffic")})
	if matchAll {
		tx.delete(&knftables.Set{Table: table, Name: nodePortIPsSet})
		return true
	}
	tx.flush(&knftables.Set{Table: table, Name: nodePortIPsSet})
	for _, ip := range proxy.NodePortIPs(local, cidrs, false) {
		if !ip.IsLoopback() {
			tx.add(&knftables.Element{Table: table, Set: nodePortIPsSet, Key: []string{ip.String()}})
		}
	}
	return false
}

func (pl *planner) noLocalhost() string {
	if pl.cfg.IPv6 {
		return "ip6 daddr != ::1"
	}
	return "ip daddr != 127.0.0.0/8"
}

// setupChecks writes the no-endpoint maps, the reject helper and the
// firewall dispatch.
func (pl *planner) setupChecks(tx *txn, matchAll bool) {
	tx.add(&knftables.Map{Name: noEndpointServicesMap, Type: pl.addrType + " . inet_proto . inet_service : verdict",
		Comment: ptrTo("vmap to drop or reject packets to services with no endpoints")})
	tx.add(&knftables.Map{Name: noEndpointNodePortsMap, Type: "inet_proto . inet_service : verdict",
		Comment: ptrTo("vmap to drop or reject packets to service nodeports with no endpoints")})
	tx.add(&knftables.Chain{Name: rejectChain, Comment: ptrTo("helper for @no-endpoint-services / @no-endpoint-nodeports")})
	tx.flush(&knftables.Chain{Name: rejectChain})
	tx.add(&knftables.Rule{Chain: rejectChain, Rule: "reject"})
	tx.add(&knftables.Rule{Chain: serviceEndpointsCheckChain,
		Rule: knftables.Concat(pl.ipX, "daddr . meta l4proto . th dport vmap", "@", noEndpointServicesMap)})
	if matchAll {
		tx.add(&knftables.Rule{Chain: nodePortEndpointsCheckChain,
			Rule: knftables.Concat(pl.noLocalhost(), "meta l4proto . th dport vmap", "@", noEndpointNodePortsMap)})
	} else {
		tx.add(&knftables.Rule{Chain: nodePortEndpointsCheckChain,
			Rule: knftables.Concat(pl.ipX, "daddr", "@", nodePortIPsSet, "meta l4proto . th dport vmap", "@", noEndpointNodePortsMap)})
	}
	tx.add(&knftables.Map{Name: firewallIPsMap, Type: pl.addrType + " . inet_proto . inet_service : verdict",
		Comment: ptrTo("destinations that are subject to LoadBalancerSourceRanges")})
	tx.add(&knftables.Rule{Chain: firewallCheckChain,
		Rule: knftables.Concat(pl.ipX, "daddr . meta l4proto . th dport vmap", "@", firewallIPsMap)})
}

// dispatchMaps adds table's service-ips and service-nodeports maps.
func (pl *planner) dispatchMaps(tx *txn, table string) {
	tx.add(&knftables.Map{Table: table, Name: serviceIPsMap, Type: pl.addrType + " . inet_proto . inet_service : verdict",
		Comment: ptrTo("ClusterIP, ExternalIP and LoadBalancer IP traffic")})
	tx.add(&knftables.Map{Table: table, Name: serviceNodePortsMap, Type: "inet_proto . inet_service : verdict", Comment: ptrTo("NodePort traffic")})
}

// setupServices writes table's dispatch maps (emptied) and its services
// chain: ClusterIP traffic from outside the pod network (or all of it with
// masquerade-all) is marked before dispatch, as it may leave the node.
func (pl *planner) setupServices(tx *txn, table string, matchAll bool) {
	pl.dispatchMaps(tx, table)
	if pl.cfg.ChoiceShared {
		// The direct choices (planner.direct): their rules follow with
		// their maps, the NodePort ones after the masquerade mark.
		tx.add(&knftables.Chain{Table: table, Name: clusterIPEndpointsChain})
		tx.flush(&knftables.Chain{Table: table, Name: clusterIPEndpointsChain})
		tx.add(&knftables.Chain{Table: table, Name: nodePortEndpointsChain})
		tx.flush(&knftables.Chain{Table: table, Name: nodePortEndpointsChain})
		tx.add(&knftables.Rule{Table: table, Chain: nodePortEndpointsChain, Rule: pl.masqueradeRule(), Comment: ptrTo("masquerade")})
		tx.add(&knftables.Set{Table: table, Name: directNodePortsSet, Type: "inet_proto . inet_service",
			Comment: ptrTo("NodePorts without a chain of their own")})
		tx.flush(&knftables.Set{Table: table, Name: directNodePortsSet})
		tx.add(&knftables.Chain{Table: table, Name: externalIPEndpointsChain})
		tx.flush(&knftables.Chain{Table: table, Name: externalIPEndpointsChain})
		tx.add(&knftables.Rule{Table: table, Chain: externalIPEndpointsChain, Rule: pl.masqueradeRule(), Comment: ptrTo("masquerade")})
		tx.add(&knftables.Rule{Table: table, Chain: externalIPEndpointsChain, Rule: "goto " + clusterIPEndpointsChain})
		tx.add(&knftables.Set{Table: table, Name: directExternalIPsSet, Type: pl.addrType + " . inet_proto . inet_service",
			Comment: ptrTo("externalIPs and LoadBalancer IPs without a chain of their own")})
		tx.flush(&knftables.Set{Table: table, Name: directExternalIPsSet})
	}
	tx.flush(&knftables.Map{Table: table, Name: serviceIPsMap})
	tx.flush(&knftables.Map{Table: table, Name: serviceNodePortsMap})
	rule := func(text string, comment *string) {
		tx.add(&knftables.Rule{Table: table, Chain: servicesChain, Rule: text, Comment: comment})
	}
	if pl.cfg.MasqueradeAll {
		rule(knftables.Concat(pl.ipX, "daddr", "@", clusterIPsSet, pl.masqueradeRule()), ptrTo("masquerade all clusterIP traffic"))
	} else if m := pl.podMatch(true); m != "" {
		rule(knftables.Concat(pl.ipX, "daddr", "@", clusterIPsSet, m, pl.masqueradeRule()), ptrTo("masquerade clusterIP traffic from outside cluster"))
	}
	rule(knftables.Concat(pl.ipX, "daddr . meta l4proto . th dport vmap", "@", serviceIPsMap), nil)
	if pl.cfg.ChoiceShared {
		rule(knftables.Concat(pl.ipX, "daddr", "@", clusterIPsSet, "jump", clusterIPEndpointsChain), ptrTo("ClusterIPs without a chain of their own"))
		rule(knftables.Concat(pl.ipX, "daddr . meta l4proto . th dport", "@", directExternalIPsSet, "goto", externalIPEndpointsChain), nil)
	}
	nodePortDst := knftables.Concat(pl.ipX, "daddr", "@", nodePortIPsSet)
	if matchAll {
		nodePortDst = knftables.Concat("fib daddr type local", pl.noLocalhost())
	}
	rule(knftables.Concat(nodePortDst, "meta l4proto . th dport vmap", "@", serviceNodePortsMap), nil)
	if pl.cfg.ChoiceShared {
		rule(knftables.Concat(nodePortDst, "meta l4proto . th dport", "@", directNodePortsSet, "goto", nodePortEndpointsChain), nil)
	}
}
