package nftables

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
)

// input is what one sync plans from: the request (policies through
// req.Policy), whether it is full, and for a full sync the Service chains
// and affinity sets the kernel lists (which may hold leftovers of an
// earlier run).
type input struct {
	req                      *proxy.SyncRequest
	full, recreated          bool
	listedChains, listedSets []tobj
	now                      time.Time
	// localAddrs are the node's addresses --nodeport-addresses selects
	// from (full syncs).
	localAddrs []netip.Addr
}

// planSync returns the transaction that takes the table from k to the
// desired state of in, and updates k to that state (k must be a fresh
// newKnown() for a full sync). A partial sync plans only the Services in
// in.req.ChangedServices().
func (pl *planner) planSync(in input, k *known) *txn {
	tx := &txn{}
	for _, a := range k.spans {
		a.reuse()
	}
	if in.full {
		pl.setup(tx, in.localAddrs, in.recreated, in.listedChains, in.listedSets)
		seen := map[elemID]string{}
		names := proxy.SortedServicePorts(in.req.Services)
		for i := 0; i < len(names); {
			j := i
			for j < len(names) && names[j].NamespacedName == names[i].NamespacedName {
				j++
			}
			tx.ports = append(tx.ports, len(tx.ops))
			pl.syncService(tx, k, names[i].NamespacedName, pl.policies(in.req, names[i:j]), seen, in.now)
			i = j
		}
		pl.dropLeftovers(tx, k, in)
		// The late ops in Service-sized runs, so that a fresh table is
		// still written in parts (applyTx).
		tx.ops = slices.Grow(tx.ops, len(tx.late))
		for i := 0; i < len(tx.late); i += lateRun {
			tx.ports = append(tx.ports, len(tx.ops))
			tx.ops = append(tx.ops, tx.late[i:min(i+lateRun, len(tx.late))]...)
		}
		tx.late = nil
		return tx
	}
	changed := in.req.ChangedServices()
	if len(changed) == 0 {
		return tx
	}
	ports := in.req.ChangedPorts()
	nns := changed.UnsortedList()
	pols := make(map[types.NamespacedName][]*proxy.PortPolicy, len(nns))
	for _, nn := range nns {
		// A copy: the ports may be the service tracker's index.
		names := slices.Clone(ports[nn])
		slices.SortFunc(names, proxy.ServicePortName.Compare)
		pols[nn] = pl.policies(in.req, names)
	}
	slices.SortFunc(nns, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	tx.partial = true
	for _, nn := range nns {
		pl.syncService(tx, k, nn, pols[nn], nil, in.now)
	}
	tx.ops = append(tx.early, tx.ops...)
	tx.early = nil
	return tx
}

// portNamesOf returns the port names of pols.
func portNamesOf(pols []*proxy.PortPolicy) []proxy.ServicePortName {
	out := make([]proxy.ServicePortName, len(pols))
	for i, pol := range pols {
		out[i] = pol.Port.Name
	}
	return out
}

// policies returns the policies of names in this family (ports without a
// cluster IP of the family have none).
func (pl *planner) policies(req *proxy.SyncRequest, names []proxy.ServicePortName) []*proxy.PortPolicy {
	var out []*proxy.PortPolicy
	for _, n := range names {
		if pol := req.Policy(n, pl.cfg.IPv6); pol != nil {
			out = append(out, pol)
		}
	}
	return out
}

// desiredService is the union of the desired state of a Service's ports.
// The lookup maps are built by index, only when a sync must compare it
// with another state (a full sync's Services have no old state).
type desiredService struct {
	ports  []*desiredPort
	chains map[tobj]bool
	sets   map[tobj]bool
	elems  map[elemID]desiredElem
}

func (pl *planner) desiredService(pols []*proxy.PortPolicy, spans spanFunc) *desiredService {
	d := &desiredService{ports: make([]*desiredPort, 0, len(pols))}
	for _, pol := range pols {
		d.ports = append(d.ports, pl.desired(pol.Port.Name, pol, spans))
	}
	return d
}

// index builds d's lookup maps (once).
func (d *desiredService) index() {
	if d.elems != nil {
		return
	}
	d.chains, d.sets, d.elems = map[tobj]bool{}, map[tobj]bool{}, map[elemID]desiredElem{}
	for _, dp := range d.ports {
		for _, c := range dp.chains {
			d.chains[c] = true
		}
		for _, s := range dp.sets {
			d.sets[tobj{s.Table, s.Name}] = true
		}
		for _, e := range dp.elems {
			if _, dup := d.elems[e.id]; !dup {
				d.elems[e.id] = e
			}
		}
	}
}

// uniqueElems returns the elements of d's ports, each id once (the first
// one's value: two ports, or an externalIP that is also a LoadBalancer IP,
// may want the same element). Small Services are deduplicated without a
// map (a full sync makes one per Service otherwise).
func (d *desiredService) uniqueElems() []desiredElem {
	n := 0
	for _, dp := range d.ports {
		n += len(dp.elems)
	}
	if len(d.ports) == 1 && n <= 32 {
		es := d.ports[0].elems
		dup := false
		for i := 1; i < len(es) && !dup; i++ {
			dup = slices.ContainsFunc(es[:i], func(o desiredElem) bool { return o.id == es[i].id })
		}
		if !dup {
			return es
		}
	}
	out := make([]desiredElem, 0, n)
	if n > 32 {
		seen := make(map[elemID]bool, n)
		for _, dp := range d.ports {
			for _, e := range dp.elems {
				if !seen[e.id] {
					seen[e.id] = true
					out = append(out, e)
				}
			}
		}
		return out
	}
	for _, dp := range d.ports {
		for _, e := range dp.elems {
			if !slices.ContainsFunc(out, func(o desiredElem) bool { return o.id == e.id }) {
				out = append(out, e)
			}
		}
	}
	return out
}

// syncService rewrites one Service (pols empty: it is gone or has no port
// of this family): its chains are added and flushed and its rules
// written, its elements added, replaced or released, and the chains and
// affinity sets its old policies used and the new ones do not are flushed
// (then deleted a second later) or deleted. seen, in a full sync, holds
// the values of the elements written so far.
func (pl *planner) syncService(tx *txn, k *known, nn types.NamespacedName, pols []*proxy.PortPolicy, seen map[elemID]string, now time.Time) {
	// The old state first: its spans are read before the new state's are
	// allocated; a chain the new state does not use gives its span up.
	type use struct {
		m     tobj
		chain chainKey
	}
	var oldSpans, newSpans []use
	old := pl.desiredService(k.services[nn], func(m tobj, c chainKey, _ int) span {
		oldSpans = append(oldSpans, use{m, c})
		return k.spansOf(m).of(c)
	})
	d := pl.desiredService(pols, func(m tobj, c chainKey, n int) span {
		newSpans = append(newSpans, use{m, c})
		return k.spansOf(m).alloc(c, n)
	})
	for _, u := range oldSpans {
		if !slices.Contains(newSpans, u) {
			k.spansOf(u.m).release(u.chain)
		}
	}
	for _, dp := range d.ports {
		for _, c := range dp.chains {
			tx.add(&knftables.Chain{Table: c.table, Name: c.name})
			tx.flush(&knftables.Chain{Table: c.table, Name: c.name})
			delete(k.stale, c)
		}
		for _, s := range dp.sets {
			tx.add(s)
		}
		for _, u := range dp.maps {
			if id := (tobj{u.m.Table, u.m.Name}); !k.maps[id] {
				k.maps[id] = true
				tx.add(u.m)
				if u.rule != nil {
					tx.add(u.rule)
				}
			}
		}
		for _, r := range dp.rules {
			tx.add(r)
		}
	}
	if len(old.ports) > 0 {
		old.index()
	}
	for _, e := range d.uniqueElems() {
		pl.ensureElem(tx, k, e, old.elems, seen)
	}
	if len(old.ports) > 0 {
		d.index()
		pl.release(tx, k, old, d, now)
	}
	for _, dp := range old.ports {
		k.noLocalInternal -= b2i(dp.noLocalInternal)
		k.noLocalExternal -= b2i(dp.noLocalExternal)
	}
	for _, dp := range d.ports {
		k.noLocalInternal += b2i(dp.noLocalInternal)
		k.noLocalExternal += b2i(dp.noLocalExternal)
	}
	if len(pols) == 0 {
		delete(k.services, nn)
	} else {
		k.services[nn] = pols
	}
}

// lateRun is how many late ops (txn.late) form one run of a full sync's
// parts.
const lateRun = 1000

// ensureElem adds e unless the Service already held it with the same
// value, replacing it when the value changed or another Service wrote it
// with another value (a conflict in the Services' spec: the last one
// wins, as with nft).
func (pl *planner) ensureElem(tx *txn, k *known, e desiredElem, old map[elemID]desiredElem, seen map[elemID]string) {
	isMap := isMapName(e.id.set)
	if o, mine := old[e.id]; mine {
		if o.value != e.value || o.comment != e.comment {
			tx.deleteElem(e.id, isMap)
			tx.add(elementObject(e.id, e.value, e.comment, isMap))
		}
		return
	}
	if isSharedMap(e.id.set) {
		// A chain's own key: no other Service holds it, so no count is
		// kept (100,000 endpoints would be 100,000 entries).
		o := op{opAdd, elementObject(e.id, e.value, e.comment, isMap)}
		if seen != nil { // a full sync: after the rules (txn.late)
			tx.late = append(tx.late, o)
		} else {
			tx.ops = append(tx.ops, o)
		}
		return
	}
	refs := k.refs[e.id]
	k.refs[e.id] = refs + 1
	if refs == 0 {
		tx.add(elementObject(e.id, e.value, e.comment, isMap))
		if seen != nil {
			seen[e.id] = e.value
		}
		return
	}
	if prev, ok := seen[e.id]; (seen == nil && isMap) || (ok && prev != e.value) {
		tx.deleteElem(e.id, isMap)
		tx.add(elementObject(e.id, e.value, e.comment, isMap))
		if seen != nil {
			seen[e.id] = e.value
		}
	}
}

// release drops what old held and d no longer does.
func (pl *planner) release(tx *txn, k *known, old, d *desiredService, now time.Time) {
	for _, dp := range old.ports {
		for _, e := range dp.elems {
			if _, ok := d.elems[e.id]; ok {
				continue
			}
			d.elems[e.id] = e // released once
			if isSharedMap(e.id.set) {
				tx.deleteElem(e.id, true)
			} else if refs := k.refs[e.id] - 1; refs > 0 {
				k.refs[e.id] = refs
			} else {
				delete(k.refs, e.id)
				tx.deleteElem(e.id, isMapName(e.id.set))
			}
		}
		for _, c := range dp.chains {
			if _, pending := k.stale[c]; !d.chains[c] && !pending {
				tx.flush(&knftables.Chain{Table: c.table, Name: c.name})
				k.stale[c] = now
			}
		}
		for _, s := range dp.sets {
			if id := (tobj{s.Table, s.Name}); !d.sets[id] {
				d.sets[id] = true // deleted once
				tx.delete(&knftables.Set{Table: s.Table, Name: s.Name})
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dropLeftovers flushes (and marks stale) the listed Service chains no
// port uses, and deletes the listed affinity sets no port uses: leftovers
// of an earlier run or of a failed sync.
func (pl *planner) dropLeftovers(tx *txn, k *known, in input) {
	if !slices.ContainsFunc(in.listedChains, func(c tobj) bool { return isServiceChainName(c.name) }) &&
		!slices.ContainsFunc(in.listedSets, func(s tobj) bool { return strings.HasPrefix(s.name, affinitySetPrefix) }) {
		return // a fresh table
	}
	active, activeSets := sets.New[tobj](), sets.New[tobj]()
	for _, pols := range k.services {
		for _, pol := range pols {
			n := pl.names(pol.Port.Name, pol)
			direct := pl.direct(pol)
			for _, c := range []string{n.cluster, n.local, n.external} {
				if c == n.local || !direct {
					active.Insert(tobj{n.table, c})
				}
			}
			active.Insert(tobj{"", n.firewall})
			if pol.Port.SessionAffinity == v1.ServiceAffinityClientIP {
				for _, ep := range pol.Reachable {
					active.Insert(tobj{n.table, n.epChain(ep)})
					activeSets.Insert(tobj{n.table, n.affSet(ep)})
				}
			}
		}
	}
	for _, c := range in.listedChains {
		if isServiceChainName(c.name) && !active.Has(c) && pl.keepsTable(c.table) {
			if _, pending := k.stale[c]; !pending {
				tx.flush(&knftables.Chain{Table: c.table, Name: c.name})
				k.stale[c] = in.now
			}
		}
	}
	for _, s := range in.listedSets {
		if strings.HasPrefix(s.name, affinitySetPrefix) && !activeSets.Has(s) && pl.keepsTable(s.table) {
			tx.delete(&knftables.Set{Table: s.table, Name: s.name})
		}
	}
}

// staleDeletes returns the deletion of the chains that went stale over a
// second before now, and their names.
func staleDeletes(k *known, now time.Time) (*txn, []tobj) {
	tx := &txn{}
	var gone []tobj
	for c, t := range k.stale {
		if t.Before(now.Add(-time.Second)) {
			tx.delete(&knftables.Chain{Table: c.table, Name: c.name})
			gone = append(gone, c)
		}
	}
	slices.SortFunc(gone, func(a, b tobj) int { return cmp.Or(strings.Compare(a.table, b.table), strings.Compare(a.name, b.name)) })
	return tx, gone
}
