// Package endpoints is svcnet's Endpoints controller: for every Service with
// a selector it keeps the core/v1 Endpoints object of the same name equal to
// the pods that back it, the way Kubernetes' endpoint-controller does.
//
// Rules, per Service:
//   - ExternalName Services and Services without a selector are never
//     touched (their Endpoints are written by hand, see package mirroring).
//   - A pod qualifies when its labels match, it has an IP of the Service's IP
//     family, it is not terminal (Succeeded/Failed), and it is not being
//     deleted — unless publishNotReadyAddresses is set, which also publishes
//     terminating pods.
//   - Ready pods go to addresses, others to notReadyAddresses (all go to
//     addresses under publishNotReadyAddresses).
//   - A named targetPort is resolved per pod by container port name and
//     protocol; a pod without it is left out of that port only. A Service
//     without ports publishes its pods only when it is headless.
//   - hostname is set when the pod's subdomain names the Service.
//   - Subsets are repacked (one subset per distinct set of ports, addresses
//     and ports ordered exactly as Kubernetes' RepackSubsets does, so
//     kubectl lists them in the same order); at most 1000 addresses are kept, ready ones first, and then
//     the endpoints.kubernetes.io/over-capacity annotation says "truncated".
//   - Labels are the Service's plus endpoints.kubernetes.io/managed-by and,
//     for a headless Service, service.kubernetes.io/headless.
//   - Nothing is written when nothing changed; Endpoints go away with their
//     Service.
package endpoints

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/davecgh/go-spew/spew"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/controller/internal/podutil"
	"github.com/svcnet/svcnet/controller/internal/triggertime"
	"github.com/svcnet/svcnet/controller/internal/worker"
)

const (
	// MaxCapacity is the most addresses one Endpoints object holds.
	MaxCapacity = 1000
	// Truncated is the value of the over-capacity annotation.
	Truncated = "truncated"
	// LabelManagedBy marks Endpoints written by this controller.
	LabelManagedBy = "endpoints.kubernetes.io/managed-by"
	// ControllerName is the value of LabelManagedBy.
	ControllerName = "endpoint-controller"
)

// cacheRetry is how soon a sync that raced the informer cache is retried.
const cacheRetry = 20 * time.Millisecond

// Controller reconciles Endpoints. Create it with New, then call Run.
type Controller struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	endpoints corelisters.EndpointsLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	recorder  record.EventRecorder
	triggers  *triggertime.Tracker
	log       *slog.Logger
}

// New wires a controller to the factory's Service, Pod and Endpoints
// informers. The factory must be started by the caller after New.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	svcInf := factory.Core().V1().Services()
	podInf := factory.Core().V1().Pods()
	epInf := factory.Core().V1().Endpoints()
	c := &Controller{
		client:    client,
		services:  svcInf.Lister(),
		pods:      podInf.Lister(),
		endpoints: epInf.Lister(),
		synced:    []cache.InformerSynced{svcInf.Informer().HasSynced, podInf.Informer().HasSynced, epInf.Informer().HasSynced},
		queue:     worker.NewQueue("endpoint"),
		recorder:  recorder,
		triggers:  triggertime.NewTracker(),
		log:       log.With("controller", ControllerName),
	}
	svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.onPod,
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Pod), cur.(*corev1.Pod)
			if o.ResourceVersion == n.ResourceVersion {
				return
			}
			c.onPod(old)
			c.onPod(cur)
		},
		DeleteFunc: c.onPod,
	})
	epInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		// A hand-edited or deleted Endpoints of a selector Service is put
		// back; syncService ignores the others.
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	return c
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.Add(key)
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

// Run waits for the caches, then syncs with the given number of workers
// until ctx is cancelled. At start it also deletes Endpoints this controller
// once wrote whose Service is gone.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("endpoint controller: caches did not sync")
	}
	c.checkLeftoverEndpoints()
	worker.Run(ctx, c.log, c.queue, workers, c.syncService)
	return nil
}

// checkLeftoverEndpoints queues every Endpoints labelled as ours so that
// those whose Service was deleted while we were down are removed.
func (c *Controller) checkLeftoverEndpoints() {
	eps, err := c.endpoints.List(labels.SelectorFromSet(labels.Set{LabelManagedBy: ControllerName}))
	if err != nil {
		return
	}
	for _, ep := range eps {
		c.queue.Add(ep.Namespace + "/" + ep.Name)
	}
}

// syncService reconciles the Endpoints of one Service key.
func (c *Controller) syncService(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.triggers.Forget(key)
		ep, err := c.endpoints.Endpoints(ns).Get(name)
		if err != nil || ep.Labels[LabelManagedBy] != ControllerName {
			// Never delete hand-written Endpoints of a Service that does not
			// exist (yet): they may be created before their Service.
			return nil
		}
		err = c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete endpoints %s: %w", key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get service %s: %w", key, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return nil
	}
	if svc.DeletionTimestamp != nil {
		return nil
	}
	pods, err := c.pods.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return fmt.Errorf("list pods for %s: %w", key, err)
	}
	trigger := c.triggers.Compute(key, svc, pods)

	current, err := c.endpoints.Endpoints(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get endpoints %s: %w", key, err)
	}
	desired := Desired(svc, pods, current, trigger)
	if desired == nil {
		return nil
	}
	if current == nil {
		_, err = c.client.CoreV1().Endpoints(ns).Create(ctx, desired, metav1.CreateOptions{})
		if err != nil {
			if apierrors.IsAlreadyExists(err) {
				// The cache has not seen our (or someone's) create yet:
				// look again shortly, outside the error backoff.
				c.queue.AddAfter(key, cacheRetry)
				return nil
			}
			c.event(svc, "FailedToCreateEndpoint", fmt.Sprintf("Failed to create endpoint for service %s/%s: %v", ns, name, err))
			return fmt.Errorf("create endpoints %s: %w", key, err)
		}
		return nil
	}
	if _, err = c.client.CoreV1().Endpoints(ns).Update(ctx, desired, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			c.queue.AddAfter(key, cacheRetry)
			return nil
		}
		if !apierrors.IsNotFound(err) {
			c.event(svc, "FailedToUpdateEndpoint", fmt.Sprintf("Failed to update endpoint %s/%s: %v", ns, name, err))
		}
		return fmt.Errorf("update endpoints %s: %w", key, err)
	}
	return nil
}

func (c *Controller) event(svc *corev1.Service, reason, msg string) {
	if c.recorder != nil {
		c.recorder.Event(svc, corev1.EventTypeWarning, reason, msg)
	}
}

// Desired returns the Endpoints object svc should have given its selected
// pods, starting from current (nil when there is none), or nil when current
// is already right and no write is needed. trigger is the
// last-change-trigger-time; the zero time drops the annotation.
func Desired(svc *corev1.Service, pods []*corev1.Pod, current *corev1.Endpoints, trigger time.Time) *corev1.Endpoints {
	subsets := Subsets(svc, pods)
	total := 0
	for _, s := range subsets {
		total += len(s.Addresses) + len(s.NotReadyAddresses)
	}
	wantLabels := map[string]string{}
	maps.Copy(wantLabels, svc.Labels)
	wantLabels[LabelManagedBy] = ControllerName
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		wantLabels[corev1.IsHeadlessService] = ""
	} else {
		delete(wantLabels, corev1.IsHeadlessService)
	}

	var out *corev1.Endpoints
	if current == nil {
		out = &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace}}
	} else {
		_, overNow := current.Annotations[corev1.EndpointsOverCapacity]
		if apiequality.Semantic.DeepEqual(subsetsIgnoringRV(current.Subsets), truncatedCopy(subsets)) &&
			apiequality.Semantic.DeepEqual(nonNil(current.Labels), wantLabels) &&
			overNow == (total > MaxCapacity) {
			return nil
		}
		out = current.DeepCopy()
	}
	out.Subsets = subsets
	out.Labels = wantLabels
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	if !trigger.IsZero() {
		out.Annotations[corev1.EndpointsLastChangeTriggerTime] = trigger.UTC().Format(time.RFC3339Nano)
	} else {
		delete(out.Annotations, corev1.EndpointsLastChangeTriggerTime)
	}
	if truncate(out) {
		out.Annotations[corev1.EndpointsOverCapacity] = Truncated
	} else {
		delete(out.Annotations, corev1.EndpointsOverCapacity)
	}
	return out
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func truncatedCopy(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	ep := &corev1.Endpoints{Subsets: subsets}
	ep = ep.DeepCopy()
	truncate(ep)
	return ep.Subsets
}

// subsetsIgnoringRV clears targetRef resourceVersions, which older writers
// set and which say nothing about membership.
func subsetsIgnoringRV(in []corev1.EndpointSubset) []corev1.EndpointSubset {
	out := make([]corev1.EndpointSubset, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
		for _, list := range [][]corev1.EndpointAddress{out[i].Addresses, out[i].NotReadyAddresses} {
			for j := range list {
				if list[j].TargetRef != nil {
					list[j].TargetRef.ResourceVersion = ""
				}
			}
		}
	}
	return out
}

// Subsets computes the repacked, untruncated subsets of svc from its pods.
func Subsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	publishNotReady := svc.Spec.PublishNotReadyAddresses
	var subsets []corev1.EndpointSubset
	for _, pod := range pods {
		if !podutil.ShouldPodBeInEndpoints(pod, publishNotReady) {
			continue
		}
		ip := podutil.PodIPOfFamily(pod, podutil.ServiceIPFamily(svc, pod.Status.PodIP))
		if ip == "" {
			continue
		}
		addr := corev1.EndpointAddress{
			IP: ip,
			TargetRef: &corev1.ObjectReference{
				Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			},
		}
		if pod.Spec.NodeName != "" {
			n := pod.Spec.NodeName
			addr.NodeName = &n
		}
		if podutil.ShouldSetHostname(pod, svc) {
			addr.Hostname = pod.Spec.Hostname
		}
		ready := publishNotReady || podutil.IsPodReady(pod)
		add := func(ports []corev1.EndpointPort) {
			if ready {
				subsets = append(subsets, corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{addr}, Ports: ports})
			} else {
				subsets = append(subsets, corev1.EndpointSubset{NotReadyAddresses: []corev1.EndpointAddress{addr}, Ports: ports})
			}
		}
		if len(svc.Spec.Ports) == 0 {
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				add(nil)
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			port, err := podutil.FindPort(pod, sp)
			if err != nil {
				continue
			}
			add([]corev1.EndpointPort{{Name: sp.Name, Port: port, Protocol: sp.Protocol, AppProtocol: sp.AppProtocol}})
		}
	}
	return Repack(subsets)
}

type addrKey struct {
	ip  string
	uid string
}

// Repack regroups subsets so that each distinct set of ports appears once
// with all the addresses that offer exactly those ports. An address listed
// as not ready for a port anywhere is not ready for it. The result is
// ordered as Kubernetes' RepackSubsets/SortSubsets orders it: addresses by
// IP string then pod UID, ports and then subsets by the MD5 of their
// go-spew dump.
func Repack(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	addrs := map[addrKey]corev1.EndpointAddress{}
	portAddrs := map[corev1.EndpointPort]map[addrKey]bool{}
	note := func(a corev1.EndpointAddress, port corev1.EndpointPort, ready bool) {
		k := addrKey{ip: a.IP}
		if a.TargetRef != nil {
			k.uid = string(a.TargetRef.UID)
		}
		if _, ok := addrs[k]; !ok {
			addrs[k] = a
		}
		set := portAddrs[port]
		if set == nil {
			set = map[addrKey]bool{}
			portAddrs[port] = set
		}
		if was, ok := set[k]; !ok || was {
			set[k] = ready
		}
	}
	for _, s := range subsets {
		ports := s.Ports
		if len(ports) == 0 {
			ports = []corev1.EndpointPort{{Port: -1}}
		}
		for _, p := range ports {
			for _, a := range s.Addresses {
				note(a, p, true)
			}
			for _, a := range s.NotReadyAddresses {
				note(a, p, false)
			}
		}
	}
	type group struct {
		set   map[addrKey]bool
		ports []corev1.EndpointPort
	}
	groups := map[string]*group{}
	for port, set := range portAddrs {
		keys := make([]string, 0, len(set))
		for k, r := range set {
			keys = append(keys, fmt.Sprintf("%s|%s|%t", k.ip, k.uid, r))
		}
		sort.Strings(keys)
		gk := fmt.Sprint(keys)
		g := groups[gk]
		if g == nil {
			g = &group{set: set}
			groups[gk] = g
		}
		if port.Port > 0 {
			g.ports = append(g.ports, port)
		}
	}
	out := make([]corev1.EndpointSubset, 0, len(groups))
	for _, g := range groups {
		var s corev1.EndpointSubset
		for k, ready := range g.set {
			if ready {
				s.Addresses = append(s.Addresses, addrs[k])
			} else {
				s.NotReadyAddresses = append(s.NotReadyAddresses, addrs[k])
			}
		}
		sortAddrs(s.Addresses)
		sortAddrs(s.NotReadyAddresses)
		sortByHash(g.ports)
		s.Ports = g.ports
		out = append(out, s)
	}
	sortByHash(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

// hashDump is the spew configuration of Kubernetes' DeepHashObject.
var hashDump = spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}

// sortByHash orders ports or subsets by the MD5 of their spew "%#v" dump,
// as Kubernetes' SortSubsets does (portsByHash, subsetsByHash); the order
// looks arbitrary but is the one kube-controller-manager writes.
func sortByHash[T any](items []T) {
	keys := make(map[int][]byte, len(items))
	idx := make([]int, len(items))
	for i := range items {
		h := md5.New()
		hashDump.Fprintf(h, "%#v", items[i])
		keys[i] = h.Sum(nil)
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return bytes.Compare(keys[idx[i]], keys[idx[j]]) < 0 })
	sorted := make([]T, len(items))
	for i, k := range idx {
		sorted[i] = items[k]
	}
	copy(items, sorted)
}

// sortAddrs orders addresses as Kubernetes' LessEndpointAddress: by the IP
// string's bytes (so "10.0.0.10" sorts before "10.0.0.9"), then an address
// without targetRef first, then by targetRef UID.
func sortAddrs(a []corev1.EndpointAddress) {
	sort.SliceStable(a, func(i, j int) bool {
		if c := strings.Compare(a[i].IP, a[j].IP); c != 0 {
			return c < 0
		}
		if a[j].TargetRef == nil {
			return false
		}
		if a[i].TargetRef == nil {
			return true
		}
		return a[i].TargetRef.UID < a[j].TargetRef.UID
	})
}

// truncate cuts ep down to MaxCapacity addresses and reports whether it had
// to. Not-ready addresses go first; if the ready ones alone are too many,
// every subset keeps a share proportional to its size.
func truncate(ep *corev1.Endpoints) bool {
	ready, notReady := 0, 0
	for _, s := range ep.Subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	if ready+notReady <= MaxCapacity {
		return false
	}
	truncReady := ready > MaxCapacity
	max, total := MaxCapacity-ready, notReady
	if truncReady {
		max, total = MaxCapacity, ready
	}
	left := max
	for i := range ep.Subsets {
		s := &ep.Subsets[i]
		n := len(s.NotReadyAddresses)
		if truncReady {
			n = len(s.Addresses)
		}
		take := int(math.Ceil(float64(max) * float64(n) / float64(total)))
		if take > left {
			take = left
		}
		if truncReady {
			s.Addresses = s.Addresses[:min(take, len(s.Addresses))]
			s.NotReadyAddresses = nil
			left -= len(s.Addresses)
		} else {
			s.NotReadyAddresses = s.NotReadyAddresses[:min(take, len(s.NotReadyAddresses))]
			left -= len(s.NotReadyAddresses)
		}
	}
	return true
}
