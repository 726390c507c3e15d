// Package lbipam is svcnet's LoadBalancer IP address management, the
// MetalLB way: it reads MetalLB's IPAddressPool objects (metallb.io/v1beta1)
// and gives every Service of type LoadBalancer (without a
// loadBalancerClass) status.loadBalancer.ingress[].ip from a pool, with
// MetalLB v0.15's decisions, events and messages (compared with MetalLB's
// own controller in e2e/interop TestRealMetalLBController).
//
//   - Requested addresses win: the metallb.io/loadBalancerIPs annotation
//     (comma-separated, one per family), else spec.loadBalancerIP; they must
//     lie in a pool that admits the Service. metallb.io/address-pool picks
//     a pool by name. Otherwise the auto-assign pools whose
//     serviceAllocation admits the Service (its namespace listed or
//     selected, its labels selected) are tried in priority order, then the
//     auto-assign pools without a serviceAllocation.
//   - An address is shared only between Services with the same
//     metallb.io/allow-shared-ip value (and, for externalTrafficPolicy
//     Local, the same selector) and no common port.
//   - A Service keeps its address across restarts and unrelated changes;
//     addresses are released when the Service is deleted or stops being a
//     LoadBalancer (its ingress and pool annotation are then cleared), and
//     every Service is looked at again, so one waiting for an address may
//     get it.
//   - Failures are Warning AllocationFailed events; success is a Normal
//     IPAllocated event and the metallb.io/ip-allocated-from-pool
//     annotation; each pool's status counts its addresses in use and left.
//   - Invalid pools are ignored with a Warning event on the pool; of two
//     overlapping pools the later (by name) is ignored and reported.
//
// The older metallb.universe.tf/ annotation prefix is honoured too (with
// MetalLB's deprecatedAnnotation warning).
package lbipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/controller/internal/worker"
	"github.com/svcnet/svcnet/internal/metallbmetrics"
	"github.com/svcnet/svcnet/internal/metallbstate"
)

// ControllerName is the event source component.
const ControllerName = "metallb-controller"

// Annotations, as MetalLB names them.
const (
	AnnotationLoadBalancerIPs = "metallb.io/loadBalancerIPs"
	AnnotationAddressPool     = "metallb.io/address-pool"
	AnnotationAllowSharedIP   = "metallb.io/allow-shared-ip"
	AnnotationAllocatedFrom   = "metallb.io/ip-allocated-from-pool"
	legacyPrefix              = "metallb.universe.tf/"
)

// Queue keys beside the Services' namespace/name: the pools, and the
// status of one pool.
const (
	poolsKey         = "\x00pools"
	poolStatusPrefix = "\x00status/"
)

// Controller assigns LoadBalancer IPs. Create with New, then Run.
type Controller struct {
	client     kubernetes.Interface
	dyn        dynamic.Interface
	services   corelisters.ServiceLister
	namespaces corelisters.NamespaceLister
	pools      cache.SharedIndexInformer
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	recorder   record.EventRecorder
	alloc      *Allocator
	log        *slog.Logger
	client8s   *metallbmetrics.K8sClient
	state      *metallbstate.Reporter
}

// New wires the controller to the Service informer and the dynamic
// IPAddressPool informer.
func New(client kubernetes.Interface, dyn dynamic.Interface, factory informers.SharedInformerFactory, dynFactory dynamicinformer.DynamicSharedInformerFactory, recorder record.EventRecorder, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	svcInf := factory.Core().V1().Services()
	nsInf := factory.Core().V1().Namespaces()
	poolInf := dynFactory.ForResource(metallbv1beta1.IPAddressPoolsResource).Informer()
	c := &Controller{
		client:     client,
		dyn:        dyn,
		services:   svcInf.Lister(),
		namespaces: nsInf.Lister(),
		pools:      poolInf,
		synced:     []cache.InformerSynced{svcInf.Informer().HasSynced, nsInf.Informer().HasSynced, poolInf.HasSynced},
		queue:      worker.NewQueue("lbipam"),
		recorder:   recorder,
		alloc:      NewAllocator(),
		log:        log.With("controller", ControllerName),
	}
	svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	poolInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.queue.Add(poolsKey) },
		UpdateFunc: func(old, cur any) {
			// Its own status writes do not change the configuration.
			o, ok1 := old.(*unstructured.Unstructured)
			n, ok2 := cur.(*unstructured.Unstructured)
			if ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && o.GetGeneration() != 0 {
				return
			}
			c.queue.Add(poolsKey)
		},
		DeleteFunc: func(any) { c.queue.Add(poolsKey) },
	})
	// Namespace labels decide which pools' namespace selectors admit them.
	nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.queue.Add(poolsKey) },
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Namespace)
			n, ok2 := cur.(*corev1.Namespace)
			if ok1 && ok2 && labels.Equals(o.Labels, n.Labels) {
				return
			}
			c.queue.Add(poolsKey)
		},
		DeleteFunc: func(any) { c.queue.Add(poolsKey) },
	})
	c.alloc.changed = func(pool string) { c.queue.Add(poolStatusPrefix + pool) }
	return c
}

// SetMetrics makes the controller keep MetalLB's allocator gauges in m
// and its metallb_k8s_client_* metrics in k (either may be nil). Call it
// before Run.
func (c *Controller) SetMetrics(m *Metrics, k *metallbmetrics.K8sClient) {
	c.alloc.SetMetrics(m)
	c.client8s = k
}

// SetConfigState makes the controller report whether the pools loaded in
// MetalLB's ConfigurationState "controller" (nil: not). Call it before Run.
func (c *Controller) SetConfigState(r *metallbstate.Reporter) { c.state = r }

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// Run waits for caches, loads pools, re-registers the addresses Services
// already hold, then serves with a single worker (allocation decisions
// depend on each other).
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("lbipam: caches did not sync")
	}
	c.loadPools()
	svcs, _ := c.services.List(labels.Everything())
	for _, s := range svcs {
		if wantsIP(s) {
			if ips := ingressIPs(s); len(ips) > 0 {
				_ = c.alloc.Assign(request(s), ips)
			}
		}
	}
	for _, p := range c.alloc.Pools() {
		c.queue.Add(poolStatusPrefix + p)
	}
	go c.state.Run(ctx)
	worker.Run(ctx, c.log, c.queue, 1, func(ctx context.Context, key string) error {
		err := c.sync(ctx, key)
		c.client8s.Processed(err)
		return err
	})
	// Another instance (leader election) reports from now on.
	c.alloc.StopMetrics()
	return nil
}

func svcKey(s *corev1.Service) string { return s.Namespace + "/" + s.Name }

// annotation reads a metallb.io/ annotation, or its metallb.universe.tf/
// form when the first is absent.
func annotation(s *corev1.Service, key string) string {
	if v, ok := s.Annotations[key]; ok {
		return v
	}
	return s.Annotations[legacyPrefix+strings.TrimPrefix(key, "metallb.io/")]
}

func wantsIP(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.LoadBalancerClass == nil
}

func ingressIPs(s *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP == "" {
			continue
		}
		ip, err := netip.ParseAddr(in.IP)
		if err != nil {
			ip = netip.Addr{}
		}
		out = append(out, ip.Unmap())
	}
	return out
}

// request is what the allocator knows of s.
func request(s *corev1.Service) Request {
	r := Request{Key: svcKey(s), Namespace: s.Namespace, Labels: s.Labels, SharingKey: annotation(s, AnnotationAllowSharedIP),
		Policy: corev1.IPFamilyPolicySingleStack}
	for _, p := range s.Spec.Ports {
		r.Ports = append(r.Ports, Port{Protocol: string(p.Protocol), Port: p.Port})
	}
	if s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		r.BackendKey = labels.Set(s.Spec.Selector).String()
	}
	if s.Spec.IPFamilyPolicy != nil {
		r.Policy = *s.Spec.IPFamilyPolicy
	}
	r.V6First = len(s.Spec.IPFamilies) > 0 && s.Spec.IPFamilies[0] == corev1.IPv6Protocol
	return r
}

// serviceFamily is the family of the Service's ClusterIPs.
func serviceFamily(s *corev1.Service) (Family, error) {
	ips := s.Spec.ClusterIPs
	if len(ips) == 0 && s.Spec.ClusterIP != "" {
		ips = []string{s.Spec.ClusterIP}
	}
	var addrs []netip.Addr
	for _, v := range ips {
		ip, err := netip.ParseAddr(v)
		if err != nil {
			return "", fmt.Errorf("invalid cluster IP %q", v)
		}
		addrs = append(addrs, ip.Unmap())
	}
	if f := familyOfIPs(addrs); f != "" {
		return f, nil
	}
	return "", fmt.Errorf("invalid cluster IPs %v", ips)
}

// loadPools parses every pool, resolves their namespace selectors,
// reports invalid and overlapping ones, and hands the rest to the
// allocator.
func (c *Controller) loadPools() {
	var pools []*Pool
	var problems []string
	defer func() {
		c.client8s.ConfigLoaded("pools", len(problems) > 0)
		c.state.Set("pools", problems)
	}()
	nsLabels := map[string]map[string]string{}
	if nss, err := c.namespaces.List(labels.Everything()); err == nil {
		for _, n := range nss {
			nsLabels[n.Name] = n.Labels
		}
	}
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range c.pools.GetStore().List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var p metallbv1beta1.IPAddressPool
		if err := metallbv1beta1.FromUnstructured(u, &p); err != nil {
			c.warnPool(u, err.Error())
			problems = append(problems, err.Error())
			continue
		}
		pp, err := ParsePool(&p)
		if err != nil {
			c.warnPool(u, err.Error())
			problems = append(problems, err.Error())
			continue
		}
		pp.ResolveNamespaces(nsLabels)
		byName[p.Name] = u
		pools = append(pools, pp)
	}
	for _, err := range c.alloc.SetPools(pools) {
		problems = append(problems, err.Error())
		c.log.Warn("overlapping address pools", "err", err)
		for name, u := range byName {
			if strings.Contains(err.Error(), fmt.Sprintf("in pool %q overlaps", name)) {
				c.warnPool(u, err.Error())
			}
		}
	}
}

func (c *Controller) warnPool(u *unstructured.Unstructured, msg string) {
	c.log.Warn("invalid address pool", "pool", u.GetNamespace()+"/"+u.GetName(), "err", msg)
	if c.recorder != nil {
		c.recorder.Event(u, corev1.EventTypeWarning, "InvalidConfig", msg)
	}
}

// reprocessAll queues every Service (after a change of the pools, or when
// an address came free: a Service waiting for one may get it now).
func (c *Controller) reprocessAll() {
	svcs, _ := c.services.List(labels.Everything())
	// Those holding addresses first (most first), as MetalLB: a Service
	// waiting for an address must not take one another still shows.
	slices.SortStableFunc(svcs, func(a, b *corev1.Service) int {
		if d := len(b.Status.LoadBalancer.Ingress) - len(a.Status.LoadBalancer.Ingress); d != 0 {
			return d
		}
		return strings.Compare(svcKey(a), svcKey(b))
	})
	for _, s := range svcs {
		c.queue.Add(svcKey(s))
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	if key == poolsKey {
		before := c.alloc.Fingerprint()
		c.loadPools()
		if c.alloc.Fingerprint() == before {
			return nil // a namespace event, or a status write, changed nothing
		}
		for _, p := range c.alloc.Pools() {
			c.queue.Add(poolStatusPrefix + p)
		}
		c.reprocessAll()
		return nil
	}
	if pool, ok := strings.CutPrefix(key, poolStatusPrefix); ok {
		return c.writePoolStatus(ctx, pool)
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svcRO, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		if c.alloc.Get(key) != nil {
			c.alloc.Unassign(key)
			c.reprocessAll()
		}
		return nil
	}
	if err != nil {
		return err
	}
	if svcRO.Spec.LoadBalancerClass != nil {
		return nil // another implementation's
	}
	svc := svcRO.DeepCopy()
	var prevIPs []netip.Addr
	prevKey := ""
	if al := c.alloc.Get(key); al != nil {
		prevIPs, prevKey = al.IPs, al.Key()
	}
	_ = c.converge(key, svc) // its failures are events; retried when something changes
	reprocess := false
	if al := c.alloc.Get(key); (al == nil && prevKey != "") || (al != nil && al.Key() != prevKey) {
		reprocess = true // a shared address's keys changed
	}
	if equality.Semantic.DeepEqual(svcRO.Status, svc.Status) && equality.Semantic.DeepEqual(svcRO.Annotations, svc.Annotations) {
		if reprocess {
			c.reprocessAll()
		}
		return nil
	}
	if c.recorder != nil {
		var deprecated []string
		for a := range svcRO.Annotations {
			if strings.HasPrefix(a, legacyPrefix) {
				deprecated = append(deprecated, a)
			}
		}
		slices.Sort(deprecated)
		for _, a := range deprecated {
			c.recorder.Eventf(svcRO, corev1.EventTypeWarning, "deprecatedAnnotation", "Service uses deprecated annotation %s", a)
		}
	}
	if len(prevIPs) > 0 && c.alloc.Get(key) == nil && c.alloc.PoolFor(prevIPs) != nil {
		reprocess = true // its address came free
	}
	if err := c.write(ctx, svcRO, svc); err != nil {
		return err
	}
	if reprocess {
		c.reprocessAll()
	}
	return nil
}

// clear releases what the Service holds and drops its addresses and
// pool annotation.
func (c *Controller) clear(key string, svc *corev1.Service) {
	c.alloc.Unassign(key)
	delete(svc.Annotations, AnnotationAllocatedFrom)
	svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
}

var errConverge = errors.New("failed to converge")

// converge decides the Service's addresses as MetalLB's controller does,
// recording its events, and leaves the result in svc's status and
// annotations.
func (c *Controller) converge(key string, svc *corev1.Service) error {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		c.clear(key, svc)
		return nil
	}
	if len(c.alloc.pools) == 0 {
		c.clear(key, svc)
		return errConverge
	}
	if len(svc.Spec.ClusterIPs) == 0 && svc.Spec.ClusterIP == "" {
		c.clear(key, svc)
		return errConverge
	}
	r := request(svc)
	lbIPs := ingressIPs(svc)
	if r.Policy == corev1.IPFamilyPolicyRequireDualStack && len(svc.Spec.ClusterIPs) < 2 {
		c.event(svc, corev1.EventTypeWarning, "not enough clusterips", "Service requires dual stack but not enough clusterips %v", svc.Spec.ClusterIPs)
		c.clear(key, svc)
		return errConverge
	}
	if len(lbIPs) == 0 {
		c.clear(key, svc)
	} else {
		lbFamily, err := familyForAddresses(lbIPs)
		if err != nil {
			c.event(svc, corev1.EventTypeWarning, "nolbIPsIPFamily", "Failed to retrieve LBIPs IPFamily for %s: %s", quoteIPs(lbIPs), err)
		}
		svcFamily, err := serviceFamily(svc)
		if err != nil {
			c.event(svc, corev1.EventTypeWarning, "noclusterIPsIPFamily", "Failed to retrieve ClusterIPs IPFamily for %q %s: %s", svc.Spec.ClusterIPs, svc.Spec.ClusterIP, err)
			return errConverge
		}
		if lbFamily == "" || (lbFamily != svcFamily && !(svcFamily == DualStack && r.Policy == corev1.IPFamilyPolicyPreferDualStack)) {
			c.clear(key, svc)
			lbIPs = nil
		}
	}
	if len(lbIPs) > 0 {
		if err := c.alloc.Assign(r, lbIPs); err != nil {
			c.event(svc, corev1.EventTypeNormal, "ClearAssignment", "current IP for %q not allowed by config, will attempt for new IP assignment: %s", key, err)
			c.clear(key, svc)
			lbIPs = nil
		}
		if pool := annotation(svc, AnnotationAddressPool); len(lbIPs) > 0 && pool != "" && c.alloc.Get(key).Pool != pool {
			c.clear(key, svc)
			lbIPs = nil
		}
		desired, _, err := desiredIPs(svc)
		if err != nil {
			c.event(svc, corev1.EventTypeWarning, "LoadBalancerFailed", "invalid requested loadbalancer IPs: %s", err)
			return errConverge
		}
		if len(desired) > 0 {
			// MetalLB's comparison sorts the held addresses (by text) in
			// place: a requested pair ends up in that order.
			sortIPText(lbIPs)
			if !sameIPs(lbIPs, desired) {
				c.clear(key, svc)
				lbIPs = nil
			}
		}
	}
	if len(lbIPs) == 1 && r.Policy == corev1.IPFamilyPolicyPreferDualStack {
		extra, err := c.alloc.AllocateAdditional(r, lbIPs[0], c.alloc.Get(key).Pool)
		if err != nil {
			c.event(svc, corev1.EventTypeNormal, "AdditionalAssignFailed", "cannot assign additional IP in PreferDualStack: %s", err)
		} else {
			lbIPs = append(lbIPs, extra)
			c.event(svc, corev1.EventTypeNormal, "IPAllocated", "Assigned additional IP %q", extra)
		}
	}
	if len(lbIPs) == 0 {
		ips, err := c.allocate(r, svc)
		if err != nil {
			c.log.Info("allocation failed", "service", key, "err", err)
			c.event(svc, corev1.EventTypeWarning, "AllocationFailed", "Failed to allocate IP for %q: %s", key, err)
			return errConverge
		}
		lbIPs = ips
		c.event(svc, corev1.EventTypeNormal, "IPAllocated", "Assigned IP %s", quoteIPs(lbIPs))
	}
	svc.Status.LoadBalancer.Ingress = nil
	for _, ip := range lbIPs {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip.String()})
	}
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[AnnotationAllocatedFrom] = c.alloc.Get(key).Pool
	return nil
}

// allocate picks addresses for a Service that holds none: those it
// requests, else from the pool it names, else from the pools that admit
// it.
func (c *Controller) allocate(r Request, svc *corev1.Service) ([]netip.Addr, error) {
	family, err := serviceFamily(svc)
	if err != nil {
		return nil, err
	}
	desired, desiredFamily, err := desiredIPs(svc)
	if err != nil {
		return nil, err
	}
	pool := annotation(svc, AnnotationAddressPool)
	if len(desired) > 0 {
		if family != desiredFamily {
			return nil, fmt.Errorf("requested loadBalancer IP(s) %s does not match the ipFamily of the service", quoteIPs(desired))
		}
		if err := c.alloc.Assign(r, desired); err != nil {
			return nil, err
		}
		if pool != "" && c.alloc.Get(r.Key).Pool != pool {
			c.alloc.Unassign(r.Key)
			return nil, fmt.Errorf("requested loadBalancer IP(s) %s is not compatible with requested address pool %s", quoteIPs(desired), pool)
		}
		return desired, nil
	}
	if pool != "" {
		return c.alloc.AllocateFromPool(r, family, pool)
	}
	return c.alloc.Allocate(r, family)
}

// desiredIPs are the addresses the Service asks for (the loadBalancerIPs
// annotation, or spec.loadBalancerIP) and their family.
func desiredIPs(svc *corev1.Service) ([]netip.Addr, Family, error) {
	v := annotation(svc, AnnotationLoadBalancerIPs)
	switch {
	case v == "" && svc.Spec.LoadBalancerIP == "":
		return nil, "", nil
	case v != "" && svc.Spec.LoadBalancerIP != "":
		return nil, "", fmt.Errorf("service can not have both %s and svc.Spec.LoadBalancerIP", AnnotationLoadBalancerIPs)
	case v == "":
		ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP)
		if err != nil || ip.Zone() != "" {
			return nil, "", fmt.Errorf("invalid spec.loadBalancerIP %q", svc.Spec.LoadBalancerIP)
		}
		return []netip.Addr{ip.Unmap()}, familyOf(ip.Unmap()), nil
	}
	var ips []netip.Addr
	for _, s := range strings.Split(v, ",") {
		ip, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil || ip.Zone() != "" {
			return nil, "", fmt.Errorf("invalid %s: %q", AnnotationLoadBalancerIPs, v)
		}
		ips = append(ips, ip.Unmap())
	}
	f, err := familyForAddresses(ips)
	if err != nil {
		return nil, "", err
	}
	return ips, f, nil
}

// familyForAddresses is the family of one address or a pair of different
// families, with MetalLB's errors otherwise.
func familyForAddresses(ips []netip.Addr) (Family, error) {
	if f := familyOfIPs(ips); f != "" {
		return f, nil
	}
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	if len(ips) == 2 {
		return "", fmt.Errorf("IPFamilyForAddresses: same address family %q", s)
	}
	return "", fmt.Errorf("IPFamilyForAddresses: invalid ips length %d %q", len(ips), s)
}

func sameIPs(a, b []netip.Addr) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	sortIPText(x)
	sortIPText(y)
	return slices.Equal(x, y)
}

func sortIPText(ips []netip.Addr) {
	slices.SortFunc(ips, func(p, q netip.Addr) int { return strings.Compare(p.String(), q.String()) })
}

func (c *Controller) event(svc *corev1.Service, typ, reason, msg string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(svc, typ, reason, msg, args...)
	}
}

// write stores the Service's new annotations and status.
func (c *Controller) write(ctx context.Context, old, svc *corev1.Service) error {
	cur := old
	if !equality.Semantic.DeepEqual(old.Annotations, svc.Annotations) {
		cp := old.DeepCopy()
		cp.Annotations = svc.Annotations
		updated, err := c.client.CoreV1().Services(svc.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("annotate service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		cur = updated
	}
	if !equality.Semantic.DeepEqual(old.Status, svc.Status) {
		cp := cur.DeepCopy()
		cp.Status = svc.Status
		if _, err := c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("update status of service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
	}
	return nil
}

// writePoolStatus writes a pool's counts to its status, as MetalLB's
// controller does.
func (c *Controller) writePoolStatus(ctx context.Context, pool string) error {
	counts, ok := c.alloc.Counters(pool)
	if !ok || c.dyn == nil {
		return nil
	}
	for _, o := range c.pools.GetStore().List() {
		u, isU := o.(*unstructured.Unstructured)
		if !isU || u.GetName() != pool {
			continue
		}
		want := map[string]any{
			"assignedIPv4": counts.AssignedIPv4, "assignedIPv6": counts.AssignedIPv6,
			"availableIPv4": counts.AvailableIPv4, "availableIPv6": counts.AvailableIPv6,
		}
		if have, _, _ := unstructured.NestedMap(u.Object, "status"); equality.Semantic.DeepEqual(have, want) {
			return nil
		}
		cp := u.DeepCopy()
		cp.Object["status"] = want
		_, err := c.dyn.Resource(metallbv1beta1.IPAddressPoolsResource).Namespace(u.GetNamespace()).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}
