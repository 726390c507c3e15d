package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"
	"unique"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/proxy/lb"
)

// StartInformers starts informers for Services and EndpointSlices (without
// the service-proxy-name and headless labels, as kube-proxy selects them) and
// for the Node named nodeName, wiring their events to p. It returns once
// p's event handlers have processed the initial lists (not merely once the
// informers' caches are full: handlers run behind the cache, and a first
// sync started in between would program only part of the Services, as
// kube-proxy avoids with its handlers' HasSynced), or when ctx ends; the
// informers stop with ctx.
func StartInformers(ctx context.Context, client kubernetes.Interface, p *Proxier, nodeName string, resync time.Duration) error {
	sel := func(o *metav1.ListOptions) {
		o.LabelSelector = "!" + LabelServiceProxyName + ",!" + LabelHeadless
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTweakListOptions(sel),
		informers.WithTransform(SlimObject))
	svcInf := f.Core().V1().Services().Informer()
	epInf := f.Discovery().V1().EndpointSlices().Informer()
	svcReg, err := svcInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if s, ok := o.(*v1.Service); ok {
				p.OnServiceAdd(s)
			}
		},
		UpdateFunc: func(a, b any) {
			oa, _ := a.(*v1.Service)
			ob, ok := b.(*v1.Service)
			if ok {
				p.OnServiceUpdate(oa, ob)
			}
		},
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if s, ok := o.(*v1.Service); ok {
				p.OnServiceDelete(s)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("service informer: %w", err)
	}
	epReg, err := epInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if s, ok := o.(*discovery.EndpointSlice); ok {
				p.OnEndpointSliceAdd(s)
			}
		},
		UpdateFunc: func(a, b any) {
			oa, _ := a.(*discovery.EndpointSlice)
			if s, ok := b.(*discovery.EndpointSlice); ok {
				p.OnEndpointSliceUpdate(oa, s)
			}
		},
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if s, ok := o.(*discovery.EndpointSlice); ok {
				p.OnEndpointSliceDelete(s)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("endpointslice informer: %w", err)
	}
	nf := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
	}), informers.WithTransform(SlimObject))
	nodeInf := nf.Core().V1().Nodes().Informer()
	nodeReg, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if n, ok := o.(*v1.Node); ok {
				p.OnNode(n)
			}
		},
		UpdateFunc: func(_, o any) {
			if n, ok := o.(*v1.Node); ok {
				p.OnNode(n)
			}
		},
		DeleteFunc: func(any) { p.OnNode(nil) },
	})
	if err != nil {
		return fmt.Errorf("node informer: %w", err)
	}
	start := time.Now()
	f.Start(ctx.Done())
	nf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), svcReg.HasSynced, epReg.HasSynced, nodeReg.HasSynced) {
		return fmt.Errorf("waiting for the proxy's informer handlers to process the initial lists: %w", ctx.Err())
	}
	p.log.Info("initial lists processed", "services", len(svcInf.GetStore().ListKeys()),
		"endpointSlices", len(epInf.GetStore().ListKeys()), "took", time.Since(start).Round(time.Millisecond))
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	return nil
}

// SlimObject is the informers' cache.TransformFunc: it strips from
// Services, EndpointSlices and Nodes what the proxy never reads, before
// the object is cached and handed to the event handlers, and interns the
// strings repeated across objects (namespaces, node names, zones, port
// names). The cache holds every Service and EndpointSlice of the cluster
// for the proxy's lifetime, and the change tracker keeps pointers to the
// same slices, so this is most of the proxy's heap: managed fields alone
// are often larger than the rest of an object. What stays is what
// NewServicePorts, the EndpointsChangeTracker and OnNode use (see
// TestSlimObjectKeepsWhatThePolicyReads); objects of other types pass
// unchanged. It modifies obj in place, which client-go allows (the object
// was just decoded and nobody else holds it).
func SlimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Service:
		slimMeta(&o.ObjectMeta, AnnotationIPVSScheduler, LabelServiceProxyName)
		sp := &o.Spec
		sp.Selector = nil
		sp.IPFamilies = nil
		for i := range sp.Ports {
			sp.Ports[i].Name = intern(sp.Ports[i].Name)
			sp.Ports[i].AppProtocol = nil
		}
		o.Status.Conditions = nil
		for i := range o.Status.LoadBalancer.Ingress {
			o.Status.LoadBalancer.Ingress[i].Hostname = ""
			o.Status.LoadBalancer.Ingress[i].Ports = nil
		}
	case *discovery.EndpointSlice:
		slimMeta(&o.ObjectMeta, AnnotationLastChangeTriggerTime, lb.EndpointWeightsAnnotation, discovery.LabelServiceName)
		for i := range o.Endpoints {
			e := &o.Endpoints[i]
			e.TargetRef = nil
			e.Hostname = nil
			e.DeprecatedTopology = nil
			internIn(e.NodeName)
			internIn(e.Zone)
		}
		for i := range o.Ports {
			internIn(o.Ports[i].Name)
			o.Ports[i].AppProtocol = nil
		}
	case *v1.Node:
		// OnNode reads labels, addresses, pod CIDRs and the deletion
		// timestamp; images and conditions are the bulk of a Node.
		o.ManagedFields = nil
		o.Annotations = nil
		o.Status.Images = nil
		o.Status.Conditions = nil
		o.Status.VolumesAttached = nil
		o.Status.VolumesInUse = nil
	}
	return obj, nil
}

// slimMeta drops managed fields, owner references and finalizers, and
// every annotation and label whose key is not in keep (a key may name
// either). Namespace and name are interned.
func slimMeta(m *metav1.ObjectMeta, keep ...string) {
	m.ManagedFields = nil
	m.OwnerReferences = nil
	m.Finalizers = nil
	m.GenerateName = ""
	m.Namespace = intern(m.Namespace)
	m.Annotations = keepKeys(m.Annotations, keep)
	m.Labels = keepKeys(m.Labels, keep)
}

// keepKeys returns the entries of m whose keys are in keep (nil if none).
func keepKeys(m map[string]string, keep []string) map[string]string {
	var out map[string]string
	for _, k := range keep {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, 1)
			}
			out[k] = v
		}
	}
	return out
}

// intern returns the canonical copy of s: the thousands of objects that
// name the same namespace, node or zone then share one string.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// internIn replaces the string *p with its canonical copy (the pointer
// stays the object's own).
func internIn(p *string) {
	if p != nil {
		*p = intern(*p)
	}
}

// WatchServiceCIDRs feeds p the ranges of the cluster's ServiceCIDR objects
// (networking.k8s.io/v1), as kube-proxy does, and returns once the first
// list is in, or with an error after wait (the informer goes on until ctx
// ends: a proxy not yet allowed to list them gets them later). It returns
// false, starting nothing, when the API server does not serve them
// (clusters before Kubernetes 1.33).
func WatchServiceCIDRs(ctx context.Context, client kubernetes.Interface, p *Proxier, wait time.Duration) (bool, error) {
	res, err := client.Discovery().ServerResourcesForGroupVersion(networking.SchemeGroupVersion.String())
	if err != nil || !slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Name == "servicecidrs" }) {
		return false, nil
	}
	f := informers.NewSharedInformerFactory(client, 0)
	inf := f.Networking().V1().ServiceCIDRs().Informer()
	publish := func() {
		var cidrs []netip.Prefix
		for _, o := range inf.GetStore().List() {
			sc, ok := o.(*networking.ServiceCIDR)
			if !ok {
				continue
			}
			for _, c := range sc.Spec.CIDRs {
				if pf, err := parsePrefix(c); err == nil {
					cidrs = append(cidrs, pf)
				}
			}
		}
		p.OnServiceCIDRs(cidrs)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { publish() },
		UpdateFunc: func(any, any) { publish() },
		DeleteFunc: func(any) { publish() },
	})
	if err != nil {
		return false, fmt.Errorf("servicecidr informer: %w", err)
	}
	f.Start(ctx.Done())
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), reg.HasSynced) {
		return true, fmt.Errorf("no ServiceCIDR list after %s: %w", wait, wctx.Err())
	}
	publish() // none at all is a list too
	return true, nil
}
