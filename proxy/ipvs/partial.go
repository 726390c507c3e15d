package ipvs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
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
//
// Of a virtual server the kernel has, the state keeps its settings and a
// digest of its real servers (keptVS), not the real servers: they are in
// the kernel, and a sync that needs them again (a conflicting Service
// takes over an address, real servers are draining) plans the port anew
// from its policy, which has not changed since (planned).
type planState struct {
	// services holds the fragments of each Service's planned ports.
	services map[types.NamespacedName][]*fragment
	// fresh are the fragments planned by the sync in progress, which
	// keep their planned virtual servers until it has applied them.
	fresh []*fragment
	// sets: short set name -> entry -> references.
	sets map[string]map[string]int
	bind map[netip.Addr]int
	// vs holds the port that plans each virtual server. Of ports that
	// plan the same one (an externalIP that is a node address, on another
	// Service's NodePort; the core resolves other shared destinations)
	// the winner of vsOwner.after is the one the kernel gets, as in a full
	// plan (lastOfEachKey), and the others wait in others.
	vs       map[Key]vsOwner
	others   map[Key][]vsOwner
	lbNoNode map[Key]int
	// noLocalInt/Ext: Service -> ports whose Local policy found no local
	// endpoint.
	noLocalInt, noLocalExt map[string]int
	iptables               []byte
	// local are the node's addresses the plan was made with
	// (PlanConfig.LocalAddrs).
	local []netip.Addr
}

// keptVS is what a planState keeps of a virtual server the kernel has.
type keptVS struct {
	vs VirtualServer
	// dests is destsDigest of its real servers.
	dests uint64
}

var digestSeed = maphash.MakeSeed()

// destsDigest is a digest of planned real servers (addresses, ports and
// weights, in order) with a seed of the process's own: two lists with
// the same digest are, but for a chance of 2^-64, the same list.
func destsDigest(ds []RealServer) uint64 {
	var h maphash.Hash
	h.SetSeed(digestSeed)
	var b [28]byte
	for _, d := range ds {
		a := d.Addr.As16()
		copy(b[:16], a[:])
		binary.LittleEndian.PutUint16(b[16:], d.Port)
		binary.LittleEndian.PutUint64(b[18:], uint64(d.Weight))
		h.Write(b[:26])
	}
	return h.Sum64()
}

// settle drops a fragment's planned real servers once the kernel has
// them.
func (f *fragment) settle() {
	if f.kept != nil || f.services == nil {
		return
	}
	f.kept = make([]keptVS, len(f.services))
	for i := range f.services {
		f.kept[i] = keptVS{f.services[i].VS, destsDigest(f.services[i].Dests)}
	}
	f.services = nil
}

// numVS is the number of virtual servers f plans.
func (f *fragment) numVS() int { return max(len(f.services), len(f.kept)) }

// vs is f's i-th virtual server and the digest of its real servers.
func (f *fragment) vs(i int32) (VirtualServer, uint64) {
	if f.kept != nil {
		return f.kept[i].vs, f.kept[i].dests
	}
	return f.services[i].VS, destsDigest(f.services[i].Dests)
}

// vsOwner is the i-th virtual server of a port's fragment.
type vsOwner struct {
	f *fragment
	i int32
}

// after reports whether o wins over p: an externalIP's or LoadBalancer
// IP's virtual server wins over a NodePort's on the same address and port
// (lastOfEachKey); else the one that sorts after (or, of one port, was
// planned after).
func (o vsOwner) after(p vsOwner) bool {
	if on, pn := o.i >= o.f.nodePorts, p.i >= p.f.nodePorts; on != pn {
		return pn
	}
	if c := o.f.name.Compare(p.f.name); c != 0 {
		return c > 0
	}
	return o.i > p.i
}

// newPlanState is the state of a plan just applied in full.
func newPlanState(frags map[proxy.ServicePortName]*fragment, plan *Plan) *planState {
	st := &planState{services: map[types.NamespacedName][]*fragment{},
		sets: map[string]map[string]int{}, bind: map[netip.Addr]int{}, vs: make(map[Key]vsOwner, len(frags)), others: map[Key][]vsOwner{},
		lbNoNode: map[Key]int{}, noLocalInt: map[string]int{}, noLocalExt: map[string]int{}, iptables: plan.IPTables}
	t := &touched{}
	for name, f := range frags {
		st.services[name.NamespacedName] = append(st.services[name.NamespacedName], f)
		st.count(name.NamespacedName, f, +1, t)
		f.settle()
	}
	return st
}

// settle drops the planned real servers of the fragments the last sync
// applied.
func (st *planState) settle() {
	for _, f := range st.fresh {
		f.settle()
	}
	st.fresh = nil
}

// planned is the virtual server o plans, with its real servers: planned
// anew from the port's policy when the state keeps only its digest. nil
// if the port no longer plans it (then the state is not the kernel's).
func (st *planState) planned(cfg PlanConfig, req *proxy.SyncRequest, o vsOwner) *PlannedService {
	if o.f.kept == nil {
		return &o.f.services[o.i]
	}
	name := o.f.name
	f := planPort(cfg, name, portPolicy(cfg, name, req.Services, req.Endpoints), req.Endpoints[name])
	if f == nil || int(o.i) >= len(f.services) || f.services[o.i].VS != o.f.kept[o.i].vs {
		return nil
	}
	return &f.services[o.i]
}

// touched records what a change touched, with its state before the change.
type touched struct {
	entries map[setEntry]bool // entry was present
	bind    map[netip.Addr]bool
	vs      map[Key]vsOwner // f nil: absent before
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
	for i := range int32(f.numVS()) {
		o := vsOwner{f, i}
		vs, _ := f.vs(i)
		k := vs.Key()
		own, ok := st.vs[k]
		if t.vs != nil {
			if _, seen := t.vs[k]; !seen {
				t.vs[k] = own
			}
		}
		others := st.others[k]
		switch {
		case sign > 0 && !ok:
			st.vs[k] = o
		case sign > 0 && o.after(own):
			st.others[k] = append(others, own)
			st.vs[k] = o
		case sign > 0:
			st.others[k] = append(others, o)
		case own != o:
			others = slices.DeleteFunc(others, func(m vsOwner) bool { return m == o })
		case len(others) == 0:
			delete(st.vs, k)
		default:
			j := 0
			for m := range others {
				if others[m].after(others[j]) {
					j = m
				}
			}
			st.vs[k] = others[j]
			others = slices.Delete(others, j, j+1)
		}
		if sign < 0 && len(others) == 0 {
			delete(st.others, k)
		} else if sign < 0 {
			st.others[k] = others
		}
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
// It fails when the state turns out not to be the kernel's (a full sync
// then starts over).
func (st *planState) update(cfg PlanConfig, req *proxy.SyncRequest, changed sets.Set[types.NamespacedName]) (*delta, error) {
	t := &touched{entries: map[setEntry]bool{}, bind: map[netip.Addr]bool{}, vs: map[Key]vsOwner{}}
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
			st.fresh = append(st.fresh, f)
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
		own, ok := st.vs[k]
		if !ok {
			if was.f != nil {
				vs, _ := was.f.vs(was.i)
				d.delVS = append(d.delVS, vs)
			}
			continue
		}
		ps := st.planned(cfg, req, own)
		if ps == nil {
			return nil, fmt.Errorf("virtual server %s: the plan kept of %s is not its policy's", k, own.f.name)
		}
		c := vsChange{ps: ps}
		if was.f != nil {
			old, oldDests := was.f.vs(was.i)
			c.old = &old
			c.same = was == own || old == ps.VS && oldDests == destsDigest(ps.Dests)
		}
		d.vs = append(d.vs, c)
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
	return d, nil
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
