package index

import (
	"context"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Watcher feeds an Index from client-go reflectors. The index is the only
// copy of the cluster state: there are no informer caches beside it. Each
// reflector writes into a store that converts every object to the index's
// slim form on arrival, so a full API object lives only as long as its
// decoding.
type Watcher struct {
	idx       *Index
	client    kubernetes.Interface
	reflector []*cache.Reflector
	stores    []*store
	done      atomic.Bool
	log       *slog.Logger
}

// NewWatcher wires reflectors for Namespaces, Services and EndpointSlices
// (and Pods when watchPods is set) into idx. Nothing runs until Run.
func NewWatcher(client kubernetes.Interface, idx *Index, watchPods bool, log *slog.Logger) (*Watcher, error) {
	if log == nil {
		log = slog.Default()
	}
	w := &Watcher{idx: idx, client: client, log: log}
	ctxLW := func(list func(context.Context, metav1.ListOptions) (runtime.Object, error),
		watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
		lw := &cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}
		return cache.ToListWatcherWithWatchListSemantics(lw, client)
	}
	add := func(name string, lw cache.ListerWatcher, typ runtime.Object, st *store) {
		st.idx, st.name = idx, name
		// Resync 0: the index is exact from events alone.
		w.reflector = append(w.reflector, cache.NewReflectorWithOptions(lw, typ, st, cache.ReflectorOptions{Name: "dns/" + name}))
		w.stores = append(w.stores, st)
	}
	core, disc := client.CoreV1(), client.DiscoveryV1()
	add("namespaces", ctxLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Namespaces().List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return core.Namespaces().Watch(ctx, o)
		}),
		&corev1.Namespace{}, &store{
			set: func(o any) (string, bool) {
				ns, ok := o.(*corev1.Namespace)
				if ok {
					idx.SetNamespace(ns.Name)
				}
				return nsKey(ns), ok
			},
			del:  func(ns, name string) { idx.DeleteNamespace(name) },
			keys: idx.namespaceKeys,
		})
	add("services", ctxLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Services("").List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return core.Services("").Watch(ctx, o)
		}),
		&corev1.Service{}, &store{
			set: func(o any) (string, bool) {
				s, ok := o.(*corev1.Service)
				if ok {
					idx.SetService(ServiceFromAPI(s))
					return key(s.Namespace, s.Name), true
				}
				return "", false
			},
			del:  idx.DeleteService,
			keys: idx.serviceKeys,
		})
	add("endpointslices", ctxLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return disc.EndpointSlices("").List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return disc.EndpointSlices("").Watch(ctx, o)
		}),
		&discoveryv1.EndpointSlice{}, &store{
			set: func(o any) (string, bool) {
				es, ok := o.(*discoveryv1.EndpointSlice)
				if !ok {
					return "", false
				}
				if s := SliceFromAPI(es); s != nil {
					idx.SetSlice(s)
				} else {
					idx.DeleteSlice(es.Namespace, es.Name)
				}
				return key(es.Namespace, es.Name), true
			},
			del:  idx.DeleteSlice,
			keys: idx.sliceKeys,
		})
	if watchPods {
		add("pods", ctxLW(
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Pods("").List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Pods("").Watch(ctx, o)
			}),
			&corev1.Pod{}, &store{
				set: func(o any) (string, bool) {
					p, ok := o.(*corev1.Pod)
					if !ok {
						return "", false
					}
					k := key(p.Namespace, p.Name)
					if p.DeletionTimestamp != nil {
						// As CoreDNS: a terminating pod is not taken in;
						// one already known keeps its entry until deleted.
						return k, idx.PodKnown(p.Namespace, p.Name)
					}
					var ips []string
					for _, ip := range p.Status.PodIPs {
						ips = append(ips, ip.IP)
					}
					if len(ips) == 0 && p.Status.PodIP != "" {
						ips = []string{p.Status.PodIP}
					}
					idx.SetPod(p.Namespace, p.Name, ips)
					return k, true
				},
				del:  idx.DeletePod,
				keys: idx.podKeys,
			})
	}
	return w, nil
}

func nsKey(ns *corev1.Namespace) string {
	if ns == nil {
		return ""
	}
	return ns.Name
}

// store is a cache.ReflectorStore that writes into the index instead of
// keeping objects: set converts and stores one object and returns its key,
// del removes a key, keys lists what the index holds of this kind (for
// Replace after a relist).
type store struct {
	idx    *Index
	name   string
	set    func(o any) (string, bool)
	del    func(ns, name string)
	keys   func() []string
	synced atomic.Bool
}

func (s *store) Add(o any) error    { s.set(o); return nil }
func (s *store) Update(o any) error { s.set(o); return nil }
func (s *store) Resync() error      { return nil }

func (s *store) Delete(o any) error {
	o = unwrap(o)
	m, err := meta.Accessor(o)
	if err != nil {
		return nil
	}
	s.del(m.GetNamespace(), m.GetName())
	return nil
}

// Replace makes the index hold exactly list for this kind: after the first
// list, or a relist after the watch broke.
func (s *store) Replace(list []any, _ string) error {
	seen := make(map[string]struct{}, len(list))
	for i, o := range list {
		if k, ok := s.set(o); ok {
			seen[k] = struct{}{}
		}
		list[i] = nil // let the full object go now
	}
	for _, k := range s.keys() {
		if _, ok := seen[k]; ok {
			continue
		}
		ns, name, found := strings.Cut(k, "/")
		if !found {
			ns, name = "", k
		}
		s.del(ns, name)
	}
	s.synced.Store(true)
	return nil
}

// Run starts the reflectors and blocks until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range w.reflector {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.RunWithContext(ctx)
		}()
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !w.allSynced() {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
	}
	w.done.Store(true)
	s, e := w.idx.Counts()
	w.log.Info("dns index synced", "services", s, "endpointslices", e)
	// The initial lists leave much garbage behind; hand it back to the OS
	// once instead of carrying it as RSS.
	debug.FreeOSMemory()
	<-ctx.Done()
	wg.Wait()
}

func (w *Watcher) allSynced() bool {
	for _, s := range w.stores {
		if !s.synced.Load() {
			return false
		}
	}
	return true
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
