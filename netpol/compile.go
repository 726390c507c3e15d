package netpol

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Names of the fixed objects in the table.
const (
	TableName      = "svcnet-netpol"
	forwardChain   = "forward"
	inputChain     = "input"
	ingressPodsMap = "ingress-pods"
	egressPodsMap  = "egress-pods"
	// The IPv6 twins of the pod maps: a dual-stack pod is in both families'
	// maps, each address jumping to the pod's one chain.
	ingressPodsMap6 = "ingress-pods6"
	egressPodsMap6  = "egress-pods6"
	// egressAllowedMark is the packet-mark bit a policy's egress chain sets
	// when it allows the packet; the pod's egress chain drops what no
	// policy marked. It is outside kube-proxy's bits (0x4000, 0x8000).
	egressAllowedMark = "0x00010000"
	clearEgressMark   = "0xfffeffff"
)

// Input is what one node's rules are computed from.
type Input struct {
	Node       string
	Policies   []*networkingv1.NetworkPolicy
	Pods       []*corev1.Pod
	Namespaces []*corev1.Namespace
}

// setDef is one named set or map and its elements (each element's key
// parts joined by " . ", then for maps " : " and the value).
type setDef struct {
	typ      string
	interval bool
	isMap    bool
	elems    map[string]bool
}

// State is the table's desired content: sets and maps with their elements,
// and the rules of every regular chain. The base chains are fixed.
type State struct {
	Sets   map[string]*setDef
	Chains map[string][]string
}

type pod struct {
	ns, name string
	labels   labels.Set
	ip       netip.Addr   // the first of ips: names the pod's chains
	ips      []netip.Addr // every address of the pod, one per family
	local    bool
	ports    []corev1.ContainerPort
}

// Compile computes the node's desired state. Policies only matter on a node
// where they select a local pod; pod IPs go into sets, so the rules a packet
// walks are those of the policies selecting its own source or destination
// pod, never all of them.
func Compile(in Input) (*State, error) {
	st := &State{Sets: map[string]*setDef{}, Chains: map[string][]string{}}
	st.Sets[ingressPodsMap] = &setDef{typ: "ipv4_addr : verdict", isMap: true, elems: map[string]bool{}}
	st.Sets[egressPodsMap] = &setDef{typ: "ipv4_addr : verdict", isMap: true, elems: map[string]bool{}}
	st.Sets[ingressPodsMap6] = &setDef{typ: "ipv6_addr : verdict", isMap: true, elems: map[string]bool{}}
	st.Sets[egressPodsMap6] = &setDef{typ: "ipv6_addr : verdict", isMap: true, elems: map[string]bool{}}

	nsLabels := map[string]labels.Set{}
	for _, ns := range in.Namespaces {
		nsLabels[ns.Name] = labels.Set(ns.Labels)
	}
	var pods []*pod
	for _, p := range in.Pods {
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		ips := podIPs(p)
		if len(ips) == 0 {
			continue
		}
		pp := &pod{ns: p.Namespace, name: p.Name, labels: labels.Set(p.Labels), ip: ips[0], ips: ips, local: p.Spec.NodeName == in.Node}
		for _, c := range p.Spec.Containers {
			pp.ports = append(pp.ports, c.Ports...)
		}
		pods = append(pods, pp)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].ip.Less(pods[j].ip) })

	policies := append([]*networkingv1.NetworkPolicy(nil), in.Policies...)
	sort.Slice(policies, func(i, j int) bool {
		if policies[i].Namespace != policies[j].Namespace {
			return policies[i].Namespace < policies[j].Namespace
		}
		return policies[i].Name < policies[j].Name
	})
	ingressOf := map[*pod][]string{}
	egressOf := map[*pod][]string{}
	for _, np := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			return nil, fmt.Errorf("networkpolicy %s/%s: %w", np.Namespace, np.Name, err)
		}
		var targets []*pod
		for _, p := range pods {
			if p.local && p.ns == np.Namespace && sel.Matches(p.labels) {
				targets = append(targets, p)
			}
		}
		if len(targets) == 0 {
			continue
		}
		id := policyID(np)
		ingress, egress := policyTypes(np)
		if ingress {
			chain := "pol-" + id + "-in"
			rules, err := compileRules(st, chain, np, true, ingressRules(np), targets, pods, nsLabels)
			if err != nil {
				return nil, err
			}
			st.Chains[chain] = rules
			for _, t := range targets {
				ingressOf[t] = append(ingressOf[t], chain)
			}
		}
		if egress {
			chain := "pol-" + id + "-eg"
			rules, err := compileRules(st, chain, np, false, egressRules(np), targets, pods, nsLabels)
			if err != nil {
				return nil, err
			}
			st.Chains[chain] = rules
			for _, t := range targets {
				egressOf[t] = append(egressOf[t], chain)
			}
		}
	}
	// Per-pod dispatch chains: one vmap lookup by address (of either
	// family) finds the chain that walks exactly the policies selecting
	// that pod.
	for p, chains := range ingressOf {
		name := "in-" + addrName(p.ip)
		var rules []string
		for _, c := range chains {
			rules = append(rules, "jump "+c)
		}
		st.Chains[name] = append(rules, "drop")
		for _, ip := range p.ips {
			st.Sets[familyName(ingressPodsMap, ip)].elems[ip.String()+" : jump "+name] = true
		}
	}
	for p, chains := range egressOf {
		name := "eg-" + addrName(p.ip)
		var rules []string
		for _, c := range chains {
			rules = append(rules, "jump "+c)
		}
		st.Chains[name] = append(rules, "meta mark and "+egressAllowedMark+" == 0 drop")
		for _, ip := range p.ips {
			st.Sets[familyName(egressPodsMap, ip)].elems[ip.String()+" : jump "+name] = true
		}
	}
	return st, nil
}

// familyName is the name of the IPv4 set or map, or its IPv6 twin
// (suffix 6) for an IPv6 address.
func familyName(name string, a netip.Addr) string {
	if a.Is6() {
		return name + "6"
	}
	return name
}

// rule is a direction-neutral view of an ingress or egress rule.
type rule struct {
	ports []networkingv1.NetworkPolicyPort
	peers []networkingv1.NetworkPolicyPeer
}

func ingressRules(np *networkingv1.NetworkPolicy) []rule {
	var out []rule
	for _, r := range np.Spec.Ingress {
		out = append(out, rule{r.Ports, r.From})
	}
	return out
}

func egressRules(np *networkingv1.NetworkPolicy) []rule {
	var out []rule
	for _, r := range np.Spec.Egress {
		out = append(out, rule{r.Ports, r.To})
	}
	return out
}

// compileRules writes one policy's chain for one direction. A packet that
// reaches the chain is to (ingress) or from (egress) a pod the policy
// selects; each rule line allows one peer set and port, so a rule with
// several ports is several lines. No rules: the chain allows nothing.
func compileRules(st *State, chain string, np *networkingv1.NetworkPolicy, ingress bool, rules []rule, targets, pods []*pod, nsLabels map[string]labels.Set) ([]string, error) {
	peerDir, verdict := "daddr", "meta mark set meta mark or "+egressAllowedMark+" return"
	if ingress {
		peerDir, verdict = "saddr", "accept"
	}
	var lines []string
	for i, r := range rules {
		// matches are the rule's peer matches: none (every peer), or one
		// per family, the IPv6 one only when some IPv6 peer exists (an
		// IPv4-only cluster's table stays as it was).
		matches := []string{""}
		if len(r.peers) > 0 {
			set := fmt.Sprintf("%s-%d", chain, i)
			ranges, err := peerRanges(np, r.peers, pods, nsLabels)
			if err != nil {
				return nil, err
			}
			elems, elems6 := map[string]bool{}, map[string]bool{}
			for _, rg := range ranges {
				if rg.lo.Is6() {
					elems6[rg.String()] = true
				} else {
					elems[rg.String()] = true
				}
			}
			st.Sets[set] = &setDef{typ: "ipv4_addr", interval: true, elems: elems}
			matches = []string{"ip " + peerDir + " @" + set + " "}
			if len(elems6) > 0 {
				st.Sets[set+"-6"] = &setDef{typ: "ipv6_addr", interval: true, elems: elems6}
				matches = append(matches, "ip6 "+peerDir+" @"+set+"-6 ")
			}
		}
		for _, match := range matches {
			ls, err := compilePorts(st, chain, i, match, verdict, ingress, r, targets, pods)
			if err != nil {
				return nil, err
			}
			lines = append(lines, ls...)
		}
	}
	return lines, nil
}

// compilePorts writes the lines of one rule for one peer match: one per
// port (or one for no ports), and one per family for named ports.
func compilePorts(st *State, chain string, i int, match, verdict string, ingress bool, r rule, targets, pods []*pod) ([]string, error) {
	var lines []string
	if len(r.ports) == 0 {
		return []string{match + verdict}, nil
	}
	named := map[string]bool{}
	named6 := map[string]bool{}
	for _, p := range r.ports {
		proto := "tcp"
		if p.Protocol != nil {
			proto = strings.ToLower(string(*p.Protocol))
		}
		switch {
		case p.Port == nil:
			lines = append(lines, match+"meta l4proto "+proto+" "+verdict)
		case p.Port.Type == 0: // intstr.Int
			port := strconv.Itoa(int(p.Port.IntVal))
			if p.EndPort != nil && *p.EndPort > p.Port.IntVal {
				port += "-" + strconv.Itoa(int(*p.EndPort))
			}
			lines = append(lines, match+"meta l4proto "+proto+" th dport "+port+" "+verdict)
		default:
			// A named port means, per destination pod, the number of its
			// container port of that name and protocol: ingress resolves
			// it on the selected pods, egress on any destination pod.
			cands := pods
			if ingress {
				cands = targets
			}
			for _, c := range cands {
				for _, cp := range c.ports {
					cpProto := "tcp"
					if cp.Protocol != "" {
						cpProto = strings.ToLower(string(cp.Protocol))
					}
					if cp.Name == p.Port.StrVal && cpProto == proto {
						for _, ip := range c.ips {
							e := ip.String() + " . " + proto + " . " + strconv.Itoa(int(cp.ContainerPort))
							if ip.Is6() {
								named6[e] = true
							} else {
								named[e] = true
							}
						}
					}
				}
			}
		}
	}
	// A peer match of one family needs only that family's line.
	if hasNamed(r.ports) && !strings.HasPrefix(match, "ip6 ") {
		set := fmt.Sprintf("%s-%d-named", chain, i)
		st.Sets[set] = &setDef{typ: "ipv4_addr . inet_proto . inet_service", elems: named}
		lines = append(lines, match+"ip daddr . meta l4proto . th dport @"+set+" "+verdict)
	}
	if hasNamed(r.ports) && len(named6) > 0 && !strings.HasPrefix(match, "ip ") {
		set := fmt.Sprintf("%s-%d-named6", chain, i)
		st.Sets[set] = &setDef{typ: "ipv6_addr . inet_proto . inet_service", elems: named6}
		lines = append(lines, match+"ip6 daddr . meta l4proto . th dport @"+set+" "+verdict)
	}
	return lines, nil
}

func hasNamed(ports []networkingv1.NetworkPolicyPort) bool {
	for _, p := range ports {
		if p.Port != nil && p.Port.Type != 0 {
			return true
		}
	}
	return false
}

// peerRanges is the union of a rule's peers as merged ranges of each family: the
// addresses of the pods the selectors pick (namespaceSelector alone: every
// pod of those namespaces; podSelector alone: pods of the policy's
// namespace; both: those pods of those namespaces) and ipBlocks minus
// their excepts.
func peerRanges(np *networkingv1.NetworkPolicy, peers []networkingv1.NetworkPolicyPeer, pods []*pod, nsLabels map[string]labels.Set) ([]ipRange, error) {
	var rs []ipRange
	for _, peer := range peers {
		if peer.IPBlock != nil {
			rs = append(rs, blockRanges(peer.IPBlock)...)
			continue
		}
		podSel := labels.Everything()
		if peer.PodSelector != nil {
			s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
			if err != nil {
				return nil, fmt.Errorf("networkpolicy %s/%s: %w", np.Namespace, np.Name, err)
			}
			podSel = s
		}
		var nsSel labels.Selector
		if peer.NamespaceSelector != nil {
			s, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
			if err != nil {
				return nil, fmt.Errorf("networkpolicy %s/%s: %w", np.Namespace, np.Name, err)
			}
			nsSel = s
		}
		for _, p := range pods {
			if nsSel == nil && p.ns != np.Namespace {
				continue
			}
			if nsSel != nil && !nsSel.Matches(nsLabels[p.ns]) {
				continue
			}
			if podSel.Matches(p.labels) {
				for _, a := range p.ips {
					rs = append(rs, ipRange{a, a})
				}
			}
		}
	}
	return mergeRanges(rs), nil
}

// ipRange is an inclusive range of addresses of one family.
type ipRange struct{ lo, hi netip.Addr }

func (r ipRange) String() string {
	if r.lo == r.hi {
		return r.lo.String()
	}
	return r.lo.String() + "-" + r.hi.String()
}

// blockRanges is an ipBlock's CIDR minus its excepts (excepts of the other
// family cut nothing; validation refuses them anyway).
func blockRanges(b *networkingv1.IPBlock) []ipRange {
	pfx, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return nil
	}
	rs := []ipRange{prefixRange(pfx.Masked())}
	for _, e := range b.Except {
		ep, err := netip.ParsePrefix(e)
		if err != nil || ep.Addr().Is4() != pfx.Addr().Is4() {
			continue
		}
		cut := prefixRange(ep.Masked())
		var next []ipRange
		for _, r := range rs {
			if cut.hi.Less(r.lo) || r.hi.Less(cut.lo) {
				next = append(next, r)
				continue
			}
			if r.lo.Less(cut.lo) {
				next = append(next, ipRange{r.lo, cut.lo.Prev()})
			}
			if cut.hi.Less(r.hi) {
				next = append(next, ipRange{cut.hi.Next(), r.hi})
			}
		}
		rs = next
	}
	return rs
}

// prefixRange is p's first and last address.
func prefixRange(p netip.Prefix) ipRange {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	hi, _ := netip.AddrFromSlice(b)
	return ipRange{p.Addr(), hi}
}

// mergeRanges sorts and merges overlapping and adjacent ranges of each
// family, so that an interval set never holds two elements that overlap
// (nft refuses that).
func mergeRanges(rs []ipRange) []ipRange {
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo.Less(rs[j].lo) })
	var out []ipRange
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].lo.Is4() == r.lo.Is4() {
			last := &out[n-1]
			// Adjacent: the address after last.hi (invalid past the end of
			// the address space, where nothing can follow) is r.lo.
			if next := last.hi.Next(); !last.hi.Less(r.lo) || (next.IsValid() && next == r.lo) {
				if last.hi.Less(r.hi) {
					last.hi = r.hi
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// podIPs are the pod's addresses, one per family, status.podIP first.
func podIPs(p *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	for _, s := range append([]corev1.PodIP{{IP: p.Status.PodIP}}, p.Status.PodIPs...) {
		a, err := netip.ParseAddr(s.IP)
		if err != nil {
			continue
		}
		a = a.Unmap()
		if !slices.ContainsFunc(out, func(b netip.Addr) bool { return b.Is4() == a.Is4() }) {
			out = append(out, a)
		}
	}
	return out
}

func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 { // not defaulted (a client that bypassed the apiserver's defaulting)
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// policyID names a policy's chains and sets: a hash of namespace/name
// (chain names are limited in length; the hash keeps them short and stable).
func policyID(np *networkingv1.NetworkPolicy) string {
	h := fnv.New64a()
	h.Write([]byte(np.Namespace + "/" + np.Name))
	return fmt.Sprintf("%016x", h.Sum64())[:12]
}

// addrName is an address as a chain-name part ("10-244-1-5", "fd00_10_244_1__5").
func addrName(a netip.Addr) string {
	return strings.NewReplacer(".", "-", ":", "_").Replace(a.String())
}
