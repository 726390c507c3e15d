package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/registry"
)

var (
	namespacesGR = schema.GroupResource{Resource: "namespaces"}
	podsGR       = schema.GroupResource{Resource: "pods"}
	nodesGR      = schema.GroupResource{Resource: "nodes"}
)

// immortalNamespaces may not be deleted, as in Kubernetes.
var immortalNamespaces = map[string]bool{"default": true, "kube-system": true, "kube-public": true}

// namespaceActive checks that content may be created in ns: 404 if the
// namespace does not exist, 403 if it is being terminated.
func (s *Server) namespaceActive(ctx context.Context, ns string, gr schema.GroupResource, name string) error {
	obj, err := s.byGR[namespacesGR].Get(ctx, "", ns)
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(namespacesGR, ns)
	}
	if err != nil {
		return err
	}
	if n := obj.(*corev1.Namespace); n.Status.Phase == corev1.NamespaceTerminating || n.DeletionTimestamp != nil {
		return apierrors.NewForbidden(gr, name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	}
	return nil
}

// deleteNamespace marks a namespace Terminating and starts deleting its
// contents; the namespace itself goes once it is empty (pods bound to a node
// leave only when their node agent confirms), as the namespace controller
// does in Kubernetes.
func (s *Server) deleteNamespace(w http.ResponseWriter, r *http.Request, out output, req request, opts registry.DeleteOptions) error {
	if immortalNamespaces[req.name] {
		return apierrors.NewForbidden(namespacesGR, req.name, fmt.Errorf("this namespace may not be deleted"))
	}
	st := s.byGR[namespacesGR]
	if opts.DryRun {
		obj, err := st.Get(r.Context(), "", req.name)
		if err != nil {
			return err
		}
		return s.respond(w, r, out, http.StatusOK, req, obj)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	var pre *metav1.Preconditions = opts.Preconditions
	obj, err := st.Storage.GuaranteedUpdate(r.Context(), st.Key("", req.name), false, nil, func(cur runtime.Object) (runtime.Object, error) {
		ns := cur.(*corev1.Namespace)
		if pre != nil && pre.UID != nil && *pre.UID != ns.UID {
			return nil, apierrors.NewConflict(namespacesGR, req.name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, ns.UID))
		}
		if ns.DeletionTimestamp == nil {
			ns.DeletionTimestamp = &now
			g := int64(0)
			ns.DeletionGracePeriodSeconds = &g
		}
		ns.Status.Phase = corev1.NamespaceTerminating
		return ns, nil
	})
	if err != nil {
		return err
	}
	go s.cleanupNamespace(s.runCtx, req.name)
	return s.respond(w, r, out, http.StatusOK, req, obj)
}

// cleanupNamespace deletes everything in a terminating namespace, waits until
// it is empty, then removes the namespace.
func (s *Server) cleanupNamespace(ctx context.Context, ns string) {
	if _, running := s.nsCleanup.LoadOrStore(ns, true); running {
		return
	}
	defer s.nsCleanup.Delete(ns)
	for ctx.Err() == nil {
		remaining := 0
		for _, st := range s.order {
			if !st.Info.Namespaced {
				continue
			}
			list, err := st.List(ctx, ns, registry.ListOptions{})
			if err != nil {
				remaining++
				continue
			}
			items, _ := meta.ExtractList(list)
			remaining += len(items)
			for _, it := range items {
				acc, _ := meta.Accessor(it)
				if acc.GetDeletionTimestamp() != nil {
					continue
				}
				if _, _, err := st.Delete(ctx, ns, acc.GetName(), registry.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					s.log.Warn("namespace cleanup", "namespace", ns, "resource", st.Info.GVR.Resource, "name", acc.GetName(), "err", err)
				}
			}
		}
		if remaining == 0 {
			st := s.byGR[namespacesGR]
			_, err := st.Storage.Delete(ctx, st.Key("", ns), nil, func(cur runtime.Object) error {
				if cur.(*corev1.Namespace).DeletionTimestamp == nil {
					return apierrors.NewConflict(namespacesGR, ns, fmt.Errorf("namespace is no longer terminating"))
				}
				return nil
			})
			if err != nil && !apierrors.IsNotFound(err) {
				s.log.Warn("namespace cleanup: delete namespace", "namespace", ns, "err", err)
			}
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// resumeNamespaceCleanup finishes deletions interrupted by a restart.
func (s *Server) resumeNamespaceCleanup(ctx context.Context) {
	list, err := s.byGR[namespacesGR].List(ctx, "", registry.ListOptions{})
	if err != nil {
		return
	}
	for _, n := range list.(*corev1.NamespaceList).Items {
		if n.DeletionTimestamp != nil {
			go s.cleanupNamespace(ctx, n.Name)
		}
	}
}

// ownerKinds are the kinds whose deletion cascades to dependents (objects
// with an ownerReference to them), standing in for the garbage collector.
var ownerKinds = map[string]bool{"Deployment": true, "ReplicaSet": true, "Service": true, "Node": true, "Pod": false}

// onDeleted runs after an object is removed: it deletes (or, with orphan,
// releases) the objects it owned.
func (s *Server) onDeleted(_ context.Context, obj runtime.Object, orphan bool) {
	gvks, _, err := Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 || !ownerKinds[gvks[0].Kind] {
		return
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	uid, ns := acc.GetUID(), acc.GetNamespace()
	ctx := s.runCtx
	go func() {
		for _, st := range s.order {
			if !st.Info.Namespaced {
				continue
			}
			list, err := st.List(ctx, ns, registry.ListOptions{Filter: func(o runtime.Object) bool {
				a, err := meta.Accessor(o)
				if err != nil {
					return false
				}
				for _, ref := range a.GetOwnerReferences() {
					if ref.UID == uid {
						return true
					}
				}
				return false
			}})
			if err != nil {
				continue
			}
			items, _ := meta.ExtractList(list)
			for _, it := range items {
				a, _ := meta.Accessor(it)
				if orphan {
					_, _, _ = st.Update(ctx, a.GetNamespace(), a.GetName(), func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
						if cur == nil {
							return nil, apierrors.NewNotFound(st.Info.GroupResource(), a.GetName())
						}
						ca, _ := meta.Accessor(cur)
						var refs []metav1.OwnerReference
						for _, ref := range ca.GetOwnerReferences() {
							if ref.UID != uid {
								refs = append(refs, ref)
							}
						}
						ca.SetOwnerReferences(refs)
						return cur, nil
					}, false, registry.WriteOptions{FieldManager: "garbage-collector"})
					continue
				}
				_, _, _ = st.Delete(ctx, a.GetNamespace(), a.GetName(), registry.DeleteOptions{})
			}
		}
	}()
}
