package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
