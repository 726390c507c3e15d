package speaker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
)

// StatusError is a failure to record an announcement's status object: the
// announcement itself is in place (the speaker counts it as announced and
// retries the status).
type StatusError struct{ Err error }

func (e *StatusError) Error() string { return "status: " + e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// L2Status keeps MetalLB's ServiceL2Status objects: the node announcing a
// Service in layer 2 holds one object for it in Namespace (generateName
// "l2-", labels metallb.io/node, metallb.io/service-name,
// metallb.io/service-namespace), whose status names the node, the Service
// and the interfaces (none listed: every interface). Becoming the announcer
// it deletes the objects other nodes left; ceasing, it deletes its own.
// MetalLB also makes the speaker pod the owner; svcnet's speaker is not a
// pod, so the objects have no owner.
type L2Status struct {
	Dynamic   dynamic.Interface
	Namespace string
	NodeName  string

	written map[types.NamespacedName]metallbv1beta1.MetalLBServiceL2Status
}

var _ L2StatusWriter = (*L2Status)(nil)

func (s *L2Status) list(ctx context.Context, key types.NamespacedName) ([]metallbv1beta1.ServiceL2Status, error) {
	sel := labels.SelectorFromSet(labels.Set{metallbv1beta1.LabelServiceName: key.Name, metallbv1beta1.LabelServiceNamespace: key.Namespace})
	l, err := s.Dynamic.Resource(metallbv1beta1.ServiceL2StatusesResource).Namespace(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	out := make([]metallbv1beta1.ServiceL2Status, len(l.Items))
	for i := range l.Items {
		if err := metallbv1beta1.FromUnstructured(&l.Items[i], &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Announcing implements L2StatusWriter.
func (s *L2Status) Announcing(ctx context.Context, svc *corev1.Service, ifs []string) error {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	want := metallbv1beta1.MetalLBServiceL2Status{Node: s.NodeName, ServiceName: svc.Name, ServiceNamespace: svc.Namespace}
	for _, i := range ifs {
		want.Interfaces = append(want.Interfaces, metallbv1beta1.InterfaceInfo{Name: i})
	}
	if w, ok := s.written[key]; ok && statusEqual(w, want) {
		return nil
	}
	items, err := s.list(ctx, key)
	if err != nil {
		return &StatusError{err}
	}
	res := s.Dynamic.Resource(metallbv1beta1.ServiceL2StatusesResource).Namespace(s.Namespace)
	var mine *metallbv1beta1.ServiceL2Status
	var errs []error
	for i := range items {
		it := &items[i]
		if it.Labels[metallbv1beta1.LabelNode] == s.NodeName && mine == nil {
			mine = it
			continue
		}
		if err := res.Delete(ctx, it.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if mine == nil {
		obj := &metallbv1beta1.ServiceL2Status{ObjectMeta: metav1.ObjectMeta{GenerateName: "l2-", Namespace: s.Namespace,
			Labels: map[string]string{metallbv1beta1.LabelNode: s.NodeName, metallbv1beta1.LabelServiceName: svc.Name,
				metallbv1beta1.LabelServiceNamespace: svc.Namespace}}}
		u, err := metallbv1beta1.ToUnstructured(obj, "ServiceL2Status")
		if err != nil {
			return &StatusError{err}
		}
		created, err := res.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			return &StatusError{errors.Join(append(errs, fmt.Errorf("create ServiceL2Status in %s: %w", s.Namespace, err))...)}
		}
		mine = &metallbv1beta1.ServiceL2Status{}
		if err := metallbv1beta1.FromUnstructured(created, mine); err != nil {
			return &StatusError{err}
		}
	}
	if !statusEqual(mine.Status, want) {
		mine.Status = want
		u, err := metallbv1beta1.ToUnstructured(mine, "ServiceL2Status")
		if err != nil {
			return &StatusError{err}
		}
		if _, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			return &StatusError{errors.Join(append(errs, fmt.Errorf("update ServiceL2Status %s/%s: %w", s.Namespace, mine.Name, err))...)}
		}
	}
	if len(errs) > 0 {
		return &StatusError{errors.Join(errs...)}
	}
	if s.written == nil {
		s.written = map[types.NamespacedName]metallbv1beta1.MetalLBServiceL2Status{}
	}
	s.written[key] = want
	return nil
}

// NotAnnouncing implements L2StatusWriter.
func (s *L2Status) NotAnnouncing(ctx context.Context, key types.NamespacedName) error {
	delete(s.written, key)
	items, err := s.list(ctx, key)
	if err != nil {
		return &StatusError{err}
	}
	var errs []error
	for _, it := range items {
		if it.Labels[metallbv1beta1.LabelNode] != s.NodeName {
			continue
		}
		err := s.Dynamic.Resource(metallbv1beta1.ServiceL2StatusesResource).Namespace(s.Namespace).Delete(ctx, it.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return &StatusError{errors.Join(errs...)}
	}
	return nil
}

func statusEqual(a, b metallbv1beta1.MetalLBServiceL2Status) bool {
	return a.Node == b.Node && a.ServiceName == b.ServiceName && a.ServiceNamespace == b.ServiceNamespace &&
		slices.Equal(a.Interfaces, b.Interfaces)
}
