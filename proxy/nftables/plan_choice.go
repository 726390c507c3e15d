package nftables

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/lb"
)

// endpointChoice writes the rules of a Service policy chain that pick an
// endpoint for a new connection. Without session affinity the chain DNATs
// directly, as kube-proxy does: `meta l4proto P dnat ip addr . port to
// numgen random mod N map { 0 : IP . PORT , ... }`. With ClientIP affinity
// it first sends clients found in an endpoint's affinity set to that
// endpoint's chain, then picks an endpoint chain with `numgen random mod N
// vmap { 0 : goto CHAIN , ... }`; the endpoint chain records the client and
// DNATs.
//
// Per-Service schedulers (annotation service.kubernetes.io/ipvs-scheduler)
// replace the numgen expression and keep the same targets: rr (`numgen
// inc`), wrr (weighted `numgen random` intervals), sh / dh (weighted
// `jhash` of the source / destination address) and mh (a Maglev table of
// 251 slots indexed by `jhash ip saddr`). Others (lc, wlc, sed, nq, or an
// unknown name) fall back to random and are reported through
// Config.UnsupportedScheduler. Which scheduler, and whether weights count,
// is proxy.NewBalance's decision over Schedulers.
//
// With Config.ChoiceRules (--nftables-endpoint-choice=rules) the random,
// wrr, sh and dh choices among up to maxChoiceRules endpoints are rules
// instead of a map, one per endpoint but the last, which takes what the
// others left: `numgen random mod R < W TARGET` with R the weight of this
// endpoint and those after it (so each is reached with probability its
// share, as in iptables mode), or `jhash ... mod T seed S LO-HI TARGET` for
// the hashing schedulers. The choice is the same; what changes is that the
// table holds no set per Service. The kernel finds a set by walking the
// table's list of sets by name, when the set is created, when a rule
// refers to it and when elements are added, so one anonymous map per
// Service makes programming N Services O(N²) (the set-name walks were 60%
// of the kernel's time in a full sync of 10k Services here). rr (numgen
// inc, whose counter is per expression) and mh (251 slots) keep the map.
//
// With Config.ChoiceShared (--nftables-endpoint-choice=shared) the random
// choice without affinity looks the endpoint up in a map shared by many
// Service chains of a protocol, `service-endpoints-tcp-XX` (one of
// sharedMapGroups per protocol, by a hash of the chain's name; one map per
// protocol because nft 1.0 refuses a rule of one protocol on a map typed by
// another's), keyed by `numgen random mod N offset O`: the chain owns keys
// O .. O+N-1 (a range of spanAlloc), whose values
// are its endpoints' DNAT targets. Like the rules layout the table then has
// no set per Service, so programming N Services is O(N) in the kernel; unlike
// it, a chain keeps one rule, so a commit's validation of the table (which
// walks every rule on each change) stays as cheap as with kube-proxy's maps.
// The other schedulers and session affinity keep the per-chain map. A
// port whose chain would hold nothing but this choice for its ClusterIPs
// has no chain in that layout (see direct).
func (pl *planner) endpointChoice(d *desiredPort, sp *proxy.ServicePort, n *portNames, chain string, eps []*proxy.Endpoint, spans spanFunc) {
	affinity := sp.SessionAffinity == v1.ServiceAffinityClientIP
	rule := func(text string) {
		d.rules = append(d.rules, &knftables.Rule{Table: n.table, Chain: chain, Rule: text})
	}
	if affinity {
		for _, ep := range eps {
			rule(knftables.Concat(pl.ipX, "saddr", "@", n.affSet(ep), "goto", n.epChain(ep)))
		}
	}
	// target is one map value; emit writes the rule around the generator.
	target := func(ep *proxy.Endpoint) string { return ep.Addr.String() + " . " + strconv.Itoa(ep.Port) }
	emit := func(gen string, parts []string) {
		rule(knftables.Concat("meta l4proto", n.protocol, "dnat", pl.ipX, "addr . port to", gen, "map {", strings.Join(parts, " , "), "}"))
	}
	if affinity {
		target = func(ep *proxy.Endpoint) string { return "goto " + n.epChain(ep) }
		emit = func(gen string, parts []string) {
			rule(knftables.Concat(gen, "vmap {", strings.Join(parts, " , "), "}"))
		}
	}
	bal := proxy.NewBalance(sp, Schedulers)
	if bal.Fallback != "" && pl.cfg.UnsupportedScheduler != nil {
		pl.cfg.UnsupportedScheduler(sp.Name, sp.Scheduler)
	}
	if !affinity && len(eps) == 1 {
		// kube-proxy 1.37: one endpoint is a plain DNAT, without a map
		// (whatever the scheduler: there is nothing to choose).
		rule(knftables.Concat("meta l4proto", n.protocol, "dnat to", eps[0].AddrPort().String()))
		return
	}
	if pl.cfg.ChoiceRules && len(eps) <= maxChoiceRules && pl.choiceRules(bal, eps, n, affinity, rule) {
		return
	}
	if pl.cfg.ChoiceShared && !affinity && bal.Scheduler == lb.Random {
		// The chain's endpoints are keys off .. off+N-1 of the shared map.
		m := pl.sharedMap(d, n.table, n.protocol, chain)
		span := spans(tobj{n.table, m}, chainKey{n.svc, chain == n.local}, len(eps))
		for i, ep := range eps {
			d.elems = append(d.elems, desiredElem{id: elemID{n.table, m, strconv.FormatUint(uint64(span.off)+uint64(i), 10)}, value: target(ep)})
		}
		rule(knftables.Concat("meta l4proto", n.protocol, "dnat", pl.ipX, "addr . port to numgen random mod", strconv.Itoa(len(eps)),
			"offset", strconv.FormatUint(uint64(span.off), 10), "map @"+m))
		return
	}
	gen, parts := pl.schedule(sp, bal, eps, target)
	emit(gen, parts)
}

// sharedMapGroups is how many shared endpoint maps a protocol's chains are
// spread over (by a hash of the chain's name). The kernel checks a map's
// data against every rule bound to it, once per rule bound (the rule
// against all elements) and once per element added (the element against
// all rules): with one map for all N Services both are O(N²) (31 s for a
// full sync of 10k Services here); with G maps O(N²/G), while every
// lookup of a set by name walks the table's sets, O(G).
const sharedMapGroups = 256

// sharedMap returns the shared endpoint map of chain (adding its
// declaration to d).
func (pl *planner) sharedMap(d *desiredPort, table, protocol, chain string) string {
	h := fnv.New32a()
	h.Write([]byte(chain))
	g := h.Sum32() % pl.sharedMapGroups()
	name := fmt.Sprintf("%s-%s-%02x", sharedEndpointsMap, protocol, g)
	if names := sharedMapNames()[protocol]; names != nil {
		name = names[g]
	}
	d.maps = append(d.maps, mapUse{m: &knftables.Map{Table: table, Name: name, TypeOf: "numgen random mod 1 : " + pl.ipX + " daddr . " + protocol + " dport",
		Comment: ptrTo("endpoints of " + strings.ToUpper(protocol) + " Service chains, a range of keys per chain")}})
	return name
}

// sharedMapGroups returns how many shared maps a table has per protocol:
// with --nftables-shards each dispatch table holds 1/Shards of the chains,
// so fewer maps keep the same number of chains per map (at least 16).
func (pl *planner) sharedMapGroups() uint32 {
	if pl.cfg.Shards <= 1 {
		return sharedMapGroups
	}
	return uint32(max(16, sharedMapGroups/pl.cfg.Shards))
}

// sharedMapNames are the names of the shared maps by protocol and group,
// made once (the planner's state keeps them).
var sharedMapNames = sync.OnceValue(func() map[string][]string {
	out := map[string][]string{}
	for _, p := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP} {
		proto := strings.ToLower(string(p))
		for g := range sharedMapGroups {
			out[proto] = append(out[proto], fmt.Sprintf("%s-%s-%02x", sharedEndpointsMap, proto, g))
		}
	}
	return out
})

// direct reports whether the policy lets the traffic of a port be
// dispatched without a chain of its own (--nftables-endpoint-choice=shared):
// a port whose only use of its chains is the random choice for its
// ClusterIPs and its external entries if it has any (no session affinity,
// no other scheduler, internalTrafficPolicy Cluster, and
// externalTrafficPolicy Cluster without source ranges) and that has 1 to
// maxDirectEndpoints endpoints. Its
// ClusterIPs then have no service-ips element; each cluster IP . port . i
// (i < N) is a key of the map cluster-ip-endpoints-PROTOCOL-N, whose value
// is the i-th endpoint, and the chain cluster-ip-endpoints (jumped to for
// every ClusterIP) holds one rule per such map:
//
//	meta l4proto tcp dnat ip addr . port to ip daddr . tcp dport . numgen random mod 3 map @cluster-ip-endpoints-tcp-3
//
// Its NodePort has no service-nodeports element: PROTOCOL . NODEPORT is in
// the set direct-node-ports, whose rule (after the service-nodeports one)
// sends the packet to the chain node-port-endpoints, which marks it for
// masquerading (externalTrafficPolicy Cluster) and holds one rule per map
// node-port-endpoints-PROTOCOL-N, keyed by NODEPORT . i:
//
//	meta l4proto tcp dnat ip addr . port to tcp dport . numgen random mod 3 map @node-port-endpoints-tcp-3
//
// NodePorts are unique in a cluster (the API server allocates them), so no
// two Services compete for a key. Its externalIPs and LoadBalancer IPs
// have no service-ips element either: ADDRESS . PROTOCOL . PORT is in the
// set direct-external-ips, whose rule (after the ClusterIP one) goes to
// the chain external-ip-endpoints, which marks the packet for masquerading
// and goes on to cluster-ip-endpoints, where ADDRESS . PORT . i are keys of
// the same maps as the ClusterIPs'. Two Services may claim one address
// and port (the API allows it), but the mode only sees the winner's claim
// (proxy/claims.go), so keys never mix; when the winner changes, the
// address's keys move from one port to the other in one partial sync,
// the loser's released first (txn.early).
//
// Why: the kernel's commit walks every chain of every table of the
// network namespace (nf_tables_commit, to publish the rule blobs), so with
// a chain per Service port a one-endpoint change beside 50k Services cost
// 12-16 ms however few tables it touched; and adding a verdict element
// makes it validate the table. A direct port's change writes only data
// elements of hash maps: no chain, no rule, no validation. The first
// packet of a ClusterIP connection looks up at most one map per distinct
// endpoint count of its protocol (maxDirectEndpoints bounds that walk).
func (pl *planner) direct(pol *proxy.PortPolicy) bool {
	sp := pol.Port
	if !pl.cfg.ChoiceShared || sp.SessionAffinity == v1.ServiceAffinityClientIP || !pol.HasEndpoints ||
		(pol.Externally && !clusterExternal(pol)) || pol.UsesLocal || !pol.UsesCluster || pol.Internal.Verdict != proxy.VerdictAccept || pol.Internal.Local ||
		len(pol.Cluster) == 0 || len(pol.Cluster) > maxDirectEndpoints {
		return false
	}
	return proxy.NewBalance(sp, Schedulers).Scheduler == lb.Random
}

// clusterExternal reports whether a port's external entries (NodePort,
// externalIPs, LoadBalancer IPs) all lead to the Service's cluster
// endpoints with every connection masqueraded: externalTrafficPolicy
// Cluster and no source ranges.
func clusterExternal(pol *proxy.PortPolicy) bool {
	return !pol.Firewall && pol.MasqueradeExternal && pol.External.Verdict == proxy.VerdictAccept && !pol.External.Local
}

// hasExternalAddrs reports whether a port has externalIPs or LoadBalancer
// IPs.
func hasExternalAddrs(sp *proxy.ServicePort) bool {
	return len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerVIPs) > 0
}

// maxDirectEndpoints bounds the endpoints of a direct port (see direct):
// a new ClusterIP connection walks one rule per endpoint count in use.
const maxDirectEndpoints = 64

// directElements adds cluster IP cip's keys of the direct choice map of
// the port's number of cluster endpoints (and the map, with its rule).
func (pl *planner) directElements(d *desiredPort, n *portNames, pol *proxy.PortPolicy, cip netip.Addr) {
	if bal := proxy.NewBalance(pol.Port, Schedulers); bal.Fallback != "" && pl.cfg.UnsupportedScheduler != nil {
		pl.cfg.UnsupportedScheduler(pol.Port.Name, pol.Port.Scheduler)
	}
	pl.directKeys(d, n, pol, false, cip.String()+" . "+n.port+" . ")
}

// directExternalElements adds external address ip's element of
// direct-external-ips and its keys of the direct choice map of the port's
// number of cluster endpoints (and the map, with its rule).
func (pl *planner) directExternalElements(d *desiredPort, n *portNames, pol *proxy.PortPolicy, ip string) {
	d.elems = append(d.elems, desiredElem{id: elemID{n.table, directExternalIPsSet, ip + " . " + n.protocol + " . " + n.port}})
	pl.directKeys(d, n, pol, false, ip+" . "+n.port+" . ")
}

// directNodePortElements adds the port's NodePort keys of the direct
// NodePort choice map of its number of cluster endpoints (and the map, with
// its rule), and its element of direct-node-ports.
func (pl *planner) directNodePortElements(d *desiredPort, n *portNames, pol *proxy.PortPolicy) {
	port := strconv.Itoa(pol.Port.NodePort)
	d.elems = append(d.elems, desiredElem{id: elemID{n.table, directNodePortsSet, n.protocol + " . " + port}})
	pl.directKeys(d, n, pol, true, port+" . ")
}

// directKeys adds the keys prefix+i (i < N) of the direct choice map of
// the port's N cluster endpoints, ClusterIP or NodePort, valued with the
// i-th endpoint.
func (pl *planner) directKeys(d *desiredPort, n *portNames, pol *proxy.PortPolicy, nodePort bool, prefix string) {
	eps := pol.Cluster
	name := directMapNames()[directKind{n.protocol, nodePort}][len(eps)]
	d.maps = append(d.maps, pl.directMap(n.table, n.protocol, name, len(eps), nodePort))
	d.elems = slices.Grow(d.elems, len(eps))
	for i, ep := range eps {
		d.elems = append(d.elems, desiredElem{id: elemID{n.table, name, prefix + strconv.Itoa(i)}, value: ep.Addr.String() + " . " + strconv.Itoa(ep.Port)})
	}
}

// directKey names a direct choice map: table, protocol, endpoint count,
// and whether it is keyed by NodePort.
type directKey struct {
	table, protocol string
	n               int
	nodePort        bool
}

// directMap returns the declaration and rule of a direct choice map, made
// once per planner (every port of that count shares them). A ClusterIP
// map is keyed by destination . port . choice, a NodePort map by port .
// choice.
func (pl *planner) directMap(table, protocol, name string, n int, nodePort bool) mapUse {
	key := directKey{table, protocol, n, nodePort}
	if u, ok := pl.directMaps[key]; ok {
		return u
	}
	plural := "s"
	if n == 1 {
		plural = ""
	}
	keyOf, chain, what := pl.ipX+" daddr . "+protocol+" dport", clusterIPEndpointsChain, "ClusterIP"
	if nodePort {
		keyOf, chain, what = protocol+" dport", nodePortEndpointsChain, "NodePort"
	}
	u := mapUse{
		m: &knftables.Map{Table: table, Name: name,
			TypeOf:  fmt.Sprintf("%s . numgen random mod %d : %s daddr . %s dport", keyOf, n, pl.ipX, protocol),
			Comment: ptrTo(fmt.Sprintf("endpoints of %s %s ports with %d endpoint%s", strings.ToUpper(protocol), what, n, plural))},
		rule: &knftables.Rule{Table: table, Chain: chain,
			Rule: knftables.Concat("meta l4proto", protocol, "dnat", pl.ipX, "addr . port to", keyOf, ". numgen random mod",
				strconv.Itoa(n), "map @"+name)},
	}
	if pl.directMaps == nil {
		pl.directMaps = map[directKey]mapUse{}
	}
	pl.directMaps[key] = u
	return u
}

// directKind is a family of direct choice maps: protocol, and ClusterIP
// or NodePort.
type directKind struct {
	protocol string
	nodePort bool
}

// directMapNames are the names of the direct choice maps by kind and
// endpoint count, made once.
var directMapNames = sync.OnceValue(func() map[directKind][]string {
	out := map[directKind][]string{}
	for _, p := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP} {
		proto := strings.ToLower(string(p))
		for _, np := range []bool{false, true} {
			chain := clusterIPEndpointsChain
			if np {
				chain = nodePortEndpointsChain
			}
			names := make([]string, maxDirectEndpoints+1)
			for n := 1; n <= maxDirectEndpoints; n++ {
				names[n] = fmt.Sprintf("%s-%s-%d", chain, proto, n)
			}
			out[directKind{proto, np}] = names
		}
	}
	return out
})

// maxChoiceRules bounds the rules of one choice: a new connection walks
// them, so larger endpoint sets keep the map.
const maxChoiceRules = 64

// choiceRules writes the choice as rules (see endpointChoice); false for a
// scheduler rules cannot express.
func (pl *planner) choiceRules(bal proxy.Balance, eps []*proxy.Endpoint, n *portNames, affinity bool, rule func(string)) bool {
	target := func(ep *proxy.Endpoint) string {
		if affinity {
			return "goto " + n.epChain(ep)
		}
		return knftables.Concat("meta l4proto", n.protocol, "dnat to", ep.AddrPort().String())
	}
	weight := func(*proxy.Endpoint) int { return 1 }
	var hash string
	switch bal.Scheduler {
	case lb.Random:
	case lb.WeightedRoundRobin:
		weight = bal.Weight
	case lb.SourceHashing, lb.DestinationHashing:
		weight = bal.Weight
		hash = "saddr"
		if bal.Scheduler == lb.DestinationHashing {
			hash = "daddr"
		}
	default:
		return false
	}
	total := 0
	for _, ep := range eps {
		total += weight(ep)
	}
	left, lo := total, 0
	for _, ep := range eps[:len(eps)-1] {
		w := weight(ep)
		if hash == "" {
			rule(fmt.Sprintf("numgen random mod %d < %d %s", left, w, target(ep)))
		} else {
			rule(fmt.Sprintf("jhash %s %s mod %d seed %s %s %s", pl.ipX, hash, total, hashSeed, rangeKey(lo, lo+w-1), target(ep)))
		}
		left -= w
		lo += w
	}
	rule(target(eps[len(eps)-1]))
	return true
}

// Schedulers are what nftables mode can express: kube-proxy's random
// choice (the default), rr, wrr, sh, dh and mh. lc, wlc, sed and nq need
// connection counts nftables does not keep; they fall back to random and
// are reported (see proxy.NewBalance).
var Schedulers = proxy.ModeSchedulers{Default: lb.Random, Supported: func(name string) bool {
	switch name {
	case lb.Random, lb.RoundRobin, lb.WeightedRoundRobin, lb.SourceHashing, lb.DestinationHashing, lb.Maglev:
		return true
	}
	return false
}}

// schedule returns the generator expression and the map entries of a
// scheduler; weighted ones (wrr, sh, dh, mh) give each endpoint an
// interval as wide as its weight. Quiesced endpoints (weight 0) never
// reach here: the core's policy leaves them out.
func (pl *planner) schedule(sp *proxy.ServicePort, bal proxy.Balance, eps []*proxy.Endpoint, target func(*proxy.Endpoint) string) (string, []string) {
	even := func() []string {
		parts := make([]string, len(eps))
		for i, ep := range eps {
			parts[i] = strconv.Itoa(i) + " : " + target(ep)
		}
		return parts
	}
	random := func() (string, []string) { return "numgen random mod " + strconv.Itoa(len(eps)), even() }
	switch bal.Scheduler {
	case lb.RoundRobin:
		return "numgen inc mod " + strconv.Itoa(len(eps)), even()
	case lb.WeightedRoundRobin, lb.SourceHashing, lb.DestinationHashing:
		total := 0
		var parts []string
		for _, ep := range eps {
			w := bal.Weight(ep)
			parts = append(parts, rangeKey(total, total+w-1)+" : "+target(ep))
			total += w
		}
		switch bal.Scheduler {
		case lb.SourceHashing:
			return fmt.Sprintf("jhash %s saddr mod %d seed %s", pl.ipX, total, hashSeed), parts
		case lb.DestinationHashing:
			return fmt.Sprintf("jhash %s daddr mod %d seed %s", pl.ipX, total, hashSeed), parts
		}
		return "numgen random mod " + strconv.Itoa(total), parts
	case lb.Maglev:
		var bs []*lb.Backend
		byID := map[string]*proxy.Endpoint{}
		for _, ep := range eps {
			b := lb.NewBackend(ep.AddrPort(), bal.Weight(ep))
			bs = append(bs, b)
			byID[b.ID] = ep
		}
		table, err := lb.MaglevTable(bs, maglevTableSize)
		if err != nil {
			pl.cfg.Log.Warn("maglev table failed; using random", "service", sp.Name.String(), "err", err)
			return random()
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
		return fmt.Sprintf("jhash %s saddr mod %d seed %s", pl.ipX, len(table), hashSeed), parts
	}
	return random()
}

func rangeKey(a, b int) string {
	if a == b {
		return strconv.Itoa(a)
	}
	return strconv.Itoa(a) + "-" + strconv.Itoa(b)
}
