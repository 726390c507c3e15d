package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/allocator/etcdtest"
)

// 1,000 NodePort Services created concurrently through two apiservers on
// one etcd: no ClusterIP or NodePort twice, and the stored allocation
// counts equal the number of Services.
func TestConcurrentCreatesTwoAPIServers(t *testing.T) {
	url := etcdtest.Start(t)
	c1, cfg := startAPIServer(t, url)
	c2, _ := startAPIServer(t, url)
	clients := []*kubernetes.Clientset{c1, c2}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const n = 1000
	start := time.Now()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := range work {
				_, err := clients[i%2].CoreV1().Services("default").Create(ctx, nodePortService(fmt.Sprintf("s%04d", i)), metav1.CreateOptions{})
				if err != nil {
					errs <- err
				}
			}
		}(w)
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create: %v", err)
	}
	t.Logf("%d NodePort services through 2 apiservers in %v", n, time.Since(start))

	list, err := c1.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips, ports := map[string]string{}, map[int32]string{}
	for _, s := range list.Items {
		if prev, dup := ips[s.Spec.ClusterIP]; dup {
			t.Errorf("ClusterIP %s given to %s and %s", s.Spec.ClusterIP, prev, s.Name)
		}
		ips[s.Spec.ClusterIP] = s.Name
		for _, p := range s.Spec.Ports {
			if p.NodePort == 0 {
				continue
			}
			if prev, dup := ports[p.NodePort]; dup {
				t.Errorf("NodePort %d given to %s and %s", p.NodePort, prev, s.Name)
			}
			ports[p.NodePort] = s.Name
		}
	}
	if len(list.Items) != n+1 || len(ips) != n+1 || len(ports) != n {
		t.Fatalf("services %d, distinct IPs %d, distinct node ports %d; want %d, %d, %d", len(list.Items), len(ips), len(ports), n+1, n+1, n)
	}
	usedIPs, _ := cfg.ClusterIPs[0].Used(ctx)
	usedPorts, _ := cfg.NodePorts.Used(ctx)
	if usedIPs != n+1 || usedPorts != n {
		t.Fatalf("stored allocations: %d IPs, %d ports; want %d, %d", usedIPs, usedPorts, n+1, n)
	}
}
