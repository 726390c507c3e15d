package proxy

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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
	f := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTweakListOptions(sel))
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
	}))
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
	f.Start(ctx.Done())
	nf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), svcReg.HasSynced, epReg.HasSynced, nodeReg.HasSynced) {
		return fmt.Errorf("waiting for the proxy's informer handlers to process the initial lists: %w", ctx.Err())
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	return nil
}
