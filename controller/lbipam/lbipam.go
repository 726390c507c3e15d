// Package lbipam is svcnet's LoadBalancer IP address management, the
// MetalLB way: it reads MetalLB's IPAddressPool objects (metallb.io/v1beta1)
// and gives every Service of type LoadBalancer (without a foreign
// loadBalancerClass) status.loadBalancer.ingress[].ip from a pool.
//
//   - Requested addresses win: the metallb.io/loadBalancerIPs annotation
//     (comma-separated, one per family), else spec.loadBalancerIP; they must
//     lie in a pool. metallb.io/address-pool picks a pool by name; otherwise
//     auto-assign pools are tried in priority order.
//   - An address is shared only between Services with the same
//     metallb.io/allow-shared-ip value and no common port/protocol.
//   - A Service keeps its address across restarts and unrelated changes;
//     addresses are released when the Service is deleted or stops being a
//     LoadBalancer (its ingress is then cleared).
//   - When nothing is available the Service stays <pending> and gets a
//     Warning AllocationFailed event; success is a Normal IPAllocated event
//     and the metallb.io/ip-allocated-from-pool annotation.
//   - Invalid pools are ignored with a Warning event on the pool; of two
//     overlapping pools the later (by name) is ignored and reported.
//
// The older metallb.universe.tf/ annotation prefix is honoured too.
package lbipam

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
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

const poolsKey = "\x00pools"

// Controller assigns LoadBalancer IPs. Create with New, then Run.
type Controller struct {
	client   kubernetes.Interface
	services corelisters.ServiceLister
	pools    cache.SharedIndexInformer
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	alloc    *Allocator
	log      *slog.Logger
	client8s *metallbmetrics.K8sClient
}

// New wires the controller to the Service informer and the dynamic
// IPAddressPool informer.
func New(client kubernetes.Interface, _ dynamic.Interface, factory informers.SharedInformerFactory, dynFactory dynamicinformer.DynamicSharedInformerFactory, recorder record.EventRecorder, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	svcInf := factory.Core().V1().Services()
	poolInf := dynFactory.ForResource(metallbv1beta1.IPAddressPoolsResource).Informer()
	c := &Controller{
		client:   client,
		services: svcInf.Lister(),
		pools:    poolInf,
		synced:   []cache.InformerSynced{svcInf.Informer().HasSynced, poolInf.HasSynced},
		queue:    worker.NewQueue("lbipam"),
		recorder: recorder,
		alloc:    NewAllocator(),
		log:      log.With("controller", ControllerName),
	}
	svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	poolInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.queue.Add(poolsKey) },
		UpdateFunc: func(any, any) { c.queue.Add(poolsKey) },
		DeleteFunc: func(any) { c.queue.Add(poolsKey) },
	})
	return c
}

// SetMetrics makes the controller keep MetalLB's allocator gauges in m
// and its metallb_k8s_client_* metrics in k (either may be nil). Call it
// before Run.
func (c *Controller) SetMetrics(m *Metrics, k *metallbmetrics.K8sClient) {
	c.alloc.SetMetrics(m)
	c.client8s = k
}

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
				_ = c.alloc.Assign(svcKey(s), ips, ports(s), annotation(s, AnnotationAllowSharedIP))
			}
		}
	}
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
		if ip, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

func ports(s *corev1.Service) []Port {
	var out []Port
	for _, p := range s.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = "TCP"
		}
		out = append(out, Port{Protocol: proto, Port: p.Port})
	}
	return out
}

func families(s *corev1.Service) []int {
	var out []int
	for _, f := range s.Spec.IPFamilies {
		if f == corev1.IPv6Protocol {
			out = append(out, 6)
		} else {
			out = append(out, 4)
		}
	}
	if len(out) == 0 {
		out = []int{4}
	}
	return out
}

// loadPools parses every pool, reports invalid and overlapping ones, and
// hands the rest to the allocator.
func (c *Controller) loadPools() {
	var pools []*Pool
	bad := false
	defer func() { c.client8s.ConfigLoaded("pools", bad) }()
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range c.pools.GetStore().List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var p metallbv1beta1.IPAddressPool
		if err := metallbv1beta1.FromUnstructured(u, &p); err != nil {
			c.warnPool(u, err.Error())
			bad = true
			continue
		}
		pp, err := ParsePool(&p)
		if err != nil {
			c.warnPool(u, err.Error())
			bad = true
			continue
		}
		byName[p.Name] = u
		pools = append(pools, pp)
	}
	for _, err := range c.alloc.SetPools(pools) {
		bad = true
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

func (c *Controller) sync(ctx context.Context, key string) error {
	if key == poolsKey {
		c.loadPools()
		svcs, _ := c.services.List(labels.Everything())
		for _, s := range svcs {
			if wantsIP(s) || len(s.Status.LoadBalancer.Ingress) > 0 {
				c.queue.Add(svcKey(s))
			}
		}
		return nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.alloc.Unassign(key)
		return nil
	}
	if err != nil {
		return err
	}
	if svc.Spec.LoadBalancerClass != nil {
		return nil // another implementation's
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		c.alloc.Unassign(key)
		if len(svc.Status.LoadBalancer.Ingress) > 0 {
			return c.setIngress(ctx, svc, nil)
		}
		return nil
	}
	ips, pool, err := c.decide(svc)
	if err != nil {
		if c.recorder != nil {
			c.recorder.Eventf(svc, corev1.EventTypeWarning, "AllocationFailed", "Failed to allocate IP for %q: %s", key, err)
		}
		c.log.Info("allocation failed", "service", key, "err", err)
		if len(svc.Status.LoadBalancer.Ingress) > 0 {
			return c.setIngress(ctx, svc, nil)
		}
		return nil
	}
	if slices.Equal(ips, ingressIPs(svc)) && annotation(svc, AnnotationAllocatedFrom) == pool {
		return nil
	}
	if err := c.setIngress(ctx, svc, ips); err != nil {
		return err
	}
	if err := c.setPoolAnnotation(ctx, svc, pool); err != nil {
		return err
	}
	if c.recorder != nil {
		strs := make([]string, len(ips))
		for i, ip := range ips {
			strs[i] = ip.String()
		}
		c.recorder.Eventf(svc, corev1.EventTypeNormal, "IPAllocated", "Assigned IP %q", strs)
	}
	return nil
}

// decide returns the addresses svc should hold and their pool, updating
// the allocator.
func (c *Controller) decide(svc *corev1.Service) ([]netip.Addr, string, error) {
	key := svcKey(svc)
	share := annotation(svc, AnnotationAllowSharedIP)
	prts := ports(svc)
	poolName := annotation(svc, AnnotationAddressPool)
	var requested []netip.Addr
	if v := annotation(svc, AnnotationLoadBalancerIPs); v != "" {
		for _, s := range strings.Split(v, ",") {
			ip, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil {
				return nil, "", fmt.Errorf("invalid %s annotation %q", AnnotationLoadBalancerIPs, v)
			}
			requested = append(requested, ip.Unmap())
		}
	} else if svc.Spec.LoadBalancerIP != "" {
		ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP)
		if err != nil {
			return nil, "", fmt.Errorf("invalid spec.loadBalancerIP %q", svc.Spec.LoadBalancerIP)
		}
		requested = []netip.Addr{ip.Unmap()}
	}
	if len(requested) > 0 {
		if err := c.alloc.Assign(key, requested, prts, share); err != nil {
			return nil, "", err
		}
		if poolName != "" && c.alloc.Get(key).Pool != poolName {
			c.alloc.Unassign(key)
			return nil, "", fmt.Errorf("requested IPs %v are not in pool %q", requested, poolName)
		}
		return requested, c.alloc.Get(key).Pool, nil
	}
	// Keep what it holds when still valid.
	if cur := ingressIPs(svc); len(cur) > 0 && len(cur) == len(families(svc)) {
		if err := c.alloc.Assign(key, cur, prts, share); err == nil {
			if a := c.alloc.Get(key); poolName == "" || a.Pool == poolName {
				if p := c.alloc.pool(a.Pool); p != nil && (p.AutoAssign || poolName == a.Pool) {
					return cur, a.Pool, nil
				}
			}
		}
	}
	c.alloc.Unassign(key)
	ips, err := c.alloc.Allocate(key, svc.Namespace, poolName, families(svc), prts, share)
	if err != nil {
		return nil, "", err
	}
	return ips, c.alloc.Get(key).Pool, nil
}

func (c *Controller) setIngress(ctx context.Context, svc *corev1.Service, ips []netip.Addr) error {
	cp := svc.DeepCopy()
	cp.Status.LoadBalancer.Ingress = nil
	for _, ip := range ips {
		cp.Status.LoadBalancer.Ingress = append(cp.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip.String()})
	}
	_, err := c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

func (c *Controller) setPoolAnnotation(ctx context.Context, svc *corev1.Service, pool string) error {
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := c.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("get service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		if cur.Annotations[AnnotationAllocatedFrom] == pool {
			return nil
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[AnnotationAllocatedFrom] = pool
		_, err = c.client.CoreV1().Services(svc.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("annotate service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
	}
	return fmt.Errorf("annotate service %s/%s: too many conflicts", svc.Namespace, svc.Name)
}
