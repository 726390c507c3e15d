package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/proxy/lb"
)

// Plan is the outcome of reconciling one Service: the writes that make its
// slices match the desired endpoints. Creates carry no name (the API server
// generates it from generateName).
type Plan struct {
	Create []*discoveryv1.EndpointSlice
	Update []*discoveryv1.EndpointSlice
	Delete []*discoveryv1.EndpointSlice
}

// Empty reports whether the plan writes nothing.
func (p *Plan) Empty() bool { return len(p.Create)+len(p.Update)+len(p.Delete) == 0 }

// Reconciler computes and applies slice changes for one managing
// controller (the endpointslice controller or the mirroring controller share
// the packing algorithm).
type Reconciler struct {
	// MaxEndpointsPerSlice bounds every slice written.
	MaxEndpointsPerSlice int
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value.
	ManagedBy string
	// NoPlaceholder turns off the empty placeholder slice (the mirroring
	// controller writes none).
	NoPlaceholder bool
}

// Desired is one group of endpoints that share a port list and address
// type; they are packed into slices together.
type Desired struct {
	AddressType discoveryv1.AddressType
	Ports       []discoveryv1.EndpointPort
	Endpoints   []discoveryv1.Endpoint
	// Weights maps an endpoint address to its pod's load-balancing weight
	// (pod annotation svcnet.io/weight); addresses not listed weigh 1.
	// Every slice carries the weights of its own endpoints in the
	// annotation svcnet.io/endpoint-weights, which the proxies read.
	Weights map[string]int
}

// weightsAnnotation is the svcnet.io/endpoint-weights value of a slice
// holding eps ("" when every weight is 1).
func weightsAnnotation(eps []discoveryv1.Endpoint, weights map[string]int) string {
	if len(weights) == 0 {
		return ""
	}
	m := map[netip.Addr]int{}
	for i := range eps {
		for _, a := range eps[i].Addresses {
			if w, ok := weights[a]; ok {
				if addr, err := netip.ParseAddr(a); err == nil {
					m[addr.Unmap()] = w
				}
			}
		}
	}
	return lb.FormatEndpointWeights(m)
}

// setWeights writes (or removes) a slice's weights annotation.
func setWeights(s *discoveryv1.EndpointSlice, weights map[string]int) {
	v := weightsAnnotation(s.Endpoints, weights)
	if v == "" {
		if _, ok := s.Annotations[lb.EndpointWeightsAnnotation]; ok {
			delete(s.Annotations, lb.EndpointWeightsAnnotation)
		}
		return
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[lb.EndpointWeightsAnnotation] = v
}

// PortKey identifies a port list independent of order.
func PortKey(ports []discoveryv1.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		var name, proto, app string
		var num int32
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		if p.Port != nil {
			num = *p.Port
		}
		if p.AppProtocol != nil {
			app = *p.AppProtocol
		}
		parts = append(parts, fmt.Sprintf("%s/%d/%s/%s", name, num, proto, app))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// endpointKey identifies an endpoint across syncs: its sorted addresses,
// hostname and target.
func endpointKey(ep *discoveryv1.Endpoint) string {
	addrs := append([]string(nil), ep.Addresses...)
	sort.Strings(addrs)
	k := strings.Join(addrs, ",")
	if ep.Hostname != nil {
		k += "|h=" + *ep.Hostname
	}
	if ep.TargetRef != nil {
		k += "|" + ep.TargetRef.Namespace + "/" + ep.TargetRef.Name
	}
	return k
}

// endpointSet is an insertion-ordered set of desired endpoints.
type endpointSet struct {
	byKey map[string]*discoveryv1.Endpoint
	order []string
}

func newEndpointSet(eps []discoveryv1.Endpoint) *endpointSet {
	s := &endpointSet{byKey: map[string]*discoveryv1.Endpoint{}}
	for i := range eps {
		k := endpointKey(&eps[i])
		if _, dup := s.byKey[k]; !dup {
			s.order = append(s.order, k)
		}
		s.byKey[k] = &eps[i]
	}
	return s
}

func (s *endpointSet) len() int { return len(s.byKey) }

func (s *endpointSet) pop() discoveryv1.Endpoint {
	for len(s.order) > 0 {
		k := s.order[0]
		s.order = s.order[1:]
		if ep, ok := s.byKey[k]; ok {
			delete(s.byKey, k)
			return *ep
		}
	}
	panic("pop from empty endpoint set")
}

// Reconcile computes the plan that turns existing (the slices this
// controller manages for the owner) into desired. It touches as few slices as
// it can: endpoints already in a slice stay there; changed slices are filled
// up before unchanged ones; new endpoints go to the unchanged slice that
// they fill most exactly, and only then into new slices. A slice left with no
// endpoints is deleted, but deletes are turned into updates where a create
// of the same address type would otherwise happen. When nothing at all is
// desired, one empty placeholder slice of the first address type is kept.
//
// newSlice builds the skeleton of a new slice (labels, owner, generateName).
// labelsFor returns the labels an existing slice should carry.
func (r *Reconciler) Reconcile(existing []*discoveryv1.EndpointSlice, desired []Desired, addressTypes []discoveryv1.AddressType,
	newSlice func(discoveryv1.AddressType, []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice,
	labelsFor func(*discoveryv1.EndpointSlice) map[string]string) Plan {
	var plan Plan
	supported := map[discoveryv1.AddressType]bool{}
	for _, t := range addressTypes {
		supported[t] = true
	}
	byType := map[discoveryv1.AddressType][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		if !supported[s.AddressType] {
			plan.Delete = append(plan.Delete, s)
			continue
		}
		byType[s.AddressType] = append(byType[s.AddressType], s)
	}
	for _, at := range addressTypes {
		var create, update, del []*discoveryv1.EndpointSlice
		existingByPorts := map[string][]*discoveryv1.EndpointSlice{}
		for _, s := range byType[at] {
			k := PortKey(s.Ports)
			existingByPorts[k] = append(existingByPorts[k], s)
		}
		desiredByPorts := map[string]*Desired{}
		var keys []string
		for i := range desired {
			d := &desired[i]
			if d.AddressType != at {
				continue
			}
			k := PortKey(d.Ports)
			if prev, ok := desiredByPorts[k]; ok {
				prev.Endpoints = append(prev.Endpoints, d.Endpoints...)
				for a, w := range d.Weights {
					if prev.Weights == nil {
						prev.Weights = map[string]int{}
					}
					prev.Weights[a] = w
				}
				continue
			}
			cp := *d
			cp.Endpoints = append([]discoveryv1.Endpoint(nil), d.Endpoints...)
			cp.Weights = maps.Clone(d.Weights)
			desiredByPorts[k] = &cp
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			d := desiredByPorts[k]
			c, u, dl := r.reconcilePorts(existingByPorts[k], d, newSlice, labelsFor)
			create, update, del = append(create, c...), append(update, u...), append(del, dl...)
		}
		var oldKeys []string
		for k := range existingByPorts {
			if _, ok := desiredByPorts[k]; !ok {
				oldKeys = append(oldKeys, k)
			}
		}
		sort.Strings(oldKeys)
		for _, k := range oldKeys {
			del = append(del, existingByPorts[k]...)
		}
		// Keep (or create) one placeholder when nothing else would exist.
		if !r.NoPlaceholder && len(byType[at]) == len(del) && len(create) == 0 && at == addressTypes[0] {
			ph := newSlice(at, []discoveryv1.EndpointPort{})
			kept := false
			for i, s := range del {
				if len(s.Endpoints) == 0 && len(s.Ports) == 0 && apiequality.Semantic.DeepEqual(s.Labels, ph.Labels) &&
					apiequality.Semantic.DeepEqual(s.OwnerReferences, ph.OwnerReferences) {
					del = append(del[:i], del[i+1:]...)
					kept = true
					break
				}
			}
			if !kept {
				create = append(create, ph)
			}
		}
		// Prefer updating a slice that would be deleted over creating one.
		for i := 0; i < len(del) && len(create) > 0; {
			s := create[len(create)-1]
			if del[i].AddressType == s.AddressType {
				s.Name = del[i].Name
				s.ResourceVersion = del[i].ResourceVersion
				create = create[:len(create)-1]
				update = append(update, s)
				del = append(del[:i], del[i+1:]...)
				continue
			}
			i++
		}
		plan.Create = append(plan.Create, create...)
		plan.Update = append(plan.Update, update...)
		plan.Delete = append(plan.Delete, del...)
	}
	return plan
}

func (r *Reconciler) reconcilePorts(existing []*discoveryv1.EndpointSlice, d *Desired,
	newSlice func(discoveryv1.AddressType, []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice,
	labelsFor func(*discoveryv1.EndpointSlice) map[string]string) (create, update, del []*discoveryv1.EndpointSlice) {
	max := r.MaxEndpointsPerSlice
	if max <= 0 {
		max = 100
	}
	want := newEndpointSet(d.Endpoints)
	toUpdate := map[string]*discoveryv1.EndpointSlice{}
	var updateOrder []string
	var unchanged []*discoveryv1.EndpointSlice

	// 1. Keep endpoints where they are; note slices that change.
	for _, s := range existing {
		var kept []discoveryv1.Endpoint
		changed := false
		for i := range s.Endpoints {
			k := endpointKey(&s.Endpoints[i])
			got, ok := want.byKey[k]
			if !ok {
				continue
			}
			kept = append(kept, *got)
			if !endpointEqual(got, &s.Endpoints[i]) {
				changed = true
			}
			delete(want.byKey, k)
		}
		lbls := labelsFor(s)
		labelsChanged := !apiequality.Semantic.DeepEqual(nonNil(s.Labels), lbls)
		switch {
		case changed || len(kept) != len(s.Endpoints):
			if len(kept) == 0 {
				del = append(del, s)
				continue
			}
			cp := s.DeepCopy()
			cp.Endpoints = kept
			cp.Labels = lbls
			toUpdate[cp.Name] = cp
			updateOrder = append(updateOrder, cp.Name)
		case labelsChanged || s.Annotations[lb.EndpointWeightsAnnotation] != weightsAnnotation(s.Endpoints, d.Weights):
			cp := s.DeepCopy()
			cp.Labels = lbls
			toUpdate[cp.Name] = cp
			updateOrder = append(updateOrder, cp.Name)
		default:
			unchanged = append(unchanged, s)
		}
	}

	// 2. Fill the slices that change anyway, fullest first.
	if want.len() > 0 && len(updateOrder) > 0 {
		list := make([]*discoveryv1.EndpointSlice, 0, len(updateOrder))
		for _, n := range updateOrder {
			list = append(list, toUpdate[n])
		}
		sort.SliceStable(list, func(i, j int) bool { return len(list[i].Endpoints) > len(list[j].Endpoints) })
		for _, s := range list {
			for want.len() > 0 && len(s.Endpoints) < max {
				s.Endpoints = append(s.Endpoints, want.pop())
			}
		}
	}

	// 3. Put the rest in the unchanged slice they fit best, else new slices.
	for want.len() > 0 {
		var fill *discoveryv1.EndpointSlice
		if want.len() < max && len(unchanged) > 0 {
			best := max
			idx := -1
			for i, s := range unchanged {
				diff := max - (want.len() + len(s.Endpoints))
				if diff >= 0 && diff < best {
					best, idx = diff, i
				}
			}
			if idx >= 0 {
				fill = unchanged[idx].DeepCopy()
				unchanged = append(unchanged[:idx], unchanged[idx+1:]...)
			}
		}
		if fill == nil {
			fill = newSlice(d.AddressType, d.Ports)
		}
		for want.len() > 0 && len(fill.Endpoints) < max {
			fill.Endpoints = append(fill.Endpoints, want.pop())
		}
		if fill.Name != "" {
			fill.Labels = labelsFor(fill)
			toUpdate[fill.Name] = fill
			updateOrder = append(updateOrder, fill.Name)
		} else {
			create = append(create, fill)
		}
	}
	for _, n := range updateOrder {
		update = append(update, toUpdate[n])
	}
	for _, s := range create {
		setWeights(s, d.Weights)
	}
	for _, s := range update {
		setWeights(s, d.Weights)
	}
	return create, update, del
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// endpointEqual compares two endpoints ignoring targetRef resourceVersion.
func endpointEqual(a, b *discoveryv1.Endpoint) bool {
	ac, bc := a.DeepCopy(), b.DeepCopy()
	if ac.TargetRef != nil {
		ac.TargetRef.ResourceVersion = ""
	}
	if bc.TargetRef != nil {
		bc.TargetRef.ResourceVersion = ""
	}
	sort.Strings(ac.Addresses)
	sort.Strings(bc.Addresses)
	return apiequality.Semantic.DeepEqual(ac, bc)
}

// Apply runs a plan against the API: creates first (so that traffic never
// sees fewer endpoints than before), then updates, then deletes. Every slice
// written gets the last-change-trigger-time annotation (dropped when trigger
// is zero). It returns the slices as the API stored them, for staleness
// tracking, and all errors joined. skipCreates suppresses creates (the
// owner is being deleted).
func Apply(ctx context.Context, client kubernetes.Interface, ns string, plan Plan, trigger time.Time, skipCreates bool) (written []*discoveryv1.EndpointSlice, deleted []string, err error) {
	var errs []error
	api := client.DiscoveryV1().EndpointSlices(ns)
	if !skipCreates {
		for _, s := range plan.Create {
			setTrigger(s, trigger)
			got, err := api.Create(ctx, s, metav1.CreateOptions{})
			if err != nil {
				if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					return written, deleted, nil
				}
				errs = append(errs, fmt.Errorf("failed to create EndpointSlice for Service %s/%s: %w", ns, s.Labels[discoveryv1.LabelServiceName], err))
				continue
			}
			written = append(written, got)
		}
	}
	for _, s := range plan.Update {
		setTrigger(s, trigger)
		got, err := api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to update %s EndpointSlice for Service %s/%s: %w", s.Name, ns, s.Labels[discoveryv1.LabelServiceName], err))
			continue
		}
		written = append(written, got)
	}
	for _, s := range plan.Delete {
		if err := api.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("failed to delete %s EndpointSlice for Service %s/%s: %w", s.Name, ns, s.Labels[discoveryv1.LabelServiceName], err))
			continue
		}
		deleted = append(deleted, s.Name)
	}
	return written, deleted, errors.Join(errs...)
}

func setTrigger(s *discoveryv1.EndpointSlice, trigger time.Time) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	if trigger.IsZero() {
		delete(s.Annotations, corev1.EndpointsLastChangeTriggerTime)
	} else {
		s.Annotations[corev1.EndpointsLastChangeTriggerTime] = trigger.UTC().Format(time.RFC3339Nano)
	}
	if len(s.Annotations) == 0 {
		s.Annotations = nil
	}
}
