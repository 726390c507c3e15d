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
	p := newPlanner(in)
	entries, numEndpoints := p.selectPorts()
	if p.incremental && p.crossesLargeClusterThreshold(numEndpoints) {
		// Endpoint chains lose their comments above the large-cluster
		// threshold: crossing it rewrites everything (a full plan, which
		// still deletes the changed Services' unused chains).
		return BuildPlan(PlanInput{IPv6: in.IPv6, Services: in.Services, Endpoints: in.Endpoints, NodeName: in.NodeName,
			NodeLabels: in.NodeLabels, NodeIP: in.NodeIP, LocalCIDRs: in.LocalCIDRs, MasqueradeAll: in.MasqueradeAll,
			MasqueradeMark: in.MasqueradeMark, NodePortIPs: in.NodePortIPs, LocalhostNodePorts: in.LocalhostNodePorts,
			ConntrackTCPLiberal: in.ConntrackTCPLiberal, Changed: in.Changed, Policy: in.Policy,
			ExistingNATChains: in.ExistingNATChains, Dispatch: in.Dispatch, Prev: in.Prev})
	}
	p.recordOld()
	if p.incremental {
		p.takeOver(len(entries), numEndpoints)
	} else {
		p.startFull(len(entries), numEndpoints)
	}
	for _, e := range entries {
		p.servicePort(e)
	}
	if p.incremental {
		p.editTopLevel()
	} else {
		p.closeTopLevel()
	}
	p.sweep()
	return p.finish()
}

// planner holds one BuildPlan's state: its input, the plan being built,
// the buffers the restore payload is assembled from, and the record of the
// Service whose port is being planned.
type planner struct {
	in          PlanInput
	plan        *Plan
	mark        string
	tree        bool
	incremental bool

	// Rules of the top-level chains that belong to no Service.
	headNAT, headFilter, tailNAT, tailFilter [][]string

	filterChains, filterRules, natChains, natRules lineBuffer
	// filterDelta and natDelta hold the rule-by-rule edits of the
	// top-level chains (incremental plans); natTail the tree and the
	// closing KUBE-SERVICES rules; natSweep the deletions of stale chains.
	filterDelta, natDelta, natTail, natSweep lineBuffer
	// countNC and countNR only count: the per-service chains of an
	// unchanged Service in a partial plan are written there.
	countNC, countNR lineBuffer

	localCIDR string
	// oldRecs are the changed Services' records in the previous plan.
	oldRecs map[types.NamespacedName]*svcRecord
	deleted sets.Set[string]

	// The Service whose port is being planned, and the rule sequence.
	rec     *svcRecord
	curPort proxy.ServicePortName
	seq     int
}

// portEntry is one Service port this plan covers, with its policy.
type portEntry struct {
	info *proxy.ServicePort
	pol  *proxy.PortPolicy
}

func newPlanner(in PlanInput) *planner {
	p := &planner{in: in, mark: in.MasqueradeMark, countNC: lineBuffer{off: true}, countNR: lineBuffer{off: true},
		oldRecs: map[types.NamespacedName]*svcRecord{}, deleted: sets.New[string]()}
	if p.mark == "" {
		p.mark = "0x4000"
	}
	dispatch := in.Dispatch
	if dispatch == "" {
		dispatch = DispatchLinear
	}
	p.tree = dispatch == DispatchTree
	p.plan = &Plan{dispatch: dispatch}
	p.fixedRules()
	prev := in.Prev
	p.incremental = in.Partial && prev != nil && prev.svcs != nil && prev.dispatch == dispatch && prev.fixed == p.plan.fixed
	for _, c := range in.LocalCIDRs {
		if c.Addr().Is6() == in.IPv6 {
			p.localCIDR = c.String()
			break
		}
	}
	return p
}

// fixedRules computes the rules of the top-level chains that belong to no
// Service. They only depend on the configuration and the node's
// addresses; when they are unchanged a partial plan leaves those chains
// alone.
func (p *planner) fixedRules() {
	in, mark := p.in, p.mark
	const npComment = `"kubernetes service nodeports; NOTE: this must be the last rule in this chain"`
	p.headNAT = append(p.headNAT,
		[]string{"-A", ChainPostrouting, "-m", "mark", "!", "--mark", mark + "/" + mark, "-j", "RETURN"},
		[]string{"-A", ChainPostrouting, "-j", "MARK", "--xor-mark", mark},
		[]string{"-A", ChainPostrouting, "-m", "comment", "--comment", `"kubernetes service traffic requiring SNAT"`, "-j", "MASQUERADE", "--random-fully"},
		[]string{"-A", ChainMarkMasq, "-j", "MARK", "--or-mark", mark})
	if !in.IPv6 && in.LocalhostNodePorts {
		p.headFilter = append(p.headFilter, []string{"-A", ChainKubeletFirewall, "-m", "comment", "--comment", `"block incoming localnet connections"`,
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
		p.tailNAT = append(p.tailNAT, append(append([]string{"-A", ChainServices, "-m", "comment", "--comment", npComment}, dst...), "-j", ChainNodePorts))
	} else {
		for _, ip := range in.NodePortIPs {
			if ip.Is6() != in.IPv6 {
				continue
			}
			if ip.IsLoopback() && (in.IPv6 || !in.LocalhostNodePorts) {
				continue
			}
			p.tailNAT = append(p.tailNAT, []string{"-A", ChainServices, "-m", "comment", "--comment", npComment, "-d", ip.String(), "-j", ChainNodePorts})
		}
	}
	if !in.ConntrackTCPLiberal {
		p.tailFilter = append(p.tailFilter, []string{"-A", ChainForward, "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP"})
	}
	p.tailFilter = append(p.tailFilter,
		[]string{"-A", ChainForward, "-m", "comment", "--comment", `"kubernetes forwarding rules"`,
			"-m", "mark", "--mark", mark + "/" + mark, "-j", "ACCEPT"},
		[]string{"-A", ChainForward, "-m", "comment", "--comment", `"kubernetes forwarding conntrack rule"`,
			"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"})
	var fixed strings.Builder
	for _, g := range [][][]string{p.headNAT, p.headFilter, p.tailNAT, p.tailFilter} {
		for _, r := range g {
			fixed.WriteString(strings.Join(r, " "))
			fixed.WriteByte('\n')
		}
		fixed.WriteByte('\n')
	}
	p.plan.fixed = fixed.String()
}

// countEndpoints counts the port's endpoints of this plan's family.
func (p *planner) countEndpoints(name proxy.ServicePortName) int {
	n := 0
	for _, ep := range p.in.Endpoints[name] {
		if ep.Addr.Is6() == p.in.IPv6 {
			n++
		}
	}
	return n
}

// selectPorts selects this family's share of the model: the policy of each
// port (which endpoints, which verdicts) comes from the proxy core. An
// incremental plan only looks at the ports of changed Services.
func (p *planner) selectPorts() ([]portEntry, int) {
	in := p.in
	policy := in.Policy
	if policy == nil {
		node := proxy.PolicyNode{Name: in.NodeName, Labels: in.NodeLabels, IP: in.NodeIP}
		policy = func(name proxy.ServicePortName, ipv6 bool) *proxy.PortPolicy {
			return proxy.NewPortPolicy(in.Services[name], in.Endpoints[name], node, ipv6)
		}
	}
	var names []proxy.ServicePortName
	if p.incremental {
		for name := range in.Services {
			if in.Changed.Has(name.NamespacedName) {
				names = append(names, name)
			}
		}
		sortPorts(names)
	} else {
		names = proxy.SortedServicePorts(in.Services)
	}
	var entries []portEntry
	numEndpoints := 0
	for _, name := range names {
		pol := policy(name, in.IPv6)
		if pol == nil {
			continue
		}
		entries = append(entries, portEntry{pol.Port, pol})
		numEndpoints += p.countEndpoints(name)
	}
	return entries, numEndpoints
}

// crossesLargeClusterThreshold reports whether an incremental plan with
// numEndpoints for the changed Services would move the cluster across the
// large-cluster threshold.
func (p *planner) crossesLargeClusterThreshold(numEndpoints int) bool {
	prev := p.in.Prev
	n := prev.NumEndpoints + numEndpoints
	for nn := range p.in.Changed {
		if r := prev.svcs[nn]; r != nil {
			n -= r.endpoints
		}
	}
	return (n > largeClusterEndpointsThreshold) != prev.LargeClusterMode
}

// recordOld keeps the changed Services' records of the previous plan.
func (p *planner) recordOld() {
	if prev := p.in.Prev; prev != nil && prev.svcs != nil {
		for nn := range p.in.Changed {
			if r := prev.svcs[nn]; r != nil {
				p.oldRecs[nn] = r
			}
		}
	}
}

// takeOver starts an incremental plan from the previous plan's state,
// minus what the changed Services held (they are planned again).
func (p *planner) takeOver(numPorts, numEndpoints int) {
	plan, prev := p.plan, p.in.Prev
	plan.Incremental = true
	plan.svcs, plan.ActiveNATChains, plan.tree = prev.svcs, prev.ActiveNATChains, prev.tree
	prev.svcs, prev.ActiveNATChains, prev.tree = nil, nil, nil
	plan.NumServices, plan.NumEndpoints = prev.NumServices, prev.NumEndpoints
	plan.NoLocalInternal, plan.NoLocalExternal = prev.NoLocalInternal, prev.NoLocalExternal
	plan.natTop, plan.filterTop, plan.svcLines = prev.natTop, prev.filterTop, prev.svcLines
	plan.LargeClusterMode = prev.LargeClusterMode
	for nn, r := range p.oldRecs {
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
	plan.NumServices += numPorts
	plan.NumEndpoints += numEndpoints
}

// startFull starts a full plan: the top-level chains and their fixed head
// rules.
func (p *planner) startFull(numPorts, numEndpoints int) {
	plan := p.plan
	plan.svcs = map[types.NamespacedName]*svcRecord{}
	plan.ActiveNATChains = sets.New[string]()
	plan.NumServices, plan.NumEndpoints = numPorts, numEndpoints
	plan.LargeClusterMode = plan.NumEndpoints > largeClusterEndpointsThreshold
	if p.tree {
		plan.tree = newDispatchTree(p.in.IPv6)
	}
	for _, c := range []string{ChainServices, ChainExternalServices, ChainForward, ChainNodePorts, ChainProxyFirewall} {
		p.filterChains.chain(c)
	}
	for _, c := range []string{ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq} {
		p.natChains.chain(c)
	}
	for _, r := range p.headNAT {
		p.natRules.write(r...)
	}
	if len(p.headFilter) > 0 {
		p.filterChains.chain(ChainKubeletFirewall)
		for _, r := range p.headFilter {
			p.filterRules.write(r...)
		}
	}
	plan.natTop = len(p.headNAT) + len(p.tailNAT)
	plan.filterTop = len(p.headFilter) + len(p.tailFilter)
	// Size the buffers once: roughly 160 bytes per nat line, about 4
	// lines per endpoint and 3 per service.
	if !p.in.Partial {
		p.natRules.b.Grow(160 * (4*plan.NumEndpoints + 3*plan.NumServices))
		p.natChains.b.Grow(40 * (plan.NumEndpoints + 2*plan.NumServices))
		p.filterRules.b.Grow(200 * plan.NumServices / 4)
	}
}

// top records one of the current port's rules in a top-level chain.
func (p *planner) top(nat bool, chain string, dst netip.Addr, words ...string) {
	p.rec.top = append(p.rec.top, topRule{nat: nat, chain: chain, dst: dst, args: strings.Join(words, " "), port: p.curPort, seq: p.seq})
	p.seq++
}

// activate records a per-service chain of the current Service.
func (p *planner) activate(c string) {
	p.plan.ActiveNATChains.Insert(c)
	p.rec.chains = append(p.rec.chains, c)
}

// servicePort plans one Service port: its rules in the top-level chains
// and its own chains.
func (p *planner) servicePort(e portEntry) {
	svc, pol, plan := e.info, e.pol, p.plan
	nn := svc.Name.NamespacedName
	changed := !p.in.Partial || p.in.Changed.Has(nn)
	p.rec = plan.svcs[nn]
	if p.rec == nil {
		p.rec = &svcRecord{}
		plan.svcs[nn] = p.rec
	}
	p.rec.ports++
	p.rec.endpoints += p.countEndpoints(svc.Name)
	p.curPort, p.seq = svc.Name, 0
	firstTop := len(p.rec.top)

	sc := &serviceChains{svc: svc, pol: pol, bal: proxy.NewBalance(svc, Schedulers), name: svc.Name.String(),
		proto: strings.ToLower(string(svc.Protocol)), port: strconv.Itoa(svc.Port), clusterIP: svc.ClusterIP(),
		epChains: make(map[*proxy.Endpoint]string, len(pol.Reachable)), clusterChain: ClusterPolicyChain(svc),
		localChain: LocalPolicyChain(svc), extChain: ExternalChain(svc), fwChain: FirewallChain(svc),
		hasInternal: pol.Internal.Verdict == proxy.VerdictAccept, hasExternal: pol.External.Verdict == proxy.VerdictAccept,
		masqueradeAll: p.in.MasqueradeAll, localCIDR: p.localCIDR, large: plan.LargeClusterMode}
	for _, ep := range pol.Reachable {
		sc.epChains[ep] = EndpointChain(svc, ep)
	}
	sc.internalChain, sc.externalPolicyChain = sc.clusterChain, sc.clusterChain
	if pol.Internal.Local {
		sc.internalChain = sc.localChain
	}
	if pol.External.Local {
		sc.externalPolicyChain = sc.localChain
	}
	// Without endpoints the LB IP is rejected in the filter table before
	// any firewall chain would be reached (kube-proxy's iptables layout
	// writes none).
	sc.usesFW = pol.Firewall && pol.HasEndpoints
	p.topRules(sc)
	for _, r := range p.rec.top[firstTop:] {
		if r.nat {
			plan.natTop++
		} else {
			plan.filterTop++
		}
		if p.incremental {
			continue // edited after all ports are planned
		}
		switch {
		case r.dispatched(p.tree):
			plan.tree.add(r)
		case r.nat:
			p.natRules.write("-A", r.chain, r.args)
		default:
			p.filterRules.write("-A", r.chain, r.args)
		}
	}

	// Per-service chains. For an unchanged Service of a partial plan
	// nothing is written: the same writer runs over buffers that only
	// count, so the line counts cannot drift from what is written.
	nc, nr := &p.natChains, &p.natRules
	if !changed {
		nc, nr = &p.countNC, &p.countNR
	}
	before := nr.lines
	writeServiceChains(nc, nr, sc, p.activate)
	p.rec.lines += nr.lines - before
	plan.svcLines += nr.lines - before
}

// topRules records the port's rules in the top-level chains: cluster IP,
// external IPs, load-balancer IPs, NodePort and health check node port,
// with the REJECT/DROP verdicts when there are no (local) endpoints.
func (p *planner) topRules(sc *serviceChains) {
	svc, name, proto, port := sc.svc, sc.name, sc.proto, sc.port
	hasEndpoints := sc.pol.HasEndpoints
	lbChain := sc.extChain
	if sc.usesFW {
		lbChain = sc.fwChain
	}
	var intTarget, intComment, extTarget, extComment string
	if !hasEndpoints {
		intTarget, intComment = "REJECT", fmt.Sprintf(`"%s has no endpoints"`, name)
		extTarget, extComment = intTarget, intComment
	} else {
		if !sc.hasInternal {
			intTarget, intComment = "DROP", fmt.Sprintf(`"%s has no local endpoints"`, name)
			p.rec.noLocalInt++
			p.plan.NoLocalInternal++
		}
		if !sc.hasExternal {
			extTarget, extComment = "DROP", fmt.Sprintf(`"%s has no local endpoints"`, name)
			p.rec.noLocalExt++
			p.plan.NoLocalExternal++
		}
	}
	match := func(ip netip.Addr) []string {
		return []string{"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port}
	}
	if sc.hasInternal {
		p.top(true, ChainServices, sc.clusterIP, append(append([]string{"-m", "comment", "--comment", fmt.Sprintf(`"%s cluster IP"`, name)},
			match(sc.clusterIP)...), "-j", sc.internalChain)...)
	} else {
		p.top(false, ChainServices, sc.clusterIP, append(append([]string{"-m", "comment", "--comment", intComment},
			match(sc.clusterIP)...), "-j", intTarget)...)
	}
	for _, ip := range svc.ExternalIPs {
		if hasEndpoints {
			p.top(true, ChainServices, ip, append(append([]string{"-m", "comment", "--comment", fmt.Sprintf(`"%s external IP"`, name)},
				match(ip)...), "-j", sc.extChain)...)
		}
		if !sc.hasExternal {
			p.top(false, ChainExternalServices, ip, append(append([]string{"-m", "comment", "--comment", extComment}, match(ip)...), "-j", extTarget)...)
		}
	}
	for _, ip := range svc.LoadBalancerVIPs {
		if hasEndpoints {
			p.top(true, ChainServices, ip, append(append([]string{"-m", "comment", "--comment", fmt.Sprintf(`"%s loadbalancer IP"`, name)},
				match(ip)...), "-j", lbChain)...)
		}
		if sc.usesFW {
			p.top(false, ChainProxyFirewall, ip, append(append([]string{"-m", "comment", "--comment",
				fmt.Sprintf(`"%s traffic not accepted by %s"`, name, sc.fwChain)}, match(ip)...), "-j", "DROP")...)
		}
	}
	if !sc.hasExternal {
		for _, ip := range svc.LoadBalancerVIPs {
			p.top(false, ChainExternalServices, ip, append(append([]string{"-m", "comment", "--comment", extComment}, match(ip)...), "-j", extTarget)...)
		}
	}
	if svc.NodePort != 0 {
		np := strconv.Itoa(svc.NodePort)
		if hasEndpoints {
			p.top(true, ChainNodePorts, netip.Addr{}, "-m", "comment", "--comment", name,
				"-m", proto, "-p", proto, "--dport", np, "-j", sc.extChain)
		}
		if !sc.hasExternal {
			p.top(false, ChainExternalServices, netip.Addr{}, "-m", "comment", "--comment", extComment,
				"-m", "addrtype", "--dst-type", "LOCAL", "-m", proto, "-p", proto, "--dport", np, "-j", extTarget)
		}
	}
	if svc.HealthCheckNodePort != 0 {
		p.top(false, ChainNodePorts, netip.Addr{}, "-m", "comment", "--comment", fmt.Sprintf(`"%s health check node port"`, name),
			"-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(svc.HealthCheckNodePort), "-j", "ACCEPT")
	}
}

// deleteChain flushes and deletes a stale per-service chain (once).
func (p *planner) deleteChain(c string) {
	if p.deleted.Has(c) {
		return
	}
	p.deleted.Insert(c)
	p.natChains.chain(c)
	p.natSweep.write("-X", c)
	p.plan.DeletedChains++
}

// editTopLevel edits the changed Services' rules of the top-level chains
// in place (incremental plans): it deletes the old ones by their exact
// text and adds the new ones. In KUBE-SERVICES they go to the top, ahead
// of the closing KUBE-NODEPORTS jump.
func (p *planner) editTopLevel() {
	changedNames := p.in.Changed.UnsortedList()
	slices.SortFunc(changedNames, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	var dirty []netip.Addr // tree leaves to rewrite
	var regroup []func()   // moves of changed rules in the tree
	for _, nn := range changedNames {
		old, cur, rewrite := p.topOf(nn)
		if !rewrite {
			continue // the kernel (and the tree) already hold them
		}
		for _, r := range old {
			switch {
			case r.dispatched(p.tree):
				dirty = append(dirty, r.dst)
			case r.nat:
				p.natDelta.write("-D", r.chain, r.args)
			default:
				p.filterDelta.write("-D", r.chain, r.args)
			}
		}
		if p.tree {
			regroup = append(regroup, func() {
				p.plan.tree.remove(nn, old)
				for _, r := range cur {
					if r.dispatched(p.tree) {
						p.plan.tree.add(r)
					}
				}
			})
		}
		for i := len(cur) - 1; i >= 0; i-- {
			r := cur[i]
			switch {
			case r.dispatched(p.tree):
				dirty = append(dirty, r.dst)
			case r.nat && r.chain == ChainServices:
				p.natDelta.write("-I", r.chain, "1", r.args)
			case r.nat:
				p.natDelta.write("-A", r.chain, r.args)
			default:
				p.filterDelta.write("-A", r.chain, r.args)
			}
		}
	}
	if p.tree && len(dirty) > 0 {
		p.rewriteTree(dirty, regroup)
	}
}

// topOf returns a changed Service's rules of the top-level chains before
// and after this plan, and whether they differ (the plan rewrites them).
func (p *planner) topOf(nn types.NamespacedName) (old, cur []topRule, differ bool) {
	if r := p.oldRecs[nn]; r != nil {
		old = r.top
	}
	if r := p.plan.svcs[nn]; r != nil {
		cur = r.top
	}
	return old, cur, !slices.EqualFunc(old, cur, topRule.same)
}

// rewriteTree rewrites KUBE-SERVICES (one jump per branch) and the tree's
// branches and leaves that hold a changed address.
func (p *planner) rewriteTree(dirty []netip.Addr, regroup []func()) {
	plan := p.plan
	p.natChains.chain(ChainServices)
	before := plan.tree.chainsOf(dirty)
	for _, f := range regroup {
		f()
	}
	plan.tree.write(&p.natChains, &p.natTail, dirty)
	for _, r := range p.tailNAT {
		p.natTail.write(r...)
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
			p.deleteChain(c)
		}
	}
}

// closeTopLevel writes the end of the top-level chains of a full plan: the
// tree (tree dispatch) and the fixed tail rules.
func (p *planner) closeTopLevel() {
	if p.tree {
		p.plan.tree.write(&p.natChains, &p.natTail, nil)
		for c := range p.plan.tree.chainsOf(nil) {
			p.plan.ActiveNATChains.Insert(c)
		}
	}
	for _, r := range p.tailNAT {
		p.natTail.write(r...)
	}
	for _, r := range p.tailFilter {
		p.filterRules.write(r...)
	}
}

// sweep deletes the chains the changed Services no longer use, and (given
// the existing chains) every chain of ours that nothing uses. In large
// clusters an incremental plan leaves them (unreferenced) to the next
// sweep, as kube-proxy does.
func (p *planner) sweep() {
	plan := p.plan
	if !(p.incremental && plan.LargeClusterMode) {
		for _, r := range p.oldRecs {
			for _, c := range r.chains {
				if !plan.ActiveNATChains.Has(c) {
					p.deleteChain(c)
				}
			}
		}
	}
	for _, c := range p.in.ExistingNATChains {
		if isServiceChainName(c) && !plan.ActiveNATChains.Has(c) {
			p.deleteChain(c)
		}
	}
}

// finish assembles the iptables-restore payload and the rule counts.
func (p *planner) finish() *Plan {
	var out bytes.Buffer
	out.Grow(p.filterChains.b.Len() + p.filterRules.b.Len() + p.filterDelta.b.Len() + p.natChains.b.Len() + p.natRules.b.Len() +
		p.natDelta.b.Len() + p.natTail.b.Len() + p.natSweep.b.Len() + 64)
	out.WriteString("*filter\n")
	writeChainsDescending(&out, p.filterChains.b.Bytes())
	out.Write(p.filterDelta.b.Bytes())
	out.Write(p.filterRules.b.Bytes())
	out.WriteString("COMMIT\n*nat\n")
	writeChainsDescending(&out, p.natChains.b.Bytes())
	out.Write(p.natDelta.b.Bytes())
	out.Write(p.natRules.b.Bytes())
	out.Write(p.natTail.b.Bytes())
	out.Write(p.natSweep.b.Bytes())
	out.WriteString("COMMIT\n")
	plan := p.plan
	plan.Data = out.Bytes()
	plan.FilterRules = plan.filterTop
	plan.NATRules = plan.natTop + plan.svcLines
	if plan.tree != nil {
		plan.NATRules += plan.tree.jumps()
	}
	return plan
}

// writeChainsDescending writes the chain declarations of one table in
// descending name order. Their order means nothing to iptables-restore,
// but iptables-nft (1.8.9, Debian 12's) keeps a table's chains in a list
// sorted by name and inserts each declared chain by walking that list from
// the smallest name: declared in ascending or hash (kube-proxy's) order,
// that is a walk over most of the list per chain, O(N²) string compares
// and cache misses; in descending order every insert is at the head
// (`go run ./bench/iptorder`: 20,000 chains restored in 5.4-7.6 s declared
// in hash order, 2.0-2.3 s in descending order; docs/proxy-modes.md).
func writeChainsDescending(out *bytes.Buffer, decls []byte) {
	lines := bytes.SplitAfter(decls, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	// Names are [A-Z0-9_-], all above the space that ends them, so
	// comparing whole lines orders them by name.
	slices.SortFunc(lines, func(a, b []byte) int { return bytes.Compare(b, a) })
	for _, l := range lines {
		out.Write(l)
	}
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
	slices.SortFunc(names, proxy.ServicePortName.Compare)
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
