package replicaset

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestSyncCountsTerminatingReplicas: pods the ReplicaSet controls that are
// deleted but not yet gone (grace period) are reported in
// status.terminatingReplicas, 0 when there are none, and never in
// status.replicas; finished pods count in neither (kube-controller-manager
// 1.37 with DeploymentReplicaSetTerminatingReplicas, beta since 1.35).
func TestSyncCountsTerminatingReplicas(t *testing.T) {
	client, ctx := start(t)
	sel := map[string]string{"app": "t"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "default", UID: "rs-uid", Generation: 1},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}},
	}
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	now := metav1.NewTime(time.Now())
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "going-1", DeletionTimestamp: &now, Finalizers: []string{"x"}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{ObjectMeta: metav1.ObjectMeta{Name: "going-2", DeletionTimestamp: &now, Finalizers: []string{"x"}}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		{ObjectMeta: metav1.ObjectMeta{Name: "done", DeletionTimestamp: &now, Finalizers: []string{"x"}}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
	} {
		p.Namespace, p.Labels, p.OwnerReferences = "default", sel, owner
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "status.terminatingReplicas 2", func() (bool, string) {
		got, _ := client.AppsV1().ReplicaSets("default").Get(ctx, "t", metav1.GetOptions{})
		st := got.Status
		return st.ObservedGeneration == 1 && st.Replicas == 0 && ptr.Deref(st.TerminatingReplicas, -1) == 2, fmt.Sprintf("%+v", st)
	})

	// No terminating pods: reported as 0, not left out.
	st := CalculateStatus(rs, nil, 0, nil, time.Now())
	if st.TerminatingReplicas == nil || *st.TerminatingReplicas != 0 {
		t.Errorf("terminatingReplicas with none terminating: %v, want 0", st.TerminatingReplicas)
	}
}
