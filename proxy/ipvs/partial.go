package ipvs

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
)

// planState is a family's plan as the union of its ports' fragments, with a
// reference count for everything ports can share (an ipset entry, a bound
// address, a virtual server). A partial sync replaces the fragments of the
// changed Services only and turns the counts that cross zero into a delta,
// so its cost follows the change, not the number of Services.
type planState struct {
	// services holds the fragments of each Service's planned ports.
	services map[types.NamespacedName][]*fragment
	// sets: short set name -> entry -> references.
	sets     map[string]map[string]int
	bind     map[netip.Addr]int
	vs       map[Key]vsRef
	lbNoNode map[Key]int
	// noLocalInt/Ext: Service -> ports whose Local policy found no local
	// endpoint.
	noLocalInt, noLocalExt map[string]int
	iptables               []byte
	// local are the node's addresses the plan was made with
	// (PlanConfig.LocalAddrs).
	local []netip.Addr
}

// vsRef is a planned virtual server and how many ports plan it (one, but
// for conflicting Services).
type vsRef struct {
	ps   *PlannedService
	refs int32
}

// newPlanState is the state of a plan just applied in full.
func newPlanState(frags map[proxy.ServicePortName]*fragment, plan *Plan) *planState {
	st := &planState{services: map[types.NamespacedName][]*fragment{},
		sets: map[string]map[string]int{}, bind: map[netip.Addr]int{}, vs: make(map[Key]vsRef, len(frags)),
		lbNoNode: map[Key]int{}, noLocalInt: map[string]int{}, noLocalExt: map[string]int{}, iptables: plan.IPTables}
	t := &touched{}
	for name, f := range frags {
		st.services[name.NamespacedName] = append(st.services[name.NamespacedName], f)
		st.count(name.NamespacedName, f, +1, t)
	}
	return st
}

// touched records what a change touched, with its state before the change.
type touched struct {
	entries map[setEntry]bool // entry was present
	bind    map[netip.Addr]bool
	vs      map[Key]*PlannedService // nil: absent before
	// lbNoNode: a load-balancer exception came or went.
	lbNoNode bool
}

// count adds (sign +1) or removes (-1) the references of a port's fragment
// (of Service nn). When t holds maps, what the fragment touches is recorded
// there first.
func (st *planState) count(nn types.NamespacedName, f *fragment, sign int, t *touched) {
	for _, e := range f.entries {
		m := st.sets[e.set]
		if m == nil {
			m = map[string]int{}
			st.sets[e.set] = m
		}
		if t.entries != nil {
			if _, ok := t.entries[e]; !ok {
				t.entries[e] = m[e.entry] > 0
			}
		}
		if m[e.entry] += sign; m[e.entry] <= 0 {
			delete(m, e.entry)
		}
	}
	for _, ip := range f.bind {
		if t.bind != nil {
			if _, ok := t.bind[ip]; !ok {
				t.bind[ip] = st.bind[ip] > 0
			}
		}
		if st.bind[ip] += sign; st.bind[ip] <= 0 {
			delete(st.bind, ip)
		}
	}
	for i := range f.services {
		ps := &f.services[i]
		k := ps.VS.Key()
		r := st.vs[k]
		if t.vs != nil {
			if _, ok := t.vs[k]; !ok {
				t.vs[k] = r.ps
			}
		}
		r.refs += int32(sign)
		switch {
		case r.refs <= 0:
			delete(st.vs, k)
			continue
		case sign > 0:
			r.ps = ps
		}
		st.vs[k] = r
	}
	for _, k := range f.lbNoNodeAccess {
		t.lbNoNode = true
		if st.lbNoNode[k] += sign; st.lbNoNode[k] <= 0 {
			delete(st.lbNoNode, k)
		}
	}
	count := func(m map[string]int, on bool) {
		if !on {
			return
		}
		n := nn.String()
		if m[n] += sign; m[n] <= 0 {
			delete(m, n)
		}
	}
	count(st.noLocalInt, f.noLocalInt)
	count(st.noLocalExt, f.noLocalExt)
}

// delta is what a partial sync writes.
type delta struct {
	// add and del are ipset entries by the sets' short names.
	add, del         []setEntry
	bindAdd, bindDel []netip.Addr
	vs               []vsChange
	delVS            []VirtualServer
	// iptables is the new payload; nil when it did not change.
	iptables  []byte
	fallbacks []SchedulerFallback
}

// vsChange is a virtual server a partial sync brings to ps; old is what
// the kernel has (nil: none), same that nothing changed (the sync only
// visits it if it is draining).
type vsChange struct {
	ps   *PlannedService
	old  *VirtualServer
	same bool
}

// update replans the ports of the changed Services and returns the delta.
func (st *planState) update(cfg PlanConfig, req *proxy.SyncRequest, changed sets.Set[types.NamespacedName]) *delta {
	t := &touched{entries: map[setEntry]bool{}, bind: map[netip.Addr]bool{}, vs: map[Key]*PlannedService{}}
	nonEmpty := func(set string) bool { return len(st.sets[set]) > 0 || set == SetIPVSIPs && len(st.bind) > 0 }
	var wasNonEmpty [32]bool
	for i, s := range Sets {
		wasNonEmpty[i] = nonEmpty(s.Name)
	}
	d := &delta{}
	for nn := range changed {
		for _, f := range st.services[nn] {
			st.count(nn, f, -1, t)
		}
		delete(st.services, nn)
	}
	for nn, names := range req.ChangedPorts() {
		for _, name := range names {
			f := planPort(cfg, name, portPolicy(cfg, name, req.Services, req.Endpoints), req.Endpoints[name])
			if f == nil {
				continue
			}
			st.services[nn] = append(st.services[nn], f)
			st.count(nn, f, +1, t)
			if f.fallback != nil {
				d.fallbacks = append(d.fallbacks, *f.fallback)
			}
		}
	}
	for e, was := range t.entries {
		switch now := st.sets[e.set][e.entry] > 0; {
		case now && !was:
			d.add = append(d.add, e)
		case was && !now:
			d.del = append(d.del, e)
		}
	}
	for ip, was := range t.bind {
		switch now := st.bind[ip] > 0; {
		case now && !was:
			d.bindAdd = append(d.bindAdd, ip)
			d.add = append(d.add, setEntry{SetIPVSIPs, ip.String()})
		case was && !now:
			d.bindDel = append(d.bindDel, ip)
			d.del = append(d.del, setEntry{SetIPVSIPs, ip.String()})
		}
	}
	for k, was := range t.vs {
		now := st.vs[k].ps
		switch {
		case now == nil && was != nil:
			d.delVS = append(d.delVS, was.VS)
		case now != nil && was == nil:
			d.vs = append(d.vs, vsChange{ps: now})
		case now != nil:
			d.vs = append(d.vs, vsChange{ps: now, old: &was.VS, same: sameService(was, now)})
		}
	}
	redo := t.lbNoNode
	for i, s := range Sets {
		redo = redo || wasNonEmpty[i] != nonEmpty(s.Name)
	}
	if redo {
		var lb []Key
		for k := range st.lbNoNode {
			lb = append(lb, k)
		}
		if p := buildIPTables(cfg, nonEmpty, sortedKeys(lb)); !bytes.Equal(p, st.iptables) {
			d.iptables, st.iptables = p, p
		}
	}
	return d
}

// payload is the `ipset restore` payload of the delta's entries: per set,
// additions before deletions.
func (d *delta) payload(ipv6 bool) []byte {
	if len(d.add) == 0 && len(d.del) == 0 {
		return nil
	}
	var b strings.Builder
	for _, s := range Sets {
		n := SetName(s.Name, ipv6)
		for _, e := range sortedEntriesOf(d.add, s.Name) {
			fmt.Fprintf(&b, "add %s %s\n", n, e)
		}
		for _, e := range sortedEntriesOf(d.del, s.Name) {
			fmt.Fprintf(&b, "del %s %s\n", n, e)
		}
	}
	return []byte(b.String())
}

func sortedEntriesOf(es []setEntry, set string) []string {
	var out []string
	for _, e := range es {
		if e.set == set {
			out = append(out, e.entry)
		}
	}
	return sortedEntries(out)
}
