package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestKubeconfigCommand issues a user kubeconfig with `svcnet kubeconfig`
// and checks that RBAC decides what it may do: nothing, then what a
// RoleBinding to its group grants.
func TestKubeconfigCommand(t *testing.T) {
	srv := apiservertest.Start(t)
	path := filepath.Join(t.TempDir(), "alice.kubeconfig")
	if err := runKubeconfig(context.Background(), []string{"--data-dir", srv.DataDir, "--user", "alice", "--group", "dev", "-o", path}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	alice := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := alice.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("new user get services: %v, want 403", err)
	}
	admin := kubernetes.NewForConfigOrDie(srv.Config)
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-view"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "dev"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := alice.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after binding dev to view: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := runKubeconfig(context.Background(), []string{"--data-dir", t.TempDir(), "--user", "x"}); err == nil {
		t.Error("no CA: accepted")
	}
}
