// Package servicecidrs is the ServiceCIDR controller of
// kube-controller-manager: every ServiceCIDR gets the finalizer
// networking.k8s.io/service-cidr-finalizer and the condition Ready=True;
// a ServiceCIDR being deleted keeps its finalizer (and gets Ready=False,
// reason Terminating) while an IPAddress of the ClusterIP allocator lies in
// it and in no other ServiceCIDR, so that no allocated ClusterIP is left
// outside every range. Once nothing depends on it, the finalizer is removed
// no sooner than 10 s after the deletion started, so that every apiserver
// has stopped allocating from it.
package servicecidrs

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/controller/internal/worker"
)

const (
	// ControllerName is the controller's name (field manager, logs).
	ControllerName = "service-cidr-controller"
	// Finalizer protects a ServiceCIDR with addresses in it.
	Finalizer = "networking.k8s.io/service-cidr-finalizer"
	// managedBy is the label value of the ClusterIP allocator's IPAddresses.
	managedBy = "ipallocator.k8s.io"
	// DeletionGracePeriod is how long after its deletion started a
	// ServiceCIDR keeps its finalizer at least.
	DeletionGracePeriod = 10 * time.Second
)

// Controller reconciles ServiceCIDRs. Create it with New, then call Run.
type Controller struct {
	client  kubernetes.Interface
	cidrs   networkinglisters.ServiceCIDRLister
	ips     networkinglisters.IPAddressLister
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	log     *slog.Logger
	nowFunc func() time.Time
}

// New wires a controller to the factory's ServiceCIDR and IPAddress
// informers; the caller starts the factory after New.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	cidrInf := factory.Networking().V1().ServiceCIDRs()
	ipInf := factory.Networking().V1().IPAddresses()
	c := &Controller{
		client: client, cidrs: cidrInf.Lister(), ips: ipInf.Lister(),
		synced:  []cache.InformerSynced{cidrInf.Informer().HasSynced, ipInf.Informer().HasSynced},
		queue:   worker.NewQueue("servicecidrs"),
		log:     log.With("controller", ControllerName),
		nowFunc: time.Now,
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	cidrInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	})
	// A deleted IPAddress may unblock a ServiceCIDR being deleted.
	ipInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(any) {
		all, _ := c.cidrs.List(labels.Everything())
		for _, sc := range all {
			if sc.DeletionTimestamp != nil {
				c.queue.Add(sc.Name)
			}
		}
	}})
	return c
}

// Run waits for the caches, then syncs until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("%s: caches did not sync", ControllerName)
	}
	worker.Run(ctx, c.log, c.queue, workers, c.sync)
	return nil
}

func (c *Controller) sync(ctx context.Context, key string) error {
	sc, err := c.cidrs.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if sc.DeletionTimestamp != nil {
		if !c.canDelete(sc) {
			return c.setReady(ctx, sc, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionFalse,
				Reason:  networkingv1.ServiceCIDRReasonTerminating,
				Message: "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"})
		}
		if wait := DeletionGracePeriod - c.nowFunc().Sub(sc.DeletionTimestamp.Time); wait > 0 {
			c.queue.AddAfter(key, wait)
			return nil
		}
		return c.setFinalizer(ctx, sc, false)
	}
	if err := c.setFinalizer(ctx, sc, true); err != nil {
		return err
	}
	return c.setReady(ctx, sc, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
		Message: "Kubernetes Service CIDR is ready"})
}

// containsPrefix: the ServiceCIDRs with a CIDR covering p.
func containsPrefix(all []*networkingv1.ServiceCIDR, p netip.Prefix) []string {
	var out []string
	for _, sc := range all {
		for _, s := range sc.Spec.CIDRs {
			if q, err := netip.ParsePrefix(s); err == nil && q.Overlaps(p) && q.Bits() <= p.Bits() {
				out = append(out, sc.Name)
			}
		}
	}
	return out
}

// prefixContains: a ServiceCIDR holds neither its network address nor an
// IPv4 broadcast address.
func prefixContains(p netip.Prefix, ip netip.Addr) bool {
	if !p.Contains(ip) || p.Masked().Addr() == ip {
		return false
	}
	if ip.Is4() {
		b := p.Masked().Addr().As4()
		host := 32 - p.Bits()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		if host > 0 {
			v |= 1<<host - 1
		}
		if netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}) == ip {
			return false
		}
	}
	return true
}

// canDelete reports whether deleting sc leaves no allocated address outside
// every range: true when another ServiceCIDR covers each of its CIDRs, or
// when no IPAddress of the allocator lies in sc alone.
func (c *Controller) canDelete(sc *networkingv1.ServiceCIDR) bool {
	all, err := c.cidrs.List(labels.Everything())
	if err != nil {
		return false
	}
	covered := true
	for _, s := range sc.Spec.CIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			continue
		}
		if in := containsPrefix(all, p); len(in) == 0 || len(in) == 1 && in[0] == sc.Name {
			covered = false
		}
	}
	if covered {
		return true
	}
	ips, err := c.ips.List(labels.SelectorFromSet(labels.Set{networkingv1.LabelManagedBy: managedBy}))
	if err != nil {
		return false
	}
	for _, obj := range ips {
		ip, err := netip.ParseAddr(obj.Name)
		if err != nil {
			continue
		}
		var holders []string
		for _, other := range all {
			for _, s := range other.Spec.CIDRs {
				if p, err := netip.ParsePrefix(s); err == nil && prefixContains(p, ip) {
					holders = append(holders, other.Name)
					break
				}
			}
		}
		if len(holders) == 1 && holders[0] == sc.Name {
			c.log.Info("deleting ServiceCIDR blocked by IP address", "serviceCIDR", sc.Name, "ip", obj.Name)
			return false
		}
	}
	return true
}

func (c *Controller) setFinalizer(ctx context.Context, sc *networkingv1.ServiceCIDR, present bool) error {
	if slices.Contains(sc.Finalizers, Finalizer) == present {
		return nil
	}
	cp := sc.DeepCopy()
	if present {
		cp.Finalizers = append(cp.Finalizers, Finalizer)
	} else {
		cp.Finalizers = slices.DeleteFunc(cp.Finalizers, func(f string) bool { return f == Finalizer })
	}
	_, err := c.client.NetworkingV1().ServiceCIDRs().Update(ctx, cp, metav1.UpdateOptions{FieldManager: ControllerName})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setReady writes the Ready condition unless it already says the same.
func (c *Controller) setReady(ctx context.Context, sc *networkingv1.ServiceCIDR, cond metav1.Condition) error {
	if cur := apimeta.FindStatusCondition(sc.Status.Conditions, cond.Type); cur != nil &&
		cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message {
		return nil
	}
	cp := sc.DeepCopy()
	cond.LastTransitionTime = metav1.NewTime(c.nowFunc())
	apimeta.SetStatusCondition(&cp.Status.Conditions, cond)
	_, err := c.client.NetworkingV1().ServiceCIDRs().UpdateStatus(ctx, cp, metav1.UpdateOptions{FieldManager: ControllerName})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
