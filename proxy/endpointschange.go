package proxy

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy/lb"
)

// EndpointsChangeTracker records EndpointSlice changes as informer events
// arrive. It keeps the current slices of every Service and, per Service with
// pending changes, the endpoints that were last applied, so Apply can report
// exactly which endpoints disappeared (for conntrack cleanup) and which UDP
// ports went from no endpoints to some. It is safe for concurrent use.
type EndpointsChangeTracker struct {
	nodeName string

	mu sync.Mutex
	// slices holds the current slices per Service, sorted by name (a
	// Service has one or a few: a list costs a word each, a map hundreds
	// of bytes).
	slices map[types.NamespacedName][]*discovery.EndpointSlice
	// applied holds, per Service with pending changes, its endpoints as of
	// the last Apply.
	applied map[types.NamespacedName]EndpointsMap
	// triggers collects last-change-trigger-time annotations per Service,
	// by the IP family of the slice that carried them (FamilyIndex).
	triggers [2]map[types.NamespacedName][]time.Time
	// start is when the tracker was made: as kube-proxy's tracker, it
	// ignores trigger times from before it (the initial list's slices
	// carry the times of changes made before the proxy ran, which measure
	// nothing of its own).
	start time.Time
}

// Started returns when the tracker was made (trigger times before it are
// ignored).
func (t *EndpointsChangeTracker) Started() time.Time { return t.start }

// NewEndpointsChangeTracker returns a tracker that marks endpoints on
// nodeName as local.
func NewEndpointsChangeTracker(nodeName string) *EndpointsChangeTracker {
	return &EndpointsChangeTracker{
		nodeName: nodeName,
		slices:   map[types.NamespacedName][]*discovery.EndpointSlice{},
		applied:  map[types.NamespacedName]EndpointsMap{},
		triggers: newTriggers(),
		start:    time.Now(),
	}
}

// EndpointSliceUpdate records that slice was added or updated (removed
// false) or deleted (removed true). Slices without the
// kubernetes.io/service-name label and slices of an unsupported address type
// (FQDN) are ignored. It returns true if a change is now pending.
func (t *EndpointsChangeTracker) EndpointSliceUpdate(slice *discovery.EndpointSlice, removed bool) bool {
	if slice == nil {
		return false
	}
	if slice.AddressType != discovery.AddressTypeIPv4 && slice.AddressType != discovery.AddressTypeIPv6 {
		return false
	}
	svcName := slice.Labels[discovery.LabelServiceName]
	if svcName == "" {
		return false
	}
	name := types.NamespacedName{Namespace: slice.Namespace, Name: svcName}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, pending := t.applied[name]; !pending {
		t.applied[name] = t.endpointsLocked(name)
	}
	cur := t.slices[name]
	i, found := slices.BinarySearchFunc(cur, slice.Name, func(s *discovery.EndpointSlice, n string) int { return strings.Compare(s.Name, n) })
	if removed {
		if found {
			cur = slices.Delete(cur, i, i+1)
		}
		// A deleted slice's trigger time is that of its last update,
		// not of the deletion: as kube-proxy, the Service's pending
		// trigger times are dropped rather than measured.
		delete(t.triggers[0], name)
		delete(t.triggers[1], name)
		if len(cur) == 0 {
			delete(t.slices, name)
		} else {
			t.slices[name] = cur
		}
	} else {
		if found {
			cur[i] = slice
		} else {
			t.slices[name] = slices.Insert(cur, i, slice)
		}
		if s, ok := slice.Annotations[AnnotationLastChangeTriggerTime]; ok {
			if ts, err := time.Parse(time.RFC3339Nano, s); err == nil && ts.After(t.start) {
				fam := FamilyIndex(slice.AddressType == discovery.AddressTypeIPv6)
				t.triggers[fam][name] = append(t.triggers[fam][name], ts)
			}
		}
	}
	if endpointsMapsEqual(t.applied[name], t.endpointsLocked(name)) {
		delete(t.applied, name)
		delete(t.triggers[0], name)
		delete(t.triggers[1], name)
		return false
	}
	return true
}

// Pending returns the number of Services with unapplied endpoint changes.
func (t *EndpointsChangeTracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.applied)
}

// ServiceEndpoint names one endpoint of one service port.
type ServiceEndpoint struct {
	ServicePortName ServicePortName
	Endpoint        string // "ip:port"
	Addr            netip.Addr
}

// EndpointsUpdateResult is what one Apply changed.
type EndpointsUpdateResult struct {
	// UpdatedServices are the Services whose endpoints changed.
	UpdatedServices sets.Set[types.NamespacedName]
	// DeletedUDPEndpoints are UDP endpoints that were removed or stopped
	// being usable; conntrack entries DNATed to them are stale.
	DeletedUDPEndpoints []ServiceEndpoint
	// NewlyActiveUDPServices are UDP ports that went from no usable
	// endpoints to some; entries that cached "unreachable" are stale.
	NewlyActiveUDPServices []ServicePortName
	// LastChangeTriggerTimes are the trigger times of the applied changes,
	// per IP family of the slices that carried them (index FamilyIndex),
	// as kube-proxy's per-family trackers see them.
	LastChangeTriggerTimes [2]map[types.NamespacedName][]time.Time
}

// Apply moves every pending change into m and clears the pending state.
func (t *EndpointsChangeTracker) Apply(m EndpointsMap) EndpointsUpdateResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	res := EndpointsUpdateResult{UpdatedServices: sets.New[types.NamespacedName](), LastChangeTriggerTimes: t.triggers}
	for name, before := range t.applied {
		res.UpdatedServices.Insert(name)
		after := t.endpointsLocked(name)
		for pn := range before {
			delete(m, pn)
		}
		for pn, eps := range after {
			m[pn] = eps
		}
		for pn, eps := range before {
			if pn.Protocol != v1.ProtocolUDP {
				continue
			}
			for _, ep := range eps {
				if !usable(ep) {
					continue
				}
				if !slices.ContainsFunc(after[pn], func(e *Endpoint) bool { return e.AddrPort() == ep.AddrPort() && usable(e) }) {
					res.DeletedUDPEndpoints = append(res.DeletedUDPEndpoints, ServiceEndpoint{ServicePortName: pn, Endpoint: ep.String(), Addr: ep.Addr})
				}
			}
		}
		for pn, eps := range after {
			if pn.Protocol != v1.ProtocolUDP {
				continue
			}
			if !slices.ContainsFunc(before[pn], usable) && slices.ContainsFunc(eps, usable) {
				res.NewlyActiveUDPServices = append(res.NewlyActiveUDPServices, pn)
			}
		}
	}
	t.applied = map[types.NamespacedName]EndpointsMap{}
	t.triggers = newTriggers()
	return res
}

func newTriggers() [2]map[types.NamespacedName][]time.Time {
	return [2]map[types.NamespacedName][]time.Time{{}, {}}
}

// usable reports whether an endpoint can receive traffic at all.
func usable(ep *Endpoint) bool { return ep.Ready || (ep.Serving && ep.Terminating) }

// endpointsLocked merges the current slices of a Service into per-port
// endpoint lists. An endpoint listed in several slices appears once.
func (t *EndpointsChangeTracker) endpointsLocked(name types.NamespacedName) EndpointsMap {
	out := EndpointsMap{}
	seen := map[ServicePortName]map[netip.AddrPort]int{} // index in out[pn]
	// The endpoints are allocated together, in one array: a Service's are
	// replaced together, and one allocation instead of one per endpoint
	// keeps the heap of 100,000 endpoints compact.
	n := 0
	for _, s := range t.slices[name] {
		n += len(s.Endpoints) * len(s.Ports)
	}
	slab := make([]Endpoint, 0, n)
	for _, s := range t.slices[name] {
		for _, port := range s.Ports {
			if port.Port == nil || *port.Port <= 0 || *port.Port > 65535 {
				continue
			}
			pn := ServicePortName{NamespacedName: name, Protocol: v1.ProtocolTCP}
			if port.Name != nil {
				pn.Port = *port.Name
			}
			if port.Protocol != nil {
				pn.Protocol = *port.Protocol
			}
			if seen[pn] == nil {
				seen[pn] = map[netip.AddrPort]int{}
			}
			// Weights ride on the slice as one annotation (see docs/proxy-modes.md);
			// a malformed entry keeps the default weight 1.
			weights, _ := lb.ParseEndpointWeights(s.Annotations[lb.EndpointWeightsAnnotation])
			for i := range s.Endpoints {
				e := &s.Endpoints[i]
				if len(e.Addresses) == 0 {
					continue
				}
				addr, err := netip.ParseAddr(e.Addresses[0])
				if err != nil {
					continue
				}
				slab = append(slab, Endpoint{
					Addr:        addr.Unmap(),
					Port:        int(*port.Port),
					Ready:       e.Conditions.Ready == nil || *e.Conditions.Ready,
					Terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
					Weight:      1,
				})
				ep := &slab[len(slab)-1]
				if w, ok := weights[ep.Addr]; ok {
					ep.Weight, ep.Quiesced = w, w == 0
				}
				// As kube-proxy: an unset serving condition means serving.
				ep.Serving = e.Conditions.Serving == nil || *e.Conditions.Serving
				if e.NodeName != nil {
					ep.NodeName = *e.NodeName
					ep.IsLocal = ep.NodeName == t.nodeName && t.nodeName != ""
				}
				if e.Zone != nil {
					ep.Zone = *e.Zone
				}
				if e.Hints != nil && len(e.Hints.ForZones)+len(e.Hints.ForNodes) > 0 {
					h := &Hints{}
					for _, z := range e.Hints.ForZones {
						h.Zones = append(h.Zones, z.Name)
					}
					for _, n := range e.Hints.ForNodes {
						h.Nodes = append(h.Nodes, n.Name)
					}
					ep.Hints = h
				}
				if i, dup := seen[pn][ep.AddrPort()]; dup {
					// The same endpoint in two slices (briefly, while it
					// moves): as kube-proxy, a non-terminating copy wins.
					if out[pn][i].Terminating && !ep.Terminating {
						out[pn][i] = ep
					}
					continue
				}
				seen[pn][ep.AddrPort()] = len(out[pn])
				out[pn] = append(out[pn], ep)
			}
		}
	}
	// kube-proxy orders a port's endpoints by their "IP:port" string (so
	// 10.0.0.10 comes before 10.0.0.9); the order decides the probability
	// each rule gets, so svcnet keeps exactly that order.
	for pn := range out {
		sortByString(out[pn])
	}
	return out
}

// sortByString sorts eps by their "IP:port" strings, each made once.
func sortByString(eps []*Endpoint) {
	if len(eps) < 2 {
		return
	}
	type keyed struct {
		key string
		ep  *Endpoint
	}
	ks := make([]keyed, len(eps))
	for i, ep := range eps {
		ks[i] = keyed{ep.String(), ep}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	for i := range ks {
		eps[i] = ks[i].ep
	}
}

func endpointsMapsEqual(a, b EndpointsMap) bool {
	if len(a) != len(b) {
		return false
	}
	for pn, ea := range a {
		eb, ok := b[pn]
		if !ok || len(ea) != len(eb) {
			return false
		}
		for i := range ea {
			x, y := ea[i], eb[i]
			if x.AddrPort() != y.AddrPort() || x.Ready != y.Ready || x.Serving != y.Serving || x.Terminating != y.Terminating ||
				x.NodeName != y.NodeName || x.Zone != y.Zone || x.IsLocal != y.IsLocal || x.Weight != y.Weight || x.Quiesced != y.Quiesced || !slices.Equal(x.ZoneHints(), y.ZoneHints()) || !slices.Equal(x.NodeHints(), y.NodeHints()) {
				return false
			}
		}
	}
	return true
}
