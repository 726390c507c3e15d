package index

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime/debug"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Watcher feeds an Index from client-go informers. Every event updates the
// one object it concerns.
type Watcher struct {
	idx     *Index
	factory informers.SharedInformerFactory
	synced  []cache.InformerSynced
	done    atomic.Bool
	log     *slog.Logger
}

// NewWatcher wires informers for Namespaces, Services and EndpointSlices (and
// Pods when watchPods is set) into idx. Nothing runs until Run.
func NewWatcher(client kubernetes.Interface, idx *Index, watchPods bool, log *slog.Logger) (*Watcher, error) {
	if log == nil {
		log = slog.Default()
	}
	w := &Watcher{idx: idx, log: log}
	// Resync 0: the index is exact from events alone, so periodic resyncs would
	// only cost CPU.
	w.factory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(slim))

	add := func(inf cache.SharedIndexInformer, h cache.ResourceEventHandlerFuncs) error {
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("add event handler: %w", err)
		}
		w.synced = append(w.synced, inf.HasSynced)
		return nil
	}

	if err := add(w.factory.Core().V1().Namespaces().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.onNamespace(o, false) },
		UpdateFunc: func(_, o any) { w.onNamespace(o, false) },
		DeleteFunc: func(o any) { w.onNamespace(o, true) },
	}); err != nil {
		return nil, err
	}
	if err := add(w.factory.Core().V1().Services().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.onService(o, false) },
		UpdateFunc: func(_, o any) { w.onService(o, false) },
		DeleteFunc: func(o any) { w.onService(o, true) },
	}); err != nil {
		return nil, err
	}
	if err := add(w.factory.Discovery().V1().EndpointSlices().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.onSlice(o, false) },
		UpdateFunc: func(_, o any) { w.onSlice(o, false) },
		DeleteFunc: func(o any) { w.onSlice(o, true) },
	}); err != nil {
		return nil, err
	}
	if watchPods {
		if err := add(w.factory.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.onPod(o, false) },
			UpdateFunc: func(_, o any) { w.onPod(o, false) },
			DeleteFunc: func(o any) { w.onPod(o, true) },
		}); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Run starts the informers and blocks until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	w.factory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), w.synced...) {
		w.done.Store(true)
		s, e := w.idx.Counts()
		w.log.Info("dns index synced", "services", s, "endpointslices", e)
		// The initial lists leave much garbage behind; hand it back to the OS
		// once instead of carrying it as RSS.
		debug.FreeOSMemory()
	}
	<-ctx.Done()
	w.factory.Shutdown()
}

// HasSynced reports whether every informer has delivered its initial list.
func (w *Watcher) HasSynced() bool { return w.done.Load() }

// WaitForSync waits up to timeout for the initial lists; it reports whether
// they arrived.
func (w *Watcher) WaitForSync(ctx context.Context, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !w.HasSynced() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return false
		case <-tick.C:
		}
	}
	return true
}

// unwrap returns the object of a delete event, which may be a tombstone.
func unwrap(o any) any {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return o
}

func (w *Watcher) onNamespace(o any, del bool) {
	ns, ok := unwrap(o).(*corev1.Namespace)
	if !ok {
		return
	}
	if del {
		w.idx.DeleteNamespace(ns.Name)
		return
	}
	w.idx.SetNamespace(ns.Name)
}

func (w *Watcher) onService(o any, del bool) {
	s, ok := unwrap(o).(*corev1.Service)
	if !ok {
		return
	}
	if del {
		w.idx.DeleteService(s.Namespace, s.Name)
		return
	}
	w.idx.SetService(ServiceFromAPI(s))
}

func (w *Watcher) onSlice(o any, del bool) {
	es, ok := unwrap(o).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	if del {
		w.idx.DeleteSlice(es.Namespace, es.Name)
		return
	}
	s := SliceFromAPI(es)
	if s == nil {
		w.idx.DeleteSlice(es.Namespace, es.Name)
		return
	}
	w.idx.SetSlice(s)
}

func (w *Watcher) onPod(o any, del bool) {
	p, ok := unwrap(o).(*corev1.Pod)
	if !ok {
		return
	}
	if del {
		w.idx.DeletePod(p.Namespace, p.Name)
		return
	}
	ip, _ := netip.ParseAddr(p.Status.PodIP)
	w.idx.SetPod(p.Namespace, p.Name, ip.Unmap())
}

// slim drops what DNS never reads before objects enter the informer caches,
// which is most of their memory (managed fields, annotations, pod specs).
func slim(o any) (any, error) {
	clearMeta := func(m *metav1.ObjectMeta) {
		m.ManagedFields = nil
		m.Annotations = nil
		m.OwnerReferences = nil
		m.Finalizers = nil
	}
	switch v := o.(type) {
	case *corev1.Service:
		clearMeta(&v.ObjectMeta)
		v.Labels = nil
		v.Spec.Selector = nil
		v.Status = corev1.ServiceStatus{}
	case *discoveryv1.EndpointSlice:
		clearMeta(&v.ObjectMeta)
		for i := range v.Endpoints {
			v.Endpoints[i].TargetRef = nil
			v.Endpoints[i].Hints = nil
			v.Endpoints[i].DeprecatedTopology = nil
		}
	case *corev1.Pod:
		clearMeta(&v.ObjectMeta)
		v.Labels = nil
		v.Spec = corev1.PodSpec{}
		v.Status = corev1.PodStatus{PodIP: v.Status.PodIP, PodIPs: v.Status.PodIPs, Phase: v.Status.Phase}
	case *corev1.Namespace:
		clearMeta(&v.ObjectMeta)
		v.Labels = nil
	}
	return o, nil
}
