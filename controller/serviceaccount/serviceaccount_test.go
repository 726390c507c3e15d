package serviceaccount

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func namespace(name string, phase corev1.NamespacePhase) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
}

func until(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !f(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// The default service account appears in active namespaces only, and comes
// back when deleted; the CA ConfigMap appears everywhere and is put back.
func TestControllers(t *testing.T) {
	client := fake.NewClientset(namespace("default", corev1.NamespaceActive), namespace("going", corev1.NamespaceTerminating))
	factory := informers.NewSharedInformerFactory(client, 0)
	sa := New(client, factory, nil)
	pub, err := NewPublisher(client, factory, []byte("CA PEM"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPublisher(client, factory, nil, nil); err == nil {
		t.Error("a publisher without a CA: want an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go func() { _ = sa.Run(ctx, 1) }()
	go func() { _ = pub.Run(ctx, 1) }()
	hasSA := func(ns string) bool {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, DefaultName, metav1.GetOptions{})
		return err == nil
	}
	caIs := func(ns, want string) bool {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, RootCAConfigMap, metav1.GetOptions{})
		return err == nil && cm.Data["ca.crt"] == want && cm.Annotations[DescriptionAnnotation] == Description
	}
	until(t, "default/default", func() bool { return hasSA("default") })
	until(t, "kube-root-ca.crt in default", func() bool { return caIs("default", "CA PEM") })
	if _, err := client.CoreV1().Namespaces().Create(ctx, namespace("team", corev1.NamespaceActive), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "team/default", func() bool { return hasSA("team") })
	until(t, "kube-root-ca.crt in team", func() bool { return caIs("team", "CA PEM") })
	if err := client.CoreV1().ServiceAccounts("team").Delete(ctx, DefaultName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "team/default made again", func() bool { return hasSA("team") })
	cm, _ := client.CoreV1().ConfigMaps("team").Get(ctx, RootCAConfigMap, metav1.GetOptions{})
	cm.Data["ca.crt"] = "forged"
	if _, err := client.CoreV1().ConfigMaps("team").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "kube-root-ca.crt put back", func() bool { return caIs("team", "CA PEM") })
	if err := client.CoreV1().ConfigMaps("team").Delete(ctx, RootCAConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "kube-root-ca.crt made again", func() bool { return caIs("team", "CA PEM") })
	time.Sleep(200 * time.Millisecond)
	if _, err := client.CoreV1().ServiceAccounts("going").Get(ctx, DefaultName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a terminating namespace got a service account: %v", err)
	}
}
