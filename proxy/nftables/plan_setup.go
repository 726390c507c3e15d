package nftables

import (
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
)

// setup writes the table, its base chains and jumps, and the fixed sets,
// maps and rules every full sync rewrites; the dispatch maps and sets are
// flushed (every Service's elements follow). recreated says the base
// chains were created by this process already; listedSets are the sets
// and maps the table holds.
func (pl *planner) setup(tx *txn, local []netip.Addr, recreated bool, listedSets []string) {
	tx.add(&knftables.Table{Comment: ptrTo("rules for kube-proxy")})
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
	pl.setupMasquerading(tx)
	matchAll := pl.setupNodePorts(tx, local)
	pl.setupChecks(tx, matchAll)
	pl.setupServices(tx, matchAll)
	for _, s := range []string{clusterIPsSet, hairpinConnectionsSet} {
		tx.flush(&knftables.Set{Name: s})
	}
	for _, m := range []string{serviceIPsMap, firewallIPsMap, noEndpointServicesMap, noEndpointNodePortsMap, serviceNodePortsMap} {
		tx.flush(&knftables.Map{Name: m})
	}
	// Shared endpoint maps (--nftables-endpoint-choice=shared) are added
	// when a chain first uses them; those of an earlier run are emptied.
	for _, m := range listedSets {
		if isSharedMap(m) {
			tx.flush(&knftables.Map{Name: m})
		}
	}
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
func (pl *planner) setupNodePorts(tx *txn, local []netip.Addr) bool {
	cidrs, matchAll, _ := proxy.NodePortCIDRs(pl.cfg.NodePortAddresses, pl.cfg.IPv6)
	tx.add(&knftables.Set{Name: nodePortIPsSet, Type: pl.addrType, Comment: ptrTo("IPs that accept NodePort traffic")})
	if matchAll {
		tx.delete(&knftables.Set{Name: nodePortIPsSet})
		return true
	}
	tx.flush(&knftables.Set{Name: nodePortIPsSet})
	for _, ip := range proxy.NodePortIPs(local, cidrs, false) {
		if !ip.IsLoopback() {
			tx.add(&knftables.Element{Set: nodePortIPsSet, Key: []string{ip.String()}})
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

// setupServices writes the dispatch maps and the services chain:
// ClusterIP traffic from outside the pod network (or all of it with
// masquerade-all) is marked before dispatch, as it may leave the node.
func (pl *planner) setupServices(tx *txn, matchAll bool) {
	tx.add(&knftables.Map{Name: serviceIPsMap, Type: pl.addrType + " . inet_proto . inet_service : verdict",
		Comment: ptrTo("ClusterIP, ExternalIP and LoadBalancer IP traffic")})
	tx.add(&knftables.Map{Name: serviceNodePortsMap, Type: "inet_proto . inet_service : verdict", Comment: ptrTo("NodePort traffic")})
	if pl.cfg.MasqueradeAll {
		tx.add(&knftables.Rule{Chain: servicesChain, Rule: knftables.Concat(pl.ipX, "daddr", "@", clusterIPsSet, pl.masqueradeRule()),
			Comment: ptrTo("masquerade all clusterIP traffic")})
	} else if m := pl.podMatch(true); m != "" {
		tx.add(&knftables.Rule{Chain: servicesChain, Rule: knftables.Concat(pl.ipX, "daddr", "@", clusterIPsSet, m, pl.masqueradeRule()),
			Comment: ptrTo("masquerade clusterIP traffic from outside cluster")})
	}
	tx.add(&knftables.Rule{Chain: servicesChain, Rule: knftables.Concat(pl.ipX, "daddr . meta l4proto . th dport vmap", "@", serviceIPsMap)})
	if matchAll {
		tx.add(&knftables.Rule{Chain: servicesChain,
			Rule: knftables.Concat("fib daddr type local", pl.noLocalhost(), "meta l4proto . th dport vmap", "@", serviceNodePortsMap)})
	} else {
		tx.add(&knftables.Rule{Chain: servicesChain,
			Rule: knftables.Concat(pl.ipX, "daddr", "@", nodePortIPsSet, "meta l4proto . th dport vmap", "@", serviceNodePortsMap)})
	}
}
