// Package gc is svcnet's garbage collector: it deletes objects whose
// owners (metadata.ownerReferences) are all gone and carries out the
// propagation policies Kubernetes encodes as finalizers on the owner:
//
//   - Background (default): the owner is deleted at once; its dependents
//     then have dangling owner references and are deleted by the collector.
//   - Foreground (finalizer "foregroundDeletion"): every dependent is
//     deleted (itself in the foreground); the owner's finalizer is removed
//     once no dependent with blockOwnerDeletion remains.
//   - Orphan (finalizer "orphan"): the owner's reference is removed from
//     every dependent, then the finalizer.
//
// An object with some owners gone and some alive only loses the dangling
// references. An owner counts as present only if an object of that kind,
// name and UID exists (verified with a live read before anything is
// deleted); owners of kinds the collector does not watch are assumed to
// exist, so it never deletes what it cannot check. It works through the
// dynamic client so any API server serving plain JSON will do; Discover
// finds the kinds to watch as kube-controller-manager does (every resource
// that can be listed, watched and deleted, Events excepted). It is the
// only cascade: svcnet's API server, like kube-apiserver, never deletes
// dependents itself.
package gc

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/controller/internal/worker"
)

// Finalizers Kubernetes uses for non-background propagation.
const (
	FinalizerOrphan     = metav1.FinalizerOrphanDependents
	FinalizerForeground = metav1.FinalizerDeleteDependents
)

// Resource is one kind the collector watches.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

func (r Resource) apiVersion() string { return r.GVR.GroupVersion().String() }

// DefaultResources are the owners and dependents svcnet creates (the Node
// owns its Lease); Discover adds every other kind the server serves.
var DefaultResources = []Resource{
	{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "Pod", true},
	{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "Service", true},
	{schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}, "Endpoints", true},
	{schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, "EndpointSlice", true},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, "ReplicaSet", true},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment", true},
	{schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "Node", false},
	{schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, "Lease", true},
	{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", true},
}

// ignored are the resources kube-controller-manager's garbage collector
// leaves alone by default (--gc-ignored-resources): Events are many, short
// lived and never owners.
var ignored = []schema.GroupResource{{Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}}

// Discover returns the resources to watch, found as kube-controller-manager
// finds them: the preferred version of every resource the server can list,
// watch and delete, but the ignored ones, joined with DefaultResources. When
// discovery of some groups fails it returns what it found (at least
// DefaultResources) with the error.
func Discover(d discovery.DiscoveryInterface) ([]Resource, error) {
	lists, err := discovery.ServerPreferredResources(d)
	lists = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete", "list", "watch"}}, lists)
	out := slices.Clone(DefaultResources)
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			gvr := gv.WithResource(r.Name)
			if strings.Contains(r.Name, "/") || slices.Contains(ignored, gvr.GroupResource()) ||
				slices.ContainsFunc(out, func(o Resource) bool { return o.GVR.GroupResource() == gvr.GroupResource() }) {
				continue
			}
			out = append(out, Resource{GVR: gvr, Kind: r.Kind, Namespaced: r.Namespaced})
		}
	}
	return out, err
}

const ownerIndex = "ownerUID"

// Collector is the garbage collector. Create with New, then Run.
type Collector struct {
	dyn       dynamic.Interface
	resources []Resource
	informers []cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[string]
	log       *slog.Logger
}

// New wires the collector to the dynamic factory's informers for res.
func New(dyn dynamic.Interface, factory dynamicinformer.DynamicSharedInformerFactory, res []Resource, log *slog.Logger) *Collector {
	if log == nil {
		log = slog.Default()
	}
	g := &Collector{dyn: dyn, resources: res, queue: worker.NewQueue("garbage_collector"), log: log.With("controller", "garbagecollector")}
	for i, r := range res {
		inf := factory.ForResource(r.GVR).Informer()
		_ = inf.AddIndexers(cache.Indexers{ownerIndex: func(obj any) ([]string, error) {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return nil, nil
			}
			var out []string
			for _, ref := range u.GetOwnerReferences() {
				out = append(out, string(ref.UID))
			}
			return out, nil
		}})
		idx := i
		inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { g.enqueue(idx, obj) },
			UpdateFunc: func(_, obj any) { g.enqueue(idx, obj) },
			DeleteFunc: func(obj any) { g.onDelete(obj) },
		})
		g.informers = append(g.informers, inf)
	}
	return g
}

func key(idx int, ns, name string) string { return fmt.Sprintf("%d|%s|%s", idx, ns, name) }

func (g *Collector) enqueue(idx int, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if len(u.GetOwnerReferences()) == 0 && (u.GetDeletionTimestamp() == nil || !hasGCFinalizer(u)) {
		return
	}
	g.queue.Add(key(idx, u.GetNamespace(), u.GetName()))
}

func hasGCFinalizer(u *unstructured.Unstructured) bool {
	f := u.GetFinalizers()
	return slices.Contains(f, FinalizerOrphan) || slices.Contains(f, FinalizerForeground)
}

// onDelete queues the dependents of a deleted object (and owners waiting
// in the foreground for it).
func (g *Collector) onDelete(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if u, ok = tomb.Obj.(*unstructured.Unstructured); !ok {
			return
		}
	}
	for _, d := range g.dependents(u.GetUID()) {
		g.queue.Add(key(d.idx, d.obj.GetNamespace(), d.obj.GetName()))
	}
	for _, ref := range u.GetOwnerReferences() {
		if idx := g.resourceFor(ref); idx >= 0 {
			ns := u.GetNamespace()
			if !g.resources[idx].Namespaced {
				ns = ""
			}
			g.queue.Add(key(idx, ns, ref.Name))
		}
	}
}

type dependent struct {
	idx int
	obj *unstructured.Unstructured
}

func (g *Collector) dependents(uid types.UID) []dependent {
	var out []dependent
	for i, inf := range g.informers {
		objs, _ := inf.GetIndexer().ByIndex(ownerIndex, string(uid))
		for _, o := range objs {
			if u, ok := o.(*unstructured.Unstructured); ok {
				out = append(out, dependent{i, u})
			}
		}
	}
	return out
}

func (g *Collector) resourceFor(ref metav1.OwnerReference) int {
	for i, r := range g.resources {
		if r.Kind == ref.Kind && r.apiVersion() == ref.APIVersion {
			return i
		}
	}
	return -1
}

// Run waits for caches and collects until ctx is cancelled.
func (g *Collector) Run(ctx context.Context, workers int) error {
	synced := make([]cache.InformerSynced, 0, len(g.informers))
	for _, inf := range g.informers {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("garbage collector: caches did not sync")
	}
	worker.Run(ctx, g.log, g.queue, workers, g.sync)
	return nil
}

func (g *Collector) api(idx int, ns string) dynamic.ResourceInterface {
	r := g.resources[idx]
	if r.Namespaced {
		return g.dyn.Resource(r.GVR).Namespace(ns)
	}
	return g.dyn.Resource(r.GVR)
}

func (g *Collector) sync(ctx context.Context, k string) error {
	parts := strings.SplitN(k, "|", 3)
	idx, _ := strconv.Atoi(parts[0])
	ns, name := parts[1], parts[2]
	obj, exists, err := g.informers[idx].GetIndexer().GetByKey(cacheKey(ns, name))
	if err != nil || !exists {
		return nil
	}
	u := obj.(*unstructured.Unstructured)
	if u.GetDeletionTimestamp() != nil {
		if slices.Contains(u.GetFinalizers(), FinalizerOrphan) {
			return g.orphan(ctx, idx, u)
		}
		if slices.Contains(u.GetFinalizers(), FinalizerForeground) {
			return g.foreground(ctx, idx, u)
		}
		return nil
	}
	refs := u.GetOwnerReferences()
	if len(refs) == 0 {
		return nil
	}
	var dangling []types.UID
	foregroundOwner := false
	for _, ref := range refs {
		owner, present, err := g.owner(ctx, idx, ns, ref)
		if err != nil {
			return err
		}
		if !present {
			dangling = append(dangling, ref.UID)
			continue
		}
		if owner != nil && owner.GetDeletionTimestamp() != nil && slices.Contains(owner.GetFinalizers(), FinalizerForeground) {
			foregroundOwner = true
		}
	}
	switch {
	case len(dangling) == len(refs):
		return g.delete(ctx, idx, u, metav1.DeletePropagationBackground)
	case len(dangling) > 0:
		return g.update(ctx, idx, ns, name, u.GetUID(), func(o *unstructured.Unstructured) bool {
			var keep []metav1.OwnerReference
			for _, r := range o.GetOwnerReferences() {
				if !slices.Contains(dangling, r.UID) {
					keep = append(keep, r)
				}
			}
			if len(keep) == len(o.GetOwnerReferences()) {
				return false
			}
			o.SetOwnerReferences(keep)
			return true
		})
	case foregroundOwner:
		return g.delete(ctx, idx, u, metav1.DeletePropagationForeground)
	}
	return nil
}

func cacheKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// owner reports whether the owner named by ref exists with ref's UID. An
// owner of an unwatched kind is assumed present (returned with nil object).
func (g *Collector) owner(ctx context.Context, depIdx int, ns string, ref metav1.OwnerReference) (*unstructured.Unstructured, bool, error) {
	idx := g.resourceFor(ref)
	if idx < 0 {
		return nil, true, nil
	}
	if !g.resources[idx].Namespaced {
		ns = ""
	}
	if o, ok, _ := g.informers[idx].GetIndexer().GetByKey(cacheKey(ns, ref.Name)); ok {
		if u := o.(*unstructured.Unstructured); u.GetUID() == ref.UID {
			return u, true, nil
		}
	}
	// The cache may lag: confirm with the API before calling it gone.
	live, err := g.api(idx, ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get owner %s %s/%s: %w", ref.Kind, ns, ref.Name, err)
	}
	if live.GetUID() != ref.UID {
		return nil, false, nil
	}
	return live, true, nil
}

func (g *Collector) delete(ctx context.Context, idx int, u *unstructured.Unstructured, policy metav1.DeletionPropagation) error {
	uid := u.GetUID()
	err := g.api(idx, u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s %s/%s: %w", g.resources[idx].Kind, u.GetNamespace(), u.GetName(), err)
	}
	g.log.Info("deleted object whose owners are gone", "kind", g.resources[idx].Kind, "namespace", u.GetNamespace(), "name", u.GetName(), "propagation", policy)
	return nil
}

// update applies mutate to a fresh copy of the object and writes it,
// retrying on conflicts; mutate returns false when nothing needs writing.
func (g *Collector) update(ctx context.Context, idx int, ns, name string, uid types.UID, mutate func(*unstructured.Unstructured) bool) error {
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := g.api(idx, ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get %s %s/%s: %w", g.resources[idx].Kind, ns, name, err)
		}
		if cur.GetUID() != uid || !mutate(cur) {
			return nil
		}
		_, err = g.api(idx, ns).Update(ctx, cur, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("update %s %s/%s: %w", g.resources[idx].Kind, ns, name, err)
		}
	}
	return fmt.Errorf("update %s %s/%s: too many conflicts", g.resources[idx].Kind, ns, name)
}

func (g *Collector) removeFinalizer(ctx context.Context, idx int, u *unstructured.Unstructured, fin string) error {
	return g.update(ctx, idx, u.GetNamespace(), u.GetName(), u.GetUID(), func(o *unstructured.Unstructured) bool {
		f := o.GetFinalizers()
		i := slices.Index(f, fin)
		if i < 0 {
			return false
		}
		o.SetFinalizers(slices.Delete(slices.Clone(f), i, i+1))
		return true
	})
}

func (g *Collector) orphan(ctx context.Context, idx int, owner *unstructured.Unstructured) error {
	uid := owner.GetUID()
	for _, d := range g.dependents(uid) {
		err := g.update(ctx, d.idx, d.obj.GetNamespace(), d.obj.GetName(), d.obj.GetUID(), func(o *unstructured.Unstructured) bool {
			var keep []metav1.OwnerReference
			for _, r := range o.GetOwnerReferences() {
				if r.UID != uid {
					keep = append(keep, r)
				}
			}
			if len(keep) == len(o.GetOwnerReferences()) {
				return false
			}
			o.SetOwnerReferences(keep)
			return true
		})
		if err != nil {
			return fmt.Errorf("orphan dependents of %s/%s: %w", owner.GetNamespace(), owner.GetName(), err)
		}
	}
	return g.removeFinalizer(ctx, idx, owner, FinalizerOrphan)
}

func (g *Collector) foreground(ctx context.Context, idx int, owner *unstructured.Unstructured) error {
	uid := owner.GetUID()
	blocking := 0
	for _, d := range g.dependents(uid) {
		for _, r := range d.obj.GetOwnerReferences() {
			if r.UID == uid && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
				blocking++
			}
		}
		if d.obj.GetDeletionTimestamp() == nil {
			if err := g.delete(ctx, d.idx, d.obj, metav1.DeletePropagationForeground); err != nil {
				return err
			}
		}
	}
	if blocking > 0 {
		// Dependents' deletions requeue us; poll as well in case they
		// finish without an event we see.
		g.queue.AddAfter(key(idx, owner.GetNamespace(), owner.GetName()), time.Second)
		return nil
	}
	return g.removeFinalizer(ctx, idx, owner, FinalizerForeground)
}
