package endpointslice

import (
	"fmt"
	"math"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Topology-aware hints for Services annotated
// service.kubernetes.io/topology-mode: Auto (or the deprecated
// service.kubernetes.io/topology-aware-hints: Auto), as
// kube-controller-manager assigns them:
//
//   - every ready endpoint is hinted for one zone, its own where possible;
//   - each zone should get a share of the endpoints in proportion to the
//     allocatable CPU of its ready nodes (control-plane nodes left out), and
//     never less than that share divided by 1.2 (the overload threshold);
//   - zones holding more endpoints than their share give the surplus to
//     zones holding fewer;
//   - hints already published are kept while their zone stays within its
//     maximum, so that they do not move on every sync;
//   - when this is impossible (a node without zone or CPU, fewer than two
//     zones, fewer ready endpoints than zones, a minimum that cannot be met,
//     an endpoint without zone) the Service gets no hints at all and a
//     TopologyAwareHintsDisabled Warning Event says why; the first sync that
//     does assign hints records TopologyAwareHintsEnabled.
//
// The annotation takes precedence over spec.trafficDistribution.

// overloadThreshold is how far above its share a zone may be loaded.
const overloadThreshold = 0.2

// Event messages, as kube-controller-manager words them.
const (
	msgNoZoneSpecified          = "One or more endpoints do not have a zone specified"
	msgNoAllocatedHintsForZones = "No hints allocated for zones"
	msgHintsEnabled             = "Topology Aware Hints has been enabled"
	msgHintsDisabled            = "Topology Aware Hints has been disabled"
	msgInsufficientNodeInfo     = "Insufficient Node information: allocatable CPU or zone not specified on one or more nodes"
	msgNodesReadyInOneZoneOnly  = "Nodes only ready in one zone"
	msgInsufficientEndpoints    = "Insufficient number of endpoints"
	msgMinAllocationExceeds     = "Unable to allocate minimum required endpoints to each zone without exceeding overload threshold"

	reasonHintsEnabled  = "TopologyAwareHintsEnabled"
	reasonHintsDisabled = "TopologyAwareHintsDisabled"
)

// TopologyEvent is an Event to record on the Service.
type TopologyEvent struct {
	Type, Reason, Message string
}

func disabled(msg string, at discoveryv1.AddressType) TopologyEvent {
	return TopologyEvent{Type: corev1.EventTypeWarning, Reason: reasonHintsDisabled, Message: withAddressType(msg, at)}
}

func withAddressType(msg string, at discoveryv1.AddressType) string {
	return fmt.Sprintf("%s, addressType: %s", msg, at)
}

// HintsAuto reports whether svc asks for topology-aware hints through its
// annotations (the deprecated name wins when both are set, as in Kubernetes).
func HintsAuto(svc *corev1.Service) bool {
	v, ok := svc.Annotations[corev1.DeprecatedAnnotationTopologyAwareHints]
	if !ok {
		v = svc.Annotations[corev1.AnnotationTopologyMode]
	}
	return v == "Auto" || v == "auto"
}

// zoneAllocation is how many endpoints one zone should be hinted.
type zoneAllocation struct {
	minimum, maximum int
	desired          float64
}

// TopologyCache holds the zones' CPU shares and, per Service and address
// type, the hints it last assigned. It is safe for concurrent use.
type TopologyCache struct {
	mu sync.Mutex
	// ratios is each zone's share of the ready nodes' allocatable CPU; nil
	// when the nodes do not allow hints.
	ratios map[string]float64
	// hinted holds, per Service key and address type, the endpoints hinted
	// per zone.
	hinted map[string]map[discoveryv1.AddressType]map[string]int
	// populated is the set of Services whose hints are in place.
	populated map[string]bool
}

// NewTopologyCache returns a cache that knows no nodes yet.
func NewTopologyCache() *TopologyCache {
	return &TopologyCache{hinted: map[string]map[discoveryv1.AddressType]map[string]int{}, populated: map[string]bool{}}
}

// SetNodes recomputes the zones' CPU shares from the nodes: ready nodes
// without a control-plane role label count; one of them without a zone or
// allocatable CPU, or fewer than two zones, disables hints.
func (t *TopologyCache) SetNodes(nodes []*corev1.Node) {
	cpu := map[string]int64{}
	var total int64
	sufficient := true
	for _, n := range nodes {
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
			continue
		}
		if _, ok := n.Labels["node-role.kubernetes.io/master"]; ok {
			continue
		}
		if !nodeReady(n) {
			continue
		}
		zone := n.Labels[corev1.LabelTopologyZone]
		q := n.Status.Allocatable.Cpu()
		if zone == "" || q.IsZero() {
			sufficient = false
			break
		}
		cpu[zone] += q.MilliValue()
		total += q.MilliValue()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !sufficient || total == 0 || len(cpu) < 2 {
		t.ratios = nil
		return
	}
	t.ratios = make(map[string]float64, len(cpu))
	for z, c := range cpu {
		t.ratios[z] = float64(c) / float64(total)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// allocations divides n ready endpoints among the zones, or says why it
// cannot.
func (t *TopologyCache) allocations(n int) (map[string]zoneAllocation, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ratios == nil {
		return nil, msgInsufficientNodeInfo
	}
	if len(t.ratios) < 2 {
		return nil, msgNodesReadyInOneZoneOnly
	}
	if len(t.ratios) > n {
		return nil, fmt.Sprintf("%s (%d endpoints, %d zones)", msgInsufficientEndpoints, n, len(t.ratios))
	}
	out := make(map[string]zoneAllocation, len(t.ratios))
	minTotal := 0
	for zone, ratio := range t.ratios {
		desired := ratio * float64(n)
		minimum := int(math.Ceil(desired / (1 + overloadThreshold)))
		out[zone] = zoneAllocation{minimum: minimum, desired: math.Max(desired, float64(minimum))}
		minTotal += minimum
		if minTotal > n {
			return nil, fmt.Sprintf("%s (%d endpoints, %d zones)", msgMinAllocationExceeds, n, len(t.ratios))
		}
	}
	for zone, a := range out {
		a.maximum = a.minimum + n - minTotal
		out[zone] = a
	}
	return out, ""
}

// AddHints sets the hints of the endpoints of one address type of the
// Service key (eps: every endpoint of that type, in slice order; published:
// the zone each address is hinted for in the slices as they are) and returns
// the Events to record. On failure every endpoint's hints are cleared.
func (t *TopologyCache) AddHints(key string, at discoveryv1.AddressType, eps []*discoveryv1.Endpoint, published map[string]string) []TopologyEvent {
	var ready []*discoveryv1.Endpoint
	for _, ep := range eps {
		ep.Hints = nil
		if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
			ready = append(ready, ep)
		}
	}
	fail := func(msg string) []TopologyEvent {
		t.RemoveHints(key, at)
		for _, ep := range ready {
			ep.Hints = nil
		}
		return []TopologyEvent{disabled(msg, at)}
	}
	alloc, why := t.allocations(len(ready))
	if why != "" {
		return fail(why)
	}
	for _, ep := range ready {
		if ep.Zone == nil || *ep.Zone == "" {
			return fail(msgNoZoneSpecified)
		}
	}
	// Hints already published stay while their zone has room; the others
	// start on their own zone and may be moved.
	perZone := map[string]int{}
	var movable []*discoveryv1.Endpoint
	for _, ep := range ready {
		if z, ok := published[ep.Addresses[0]]; ok {
			if a, ok := alloc[z]; ok && perZone[z] < a.maximum {
				ep.Hints = zoneHint(z)
				perZone[z]++
				continue
			}
		}
		movable = append(movable, ep)
	}
	for _, ep := range movable {
		ep.Hints = zoneHint(*ep.Zone)
		perZone[*ep.Zone]++
	}
	giving, receiving := givingAndReceiving(alloc, perZone)
	for _, ep := range movable {
		if len(giving) == 0 || len(receiving) == 0 {
			break
		}
		from := *ep.Zone
		if giving[from] == 0 {
			continue
		}
		to := firstZone(receiving)
		ep.Hints = zoneHint(to)
		perZone[from]--
		perZone[to]++
		take(giving, from)
		take(receiving, to)
	}
	if len(perZone) == 0 {
		return fail(msgNoAllocatedHintsForZones)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.populated[key]
	if t.hinted[key] == nil {
		t.hinted[key] = map[discoveryv1.AddressType]map[string]int{}
	}
	t.hinted[key][at] = perZone
	t.populated[key] = true
	if !was {
		return []TopologyEvent{{Type: corev1.EventTypeNormal, Reason: reasonHintsEnabled, Message: withAddressType(msgHintsEnabled, at)}}
	}
	return nil
}

// DisableHints is the sync of a Service without the annotation: when hints
// were in place it returns the Event that says they are gone.
func (t *TopologyCache) DisableHints(key string, at discoveryv1.AddressType) []TopologyEvent {
	t.mu.Lock()
	was := t.populated[key]
	t.mu.Unlock()
	t.RemoveHints(key, at)
	if was {
		return []TopologyEvent{disabled(msgHintsDisabled, at)}
	}
	return nil
}

// RemoveHints forgets the hints of one address type of a Service; the
// Service no longer counts as hinted.
func (t *TopologyCache) RemoveHints(key string, at discoveryv1.AddressType) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.hinted[key], at)
	if len(t.hinted[key]) == 0 {
		delete(t.hinted, key)
	}
	delete(t.populated, key)
}

// Forget drops a deleted Service.
func (t *TopologyCache) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.hinted, key)
	delete(t.populated, key)
}

// Overloaded returns the hinted Services whose hints no longer fit the
// zones' shares (after a node change): some zone has fewer endpoints than
// its minimum, or none at all.
func (t *TopologyCache) Overloaded() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for key, byType := range t.hinted {
		for _, perZone := range byType {
			if overloaded(perZone, t.ratios) {
				out = append(out, key)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

func overloaded(perZone map[string]int, ratios map[string]float64) bool {
	if len(perZone) == 0 {
		return false
	}
	if len(ratios) == 0 {
		return true
	}
	total := 0
	for _, n := range perZone {
		total += n
	}
	for zone, ratio := range ratios {
		n, ok := perZone[zone]
		if !ok || n < int(math.Ceil(float64(total)*ratio/(1+overloadThreshold))) {
			return true
		}
	}
	return false
}

// givingAndReceiving returns how many endpoints each zone above its desired
// share gives, and each zone below receives: one at a time from the zone
// furthest above to the zone furthest below, while both are at least half
// an endpoint off and one of them a whole endpoint.
func givingAndReceiving(alloc map[string]zoneAllocation, perZone map[string]int) (map[string]int, map[string]int) {
	over, under := map[string]float64{}, map[string]float64{}
	for zone, a := range alloc {
		have := float64(perZone[zone])
		switch {
		case have > a.desired:
			over[zone] = have - a.desired
		case have < a.desired:
			under[zone] = a.desired - have
		}
	}
	giving, receiving := map[string]int{}, map[string]int{}
	for {
		gz, g := most(over)
		rz, r := most(under)
		if gz == "" || rz == "" || (g < 1 && r < 1) || g < 0.5 || r < 0.5 {
			return giving, receiving
		}
		giving[gz]++
		over[gz]--
		receiving[rz]++
		under[rz]--
	}
}

// most returns the zone with the largest positive value (the first by name
// on a tie).
func most(m map[string]float64) (string, float64) {
	zone, best := "", 0.0
	for _, z := range sortedZones(m) {
		if m[z] > best {
			zone, best = z, m[z]
		}
	}
	return zone, best
}

func sortedZones[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for z := range m {
		out = append(out, z)
	}
	sort.Strings(out)
	return out
}

func firstZone(m map[string]int) string { return sortedZones(m)[0] }

// take counts one down and drops the zone at zero.
func take(m map[string]int, zone string) {
	if m[zone] <= 1 {
		delete(m, zone)
		return
	}
	m[zone]--
}

func zoneHint(zone string) *discoveryv1.EndpointHints {
	return &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
}

// publishedHints maps each address of the live slices of one address type
// to the zone it is hinted for (endpoints with exactly one zone hint).
func publishedHints(live []*discoveryv1.EndpointSlice, at discoveryv1.AddressType) map[string]string {
	out := map[string]string{}
	for _, s := range live {
		if s.AddressType != at {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Hints != nil && len(ep.Hints.ForZones) == 1 && len(ep.Addresses) > 0 {
				out[ep.Addresses[0]] = ep.Hints.ForZones[0].Name
			}
		}
	}
	return out
}
