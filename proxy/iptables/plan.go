package iptables

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/lb"
)

// largeClusterEndpointsThreshold is kube-proxy's size above which endpoint
// rules drop their comments (and stale chains are swept less often) to keep
// iptables-restore fast.
const largeClusterEndpointsThreshold = 1000

// PlanInput is everything Plan needs; it holds no handles, so Plan is pure.
type PlanInput struct {
	// IPv6 selects the family; services and endpoints of the other family
	// are ignored.
	IPv6      bool
	Services  proxy.ServicePortMap
	Endpoints proxy.EndpointsMap
	// NodeName and NodeLabels select topology hints (see
	// proxy.CategorizeEndpointsForNode).
	NodeName   string
	NodeLabels map[string]string
	// NodeIP is the node's primary address of this family (used for
	// loadBalancerSourceRanges that contain the node).
	NodeIP netip.Addr
	// LocalCIDRs are the cluster (pod) CIDRs of this family. Traffic from
	// outside them to a ClusterIP is masqueraded; empty disables that.
	LocalCIDRs []netip.Prefix
	// MasqueradeAll masquerades all traffic to ClusterIPs.
	MasqueradeAll bool
	// MasqueradeMark is the fwmark, e.g. "0x4000".
	MasqueradeMark string
	// NodePortIPs restricts NodePorts to these local addresses; nil means
	// every local address (-m addrtype --dst-type LOCAL).
	NodePortIPs []netip.Addr
	// LocalhostNodePorts lets IPv4 NodePorts answer on 127.0.0.1 (kube-proxy
	// default true; needs route_localnet).
	LocalhostNodePorts bool
	// ConntrackTCPLiberal omits the INVALID-drop rule.
	ConntrackTCPLiberal bool
	// Partial, when true, writes the per-service chains only for Services
	// in Changed; other services' chains are left as they are in the kernel
	// (the payload is applied with --noflush).
	Partial bool
	Changed sets.Set[types.NamespacedName]
	// Policy, when set, returns the core's policy of a port (the
	// Proxier's cache); when nil, BuildPlan computes it from the fields
	// above.
	Policy func(name proxy.ServicePortName, ipv6 bool) *proxy.PortPolicy
	// ExistingNATChains are the nat chains currently in the kernel; our
	// service chains among them that are no longer used are deleted. Nil
	// skips the sweep.
	ExistingNATChains []string
	// Prev is the plan last applied to the kernel. With Partial, its
	// record of the rules each Service owns in the top-level chains
	// (KUBE-SERVICES, KUBE-NODEPORTS, KUBE-EXTERNAL-SERVICES, ...) lets a
	// partial plan edit only the changed Services' rules there (-D and
	// -I/-A) instead of rewriting those chains whole. Nil rewrites them.
	Prev *Plan
	// Dispatch selects the layout of the nat KUBE-SERVICES chain:
	// DispatchLinear (kube-proxy's, the default) or DispatchTree.
	Dispatch Dispatch
}

// Dispatch is a layout of the nat KUBE-SERVICES chain.
type Dispatch string

const (
	// DispatchLinear is kube-proxy's layout: one rule per Service address
	// and port in KUBE-SERVICES, walked in order by every new connection.
	DispatchLinear Dispatch = "linear"
	// DispatchTree sends each packet down a tree of KUBE-DST- chains split
	// by destination prefix (/24 then /28 for IPv4, /120 then /124 for
	// IPv6), so a new connection walks the rules of at most 16 addresses
	// plus one rule per populated prefix instead of every Service's rule.
	DispatchTree Dispatch = "tree"
)

// ParseDispatch validates an --iptables-dispatch value ("" is linear).
func ParseDispatch(s string) (Dispatch, error) {
	switch Dispatch(s) {
	case "", DispatchLinear:
		return DispatchLinear, nil
	case DispatchTree:
		return DispatchTree, nil
	}
	return "", fmt.Errorf("invalid iptables dispatch %q: must be %q or %q", s, DispatchLinear, DispatchTree)
}

// topRule is one rule a Service owns in a top-level chain (one that holds
// the rules of many Services), kept so the next partial plan can delete it
// by its exact text.
type topRule struct {
	nat   bool
	chain string
	// dst is the address the rule matches (-d), if any; in tree dispatch
	// the nat KUBE-SERVICES rules with a dst live in the tree's leaves.
	dst  netip.Addr
	args string // the rule after "-A chain "
	// port and seq place the rule in the canonical order (Service ports
	// sorted, then the order in which the port's rules are written).
	port proxy.ServicePortName
	seq  int
}

func (r topRule) same(o topRule) bool {
	return r.nat == o.nat && r.chain == o.chain && r.dst == o.dst && r.args == o.args
}

// dispatched reports whether the rule lives in the tree of DispatchTree.
func (r topRule) dispatched(tree bool) bool {
	return tree && r.nat && r.chain == ChainServices && r.dst.IsValid()
}

// svcRecord is what one Service (all its ports of this family) holds in
// the kernel after a plan: enough for the next partial plan to edit it
// without looking at any other Service.
type svcRecord struct {
	top    []topRule
	chains []string // its per-service nat chains
	// lines counts the rules of those chains; ports, endpoints and the
	// noLocal counters are its share of the Plan's totals.
	lines, ports, endpoints, noLocalInt, noLocalExt int
}

// Plan is the result of planning: one iptables-restore payload.
type Plan struct {
	// Data is the iptables-restore --noflush input.
	Data []byte
	// ActiveNATChains are all per-service chains that the kernel should
	// hold after Data is applied (including unchanged ones in a partial
	// plan).
	ActiveNATChains sets.Set[string]
	FilterRules     int
	NATRules        int
	// DeletedChains is the number of stale chains removed.
	DeletedChains    int
	NumServices      int
	NumEndpoints     int
	NoLocalInternal  int
	NoLocalExternal  int
	LargeClusterMode bool
	// Incremental is true when only the changed Services were planned and
	// the top-level chains were edited rule by rule.
	Incremental bool
	// svcs holds each Service's record; fixed the rules of the top-level
	// chains that belong to no Service. An incremental plan built on this
	// one takes them over (and the tree, and ActiveNATChains): a plan can
	// serve as Prev once.
	svcs     map[types.NamespacedName]*svcRecord
	fixed    string
	dispatch Dispatch
	tree     *dispatchTree
	// natTop and filterTop count the rules of the top-level chains,
	// svcLines those of the per-service chains.
	natTop, filterTop, svcLines int
}

// lineBuffer accumulates iptables-restore lines and counts them.
type lineBuffer struct {
	b     bytes.Buffer
	lines int
	off   bool
}

func (l *lineBuffer) write(words ...string) {
	if l.off {
		l.lines++
		return
	}
	for i, w := range words {
		if i > 0 {
			l.b.WriteByte(' ')
		}
		l.b.WriteString(w)
	}
	l.b.WriteByte('\n')
	l.lines++
}

func (l *lineBuffer) chain(name string) { l.write(":" + name + " - [0:0]") }

// BuildPlan turns services and endpoints into kube-proxy's iptables layout.
// The order of services is stable (namespace, name, port, protocol), and
// endpoints keep the order of the EndpointsMap, so the same input always
// yields the same bytes.
func BuildPlan(in PlanInput) *Plan {
	var filterChains, filterRules, natChains, natRules lineBuffer
	// filterDelta and natDelta hold the rule-by-rule edits of the
	// top-level chains (incremental plans); natTail the tree and the
	// closing KUBE-SERVICES rules; natSweep the deletions of stale chains.
	var filterDelta, natDelta, natTail, natSweep lineBuffer
	mark := in.MasqueradeMark
	if mark == "" {
		mark = "0x4000"
	}
	dispatch := in.Dispatch
	if dispatch == "" {
		dispatch = DispatchLinear
	}
	tree := dispatch == DispatchTree
	plan := &Plan{dispatch: dispatch}

	// Rules of the top-level chains that belong to no Service. They only
	// depend on the configuration and the node's addresses; when they are
	// unchanged a partial plan leaves those chains alone.
	const npComment = `"kubernetes service nodeports; NOTE: this must be the last rule in this chain"`
	var headNAT, headFilter, tailNAT, tailFilter [][]string
	headNAT = append(headNAT,
		[]string{"-A", ChainPostrouting, "-m", "mark", "!", "--mark", mark + "/" + mark, "-j", "RETURN"},
		[]string{"-A", ChainPostrouting, "-j", "MARK", "--xor-mark", mark},
		[]string{"-A", ChainPostrouting, "-m", "comment", "--comment", `"kubernetes service traffic requiring SNAT"`, "-j", "MASQUERADE", "--random-fully"},
		[]string{"-A", ChainMarkMasq, "-j", "MARK", "--or-mark", mark})
	if !in.IPv6 && in.LocalhostNodePorts {
		headFilter = append(headFilter, []string{"-A", ChainKubeletFirewall, "-m", "comment", "--comment", `"block incoming localnet connections"`,
			"-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP"})
	}
	// NodePorts: the last rule of KUBE-SERVICES.
	if in.NodePortIPs == nil {
		dst := []string{"-m", "addrtype", "--dst-type", "LOCAL"}
		if in.IPv6 {
			dst = append(dst, "!", "-d", "::1/128")
		} else if !in.LocalhostNodePorts {
			dst = append(dst, "!", "-d", "127.0.0.0/8")
		}
		tailNAT = append(tailNAT, append(append([]string{"-A", ChainServices, "-m", "comment", "--comment", npComment}, dst...), "-j", ChainNodePorts))
	} else {
		for _, ip := range in.NodePortIPs {
			if ip.Is6() != in.IPv6 {
				continue
			}
			if ip.IsLoopback() && (in.IPv6 || !in.LocalhostNodePorts) {
				continue
			}
			tailNAT = append(tailNAT, []string{"-A", ChainServices, "-m", "comment", "--comment", npComment, "-d", ip.String(), "-j", ChainNodePorts})
		}
	}
	if !in.ConntrackTCPLiberal {
		tailFilter = append(tailFilter, []string{"-A", ChainForward, "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP"})
	}
	tailFilter = append(tailFilter,
		[]string{"-A", ChainForward, "-m", "comment", "--comment", `"kubernetes forwarding rules"`,
			"-m", "mark", "--mark", mark + "/" + mark, "-j", "ACCEPT"},
		[]string{"-A", ChainForward, "-m", "comment", "--comment", `"kubernetes forwarding conntrack rule"`,
			"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"})
	var fixed strings.Builder
	for _, g := range [][][]string{headNAT, headFilter, tailNAT, tailFilter} {
		for _, r := range g {
			fixed.WriteString(strings.Join(r, " "))
			fixed.WriteByte('\n')
		}
		fixed.WriteByte('\n')
	}
	plan.fixed = fixed.String()

	// Select this family's share of the model: the policy of each port
	// (which endpoints, which verdicts) comes from the proxy core. An
	// incremental plan only looks at the ports of changed Services.
	type svcEntry struct {
		info *proxy.ServicePort
		pol  *proxy.PortPolicy
	}
	policy := in.Policy
	if policy == nil {
		node := proxy.PolicyNode{Name: in.NodeName, Labels: in.NodeLabels, IP: in.NodeIP}
		policy = func(name proxy.ServicePortName, ipv6 bool) *proxy.PortPolicy {
			return proxy.NewPortPolicy(in.Services[name], in.Endpoints[name], node, ipv6)
		}
	}
	countEndpoints := func(name proxy.ServicePortName) int {
		n := 0
		for _, ep := range in.Endpoints[name] {
			if ep.Addr.Is6() == in.IPv6 {
				n++
			}
		}
		return n
	}
	prev := in.Prev
	incremental := in.Partial && prev != nil && prev.svcs != nil && prev.dispatch == dispatch && prev.fixed == plan.fixed
	var names []proxy.ServicePortName
	if incremental {
		for name := range in.Services {
			if in.Changed.Has(name.NamespacedName) {
				names = append(names, name)
			}
		}
		sortPorts(names)
	} else {
		names = proxy.SortedServicePorts(in.Services)
	}
	var entries []svcEntry
	numEndpoints := 0
	for _, name := range names {
		pol := policy(name, in.IPv6)
		if pol == nil {
			continue
		}
		entries = append(entries, svcEntry{pol.Port, pol})
		numEndpoints += countEndpoints(name)
	}
	if incremental {
		// Endpoint chains lose their comments above the large-cluster
		// threshold: crossing it rewrites everything.
		n := prev.NumEndpoints + numEndpoints
		for nn := range in.Changed {
			if r := prev.svcs[nn]; r != nil {
				n -= r.endpoints
			}
		}
		if (n > largeClusterEndpointsThreshold) != prev.LargeClusterMode {
			// A full plan (which still deletes the changed Services'
			// unused chains).
			return BuildPlan(PlanInput{IPv6: in.IPv6, Services: in.Services, Endpoints: in.Endpoints, NodeName: in.NodeName,
				NodeLabels: in.NodeLabels, NodeIP: in.NodeIP, LocalCIDRs: in.LocalCIDRs, MasqueradeAll: in.MasqueradeAll,
				MasqueradeMark: in.MasqueradeMark, NodePortIPs: in.NodePortIPs, LocalhostNodePorts: in.LocalhostNodePorts,
				ConntrackTCPLiberal: in.ConntrackTCPLiberal, Changed: in.Changed, Policy: in.Policy,
				ExistingNATChains: in.ExistingNATChains, Dispatch: in.Dispatch, Prev: prev})
		}
	}

	// Records of the Services before this plan (for partial plans), and
	// the starting point of this one.
	oldRecs := map[types.NamespacedName]*svcRecord{}
	if prev != nil && prev.svcs != nil {
		for nn := range in.Changed {
			if r := prev.svcs[nn]; r != nil {
				oldRecs[nn] = r
			}
		}
	}
	if incremental {
		plan.Incremental = true
		// Take over the previous plan's state; remove what the changed
		// Services held (they are planned again below).
		plan.svcs, plan.ActiveNATChains, plan.tree = prev.svcs, prev.ActiveNATChains, prev.tree
		prev.svcs, prev.ActiveNATChains, prev.tree = nil, nil, nil
		plan.NumServices, plan.NumEndpoints = prev.NumServices, prev.NumEndpoints
		plan.NoLocalInternal, plan.NoLocalExternal = prev.NoLocalInternal, prev.NoLocalExternal
		plan.natTop, plan.filterTop, plan.svcLines = prev.natTop, prev.filterTop, prev.svcLines
		plan.LargeClusterMode = prev.LargeClusterMode
		for nn, r := range oldRecs {
			delete(plan.svcs, nn)
			plan.NumServices -= r.ports
			plan.NumEndpoints -= r.endpoints
			plan.NoLocalInternal -= r.noLocalInt
			plan.NoLocalExternal -= r.noLocalExt
			plan.svcLines -= r.lines
			for _, c := range r.chains {
				plan.ActiveNATChains.Delete(c)
			}
			for _, t := range r.top {
				if t.nat {
					plan.natTop--
				} else {
					plan.filterTop--
				}
			}
		}
		plan.NumServices += len(entries)
		plan.NumEndpoints += numEndpoints
	} else {
		plan.svcs = map[types.NamespacedName]*svcRecord{}
		plan.ActiveNATChains = sets.New[string]()
		plan.NumServices, plan.NumEndpoints = len(entries), numEndpoints
		plan.LargeClusterMode = plan.NumEndpoints > largeClusterEndpointsThreshold
		if tree {
			plan.tree = newDispatchTree(in.IPv6)
		}
		for _, c := range []string{ChainServices, ChainExternalServices, ChainForward, ChainNodePorts, ChainProxyFirewall} {
			filterChains.chain(c)
		}
		for _, c := range []string{ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq} {
			natChains.chain(c)
		}
		for _, r := range headNAT {
			natRules.write(r...)
		}
		if len(headFilter) > 0 {
			filterChains.chain(ChainKubeletFirewall)
			for _, r := range headFilter {
				filterRules.write(r...)
			}
		}
		plan.natTop = len(headNAT) + len(tailNAT)
		plan.filterTop = len(headFilter) + len(tailFilter)
		// Size the buffers once: roughly 160 bytes per nat line, about 4
		// lines per endpoint and 3 per service.
		if !in.Partial {
			natRules.b.Grow(160 * (4*plan.NumEndpoints + 3*plan.NumServices))
			natChains.b.Grow(40 * (plan.NumEndpoints + 2*plan.NumServices))
			filterRules.b.Grow(200 * plan.NumServices / 4)
		}
	}

	var localCIDR string
	for _, c := range in.LocalCIDRs {
		if c.Addr().Is6() == in.IPv6 {
			localCIDR = c.String()
			break
		}
	}

	// The record of the Service whose port is being planned, and the
	// helpers that fill it.
	var rec *svcRecord
	var curPort proxy.ServicePortName
	seq := 0
	top := func(nat bool, chain string, dst netip.Addr, words ...string) {
		rec.top = append(rec.top, topRule{nat: nat, chain: chain, dst: dst, args: strings.Join(words, " "), port: curPort, seq: seq})
		seq++
	}
	activate := func(c string) {
		plan.ActiveNATChains.Insert(c)
		rec.chains = append(rec.chains, c)
	}

	countNC, countNR := lineBuffer{off: true}, lineBuffer{off: true}
	for _, e := range entries {
		svc := e.info
		nn := svc.Name.NamespacedName
		changed := !in.Partial || in.Changed.Has(nn)
		rec = plan.svcs[nn]
		if rec == nil {
			rec = &svcRecord{}
			plan.svcs[nn] = rec
		}
		rec.ports++
		rec.endpoints += countEndpoints(svc.Name)
		curPort, seq = svc.Name, 0
		firstTop := len(rec.top)

		proto := strings.ToLower(string(svc.Protocol))
		name := svc.Name.String()
		port := strconv.Itoa(svc.Port)
		clusterIP := svc.ClusterIP()

		pol := e.pol
		bal := proxy.NewBalance(svc, Schedulers)
		reachable, hasEndpoints := pol.Reachable, pol.HasEndpoints
		epChains := make(map[*proxy.Endpoint]string, len(reachable))
		for _, ep := range reachable {
			epChains[ep] = EndpointChain(svc, ep)
		}
		clusterChain := ClusterPolicyChain(svc)
		localChain := LocalPolicyChain(svc)

		internalChain := clusterChain
		if pol.Internal.Local {
			internalChain = localChain
		}
		hasInternal := pol.Internal.Verdict == proxy.VerdictAccept
		externalPolicyChain := clusterChain
		if pol.External.Local {
			externalPolicyChain = localChain
		}
		hasExternal := pol.External.Verdict == proxy.VerdictAccept
		extChain := ExternalChain(svc)
		lbChain := extChain
		fwChain := FirewallChain(svc)
		// Without endpoints the LB IP is rejected in the filter table
		// before any firewall chain would be reached (kube-proxy's
		// iptables layout writes none).
		usesFW := pol.Firewall && hasEndpoints
		if usesFW {
			lbChain = fwChain
		}

		var intTarget, intComment, extTarget, extComment string
		if !hasEndpoints {
			intTarget, intComment = "REJECT", fmt.Sprintf(`"%s has no endpoints"`, name)
			extTarget, extComment = intTarget, intComment
		} else {
			if !hasInternal {
				intTarget, intComment = "DROP", fmt.Sprintf(`"%s has no local endpoints"`, name)
				rec.noLocalInt++
				plan.NoLocalInternal++
			}
			if !hasExternal {
				extTarget, extComment = "DROP", fmt.Sprintf(`"%s has no local endpoints"`, name)
				rec.noLocalExt++
				plan.NoLocalExternal++
			}
		}

		// The Service's rules in the top-level chains.
		// Cluster IP.
		if hasInternal {
			top(true, ChainServices, clusterIP, "-m", "comment", "--comment", fmt.Sprintf(`"%s cluster IP"`, name),
				"-m", proto, "-p", proto, "-d", clusterIP.String(), "--dport", port, "-j", internalChain)
		} else {
			top(false, ChainServices, clusterIP, "-m", "comment", "--comment", intComment,
				"-m", proto, "-p", proto, "-d", clusterIP.String(), "--dport", port, "-j", intTarget)
		}
		// External IPs.
		for _, ip := range svc.ExternalIPs {
			if hasEndpoints {
				top(true, ChainServices, ip, "-m", "comment", "--comment", fmt.Sprintf(`"%s external IP"`, name),
					"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", extChain)
			}
			if !hasExternal {
				top(false, ChainExternalServices, ip, "-m", "comment", "--comment", extComment,
					"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", extTarget)
			}
		}
		// Load-balancer ingress IPs.
		for _, ip := range svc.LoadBalancerVIPs {
			if hasEndpoints {
				top(true, ChainServices, ip, "-m", "comment", "--comment", fmt.Sprintf(`"%s loadbalancer IP"`, name),
					"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", lbChain)
			}
			if usesFW {
				top(false, ChainProxyFirewall, ip, "-m", "comment", "--comment", fmt.Sprintf(`"%s traffic not accepted by %s"`, name, fwChain),
					"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", "DROP")
			}
		}
		if !hasExternal {
			for _, ip := range svc.LoadBalancerVIPs {
				top(false, ChainExternalServices, ip, "-m", "comment", "--comment", extComment,
					"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", extTarget)
			}
		}
		// NodePort.
		if svc.NodePort != 0 {
			np := strconv.Itoa(svc.NodePort)
			if hasEndpoints {
				top(true, ChainNodePorts, netip.Addr{}, "-m", "comment", "--comment", name,
					"-m", proto, "-p", proto, "--dport", np, "-j", extChain)
			}
			if !hasExternal {
				top(false, ChainExternalServices, netip.Addr{}, "-m", "comment", "--comment", extComment,
					"-m", "addrtype", "--dst-type", "LOCAL", "-m", proto, "-p", proto, "--dport", np, "-j", extTarget)
			}
		}
		// Health check node port.
		if svc.HealthCheckNodePort != 0 {
			top(false, ChainNodePorts, netip.Addr{}, "-m", "comment", "--comment", fmt.Sprintf(`"%s health check node port"`, name),
				"-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(svc.HealthCheckNodePort), "-j", "ACCEPT")
		}
		for _, r := range rec.top[firstTop:] {
			if r.nat {
				plan.natTop++
			} else {
				plan.filterTop++
			}
			if incremental {
				continue // edited after the loop
			}
			switch {
			case r.dispatched(tree):
				plan.tree.add(r)
			case r.nat:
				natRules.write("-A", r.chain, r.args)
			default:
				filterRules.write("-A", r.chain, r.args)
			}
		}

		// Per-service chains. For an unchanged Service of a partial plan
		// nothing is written: the same writer runs over buffers that only
		// count, so the line counts cannot drift from what is written.
		nc, nr := &natChains, &natRules
		if !changed {
			nc, nr = &countNC, &countNR
		}
		before := nr.lines
		writeServiceChains(nc, nr, &serviceChains{svc: svc, pol: pol, bal: bal, name: name, proto: proto, port: port,
			clusterIP: clusterIP, epChains: epChains, clusterChain: clusterChain, localChain: localChain,
			internalChain: internalChain, externalPolicyChain: externalPolicyChain, extChain: extChain, fwChain: fwChain,
			usesFW: usesFW, hasInternal: hasInternal, hasExternal: hasExternal, masqueradeAll: in.MasqueradeAll,
			localCIDR: localCIDR, large: plan.LargeClusterMode}, activate)
		rec.lines += nr.lines - before
		plan.svcLines += nr.lines - before
	}

	deleted := sets.New[string]()
	deleteChain := func(c string) {
		if deleted.Has(c) {
			return
		}
		deleted.Insert(c)
		natChains.chain(c)
		natSweep.write("-X", c)
		plan.DeletedChains++
	}
	if incremental {
		// Edit the changed Services' rules in place: delete the old ones
		// by their exact text, add the new ones. In KUBE-SERVICES they go
		// to the top, ahead of the closing KUBE-NODEPORTS jump.
		changedNames := in.Changed.UnsortedList()
		slices.SortFunc(changedNames, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		var dirty []netip.Addr // tree leaves to rewrite
		var regroup []func()   // moves of changed rules in the tree
		for _, nn := range changedNames {
			var old, cur []topRule
			if r := oldRecs[nn]; r != nil {
				old = r.top
			}
			if r := plan.svcs[nn]; r != nil {
				cur = r.top
			}
			if slices.EqualFunc(old, cur, topRule.same) {
				continue // the kernel (and the tree) already hold them
			}
			for _, r := range old {
				switch {
				case r.dispatched(tree):
					dirty = append(dirty, r.dst)
				case r.nat:
					natDelta.write("-D", r.chain, r.args)
				default:
					filterDelta.write("-D", r.chain, r.args)
				}
			}
			if tree {
				regroup = append(regroup, func() {
					plan.tree.remove(nn, old)
					for _, r := range cur {
						if r.dispatched(tree) {
							plan.tree.add(r)
						}
					}
				})
			}
			for i := len(cur) - 1; i >= 0; i-- {
				r := cur[i]
				switch {
				case r.dispatched(tree):
					dirty = append(dirty, r.dst)
				case r.nat && r.chain == ChainServices:
					natDelta.write("-I", r.chain, "1", r.args)
				case r.nat:
					natDelta.write("-A", r.chain, r.args)
				default:
					filterDelta.write("-A", r.chain, r.args)
				}
			}
		}
		if tree && len(dirty) > 0 {
			// Rewrite KUBE-SERVICES (one jump per branch) and the
			// branches and leaves that hold a changed address.
			natChains.chain(ChainServices)
			before := plan.tree.chainsOf(dirty)
			for _, f := range regroup {
				f()
			}
			plan.tree.write(&natChains, &natTail, dirty)
			for _, r := range tailNAT {
				natTail.write(r...)
			}
			after := plan.tree.chainsOf(dirty)
			for c := range before {
				if !after.Has(c) {
					plan.ActiveNATChains.Delete(c)
				}
			}
			plan.ActiveNATChains = plan.ActiveNATChains.Union(after)
			for c := range before {
				if !after.Has(c) && !plan.LargeClusterMode {
					deleteChain(c)
				}
			}
		}
	} else {
		if tree {
			plan.tree.write(&natChains, &natTail, nil)
			for c := range plan.tree.chainsOf(nil) {
				plan.ActiveNATChains.Insert(c)
			}
		}
		for _, r := range tailNAT {
			natTail.write(r...)
		}
		for _, r := range tailFilter {
			filterRules.write(r...)
		}
	}

	// Delete the chains the changed Services no longer use, and (on a
	// sweep) every chain of ours that nothing uses. In large clusters an
	// incremental plan leaves them (unreferenced) to the next sweep, as
	// kube-proxy does.
	if !(incremental && plan.LargeClusterMode) {
		for _, r := range oldRecs {
			for _, c := range r.chains {
				if !plan.ActiveNATChains.Has(c) {
					deleteChain(c)
				}
			}
		}
	}
	if in.ExistingNATChains != nil {
		for _, c := range in.ExistingNATChains {
			if isServiceChainName(c) && !plan.ActiveNATChains.Has(c) {
				deleteChain(c)
			}
		}
	}

	var out bytes.Buffer
	out.Grow(filterChains.b.Len() + filterRules.b.Len() + filterDelta.b.Len() + natChains.b.Len() + natRules.b.Len() +
		natDelta.b.Len() + natTail.b.Len() + natSweep.b.Len() + 64)
	out.WriteString("*filter\n")
	out.Write(filterChains.b.Bytes())
	out.Write(filterDelta.b.Bytes())
	out.Write(filterRules.b.Bytes())
	out.WriteString("COMMIT\n*nat\n")
	out.Write(natChains.b.Bytes())
	out.Write(natDelta.b.Bytes())
	out.Write(natRules.b.Bytes())
	out.Write(natTail.b.Bytes())
	out.Write(natSweep.b.Bytes())
	out.WriteString("COMMIT\n")
	plan.Data = out.Bytes()
	plan.FilterRules = plan.filterTop
	plan.NATRules = plan.natTop + plan.svcLines
	if plan.tree != nil {
		plan.NATRules += plan.tree.jumps()
	}
	return plan
}

// serviceChains is what writeServiceChains needs of one Service port.
type serviceChains struct {
	svc                                     *proxy.ServicePort
	pol                                     *proxy.PortPolicy
	bal                                     proxy.Balance
	name, proto, port                       string
	clusterIP                               netip.Addr
	epChains                                map[*proxy.Endpoint]string
	clusterChain, localChain, internalChain string
	externalPolicyChain, extChain, fwChain  string
	usesFW, hasInternal, hasExternal        bool
	masqueradeAll, large                    bool
	localCIDR                               string
}

// writeServiceChains writes a Service port's own nat chains (external,
// firewall, cluster and local policy, endpoints) to nc (declarations) and
// nr (rules), and activates each chain.
func writeServiceChains(nc, nr *lineBuffer, c *serviceChains, activate func(string)) {
	if c.hasInternal {
		args := []string{"-m", "comment", "--comment", fmt.Sprintf(`"%s cluster IP"`, c.name),
			"-m", c.proto, "-p", c.proto, "-d", c.clusterIP.String(), "--dport", c.port}
		if c.masqueradeAll {
			nr.write(append(append([]string{"-A", c.internalChain}, args...), "-j", ChainMarkMasq)...)
		} else if c.localCIDR != "" {
			nr.write(append(append([]string{"-A", c.internalChain}, args...), "!", "-s", c.localCIDR, "-j", ChainMarkMasq)...)
		}
	}
	if c.pol.Externally {
		nc.chain(c.extChain)
		activate(c.extChain)
		if c.pol.MasqueradeExternal {
			nr.write("-A", c.extChain, "-m", "comment", "--comment", fmt.Sprintf(`"masquerade traffic for %s external destinations"`, c.name), "-j", ChainMarkMasq)
		} else {
			if c.localCIDR != "" {
				nr.write("-A", c.extChain, "-m", "comment", "--comment", fmt.Sprintf(`"pod traffic for %s external destinations"`, c.name),
					"-s", c.localCIDR, "-j", c.clusterChain)
			}
			nr.write("-A", c.extChain, "-m", "comment", "--comment", fmt.Sprintf(`"masquerade LOCAL traffic for %s external destinations"`, c.name),
				"-m", "addrtype", "--src-type", "LOCAL", "-j", ChainMarkMasq)
			nr.write("-A", c.extChain, "-m", "comment", "--comment", fmt.Sprintf(`"route LOCAL traffic for %s external destinations"`, c.name),
				"-m", "addrtype", "--src-type", "LOCAL", "-j", c.clusterChain)
		}
		if c.hasExternal {
			nr.write("-A", c.extChain, "-j", c.externalPolicyChain)
		}
	}
	if c.usesFW {
		nc.chain(c.fwChain)
		activate(c.fwChain)
		args := []string{"-A", c.fwChain, "-m", "comment", "--comment", fmt.Sprintf(`"%s loadbalancer IP"`, c.name)}
		for _, r := range c.pol.SourceRanges {
			nr.write(append(append([]string{}, args...), "-s", r.String(), "-j", c.extChain)...)
		}
		if c.pol.FirewallAllowsNode {
			for _, ip := range c.svc.LoadBalancerVIPs {
				nr.write(append(append([]string{}, args...), "-s", ip.String(), "-j", c.extChain)...)
			}
		}
		nr.write("-A", c.fwChain, "-m", "comment", "--comment", fmt.Sprintf(`"other traffic to %s will be dropped by KUBE-PROXY-FIREWALL"`, c.name))
	}
	if c.pol.UsesCluster {
		nc.chain(c.clusterChain)
		activate(c.clusterChain)
		writeServiceToEndpointRules(nr, c.svc, c.bal, c.clusterChain, c.pol.Cluster, c.epChains, c.large)
	}
	if c.pol.UsesLocal {
		nc.chain(c.localChain)
		activate(c.localChain)
		writeServiceToEndpointRules(nr, c.svc, c.bal, c.localChain, c.pol.Local, c.epChains, c.large)
	}
	for _, ep := range c.pol.Reachable {
		epChain := c.epChains[ep]
		nc.chain(epChain)
		activate(epChain)
		args := []string{"-A", epChain}
		if !c.large {
			args = append(args, "-m", "comment", "--comment", c.name)
		}
		nr.write(append(append([]string{}, args...), "-s", ep.IP(), "-j", ChainMarkMasq)...)
		if c.svc.SessionAffinity == v1.ServiceAffinityClientIP {
			args = append(args, "-m", "recent", "--name", epChain, "--set")
		}
		nr.write(append(args, "-m", c.proto, "-p", c.proto, "-j", "DNAT", "--to-destination", ep.String())...)
	}
}

// sortPorts sorts Service ports as proxy.SortedServicePorts does.
func sortPorts(names []proxy.ServicePortName) {
	slices.SortFunc(names, comparePorts)
}

func comparePorts(a, b proxy.ServicePortName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := strings.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	return strings.Compare(string(a.Protocol), string(b.Protocol))
}

// Schedulers are what iptables mode can balance with: kube-proxy's uniform
// random choice (the default) and wrr, the same choice weighted by the
// endpoints' weights (as nftables mode's wrr). Other algorithms fall back
// to random and are reported (see proxy.NewBalance).
var Schedulers = proxy.ModeSchedulers{Default: lb.Random, Supported: func(name string) bool {
	return name == lb.Random || name == lb.WeightedRoundRobin
}}

// writeServiceToEndpointRules fills a KUBE-SVC-/KUBE-SVL- chain: affinity
// checks first (recent --rcheck), then one statistic rule per endpoint, the
// last unconditional. Endpoint i of n is taken with probability
// w_i / (w_i + ... + w_n-1), its share of the weight not yet passed, so
// that it gets w_i / W of all connections; with equal weights (every
// unweighted scheduler) that is kube-proxy's 1/(n-i), written the same.
func writeServiceToEndpointRules(nr *lineBuffer, svc *proxy.ServicePort, bal proxy.Balance, chain string, eps []*proxy.Endpoint, epChains map[*proxy.Endpoint]string, large bool) {
	name := svc.Name.String()
	if svc.SessionAffinity == v1.ServiceAffinityClientIP {
		for _, ep := range eps {
			epChain := epChains[ep]
			args := []string{"-A", chain}
			if !large {
				args = append(args, "-m", "comment", "--comment", fmt.Sprintf(`"%s -> %s"`, name, ep.String()))
			}
			args = append(args, "-m", "recent", "--name", epChain, "--rcheck", "--seconds", strconv.Itoa(svc.StickyMaxAgeSeconds), "--reap", "-j", epChain)
			nr.write(args...)
		}
	}
	n := len(eps)
	rest := 0
	if bal.Weighted {
		for _, ep := range eps {
			rest += bal.Weight(ep)
		}
	}
	for i, ep := range eps {
		args := []string{"-A", chain}
		if !large {
			args = append(args, "-m", "comment", "--comment", fmt.Sprintf(`"%s -> %s"`, name, ep.String()))
		}
		if i < n-1 {
			p := proxy.FormatProbability(n - i)
			if bal.Weighted {
				w := bal.Weight(ep)
				p = proxy.FormatWeightedProbability(w, rest)
				rest -= w
			}
			args = append(args, "-m", "statistic", "--mode", "random", "--probability", p)
		}
		nr.write(append(args, "-j", epChains[ep])...)
	}
}
