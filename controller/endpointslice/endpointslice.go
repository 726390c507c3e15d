// Package endpointslice is svcnet's EndpointSlice controller: for every
// Service with a selector it writes discovery/v1 EndpointSlices for the pods
// that back it, as Kubernetes' endpointslice-controller.k8s.io does, and
// exports the packing Reconciler that the mirroring controller shares.
//
// Per Service:
//   - one address type per slice, from spec.ipFamilies (a headless Service
//     without families gets both); slices of a type the Service dropped are
//     deleted;
//   - a pod qualifies when it has an IP of the type and is not terminal;
//     terminating pods stay with ready=false, serving=<pod Ready>,
//     terminating=true (ready=true under publishNotReadyAddresses);
//   - pods whose node does not exist are skipped (and the Service is retried)
//     unless publishNotReadyAddresses is set;
//   - endpoints carry nodeName, zone (the node's topology.kubernetes.io/zone
//     label), targetRef, and hostname when the pod's subdomain names the
//     Service;
//   - pods are grouped by their resolved port list (a named targetPort may
//     resolve differently per pod), at most MaxEndpointsPerSlice per slice;
//   - slices are named generateName "<service>-", labelled with the
//     Service's labels plus kubernetes.io/service-name,
//     endpointslice.kubernetes.io/managed-by and (headless)
//     service.kubernetes.io/headless, and owned by the Service (controller
//     reference) so that garbage collection removes them with it;
//   - spec.trafficDistribution PreferSameZone/PreferClose and PreferSameNode
//     set forZones/forNodes hints from each endpoint's own zone and node;
//   - the service.kubernetes.io/topology-mode: Auto annotation instead
//     spreads zone hints by the zones' CPU (topology.go);
//   - a Service with no endpoints keeps one empty placeholder slice.
package endpointslice

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apidump "k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/controller/internal/podutil"
	"github.com/svcnet/svcnet/controller/internal/triggertime"
	"github.com/svcnet/svcnet/controller/internal/worker"
	"github.com/svcnet/svcnet/proxy/lb"
)

// ControllerName is the endpointslice.kubernetes.io/managed-by value of the
// slices this controller writes.
const ControllerName = "endpointslice-controller.k8s.io"

// DefaultMaxEndpointsPerSlice is Kubernetes' default for
// --max-endpoints-per-slice.
const DefaultMaxEndpointsPerSlice = 100

// Controller reconciles EndpointSlices. Create it with New, then Run.
type Controller struct {
	client   kubernetes.Interface
	services corelisters.ServiceLister
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	slices   discoverylisters.EndpointSliceLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	triggers *triggertime.Tracker
	topology *TopologyCache
	topoQ    workqueue.TypedRateLimitingInterface[string]
	rec      Reconciler
	tracker  *Tracker
	log      *slog.Logger
}

// New wires the controller to the factory's informers; the caller starts
// the factory. maxPerSlice <= 0 means DefaultMaxEndpointsPerSlice.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, maxPerSlice int, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	if maxPerSlice <= 0 {
		maxPerSlice = DefaultMaxEndpointsPerSlice
	}
	svcInf := factory.Core().V1().Services()
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	c := &Controller{
		client:   client,
		services: svcInf.Lister(),
		pods:     podInf.Lister(),
		nodes:    nodeInf.Lister(),
		slices:   sliceInf.Lister(),
		synced: []cache.InformerSynced{svcInf.Informer().HasSynced, podInf.Informer().HasSynced,
			nodeInf.Informer().HasSynced, sliceInf.Informer().HasSynced},
		queue:    worker.NewQueue("endpoint_slice"),
		recorder: recorder,
		triggers: triggertime.NewTracker(),
		topology: NewTopologyCache(),
		topoQ:    worker.NewQueue("endpoint_slice_topology"),
		rec:      Reconciler{MaxEndpointsPerSlice: maxPerSlice, ManagedBy: ControllerName},
		tracker:  NewTracker(),
		log:      log.With("controller", ControllerName),
	}
	svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.onPod,
		UpdateFunc: func(old, cur any) {
			if old.(*corev1.Pod).ResourceVersion == cur.(*corev1.Pod).ResourceVersion && old.(*corev1.Pod).ResourceVersion != "" {
				return
			}
			c.onPod(old)
			c.onPod(cur)
		},
		DeleteFunc: c.onPod,
	})
	nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.onNode(obj)
			c.topoQ.Add(topologyKey)
		},
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			if o.Labels[corev1.LabelTopologyZone] != n.Labels[corev1.LabelTopologyZone] {
				c.onNode(cur)
			}
			if o.Labels[corev1.LabelTopologyZone] != n.Labels[corev1.LabelTopologyZone] || nodeReady(o) != nodeReady(n) ||
				!o.Status.Allocatable.Cpu().Equal(*n.Status.Allocatable.Cpu()) {
				c.topoQ.Add(topologyKey)
			}
		},
		DeleteFunc: func(obj any) {
			c.onNode(obj)
			c.topoQ.Add(topologyKey)
		},
	})
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

func (c *Controller) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	svcs, err := c.services.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, k := range podutil.ServiceKeysForPod(svcs, pod) {
		c.queue.Add(k)
	}
}

// onNode resyncs every Service with a pod on the node: its zone or its
// existence changed.
func (c *Controller) onNode(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if node, ok = tomb.Obj.(*corev1.Node); !ok {
			return
		}
	}
	pods, _ := c.pods.List(labels.Everything())
	for _, p := range pods {
		if p.Spec.NodeName == node.Name {
			c.onPod(p)
		}
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

// Run waits for caches and syncs until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("endpointslice controller: caches did not sync")
	}
	// The zones are known before the first Service sync, so that hints are
	// not refused for want of node information at start.
	c.checkTopology()
	go worker.Run(ctx, c.log, c.topoQ, 1, func(context.Context, string) error {
		c.checkTopology()
		return nil
	})
	worker.Run(ctx, c.log, c.queue, workers, c.syncService)
	return nil
}

// topologyKey is the one item of the topology queue: a node change that may
// move the zones' CPU shares.
const topologyKey = "nodes"

// checkTopology recomputes the zones' shares and resyncs the Services whose
// hints no longer fit them.
func (c *Controller) checkTopology() {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	c.topology.SetNodes(nodes)
	for _, key := range c.topology.Overloaded() {
		c.queue.Add(key)
	}
}

// staleRetry is how soon a Service whose slices are not yet in the cache is
// looked at again.
const staleRetry = 20 * time.Millisecond

// ErrStale means the informer cache has not yet seen this controller's own
// last writes for a Service; the sync is retried shortly.
var ErrStale = errors.New("endpointslice cache is stale")

func (c *Controller) syncService(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Slices go with the Service through their owner reference.
		c.triggers.Forget(key)
		c.tracker.Forget(key)
		c.topology.Forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get service %s: %w", key, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return nil
	}
	pods, err := c.pods.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return fmt.Errorf("list pods for %s: %w", key, err)
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: name,
		discoveryv1.LabelManagedBy:   ControllerName,
	}))
	if err != nil {
		return fmt.Errorf("list slices for %s: %w", key, err)
	}
	var live []*discoveryv1.EndpointSlice
	for _, s := range existing {
		if s.DeletionTimestamp == nil {
			live = append(live, s)
		}
	}
	if c.tracker.Stale(key, live) {
		// Our own writes are on their way through the informer: look again
		// shortly, outside the error backoff (whose overall bucket would
		// throttle a large initial sync).
		c.queue.AddAfter(key, staleRetry)
		return nil
	}
	trigger := c.triggers.Compute(key, svc, pods)
	desired, allErrs := DesiredForService(svc, pods, c.nodes)
	var podErrs []error
	for _, err := range allErrs {
		var iw *InvalidWeightError
		if errors.As(err, &iw) {
			if c.recorder != nil {
				c.recorder.Eventf(iw.Pod, corev1.EventTypeWarning, "InvalidWeight",
					"Ignoring %s for Service %s/%s: %v; the pod gets weight 1", lb.WeightAnnotation, ns, name, iw.Err)
			}
			continue
		}
		podErrs = append(podErrs, err)
	}
	events := c.topologyHints(key, svc, desired, live)
	plan := c.rec.Reconcile(live, desired, AddressTypes(svc),
		func(at discoveryv1.AddressType, ports []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
			return NewSlice(svc, at, ports, ControllerName)
		},
		func(*discoveryv1.EndpointSlice) map[string]string { return SliceLabels(svc, ControllerName) })
	if plan.Empty() {
		c.record(svc, events)
		return errors.Join(podErrs...)
	}
	written, deleted, err := Apply(ctx, c.client, ns, plan, trigger, svc.DeletionTimestamp != nil)
	c.tracker.Record(key, live, written, deleted)
	c.record(svc, events)
	if err != nil {
		if c.recorder != nil {
			c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
				"Error updating Endpoint Slices for Service %s/%s: %v", ns, name, err)
		}
		return err
	}
	return errors.Join(podErrs...)
}

// topologyHints sets the topology-mode Auto hints of the desired endpoints
// (each address type on its own, as Kubernetes does) or, for a Service
// without the annotation, retires hints it had; it returns the Events to
// record.
func (c *Controller) topologyHints(key string, svc *corev1.Service, desired []Desired, live []*discoveryv1.EndpointSlice) []TopologyEvent {
	var events []TopologyEvent
	auto := HintsAuto(svc)
	for _, at := range AddressTypes(svc) {
		if !auto {
			events = append(events, c.topology.DisableHints(key, at)...)
			continue
		}
		var eps []*discoveryv1.Endpoint
		for i := range desired {
			if desired[i].AddressType != at {
				continue
			}
			for j := range desired[i].Endpoints {
				eps = append(eps, &desired[i].Endpoints[j])
			}
		}
		events = append(events, c.topology.AddHints(key, at, eps, publishedHints(live, at))...)
	}
	return events
}

func (c *Controller) record(svc *corev1.Service, events []TopologyEvent) {
	if c.recorder == nil {
		return
	}
	for _, e := range events {
		c.recorder.Event(svc, e.Type, e.Reason, e.Message)
	}
}

// AddressTypes returns the slice address types a Service gets.
func AddressTypes(svc *corev1.Service) []discoveryv1.AddressType {
	var out []discoveryv1.AddressType
	for _, f := range svc.Spec.IPFamilies {
		if f == corev1.IPv6Protocol {
			out = append(out, discoveryv1.AddressTypeIPv6)
		} else {
			out = append(out, discoveryv1.AddressTypeIPv4)
		}
	}
	if len(out) > 0 {
		return out
	}
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		if podutil.ServiceIPFamily(svc, "") == corev1.IPv6Protocol {
			return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv6}
		}
		return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}
	}
	return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}
}

// DesiredForService computes the endpoints of svc grouped by address type
// and port list. It returns an error per pod skipped because its node is
// missing.
func DesiredForService(svc *corev1.Service, pods []*corev1.Pod, nodes corelisters.NodeLister) ([]Desired, []error) {
	var errs []error
	groups := map[string]*Desired{}
	var order []string
	for _, at := range AddressTypes(svc) {
		family := corev1.IPv4Protocol
		if at == discoveryv1.AddressTypeIPv6 {
			family = corev1.IPv6Protocol
		}
		for _, pod := range pods {
			if !podutil.ShouldPodBeInEndpoints(pod, true) {
				continue
			}
			ports := endpointPorts(svc, pod)
			var node *corev1.Node
			if nodes != nil {
				n, err := nodes.Get(pod.Spec.NodeName)
				if err != nil {
					if !svc.Spec.PublishNotReadyAddresses {
						errs = append(errs, fmt.Errorf("skipping Pod %s for Service %s/%s: Node %s Not Found", pod.Name, svc.Namespace, svc.Name, pod.Spec.NodeName))
						continue
					}
				} else {
					node = n
				}
			}
			ip := podutil.PodIPOfFamily(pod, family)
			if ip == "" {
				continue
			}
			k := string(at) + "|" + PortKey(ports)
			g := groups[k]
			if g == nil {
				g = &Desired{AddressType: at, Ports: ports}
				groups[k] = g
				order = append(order, k)
			}
			ep := podToEndpoint(pod, node, svc, ip)
			if !HintsAuto(svc) {
				setHints(&ep, svc.Spec.TrafficDistribution)
			}
			g.Endpoints = append(g.Endpoints, ep)
			if v, ok := pod.Annotations[lb.WeightAnnotation]; ok {
				w, err := lb.ParseWeight(v)
				if err != nil {
					if at == AddressTypes(svc)[0] {
						errs = append(errs, &InvalidWeightError{Pod: pod, Err: err})
					}
				} else if w != 1 {
					if g.Weights == nil {
						g.Weights = map[string]int{}
					}
					g.Weights[ip] = w
				}
			}
		}
	}
	out := make([]Desired, 0, len(order))
	for _, k := range order {
		out = append(out, *groups[k])
	}
	return out, errs
}

// InvalidWeightError reports a pod whose svcnet.io/weight annotation is not
// an integer in 0..65535. The pod is published with the default weight 1;
// the controller tells its owner through a Warning Event on the pod and
// does not retry (nothing but a new annotation can fix it).
type InvalidWeightError struct {
	Pod *corev1.Pod
	Err error
}

func (e *InvalidWeightError) Error() string {
	return fmt.Sprintf("pod %s/%s: %v; using weight 1", e.Pod.Namespace, e.Pod.Name, e.Err)
}

// setHints sets topology hints for spec.trafficDistribution:
// PreferSameZone (and its old name PreferClose) hints the endpoint's own
// zone; PreferSameNode hints its node and zone. Endpoints without a zone
// (or node) get no such hint, and neither do endpoints that are not ready
// (kube-controller-manager's trafficDistribution heuristic hints ready
// endpoints only).
func setHints(ep *discoveryv1.Endpoint, td *string) {
	if td == nil || ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
		return
	}
	var h discoveryv1.EndpointHints
	switch *td {
	case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone:
		if ep.Zone != nil && *ep.Zone != "" {
			h.ForZones = []discoveryv1.ForZone{{Name: *ep.Zone}}
		}
	case corev1.ServiceTrafficDistributionPreferSameNode:
		if ep.NodeName != nil && *ep.NodeName != "" {
			h.ForNodes = []discoveryv1.ForNode{{Name: *ep.NodeName}}
		}
		if ep.Zone != nil && *ep.Zone != "" {
			h.ForZones = []discoveryv1.ForZone{{Name: *ep.Zone}}
		}
	}
	if len(h.ForZones) > 0 || len(h.ForNodes) > 0 {
		ep.Hints = &h
	}
}

func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	ports := []discoveryv1.EndpointPort{}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		num, err := podutil.FindPort(pod, sp)
		if err != nil {
			continue
		}
		name, proto := sp.Name, sp.Protocol
		ports = append(ports, discoveryv1.EndpointPort{Name: &name, Port: &num, Protocol: &proto, AppProtocol: sp.AppProtocol})
	}
	sortPortsAsKCM(ports)
	return ports
}

// sortPortsAsKCM puts a slice's ports in kube-controller-manager's order:
// it sorts them by the hex FNV-128a hash of their apimachinery hash dump
// (the order its port-group key leaves them in), so the slices it and
// svcnet write for the same Service list their ports alike.
func sortPortsAsKCM(ports []discoveryv1.EndpointPort) {
	if len(ports) < 2 {
		return
	}
	type keyed struct {
		hash string
		port discoveryv1.EndpointPort
	}
	ks := make([]keyed, len(ports))
	for i, p := range ports {
		h := fnv.New128a()
		fmt.Fprint(h, apidump.ForHash(p))
		ks[i] = keyed{hex.EncodeToString(h.Sum(nil)), p}
	}
	sort.SliceStable(ks, func(a, b int) bool { return ks[a].hash < ks[b].hash })
	for i := range ks {
		ports[i] = ks[i].port
	}
}

func podToEndpoint(pod *corev1.Pod, node *corev1.Node, svc *corev1.Service, ip string) discoveryv1.Endpoint {
	serving := podutil.IsPodReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if pod.Spec.NodeName != "" {
		n := pod.Spec.NodeName
		ep.NodeName = &n
	}
	if node != nil {
		if z := node.Labels[corev1.LabelTopologyZone]; z != "" {
			ep.Zone = &z
		}
	}
	if podutil.ShouldSetHostname(pod, svc) {
		h := pod.Spec.Hostname
		ep.Hostname = &h
	}
	return ep
}

// SliceLabels returns the labels of a slice of svc: the Service's labels
// (reserved keys excluded), the headless marker when the Service has no
// cluster IP, kubernetes.io/service-name and the managed-by label.
func SliceLabels(svc *corev1.Service, managedBy string) map[string]string {
	out := map[string]string{}
	for k, v := range svc.Labels {
		if k == discoveryv1.LabelServiceName || k == discoveryv1.LabelManagedBy || k == corev1.IsHeadlessService {
			continue
		}
		out[k] = v
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		out[corev1.IsHeadlessService] = ""
	}
	out[discoveryv1.LabelServiceName] = svc.Name
	out[discoveryv1.LabelManagedBy] = managedBy
	return out
}

// NewSlice returns an unnamed slice skeleton for svc: generateName
// "<service>-", labels, and a controller owner reference to the Service.
func NewSlice(svc *corev1.Service, at discoveryv1.AddressType, ports []discoveryv1.EndpointPort, managedBy string) *discoveryv1.EndpointSlice {
	owner := metav1.NewControllerRef(svc, schema.GroupVersionKind{Version: "v1", Kind: "Service"})
	prefix := svc.Name + "-"
	if len(prefix) > 253-5 {
		prefix = "slice-"
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    prefix,
			Namespace:       svc.Namespace,
			Labels:          SliceLabels(svc, managedBy),
			OwnerReferences: []metav1.OwnerReference{*owner},
		},
		AddressType: at,
		Ports:       ports,
		Endpoints:   []discoveryv1.Endpoint{},
	}
}

// Tracker remembers the slices this controller last wrote per owner so
// that a sync can tell when the informer cache is behind its own writes
// (which would otherwise lead to duplicate slices).
type Tracker struct {
	mu sync.Mutex
	// want maps owner key -> slice name -> resourceVersion written ("" for
	// deleted).
	want map[string]map[string]string
	// expected is the set of namespace/name@rv we wrote, to ignore our own
	// informer events.
	expected map[string]bool
	// staleCount bounds how long one owner is held back: a slice of ours
	// deleted by someone else must not block it forever.
	staleCount map[string]int
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{want: map[string]map[string]string{}, expected: map[string]bool{}, staleCount: map[string]int{}}
}

// Record notes the outcome of a sync.
func (t *Tracker) Record(key string, before, written []*discoveryv1.EndpointSlice, deleted []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := map[string]string{}
	for _, s := range written {
		w[s.Name] = s.ResourceVersion
		t.expected[s.Namespace+"/"+s.Name+"@"+s.ResourceVersion] = true
	}
	for _, n := range deleted {
		w[n] = "\x00deleted"
	}
	_ = before
	t.want[key] = w
	delete(t.staleCount, key)
}

// Expected reports (once) whether s is exactly a write of ours.
func (t *Tracker) Expected(s *discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := s.Namespace + "/" + s.Name + "@" + s.ResourceVersion
	if s.ResourceVersion != "" && t.expected[k] {
		delete(t.expected, k)
		return true
	}
	return false
}

// Stale reports whether cached misses a slice we wrote (or still has one
// we deleted, or has an older version of one we updated).
func (t *Tracker) Stale(key string, cached []*discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.want[key]
	if len(w) == 0 {
		return false
	}
	have := map[string]string{}
	for _, s := range cached {
		have[s.Name] = s.ResourceVersion
	}
	for name, rv := range w {
		got, ok := have[name]
		if rv == "\x00deleted" {
			if ok {
				t.staleCount[key]++
				if t.staleCount[key] > 8 {
					break
				}
				return true
			}
			continue
		}
		if !ok || (rv != "" && got != rv && !newerRV(got, rv)) {
			t.staleCount[key]++
			if t.staleCount[key] > 8 {
				delete(t.want, key)
				delete(t.staleCount, key)
				return false
			}
			return true
		}
	}
	// The cache caught up; forget so later external edits are not
	// mistaken for staleness.
	delete(t.want, key)
	delete(t.staleCount, key)
	return false
}

// newerRV treats resourceVersions as opaque except that a different value
// which parses as a larger integer is newer.
func newerRV(got, want string) bool {
	var g, w uint64
	if _, err := fmt.Sscan(got, &g); err != nil {
		return false
	}
	if _, err := fmt.Sscan(want, &w); err != nil {
		return false
	}
	return g > w
}

// Forget drops the state of a deleted owner.
func (t *Tracker) Forget(key string) {
	t.mu.Lock()
	delete(t.want, key)
	t.mu.Unlock()
}
