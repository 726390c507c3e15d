package apiserver_test

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver"
	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestClusterIPRangeExhaustion fills a /28 Service range (13 addresses
// left after the kubernetes Service's) with concurrent creates: the random
// tries collide more and more and the allocator falls back to listing the
// used addresses; every Service gets a distinct address and the next one
// gets kube-apiserver's "range is full".
func TestClusterIPRangeExhaustion(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.WithConfig(func(c *apiserver.Config) {
		c.ServiceClusterIPRange = netip.MustParsePrefix("10.97.0.0/28")
	}))
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 13)
	for i := range 13 {
		wg.Go(func() {
			if _, err := c.CoreV1().Services("default").Create(ctx, svc(fmt.Sprint("s", i)), metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("create: %v", err)
	}
	l, err := c.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, s := range l.Items {
		if other, dup := seen[s.Spec.ClusterIP]; dup {
			t.Errorf("%s and %s share %s", s.Name, other, s.Spec.ClusterIP)
		}
		seen[s.Spec.ClusterIP] = s.Name
	}
	if len(seen) != 14 {
		t.Errorf("%d distinct ClusterIPs, want 14", len(seen))
	}
	_, err = c.CoreV1().Services("default").Create(ctx, svc("full"), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), `failed to allocate a serviceIP for Service "full": range is full`) {
		t.Errorf("create in a full range: %v", err)
	}
}
