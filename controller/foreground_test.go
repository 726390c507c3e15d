package controller_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/controller"
)

// A Deployment deleted with propagationPolicy=Foreground stays (marked, with
// the foregroundDeletion finalizer) until the garbage collector has removed
// its ReplicaSet and Pods, and only then disappears.
func TestForegroundDeletionThroughAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the apiserver")
	}
	srv := apiservertest.Start(t)
	client := kubernetes.NewForConfigOrDie(srv.Config)
	dyn := dynamic.NewForConfigOrDie(srv.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(ctx, client, dyn, controller.Options{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })

	labels := map[string]string{"app": "fg"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "fg", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=fg"})
		if err == nil && len(pods.Items) == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the Deployment's two pods never appeared")
		}
		time.Sleep(50 * time.Millisecond)
	}
	w, err := client.AppsV1().Deployments("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=fg"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := client.AppsV1().Deployments("default").Delete(ctx, "fg", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	marked := false
	for ev := range w.ResultChan() {
		dep, ok := ev.Object.(*appsv1.Deployment)
		if !ok {
			continue
		}
		if ev.Type == watch.Modified && dep.DeletionTimestamp != nil && slices.Contains(dep.Finalizers, metav1.FinalizerDeleteDependents) {
			marked = true
		}
		if ev.Type == watch.Deleted {
			if !marked {
				t.Error("the Deployment was deleted without first being marked with the foregroundDeletion finalizer")
			}
			rs, _ := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=fg"})
			pods, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=fg"})
			if len(rs.Items) != 0 || len(pods.Items) != 0 {
				t.Errorf("owner gone before its dependents: %d ReplicaSets, %d Pods left", len(rs.Items), len(pods.Items))
			}
			return
		}
	}
	t.Fatal("watch ended before the Deployment was deleted")
}
