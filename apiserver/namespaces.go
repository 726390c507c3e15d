package apiserver

import (
	"context"
	"fmt"

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
