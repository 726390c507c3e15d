package bgp

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/speaker"
)

// statusWriter keeps MetalLB's ServiceBGPStatus objects: every node that
// announces a Service holds one object for it in the namespace
// (generateName "bgp-", labels metallb.io/node, metallb.io/service-name,
// metallb.io/service-namespace) whose status names the node, the Service
// and the BGPPeers the Service's routes are configured to go to from this
// node (whatever the sessions' state), and deletes it when it stops
// announcing. Failures are speaker.StatusErrors: the routes stay.
type statusWriter struct {
	dyn       dynamic.Interface
	namespace string
	node      string
	written   map[types.NamespacedName][]string
}

func (w *statusWriter) list(ctx context.Context, key types.NamespacedName) ([]metallbv1beta1.ServiceBGPStatus, error) {
	sel := labels.SelectorFromSet(labels.Set{metallbv1beta1.LabelNode: w.node,
		metallbv1beta1.LabelServiceName: key.Name, metallbv1beta1.LabelServiceNamespace: key.Namespace})
	l, err := w.dyn.Resource(metallbv1beta1.ServiceBGPStatusesResource).Namespace(w.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	out := make([]metallbv1beta1.ServiceBGPStatus, len(l.Items))
	for i := range l.Items {
		if err := metallbv1beta1.FromUnstructured(&l.Items[i], &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (w *statusWriter) announcing(ctx context.Context, key types.NamespacedName, peers []string) error {
	if old, ok := w.written[key]; ok && slices.Equal(old, peers) {
		return nil
	}
	items, err := w.list(ctx, key)
	if err != nil {
		return &speaker.StatusError{Err: err}
	}
	res := w.dyn.Resource(metallbv1beta1.ServiceBGPStatusesResource).Namespace(w.namespace)
	var errs []error
	var mine *metallbv1beta1.ServiceBGPStatus
	for i := range items {
		if mine == nil {
			mine = &items[i]
			continue
		}
		if err := res.Delete(ctx, items[i].Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if mine == nil {
		obj := &metallbv1beta1.ServiceBGPStatus{ObjectMeta: metav1.ObjectMeta{GenerateName: "bgp-", Namespace: w.namespace,
			Labels: map[string]string{metallbv1beta1.LabelNode: w.node, metallbv1beta1.LabelServiceName: key.Name,
				metallbv1beta1.LabelServiceNamespace: key.Namespace}}}
		u, err := metallbv1beta1.ToUnstructured(obj, "ServiceBGPStatus")
		if err != nil {
			return &speaker.StatusError{Err: err}
		}
		created, err := res.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			return &speaker.StatusError{Err: fmt.Errorf("create ServiceBGPStatus in %s: %w", w.namespace, err)}
		}
		mine = &metallbv1beta1.ServiceBGPStatus{}
		if err := metallbv1beta1.FromUnstructured(created, mine); err != nil {
			return &speaker.StatusError{Err: err}
		}
	}
	want := metallbv1beta1.MetalLBServiceBGPStatus{Node: w.node, ServiceName: key.Name, ServiceNamespace: key.Namespace, Peers: peers}
	if mine.Status.Node != want.Node || mine.Status.ServiceName != want.ServiceName || mine.Status.ServiceNamespace != want.ServiceNamespace ||
		!slices.Equal(mine.Status.Peers, want.Peers) {
		mine.Status = want
		u, err := metallbv1beta1.ToUnstructured(mine, "ServiceBGPStatus")
		if err != nil {
			return &speaker.StatusError{Err: err}
		}
		if _, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("update ServiceBGPStatus %s/%s: %w", w.namespace, mine.Name, err))
		}
	}
	if len(errs) > 0 {
		return &speaker.StatusError{Err: errors.Join(errs...)}
	}
	if w.written == nil {
		w.written = map[types.NamespacedName][]string{}
	}
	w.written[key] = peers
	return nil
}

func (w *statusWriter) notAnnouncing(ctx context.Context, key types.NamespacedName) error {
	delete(w.written, key)
	items, err := w.list(ctx, key)
	if err != nil {
		return &speaker.StatusError{Err: err}
	}
	var errs []error
	for _, it := range items {
		err := w.dyn.Resource(metallbv1beta1.ServiceBGPStatusesResource).Namespace(w.namespace).Delete(ctx, it.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return &speaker.StatusError{Err: errors.Join(errs...)}
	}
	return nil
}
