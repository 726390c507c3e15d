package proxy

import (
	"net/netip"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ServiceChangeTracker records Service changes as informer events arrive.
// Several events for one Service between two syncs collapse into one
// (previous, current) pair; a change that ends where it started disappears.
// It is safe for concurrent use.
type ServiceChangeTracker struct {
	mu    sync.Mutex
	items map[types.NamespacedName]*serviceChange
	// ports lists the ports of every Service applied so far (Apply keeps
	// it, so a partial sync finds a changed Service's ports without a scan
	// of the whole ServicePortMap).
	ports PortIndex
	// claims are the addresses every applied port claims (see claims.go);
	// raw holds, for the ports that lost a destination to another, the
	// port as its Service declares it (the map Apply updates holds them
	// without the lost addresses).
	claims addressClaims
	raw    map[ServicePortName]*ServicePort
}

// PortIndex lists the ports of each Service of a ServicePortMap.
type PortIndex map[types.NamespacedName][]ServicePortName

type serviceChange struct {
	previous ServicePortMap
	current  ServicePortMap
}

// NewServiceChangeTracker returns an empty tracker.
func NewServiceChangeTracker() *ServiceChangeTracker {
	return &ServiceChangeTracker{items: map[types.NamespacedName]*serviceChange{}, ports: PortIndex{},
		claims: addressClaims{}, raw: map[ServicePortName]*ServicePort{}}
}

// Update records that a Service went from previous to current (nil previous
// for an add, nil current for a delete). It returns true if a change is now
// pending for that Service, i.e. the caller should request a sync.
func (t *ServiceChangeTracker) Update(previous, current *v1.Service) bool {
	svc := current
	if svc == nil {
		svc = previous
	}
	if svc == nil {
		return false
	}
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	ch, ok := t.items[name]
	if !ok {
		ch = &serviceChange{previous: toPortMap(previous)}
		t.items[name] = ch
	}
	ch.current = toPortMap(current)
	if portMapsEqual(ch.previous, ch.current) {
		delete(t.items, name)
		return false
	}
	return true
}

// Pending returns the number of Services with unapplied changes.
func (t *ServiceChangeTracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.items)
}

// ServiceUpdateResult is what one Apply changed.
type ServiceUpdateResult struct {
	// UpdatedServices are the Services whose ports changed in any way.
	UpdatedServices sets.Set[types.NamespacedName]
	// DeletedUDPClusterIPs are the cluster IPs of UDP ports that no longer
	// exist; their conntrack entries are stale.
	DeletedUDPClusterIPs sets.Set[string]
	// Deleted are the ports that were removed (with their last state).
	Deleted []*ServicePort
	// Ports is the tracker's index of every Service's ports after this
	// Apply (not a copy: the next Apply changes it).
	Ports PortIndex
}

// Apply moves every pending change into m and clears the tracker. Where
// ports claim one destination, m holds the losers without it (see
// claims.go), and a change that moves a destination from one Service to
// another counts as a change of both.
func (t *ServiceChangeTracker) Apply(m ServicePortMap) ServiceUpdateResult {
	t.mu.Lock()
	items := t.items
	t.items = map[types.NamespacedName]*serviceChange{}
	t.mu.Unlock()
	res := ServiceUpdateResult{UpdatedServices: sets.New[types.NamespacedName](), DeletedUDPClusterIPs: sets.New[string](), Ports: t.ports}
	touched := map[netip.Addr]bool{}
	for name, ch := range items {
		res.UpdatedServices.Insert(name)
		if len(ch.current) == 0 {
			delete(t.ports, name)
		} else {
			ports := make([]ServicePortName, 0, len(ch.current))
			for pn := range ch.current {
				ports = append(ports, pn)
			}
			t.ports[name] = ports
		}
		for pn, p := range ch.previous {
			programmed, ok := m[pn]
			if ok {
				raw := programmed
				if r, lost := t.raw[pn]; lost {
					raw = r
				}
				t.claims.drop(raw, touched)
				delete(t.raw, pn)
				delete(m, pn)
			}
			if _, still := ch.current[pn]; still {
				continue
			}
			if !ok {
				programmed = p
			}
			res.Deleted = append(res.Deleted, programmed)
			if p.Protocol == v1.ProtocolUDP {
				for _, ip := range p.ClusterIPs {
					res.DeletedUDPClusterIPs.Insert(ip.String())
				}
			}
		}
		for pn, p := range ch.current {
			m[pn] = p
			t.claims.add(p, touched)
		}
	}
	// Every port that claims an address whose claims changed gets its
	// winners again.
	recheck := map[ServicePortName]*ServicePort{}
	for ip := range touched {
		for _, c := range t.claims[ip] {
			recheck[c.port.Name] = c.port
		}
	}
	for pn, raw := range recheck {
		want := t.claims.resolve(raw)
		if want != raw {
			t.raw[pn] = raw
		} else {
			delete(t.raw, pn)
		}
		if cur := m[pn]; cur != want {
			m[pn] = want
			if !cur.equal(want) {
				res.UpdatedServices.Insert(pn.NamespacedName)
			}
		}
	}
	return res
}

func toPortMap(svc *v1.Service) ServicePortMap {
	if svc == nil {
		return nil
	}
	m := ServicePortMap{}
	for _, p := range NewServicePorts(svc) {
		m[p.Name] = p
	}
	return m
}

func portMapsEqual(a, b ServicePortMap) bool {
	if len(a) != len(b) {
		return false
	}
	for n, p := range a {
		if !p.equal(b[n]) {
			return false
		}
	}
	return true
}
