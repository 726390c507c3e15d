package apiservertest_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

func TestStart(t *testing.T) {
	srv := apiservertest.Start(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	svc, err := c.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.96.0.1" {
		t.Errorf("kubernetes service ClusterIP = %s, want 10.96.0.1", svc.Spec.ClusterIP)
	}
}
