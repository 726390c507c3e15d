package fakeapi

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A status write from a stale copy (what a controller holds from its
// informer cache) must not undo a spec change made in between: the
// TestDeploymentStates flake, where a rollout stayed at the old template.
func TestStatusUpdateKeepsSpec(t *testing.T) {
	ctx := context.Background()
	c := NewClientset()
	ds := c.AppsV1().Deployments("default")
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "default"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}}
	stale, err := ds.Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := stale.DeepCopy()
	fresh.Spec.Replicas = ptr.To[int32](4)
	if _, err := ds.Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale.Status.Replicas = 2
	got, err := ds.UpdateStatus(ctx, stale, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := ds.Get(ctx, "d", metav1.GetOptions{})
	for _, o := range []*appsv1.Deployment{got, stored} {
		if *o.Spec.Replicas != 4 || o.Status.Replicas != 2 {
			t.Errorf("spec.replicas %d status.replicas %d, want 4 and 2", *o.Spec.Replicas, o.Status.Replicas)
		}
	}
	if _, err := ds.UpdateStatus(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "default"}}, metav1.UpdateOptions{}); err == nil {
		t.Error("status update of a missing object succeeded")
	}
}
