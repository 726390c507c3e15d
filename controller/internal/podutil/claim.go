package podutil

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// ClaimPods is how a workload controller (ReplicaSets, DaemonSets) takes
// its pods, as Kubernetes' controller ref manager: it adopts the matching
// orphans (unless it or the pod is being deleted) and releases the pods it
// controls that its selector no longer matches; it returns the pods the
// owner controls afterwards.
func ClaimPods(ctx context.Context, client kubernetes.Interface, owner metav1.Object, kind schema.GroupVersionKind, sel labels.Selector, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	var owned []*corev1.Pod
	var errs []error
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		matches := sel.Matches(labels.Set(p.Labels))
		switch {
		case ref != nil && ref.UID == owner.GetUID():
			if matches {
				owned = append(owned, p)
				continue
			}
			if p.DeletionTimestamp != nil {
				continue
			}
			cp := p.DeepCopy()
			var refs []metav1.OwnerReference
			for _, r := range cp.OwnerReferences {
				if r.UID != owner.GetUID() {
					refs = append(refs, r)
				}
			}
			cp.OwnerReferences = refs
			if _, err := client.CoreV1().Pods(p.Namespace).Update(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("release pod %s: %w", p.Name, err))
			}
		case ref == nil && matches && p.DeletionTimestamp == nil && owner.GetDeletionTimestamp() == nil:
			cp := p.DeepCopy()
			cp.OwnerReferences = append(cp.OwnerReferences, *metav1.NewControllerRef(owner, kind))
			got, err := client.CoreV1().Pods(p.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
			if err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("adopt pod %s: %w", p.Name, err))
				}
				continue
			}
			owned = append(owned, got)
		}
	}
	return owned, errors.Join(errs...)
}
