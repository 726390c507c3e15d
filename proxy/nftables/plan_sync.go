package nftables

import (
	"slices"
	"strings"
	"time"

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
	listedChains, listedSets []string
	now                      time.Time
}

// planSync returns the transaction that takes the table from k to the
// desired state of in, and updates k to that state (k must be a fresh
// newKnown() for a full sync).
func (pl *planner) planSync(in input, k *known) *txn {
	tx := &txn{}
	if in.full {
		pl.setup(tx, in.req.Node, in.recreated)
		for _, name := range proxy.SortedServicePorts(in.req.Services) {
			tx.ports = append(tx.ports, len(tx.ops))
			pl.syncPort(tx, k, name, in.req.Policy(name, pl.cfg.IPv6), in.now)
		}
		pl.dropLeftovers(tx, k, in)
		return tx
	}
	changed := in.req.ChangedServices()
	var names []proxy.ServicePortName
	for nn := range changed {
		names = append(names, k.byName[nn]...)
	}
	if len(changed) > 0 {
		for name := range in.req.Services {
			if changed.Has(name.NamespacedName) {
				names = append(names, name)
			}
		}
	}
	slices.SortFunc(names, comparePorts)
	names = slices.Compact(names)
	for _, name := range names {
		var pol *proxy.PortPolicy
		if _, ok := in.req.Services[name]; ok {
			pol = in.req.Policy(name, pl.cfg.IPv6)
		}
		pl.syncPort(tx, k, name, pol, in.now)
	}
	return tx
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

// syncPort rewrites one Service port (pol nil: it is gone): its chains are
// added and flushed and its rules written, its elements added, replaced
// or released, and chains and affinity sets it no longer uses flushed
// (then deleted a second later) or deleted.
func (pl *planner) syncPort(tx *txn, k *known, name proxy.ServicePortName, pol *proxy.PortPolicy, now time.Time) {
	old := k.ports[name]
	var d *desiredPort
	if pol != nil {
		d = pl.desired(name, pol)
	} else {
		d = &desiredPort{}
	}
	for _, c := range d.chains {
		tx.add(&knftables.Chain{Name: c})
		tx.flush(&knftables.Chain{Name: c})
		delete(k.stale, c)
	}
	for _, s := range d.sets {
		tx.add(s)
	}
	for _, r := range d.rules {
		tx.add(r)
	}
	nk := &portKnown{noLocalInternal: d.noLocalInternal, noLocalExternal: d.noLocalExternal}
	for _, s := range d.sets {
		nk.affinity = append(nk.affinity, s.Name)
	}
	nk.chains = d.chains
	want := make(map[elemID]bool, len(d.elems))
	for _, e := range d.elems {
		if want[e.id] {
			continue
		}
		want[e.id] = true
		nk.elems = append(nk.elems, e.id)
		pl.ensureElem(tx, k, e, old != nil && slices.Contains(old.elems, e.id))
	}
	if old != nil {
		pl.release(tx, k, old, nk, want, now)
	}
	pl.record(k, name, old, nk, pol != nil)
}

// ensureElem adds e, or replaces it when its value changed; mine says
// this port already held a reference.
func (pl *planner) ensureElem(tx *txn, k *known, e desiredElem, mine bool) {
	ref := k.elems[e.id]
	isMap := isMapName(e.id.set)
	switch {
	case ref == nil:
		tx.add(elementObject(e.id, e.value, e.comment, isMap))
		k.elems[e.id] = &elemRef{value: e.value, refs: 1}
		return
	case ref.value != e.value:
		tx.delete(elementObject(e.id, "", "", isMap))
		tx.add(elementObject(e.id, e.value, e.comment, isMap))
		ref.value = e.value
	}
	if !mine {
		ref.refs++
	}
}

// release drops what old held and nk no longer does.
func (pl *planner) release(tx *txn, k *known, old, nk *portKnown, want map[elemID]bool, now time.Time) {
	for _, id := range old.elems {
		if want[id] {
			continue
		}
		if ref := k.elems[id]; ref != nil {
			if ref.refs--; ref.refs <= 0 {
				tx.delete(elementObject(id, "", "", isMapName(id.set)))
				delete(k.elems, id)
			}
		}
	}
	for _, c := range old.chains {
		if !slices.Contains(nk.chains, c) {
			if _, pending := k.stale[c]; !pending {
				tx.flush(&knftables.Chain{Name: c})
				k.stale[c] = now
			}
		}
	}
	for _, s := range old.affinity {
		if !slices.Contains(nk.affinity, s) {
			tx.delete(&knftables.Set{Name: s})
		}
	}
}

// record stores nk as the port's known state (or forgets the port).
func (pl *planner) record(k *known, name proxy.ServicePortName, old, nk *portKnown, exists bool) {
	if old != nil {
		k.noLocalInternal -= b2i(old.noLocalInternal)
		k.noLocalExternal -= b2i(old.noLocalExternal)
	}
	nn := name.NamespacedName
	if !exists {
		delete(k.ports, name)
		k.byName[nn] = slices.DeleteFunc(k.byName[nn], func(n proxy.ServicePortName) bool { return n == name })
		if len(k.byName[nn]) == 0 {
			delete(k.byName, nn)
		}
		return
	}
	k.noLocalInternal += b2i(nk.noLocalInternal)
	k.noLocalExternal += b2i(nk.noLocalExternal)
	if old == nil {
		k.byName[nn] = append(k.byName[nn], name)
	}
	k.ports[name] = nk
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
	active, activeSets := sets.New[string](), sets.New[string]()
	for _, pk := range k.ports {
		active.Insert(pk.chains...)
		activeSets.Insert(pk.affinity...)
	}
	for _, c := range in.listedChains {
		if isServiceChainName(c) && !active.Has(c) {
			if _, pending := k.stale[c]; !pending {
				tx.flush(&knftables.Chain{Name: c})
				k.stale[c] = in.now
			}
		}
	}
	for _, s := range in.listedSets {
		if strings.HasPrefix(s, affinitySetPrefix) && !activeSets.Has(s) {
			tx.delete(&knftables.Set{Name: s})
		}
	}
}

// staleDeletes returns the deletion of the chains that went stale over a
// second before now, and their names.
func staleDeletes(k *known, now time.Time) (*txn, []string) {
	tx := &txn{}
	var gone []string
	for c, t := range k.stale {
		if t.Before(now.Add(-time.Second)) {
			tx.delete(&knftables.Chain{Name: c})
			gone = append(gone, c)
		}
	}
	slices.Sort(gone)
	return tx, gone
}
