package controller_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/controller"
)

// Cascading deletion is the garbage collector's work, as in Kubernetes:
// svcnet's API server only deletes (or, for Orphan and Foreground, marks)
// the object asked for, and the collector running among the controllers
// deletes or releases its dependents.
func TestCascadingDeletionByGarbageCollector(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the apiserver")
	}
	srv := apiservertest.Start(t)
	client := kubernetes.NewForConfigOrDie(srv.Config)
	dyn := dynamic.NewForConfigOrDie(srv.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(ctx, client, dyn, controller.Options{Controllers: []string{
			controller.Deployment, controller.ReplicaSet, controller.EndpointSlice, controller.GC,
		}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })

	eventually := func(what string, f func() (bool, error)) {
		t.Helper()
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			ok, err := f()
			last = err
			return ok, nil
		})
		if err != nil {
			t.Fatalf("never: %s (last error: %v)", what, last)
		}
	}
	gone := func(err error) (bool, error) {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	deployment := func(name string) {
		t.Helper()
		labels := map[string]string{"app": name}
		_, err := client.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(name+": a ReplicaSet and two Pods", func() (bool, error) {
			rs, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			if err != nil {
				return false, err
			}
			pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			return len(rs.Items) == 1 && len(pods.Items) == 2, err
		})
	}
	count := func(name string) (int, int, error) {
		rs, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return 0, 0, err
		}
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return 0, 0, err
		}
		return len(rs.Items), len(pods.Items), nil
	}

	t.Run("background: Deployment, then its ReplicaSet, then their Pods", func(t *testing.T) {
		deployment("bg")
		// A NetworkPolicy owned by the Deployment: not a kind svcnet's
		// controllers create, found by the collector through discovery.
		d, err := client.AppsV1().Deployments("default").Get(ctx, "bg", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.NetworkingV1().NetworkPolicies("default").Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{
			Name: "bg-policy", OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "bg", UID: d.UID}},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.AppsV1().Deployments("default").Delete(ctx, "bg", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually("ReplicaSet and Pods deleted", func() (bool, error) {
			rs, pods, err := count("bg")
			return rs == 0 && pods == 0, err
		})
		eventually("owned NetworkPolicy deleted", func() (bool, error) {
			_, err := client.NetworkingV1().NetworkPolicies("default").Get(ctx, "bg-policy", metav1.GetOptions{})
			return gone(err)
		})
	})

	t.Run("orphan: the Deployment goes, its ReplicaSet and Pods stay without the reference", func(t *testing.T) {
		deployment("orphan")
		if err := client.AppsV1().Deployments("default").Delete(ctx, "orphan", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
			t.Fatal(err)
		}
		eventually("the Deployment deleted once the orphan finalizer is done", func() (bool, error) {
			_, err := client.AppsV1().Deployments("default").Get(ctx, "orphan", metav1.GetOptions{})
			return gone(err)
		})
		rs, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=orphan"})
		if err != nil || len(rs.Items) != 1 || len(rs.Items[0].OwnerReferences) != 0 {
			t.Fatalf("orphaned ReplicaSet: %v %+v, want one without owner references", err, rs)
		}
		_, pods, err := count("orphan")
		if err != nil || pods != 2 {
			t.Fatalf("pods of the orphaned ReplicaSet: %d (%v), want 2", pods, err)
		}
	})

	t.Run("Service deletion takes its EndpointSlice", func(t *testing.T) {
		if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"}
		eventually("the EndpointSlice controller writes a slice", func() (bool, error) {
			l, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, sel)
			return err == nil && len(l.Items) == 1, err
		})
		if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually("the slice deleted", func() (bool, error) {
			l, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, sel)
			return err == nil && len(l.Items) == 0, err
		})
	})

	t.Run("Node deletion takes its Lease", func(t *testing.T) {
		n, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone-node"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: "gone-node", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}},
		}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("gone-node")}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Nodes().Delete(ctx, "gone-node", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually("the Lease deleted", func() (bool, error) {
			_, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "gone-node", metav1.GetOptions{})
			return gone(err)
		})
	})

	t.Run("an owner still present keeps its dependents", func(t *testing.T) {
		cm, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refs := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: cm.UID}}
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", OwnerReferences: refs}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dropped",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "never", UID: "00000000-0000-0000-0000-000000000001"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The one with a missing owner is collected; once it is, the
		// collector has seen "kept" too (same informer, created first).
		eventually("dependent of a missing owner deleted", func() (bool, error) {
			_, err := client.CoreV1().ConfigMaps("default").Get(ctx, "dropped", metav1.GetOptions{})
			return gone(err)
		})
		kept, err := client.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
		if err != nil || !slices.ContainsFunc(kept.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == cm.UID }) {
			t.Fatalf("dependent of a live owner: %v %+v", err, kept)
		}
	})
}
