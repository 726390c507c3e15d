package iptables

import (
	"bytes"
	"fmt"
	"net/netip"
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
	var skipRules lineBuffer // counts the lines of skipped chains
	mark := in.MasqueradeMark
	if mark == "" {
		mark = "0x4000"
	}
	plan := &Plan{ActiveNATChains: sets.New[string]()}

	for _, c := range []string{ChainServices, ChainExternalServices, ChainForward, ChainNodePorts, ChainProxyFirewall} {
		filterChains.chain(c)
	}
	for _, c := range []string{ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq} {
		natChains.chain(c)
	}
	natRules.write("-A", ChainPostrouting, "-m", "mark", "!", "--mark", mark+"/"+mark, "-j", "RETURN")
	natRules.write("-A", ChainPostrouting, "-j", "MARK", "--xor-mark", mark)
	natRules.write("-A", ChainPostrouting, "-m", "comment", "--comment", `"kubernetes service traffic requiring SNAT"`, "-j", "MASQUERADE", "--random-fully")
	natRules.write("-A", ChainMarkMasq, "-j", "MARK", "--or-mark", mark)
	if !in.IPv6 && in.LocalhostNodePorts {
		filterChains.chain(ChainKubeletFirewall)
		filterRules.write("-A", ChainKubeletFirewall, "-m", "comment", "--comment", `"block incoming localnet connections"`,
			"-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
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
	natRules.b.Grow(160 * (4*plan.NumEndpoints + 3*plan.NumServices))
	natChains.b.Grow(40 * (plan.NumEndpoints + 2*plan.NumServices))
	filterRules.b.Grow(200 * plan.NumServices / 4)

	var localCIDR string
	for _, c := range in.LocalCIDRs {
		if c.Addr().Is6() == in.IPv6 {
			localCIDR = c.String()
			break
		}
	}

	for _, e := range entries {
		svc := e.info
		proto := strings.ToLower(string(svc.Protocol))
		name := svc.Name.String()
		port := strconv.Itoa(svc.Port)
		clusterIP := svc.ClusterIP().String()

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

		// Cluster IP.
		if hasInternal {
			natRules.write("-A", ChainServices, "-m", "comment", "--comment", fmt.Sprintf(`"%s cluster IP"`, name),
				"-m", proto, "-p", proto, "-d", clusterIP, "--dport", port, "-j", internalChain)
		} else {
			filterRules.write("-A", ChainServices, "-m", "comment", "--comment", intComment,
				"-m", proto, "-p", proto, "-d", clusterIP, "--dport", port, "-j", intTarget)
		}
		// External IPs.
		for _, ip := range svc.ExternalIPs {
			if hasEndpoints {
				natRules.write("-A", ChainServices, "-m", "comment", "--comment", fmt.Sprintf(`"%s external IP"`, name),
					"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", extChain)
			}
			if !hasExternal {
				filterRules.write("-A", ChainExternalServices, "-m", "comment", "--comment", extComment,
					"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", extTarget)
			}
		}
		// Load-balancer ingress IPs.
		for _, ip := range svc.LoadBalancerVIPs {
			if hasEndpoints {
				natRules.write("-A", ChainServices, "-m", "comment", "--comment", fmt.Sprintf(`"%s loadbalancer IP"`, name),
					"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", lbChain)
			}
			if usesFW {
				filterRules.write("-A", ChainProxyFirewall, "-m", "comment", "--comment", fmt.Sprintf(`"%s traffic not accepted by %s"`, name, fwChain),
					"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", "DROP")
			}
		}
		if !hasExternal {
			for _, ip := range svc.LoadBalancerVIPs {
				filterRules.write("-A", ChainExternalServices, "-m", "comment", "--comment", extComment,
					"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", extTarget)
			}
		}
		// NodePort.
		if svc.NodePort != 0 {
			np := strconv.Itoa(svc.NodePort)
			if hasEndpoints {
				natRules.write("-A", ChainNodePorts, "-m", "comment", "--comment", name,
					"-m", proto, "-p", proto, "--dport", np, "-j", extChain)
			}
			if !hasExternal {
				filterRules.write("-A", ChainExternalServices, "-m", "comment", "--comment", extComment,
					"-m", "addrtype", "--dst-type", "LOCAL", "-m", proto, "-p", proto, "--dport", np, "-j", extTarget)
			}
		}
		// Health check node port.
		if svc.HealthCheckNodePort != 0 {
			filterRules.write("-A", ChainNodePorts, "-m", "comment", "--comment", fmt.Sprintf(`"%s health check node port"`, name),
				"-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(svc.HealthCheckNodePort), "-j", "ACCEPT")
		}

		// Per-service chains: skipped in a partial plan for unchanged
		// services (they are still counted, and still active).
		nc, nr := &natChains, &natRules
		if in.Partial && !in.Changed.Has(svc.Name.NamespacedName) {
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
		if hasInternal {
			args := []string{"-m", "comment", "--comment", fmt.Sprintf(`"%s cluster IP"`, name),
				"-m", proto, "-p", proto, "-d", clusterIP, "--dport", port}
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
	}

	// Sweep our chains that nothing uses any more.
	if in.ExistingNATChains != nil {
		for _, c := range in.ExistingNATChains {
			if isServiceChainName(c) && !plan.ActiveNATChains.Has(c) {
				natChains.chain(c)
				natRules.write("-X", c)
				plan.DeletedChains++
			}
		}
	}

	// NodePorts: the last rule of KUBE-SERVICES.
	const npComment = `"kubernetes service nodeports; NOTE: this must be the last rule in this chain"`
	if in.NodePortIPs == nil {
		dst := []string{"-m", "addrtype", "--dst-type", "LOCAL"}
		if in.IPv6 {
			dst = append(dst, "!", "-d", "::1/128")
		} else if !in.LocalhostNodePorts {
			dst = append(dst, "!", "-d", "127.0.0.0/8")
		}
		natRules.write(append(append([]string{"-A", ChainServices, "-m", "comment", "--comment", npComment}, dst...), "-j", ChainNodePorts)...)
	} else {
		for _, ip := range in.NodePortIPs {
			if ip.Is6() != in.IPv6 {
				continue
			}
			if ip.IsLoopback() && (in.IPv6 || !in.LocalhostNodePorts) {
				continue
			}
			natRules.write("-A", ChainServices, "-m", "comment", "--comment", npComment, "-d", ip.String(), "-j", ChainNodePorts)
		}
	}

	if !in.ConntrackTCPLiberal {
		filterRules.write("-A", ChainForward, "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP")
	}
	filterRules.write("-A", ChainForward, "-m", "comment", "--comment", `"kubernetes forwarding rules"`,
		"-m", "mark", "--mark", mark+"/"+mark, "-j", "ACCEPT")
	filterRules.write("-A", ChainForward, "-m", "comment", "--comment", `"kubernetes forwarding conntrack rule"`,
		"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")

	var out bytes.Buffer
	out.Grow(filterChains.b.Len() + filterRules.b.Len() + natChains.b.Len() + natRules.b.Len() + 64)
	out.WriteString("*filter\n")
	out.Write(filterChains.b.Bytes())
	out.Write(filterRules.b.Bytes())
	out.WriteString("COMMIT\n*nat\n")
	out.Write(natChains.b.Bytes())
	out.Write(natRules.b.Bytes())
	out.WriteString("COMMIT\n")
	plan.Data = out.Bytes()
	plan.FilterRules = filterRules.lines
	plan.NATRules = natRules.lines + skipRules.lines - plan.DeletedChains
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
