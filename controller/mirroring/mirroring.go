// Package mirroring is svcnet's EndpointSlice mirroring controller
// (endpointslicemirroring-controller.k8s.io): the hand-written Endpoints of
// a Service without a selector are mirrored into EndpointSlices, so that DNS
// and the proxy read one source.
//
// An Endpoints object is mirrored when a Service of the same name exists,
// that Service has no selector, and the Endpoints is not labelled
// endpointslice.kubernetes.io/skip-mirror=true. Otherwise its mirrored slices
// are deleted. Mirrored slices:
//   - are owned by the Endpoints (controller reference, kind Endpoints);
//   - carry the Endpoints' labels plus kubernetes.io/service-name and
//     endpointslice.kubernetes.io/managed-by, and its annotations except
//     last-change-trigger-time and kubectl's last-applied-configuration;
//   - hold one subset's ports and one address type each; addresses become
//     ready endpoints, notReadyAddresses endpoints with ready=false; invalid
//     IPs are skipped;
//   - at most MaxEndpointsPerSubset addresses of a subset are mirrored.
package mirroring

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/controller/endpointslice"
	"github.com/svcnet/svcnet/controller/internal/worker"
)

// ControllerName is the managed-by value of mirrored slices.
const ControllerName = "endpointslicemirroring-controller.k8s.io"

// MaxEndpointsPerSubset is how many addresses of one subset are mirrored
// (Kubernetes' --mirroring-max-endpoints-per-subset default).
const MaxEndpointsPerSubset = 1000

// Controller mirrors Endpoints into EndpointSlices. Create with New, then
// Run.
type Controller struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	endpoints corelisters.EndpointsLister
	slices    discoverylisters.EndpointSliceLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	recorder  record.EventRecorder
	rec       endpointslice.Reconciler
	tracker   *endpointslice.Tracker
	log       *slog.Logger
}

// New wires the controller to the factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	svcInf := factory.Core().V1().Services()
	epInf := factory.Core().V1().Endpoints()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	c := &Controller{
		client:    client,
		services:  svcInf.Lister(),
		endpoints: epInf.Lister(),
		slices:    sliceInf.Lister(),
		synced:    []cache.InformerSynced{svcInf.Informer().HasSynced, epInf.Informer().HasSynced, sliceInf.Informer().HasSynced},
		queue:     worker.NewQueue("endpoint_slice_mirroring"),
		recorder:  recorder,
		rec:       endpointslice.Reconciler{MaxEndpointsPerSlice: MaxEndpointsPerSubset, ManagedBy: ControllerName, NoPlaceholder: true},
		tracker:   endpointslice.NewTracker(),
		log:       log.With("controller", ControllerName),
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}
	svcInf.Informer().AddEventHandler(h)
	epInf.Informer().AddEventHandler(h)
	sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onSlice,
		UpdateFunc: func(_, obj any) { c.onSlice(obj) },
		DeleteFunc: c.onSlice,
	})
	return c
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

func (c *Controller) onSlice(obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if s, ok = tomb.Obj.(*discoveryv1.EndpointSlice); !ok {
			return
		}
	}
	if s.Labels[discoveryv1.LabelManagedBy] != ControllerName || s.Labels[discoveryv1.LabelServiceName] == "" {
		return
	}
	if c.tracker.Expected(s) {
		return
	}
	c.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
}

// Run waits for caches and mirrors until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("endpointslice mirroring controller: caches did not sync")
	}
	worker.Run(ctx, c.log, c.queue, workers, c.sync)
	return nil
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: name,
		discoveryv1.LabelManagedBy:   ControllerName,
	}))
	if err != nil {
		return fmt.Errorf("list mirrored slices for %s: %w", key, err)
	}
	var live []*discoveryv1.EndpointSlice
	for _, s := range existing {
		if s.DeletionTimestamp == nil {
			live = append(live, s)
		}
	}
	svc, svcErr := c.services.Services(ns).Get(name)
	ep, epErr := c.endpoints.Endpoints(ns).Get(name)
	mirror := svcErr == nil && epErr == nil && svc.Spec.Selector == nil &&
		ep.Labels[discoveryv1.LabelSkipMirror] != "true" && ep.DeletionTimestamp == nil
	if !mirror {
		return c.deleteAll(ctx, key, ns, live)
	}
	if c.tracker.Stale(key, live) {
		c.queue.AddAfter(key, 20*time.Millisecond)
		return nil
	}
	desired, types := Desired(ep)
	plan := c.rec.Reconcile(live, desired, types,
		func(at discoveryv1.AddressType, ports []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
			return NewSlice(ep, at, ports)
		},
		func(*discoveryv1.EndpointSlice) map[string]string { return SliceLabels(ep) })
	if plan.Empty() {
		return nil
	}
	// Mirrored slices carry the Endpoints' own annotations, not a trigger
	// time of ours.
	for _, s := range append(append([]*discoveryv1.EndpointSlice{}, plan.Create...), plan.Update...) {
		s.Annotations = sliceAnnotations(ep)
	}
	written, deleted, err := endpointslice.Apply(ctx, c.client, ns, plan, time.Time{}, false)
	c.tracker.Record(key, live, written, deleted)
	if err != nil {
		if c.recorder != nil {
			c.recorder.Eventf(ep, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
				"Error updating EndpointSlices for Endpoints %s/%s: %v", ns, name, err)
		}
		return err
	}
	return nil
}

func (c *Controller) deleteAll(ctx context.Context, key, ns string, slices []*discoveryv1.EndpointSlice) error {
	c.tracker.Forget(key)
	for _, s := range slices {
		err := c.client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete mirrored slice %s/%s: %w", ns, s.Name, err)
		}
	}
	return nil
}

// Desired converts Endpoints subsets into slice groups, and returns the
// address types present (IPv4 first).
func Desired(ep *corev1.Endpoints) ([]endpointslice.Desired, []discoveryv1.AddressType) {
	var out []endpointslice.Desired
	seen := map[discoveryv1.AddressType]bool{}
	for _, subset := range ep.Subsets {
		ports := make([]discoveryv1.EndpointPort, 0, len(subset.Ports))
		for _, p := range subset.Ports {
			name, port, proto := p.Name, p.Port, p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			ports = append(ports, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto, AppProtocol: p.AppProtocol})
		}
		groups := map[discoveryv1.AddressType]*endpointslice.Desired{}
		count := 0
		add := func(a corev1.EndpointAddress, ready bool) {
			ip, err := netip.ParseAddr(a.IP)
			if err != nil || count >= MaxEndpointsPerSubset {
				return
			}
			at := discoveryv1.AddressTypeIPv4
			if ip.Is6() && !ip.Is4In6() {
				at = discoveryv1.AddressTypeIPv6
			}
			g := groups[at]
			if g == nil {
				g = &endpointslice.Desired{AddressType: at, Ports: ports}
				groups[at] = g
			}
			r := ready
			e := discoveryv1.Endpoint{Addresses: []string{a.IP}, Conditions: discoveryv1.EndpointConditions{Ready: &r}}
			if a.TargetRef != nil {
				t := *a.TargetRef
				e.TargetRef = &t
			}
			if a.NodeName != nil {
				n := *a.NodeName
				e.NodeName = &n
			}
			if a.Hostname != "" {
				h := a.Hostname
				e.Hostname = &h
			}
			g.Endpoints = append(g.Endpoints, e)
			seen[at] = true
			count++
		}
		for _, a := range subset.Addresses {
			add(a, true)
		}
		for _, a := range subset.NotReadyAddresses {
			add(a, false)
		}
		for _, at := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			if g := groups[at]; g != nil {
				out = append(out, *g)
			}
		}
	}
	var types []discoveryv1.AddressType
	for _, at := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		if seen[at] {
			types = append(types, at)
		}
	}
	return out, types
}

// SliceLabels returns the labels of a slice mirroring ep.
func SliceLabels(ep *corev1.Endpoints) map[string]string {
	out := map[string]string{}
	for k, v := range ep.Labels {
		out[k] = v
	}
	out[discoveryv1.LabelServiceName] = ep.Name
	out[discoveryv1.LabelManagedBy] = ControllerName
	return out
}

func sliceAnnotations(ep *corev1.Endpoints) map[string]string {
	out := map[string]string{}
	for k, v := range ep.Annotations {
		if k == corev1.EndpointsLastChangeTriggerTime || k == corev1.LastAppliedConfigAnnotation {
			continue
		}
		out[k] = v
	}
	return out
}

// NewSlice returns the skeleton of a new mirrored slice.
func NewSlice(ep *corev1.Endpoints, at discoveryv1.AddressType, ports []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	owner := metav1.NewControllerRef(ep, schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"})
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ep.Name + "-",
			Namespace:       ep.Namespace,
			Labels:          SliceLabels(ep),
			Annotations:     sliceAnnotations(ep),
			OwnerReferences: []metav1.OwnerReference{*owner},
		},
		AddressType: at,
		Ports:       ports,
		Endpoints:   []discoveryv1.Endpoint{},
	}
}
