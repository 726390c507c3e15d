package netpol

import (
	"sort"
	"strings"

	"sigs.k8s.io/knftables"
)

func ref[T any](v T) *T { return &v }

// baseChains are the table's hooks. forward sees pod traffic routed between
// nodes, routed from a pod to a Service and DNATed to a pod (prerouting's
// DNAT is done by then), and bridged between pods of one node (the node's
// bridge calls the inet hooks: bridge-nf-call-iptables). input sees a local
// pod's traffic to the node itself (egress only). Traffic the node itself
// sends (probes, a host-network client, the userspace proxy) goes through
// output, which is not hooked: it is always allowed.
func baseChains(tx *knftables.Transaction) {
	tx.Add(&knftables.Chain{Name: forwardChain, Type: ref(knftables.FilterType), Hook: ref(knftables.ForwardHook), Priority: ref(knftables.FilterPriority)})
	tx.Add(&knftables.Chain{Name: inputChain, Type: ref(knftables.FilterType), Hook: ref(knftables.InputHook), Priority: ref(knftables.FilterPriority)})
	tx.Flush(&knftables.Chain{Name: forwardChain})
	tx.Flush(&knftables.Chain{Name: inputChain})
	for _, c := range []string{forwardChain, inputChain} {
		tx.Add(&knftables.Rule{Chain: c, Rule: "ct state established,related accept"})
		tx.Add(&knftables.Rule{Chain: c, Rule: "meta mark set meta mark and " + clearEgressMark})
		// Neighbor discovery is IPv6's ARP: never judged (ARP does not
		// reach the inet hooks), or an isolated pod could not even resolve
		// the peers it may talk to.
		tx.Add(&knftables.Rule{Chain: c, Rule: "icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert, nd-redirect } accept"})
		tx.Add(&knftables.Rule{Chain: c, Rule: "ip saddr vmap @" + egressPodsMap})
		tx.Add(&knftables.Rule{Chain: c, Rule: "ip6 saddr vmap @" + egressPodsMap6})
	}
	tx.Add(&knftables.Rule{Chain: forwardChain, Rule: "ip daddr vmap @" + ingressPodsMap})
	tx.Add(&knftables.Rule{Chain: forwardChain, Rule: "ip6 daddr vmap @" + ingressPodsMap6})
}

func addSet(tx *knftables.Transaction, name string, d *setDef) {
	if d.isMap {
		kv := strings.SplitN(d.typ, " : ", 2)
		tx.Add(&knftables.Map{Name: name, Type: kv[0] + " : " + kv[1]})
		return
	}
	s := &knftables.Set{Name: name, Type: d.typ}
	if d.interval {
		s.Flags = []knftables.SetFlag{knftables.IntervalFlag}
	}
	if strings.Contains(d.typ, " . ") {
		// Concatenations need no flag; kept explicit for readers of `nft list`.
		s.Flags = nil
	}
	tx.Add(s)
}

func element(set string, d *setDef, e string) *knftables.Element {
	if d.isMap {
		kv := strings.SplitN(e, " : ", 2)
		return &knftables.Element{Map: set, Key: []string{kv[0]}, Value: []string{kv[1]}}
	}
	return &knftables.Element{Set: set, Key: strings.Split(e, " . ")}
}

// fullSync writes the whole table in one transaction: the table is created
// if missing, deleted, and created again, so nothing stale survives and no
// packet ever sees it half written.
func fullSync(tx *knftables.Transaction, st *State) {
	tx.Add(&knftables.Table{Comment: ref("svcnet netpol: NetworkPolicy enforcement")})
	tx.Delete(&knftables.Table{})
	tx.Add(&knftables.Table{Comment: ref("svcnet netpol: NetworkPolicy enforcement")})
	for _, name := range sortedKeys(st.Sets) {
		addSet(tx, name, st.Sets[name])
	}
	for _, name := range sortedKeys(st.Chains) {
		tx.Add(&knftables.Chain{Name: name})
	}
	for _, name := range sortedKeys(st.Chains) {
		for _, r := range st.Chains[name] {
			tx.Add(&knftables.Rule{Chain: name, Rule: r})
		}
	}
	for _, name := range sortedKeys(st.Sets) {
		for _, e := range sortedKeys(st.Sets[name].elems) {
			tx.Add(element(name, st.Sets[name], e))
		}
	}
	baseChains(tx)
}

// incrementalSync writes only what differs between prev (what the table
// holds) and st: new sets and chains, element additions and removals,
// rewritten chains whose rules changed, then removed chains and sets. It
// returns the number of operations (0: nothing to do).
func incrementalSync(tx *knftables.Transaction, prev, st *State) int {
	n := 0
	for _, name := range sortedKeys(st.Sets) {
		if _, ok := prev.Sets[name]; !ok {
			addSet(tx, name, st.Sets[name])
			n++
		}
	}
	for _, name := range sortedKeys(st.Chains) {
		if _, ok := prev.Chains[name]; !ok {
			tx.Add(&knftables.Chain{Name: name})
			n++
		}
	}
	// Elements: removals first (a merged range replaces the pieces it
	// covers, and interval sets refuse overlaps).
	for _, name := range sortedKeys(st.Sets) {
		d, old := st.Sets[name], prev.Sets[name]
		if old == nil {
			continue
		}
		for _, e := range sortedKeys(old.elems) {
			if !d.elems[e] {
				tx.Delete(element(name, d, e))
				n++
			}
		}
	}
	for _, name := range sortedKeys(st.Sets) {
		d, old := st.Sets[name], prev.Sets[name]
		for _, e := range sortedKeys(d.elems) {
			if old == nil || !old.elems[e] {
				tx.Add(element(name, d, e))
				n++
			}
		}
	}
	for _, name := range sortedKeys(st.Chains) {
		if old, ok := prev.Chains[name]; ok && equalRules(old, st.Chains[name]) {
			continue
		}
		tx.Flush(&knftables.Chain{Name: name})
		for _, r := range st.Chains[name] {
			tx.Add(&knftables.Rule{Chain: name, Rule: r})
		}
		n++
	}
	// Removed chains: flush them all first (they may jump to each other),
	// then delete them, then the sets their rules used.
	var gone []string
	for _, name := range sortedKeys(prev.Chains) {
		if _, ok := st.Chains[name]; !ok {
			gone = append(gone, name)
			tx.Flush(&knftables.Chain{Name: name})
		}
	}
	for _, name := range gone {
		tx.Delete(&knftables.Chain{Name: name})
		n++
	}
	for _, name := range sortedKeys(prev.Sets) {
		if _, ok := st.Sets[name]; !ok {
			if prev.Sets[name].isMap {
				tx.Delete(&knftables.Map{Name: name})
			} else {
				tx.Delete(&knftables.Set{Name: name})
			}
			n++
		}
	}
	return n
}

func equalRules(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
