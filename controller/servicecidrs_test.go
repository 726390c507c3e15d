package controller_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/controller"
)

// A ServiceCIDR gets the protection finalizer and Ready=True; deleting it
// while a Service's ClusterIP lies only in it leaves it Terminating
// (Ready=False) until the Service is gone, then it disappears.
func TestServiceCIDRProtectionThroughAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the apiserver")
	}
	srv := apiservertest.Start(t)
	client := kubernetes.NewForConfigOrDie(srv.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(ctx, client, nil, controller.Options{Controllers: []string{controller.ServiceCIDRs}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })
	cidrs := client.NetworkingV1().ServiceCIDRs()
	if _, err := cidrs.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.100.0.0/24"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCIDR := func(name, what string, ok func(*networkingv1.ServiceCIDR, error) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return ok(cidrs.Get(ctx, name, metav1.GetOptions{})), nil
		}); err != nil {
			sc, gerr := cidrs.Get(ctx, name, metav1.GetOptions{})
			t.Fatalf("%s %s: %v (%+v %v)", name, what, err, sc, gerr)
		}
	}
	ready := func(sc *networkingv1.ServiceCIDR, status metav1.ConditionStatus, reason string) bool {
		c := apimeta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
		return c != nil && c.Status == status && c.Reason == reason
	}
	for _, n := range []string{"kubernetes", "extra"} {
		waitCIDR(n, "protected and ready", func(sc *networkingv1.ServiceCIDR, err error) bool {
			return err == nil && slices.Contains(sc.Finalizers, "networking.k8s.io/service-cidr-finalizer") && ready(sc, metav1.ConditionTrue, "")
		})
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "in-extra"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.100.0.10", Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cidrs.Delete(ctx, "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCIDR("extra", "terminating", func(sc *networkingv1.ServiceCIDR, err error) bool {
		return err == nil && sc.DeletionTimestamp != nil && ready(sc, metav1.ConditionFalse, "Terminating")
	})
	// Being deleted, it gives no new addresses.
	if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "late"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.100.0.11", Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("ClusterIP from a ServiceCIDR being deleted: %v", err)
	}
	time.Sleep(time.Second)
	if _, err := cidrs.Get(ctx, "extra", metav1.GetOptions{}); err != nil {
		t.Fatalf("ServiceCIDR with an address in it went away: %v", err)
	}
	if err := client.CoreV1().Services("default").Delete(ctx, "in-extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCIDR("extra", "gone", func(_ *networkingv1.ServiceCIDR, err error) bool { return apierrors.IsNotFound(err) })
}
