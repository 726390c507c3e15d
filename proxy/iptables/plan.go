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
	// Incremental is true when the top-level chains were edited rule by
	// rule rather than rewritten.
	Incremental bool
	// top holds, per Service, its rules in the top-level chains (in the
	// order written); fixed holds the rules of those chains that belong to
	// no Service. A partial plan built on this one diffs against them.
	top      map[types.NamespacedName][]topRule
	fixed    string
	dispatch Dispatch
	// natTop and filterTop count the rules of the top-level chains;
	// treeChains and treeJumps are the KUBE-DST- chains and their jumps.
	natTop, filterTop int
	treeChains        []string
	treeJumps         int
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
	var skipRules lineBuffer // counts the lines of skipped chains
	mark := in.MasqueradeMark
	if mark == "" {
		mark = "0x4000"
	}
	dispatch := in.Dispatch
	if dispatch == "" {
		dispatch = DispatchLinear
	}
	tree := dispatch == DispatchTree
	plan := &Plan{ActiveNATChains: sets.New[string](), top: map[types.NamespacedName][]topRule{}, dispatch: dispatch}

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

	// An incremental plan edits the top-level chains rule by rule; it
	// needs the previous plan's record of them, in the same layout.
	prev := in.Prev
	incremental := in.Partial && prev != nil && prev.top != nil && prev.dispatch == dispatch && prev.fixed == plan.fixed
	var oldTop map[types.NamespacedName][]topRule
	if incremental {
		plan.Incremental = true
		plan.top = prev.top // taken over: unchanged Services keep their records
		prev.top = nil
		oldTop = make(map[types.NamespacedName][]topRule, len(in.Changed))
		for nn := range in.Changed {
			oldTop[nn] = plan.top[nn]
			delete(plan.top, nn)
		}
	} else {
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
	}

	// Select this family's share of the model: the policy of each port
	// (which endpoints, which verdicts) comes from the proxy core.
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
	var entries []svcEntry
	for _, name := range proxy.SortedServicePorts(in.Services) {
		pol := policy(name, in.IPv6)
		if pol == nil {
			continue
		}
		entries = append(entries, svcEntry{pol.Port, pol})
		for _, ep := range in.Endpoints[name] {
			if ep.Addr.Is6() == in.IPv6 {
				plan.NumEndpoints++
			}
		}
	}
	plan.NumServices = len(entries)
	plan.LargeClusterMode = plan.NumEndpoints > largeClusterEndpointsThreshold
	// Size the buffers once: roughly 160 bytes per nat line, about 4 lines
	// per endpoint and 3 per service.
	if !in.Partial {
		natRules.b.Grow(160 * (4*plan.NumEndpoints + 3*plan.NumServices))
		natChains.b.Grow(40 * (plan.NumEndpoints + 2*plan.NumServices))
		filterRules.b.Grow(200 * plan.NumServices / 4)
	}

	var localCIDR string
	for _, c := range in.LocalCIDRs {
		if c.Addr().Is6() == in.IPv6 {
			localCIDR = c.String()
			break
		}
	}

	// The Service rules of the top-level chains of the port being planned.
	var cur []topRule
	top := func(nat bool, chain string, dst netip.Addr, words ...string) {
		cur = append(cur, topRule{nat: nat, chain: chain, dst: dst, args: strings.Join(words, " ")})
	}
	var dt *dispatchTree
	svcChainLines := 0
	if tree && !incremental {
		dt = newDispatchTree(in.IPv6)
	}

	for _, e := range entries {
		svc := e.info
		changed := !in.Partial || in.Changed.Has(svc.Name.NamespacedName)
		proto := strings.ToLower(string(svc.Protocol))
		name := svc.Name.String()
		port := strconv.Itoa(svc.Port)
		clusterIP := svc.ClusterIP()

		pol := e.pol
		clusterEPs, localEPs, reachable, hasEndpoints := pol.Cluster, pol.Local, pol.Reachable, pol.HasEndpoints
		epChains := make(map[*proxy.Endpoint]string, len(reachable))
		for _, ep := range reachable {
			epChains[ep] = EndpointChain(svc, ep)
		}
		clusterChain := ClusterPolicyChain(svc)
		usesClusterChain := pol.UsesCluster
		localChain := LocalPolicyChain(svc)
		usesLocalChain := pol.UsesLocal

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
		usesExtChain := pol.Externally
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
				plan.NoLocalInternal++
			}
			if !hasExternal {
				extTarget, extComment = "DROP", fmt.Sprintf(`"%s has no local endpoints"`, name)
				plan.NoLocalExternal++
			}
		}

		// The Service's rules in the top-level chains: computed unless an
		// incremental plan keeps them as they are.
		cur = cur[:0]
		if changed || !incremental {
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
			nn := svc.Name.NamespacedName
			plan.top[nn] = append(plan.top[nn], cur...)
			if !incremental {
				for _, r := range cur {
					switch {
					case tree && r.nat && r.chain == ChainServices && r.dst.IsValid():
						dt.add(r)
					case r.nat:
						natRules.write("-A", r.chain, r.args)
					default:
						filterRules.write("-A", r.chain, r.args)
					}
				}
			}
		}

		// Per-service chains: skipped in a partial plan for unchanged
		// services (they are still counted, and still active).
		nc, nr := &natChains, &natRules
		if !changed {
			// Nothing is written: record the chains as active and count
			// the lines the chains hold, without formatting them.
			lines := 2 * len(reachable)
			if hasInternal && (in.MasqueradeAll || localCIDR != "") {
				lines++
			}
			if usesExtChain {
				plan.ActiveNATChains.Insert(extChain)
				if pol.MasqueradeExternal {
					lines++
				} else {
					lines += 2
					if localCIDR != "" {
						lines++
					}
				}
				if hasExternal {
					lines++
				}
			}
			if usesFW {
				plan.ActiveNATChains.Insert(fwChain)
				lines += len(pol.SourceRanges) + 1
				if pol.FirewallAllowsNode {
					lines += len(svc.LoadBalancerVIPs)
				}
			}
			perEP := 1
			if svc.SessionAffinity == v1.ServiceAffinityClientIP {
				perEP = 2
			}
			if usesClusterChain {
				plan.ActiveNATChains.Insert(clusterChain)
				lines += perEP * len(clusterEPs)
			}
			if usesLocalChain {
				plan.ActiveNATChains.Insert(localChain)
				lines += perEP * len(localEPs)
			}
			for _, c := range epChains {
				plan.ActiveNATChains.Insert(c)
			}
			skipRules.lines += lines
			continue
		}
		before := nr.lines
		if hasInternal {
			args := []string{"-m", "comment", "--comment", fmt.Sprintf(`"%s cluster IP"`, name),
				"-m", proto, "-p", proto, "-d", clusterIP.String(), "--dport", port}
			if in.MasqueradeAll {
				nr.write(append(append([]string{"-A", internalChain}, args...), "-j", ChainMarkMasq)...)
			} else if localCIDR != "" {
				nr.write(append(append([]string{"-A", internalChain}, args...), "!", "-s", localCIDR, "-j", ChainMarkMasq)...)
			}
		}
		if usesExtChain {
			nc.chain(extChain)
			plan.ActiveNATChains.Insert(extChain)
			if pol.MasqueradeExternal {
				nr.write("-A", extChain, "-m", "comment", "--comment", fmt.Sprintf(`"masquerade traffic for %s external destinations"`, name), "-j", ChainMarkMasq)
			} else {
				if localCIDR != "" {
					nr.write("-A", extChain, "-m", "comment", "--comment", fmt.Sprintf(`"pod traffic for %s external destinations"`, name),
						"-s", localCIDR, "-j", clusterChain)
				}
				nr.write("-A", extChain, "-m", "comment", "--comment", fmt.Sprintf(`"masquerade LOCAL traffic for %s external destinations"`, name),
					"-m", "addrtype", "--src-type", "LOCAL", "-j", ChainMarkMasq)
				nr.write("-A", extChain, "-m", "comment", "--comment", fmt.Sprintf(`"route LOCAL traffic for %s external destinations"`, name),
					"-m", "addrtype", "--src-type", "LOCAL", "-j", clusterChain)
			}
			if hasExternal {
				nr.write("-A", extChain, "-j", externalPolicyChain)
			}
		}
		if usesFW {
			nc.chain(fwChain)
			plan.ActiveNATChains.Insert(fwChain)
			args := []string{"-A", fwChain, "-m", "comment", "--comment", fmt.Sprintf(`"%s loadbalancer IP"`, name)}
			for _, r := range pol.SourceRanges {
				nr.write(append(append([]string{}, args...), "-s", r.String(), "-j", extChain)...)
			}
			if pol.FirewallAllowsNode {
				for _, ip := range svc.LoadBalancerVIPs {
					nr.write(append(append([]string{}, args...), "-s", ip.String(), "-j", extChain)...)
				}
			}
			nr.write("-A", fwChain, "-m", "comment", "--comment", fmt.Sprintf(`"other traffic to %s will be dropped by KUBE-PROXY-FIREWALL"`, name))
		}
		if usesClusterChain {
			nc.chain(clusterChain)
			plan.ActiveNATChains.Insert(clusterChain)
			writeServiceToEndpointRules(nr, svc, clusterChain, clusterEPs, epChains, plan.LargeClusterMode)
		}
		if usesLocalChain {
			nc.chain(localChain)
			plan.ActiveNATChains.Insert(localChain)
			writeServiceToEndpointRules(nr, svc, localChain, localEPs, epChains, plan.LargeClusterMode)
		}
		for _, ep := range reachable {
			epChain := epChains[ep]
			nc.chain(epChain)
			plan.ActiveNATChains.Insert(epChain)
			args := []string{"-A", epChain}
			if !plan.LargeClusterMode {
				args = append(args, "-m", "comment", "--comment", name)
			}
			nr.write(append(append([]string{}, args...), "-s", ep.IP(), "-j", ChainMarkMasq)...)
			if svc.SessionAffinity == v1.ServiceAffinityClientIP {
				args = append(args, "-m", "recent", "--name", epChain, "--set")
			}
			nr.write(append(args, "-m", proto, "-p", proto, "-j", "DNAT", "--to-destination", ep.String())...)
		}
		svcChainLines += nr.lines - before
	}

	// The top-level rules: counted from the previous plan plus the
	// changes, or from what was written.
	natTop, filterTop := 0, 0
	if incremental {
		natTop, filterTop = prev.natTop, prev.filterTop
		// Edit the changed Services' rules in place: delete the old ones
		// by their exact text, add the new ones. In KUBE-SERVICES they go
		// to the top, ahead of the closing KUBE-NODEPORTS jump.
		var dirty []netip.Addr // tree leaves to rewrite
		changedNames := in.Changed.UnsortedList()
		slices.SortFunc(changedNames, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		for _, nn := range changedNames {
			old, cur := oldTop[nn], plan.top[nn]
			if len(cur) == 0 {
				delete(plan.top, nn)
			}
			if slices.Equal(old, cur) {
				continue
			}
			for _, r := range old {
				switch {
				case tree && r.nat && r.chain == ChainServices && r.dst.IsValid():
					dirty = append(dirty, r.dst)
				case r.nat:
					natDelta.write("-D", r.chain, r.args)
				default:
					filterDelta.write("-D", r.chain, r.args)
				}
				if r.nat {
					natTop--
				} else {
					filterTop--
				}
			}
			for i := len(cur) - 1; i >= 0; i-- {
				r := cur[i]
				switch {
				case tree && r.nat && r.chain == ChainServices && r.dst.IsValid():
					dirty = append(dirty, r.dst)
				case r.nat && r.chain == ChainServices:
					natDelta.write("-I", r.chain, "1", r.args)
				case r.nat:
					natDelta.write("-A", r.chain, r.args)
				default:
					filterDelta.write("-A", r.chain, r.args)
				}
				if r.nat {
					natTop++
				} else {
					filterTop++
				}
			}
		}
		if tree && len(dirty) > 0 {
			// Regroup every Service's KUBE-SERVICES rules (in the
			// canonical order) and rewrite KUBE-SERVICES, the branches
			// and the leaves that hold a changed address.
			dt = newDispatchTree(in.IPv6)
			var last types.NamespacedName
			for i, e := range entries {
				nn := e.info.Name.NamespacedName
				if i > 0 && nn == last {
					continue
				}
				last = nn
				for _, r := range plan.top[nn] {
					if r.nat && r.chain == ChainServices && r.dst.IsValid() {
						dt.add(r)
					}
				}
			}
			natChains.chain(ChainServices)
			dt.write(&natChains, &natTail, dirty)
			for _, r := range tailNAT {
				natTail.write(r...)
			}
			plan.treeChains, plan.treeJumps = dt.chains(), dt.jumps
		} else if tree {
			plan.treeChains, plan.treeJumps = prev.treeChains, prev.treeJumps
		}
	} else {
		for _, rules := range plan.top {
			for _, r := range rules {
				if r.nat {
					natTop++
				} else {
					filterTop++
				}
			}
		}
		natTop += len(headNAT) + len(tailNAT)
		filterTop += len(headFilter) + len(tailFilter)
		if tree {
			dt.write(&natChains, &natTail, nil)
			plan.treeChains, plan.treeJumps = dt.chains(), dt.jumps
		}
		for _, r := range tailNAT {
			natTail.write(r...)
		}
		for _, r := range tailFilter {
			filterRules.write(r...)
		}
	}
	plan.natTop, plan.filterTop = natTop, filterTop
	for _, c := range plan.treeChains {
		plan.ActiveNATChains.Insert(c)
	}

	// Sweep our chains that nothing uses any more.
	if in.ExistingNATChains != nil {
		for _, c := range in.ExistingNATChains {
			if isServiceChainName(c) && !plan.ActiveNATChains.Has(c) {
				natChains.chain(c)
				natSweep.write("-X", c)
				plan.DeletedChains++
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
	plan.FilterRules = filterTop
	plan.NATRules = natTop + svcChainLines + skipRules.lines + plan.treeJumps
	return plan
}

// writeServiceToEndpointRules fills a KUBE-SVC-/KUBE-SVL- chain: affinity
// checks first (recent --rcheck), then one statistic rule per endpoint with
// probability 1/(n-i), the last unconditional.
func writeServiceToEndpointRules(nr *lineBuffer, svc *proxy.ServicePort, chain string, eps []*proxy.Endpoint, epChains map[*proxy.Endpoint]string, large bool) {
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
	for i, ep := range eps {
		args := []string{"-A", chain}
		if !large {
			args = append(args, "-m", "comment", "--comment", fmt.Sprintf(`"%s -> %s"`, name, ep.String()))
		}
		if i < n-1 {
			args = append(args, "-m", "statistic", "--mode", "random", "--probability", proxy.FormatProbability(n-i))
		}
		nr.write(append(args, "-j", epChains[ep])...)
	}
}
