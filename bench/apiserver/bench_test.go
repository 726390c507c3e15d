// Package apiserver_bench measures svcnet's API server: LIST latency over
// 10,000 Services, the rate at which watch events reach 10 concurrent
// watchers, and 250 concurrent Service creates (ClusterIP allocation
// through IPAddress objects). Run with
//
//	go test -run '^$' -bench . -benchtime 5x ./bench/apiserver/
//
// It is not part of CI (there are no Test functions here).
package apiserver_bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

const services = 10000

func client(cfg *rest.Config, ct string) *kubernetes.Clientset {
	c := rest.CopyConfig(cfg)
	c.ContentType, c.AcceptContentTypes = ct, ct
	c.QPS, c.Burst = -1, 0
	return kubernetes.NewForConfigOrDie(c)
}

// fill creates n Services with 16 concurrent writers.
func fill(b *testing.B, c *kubernetes.Clientset, n int) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Int64
	work := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				svc := &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%05d", i), Labels: map[string]string{"app": fmt.Sprint("a", i%10)}},
					Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "x"},
						Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
				}
				if _, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d creates failed", failed.Load())
	}
	b.Logf("created %d services in %v (%.0f/s)", n, time.Since(start), float64(n)/time.Since(start).Seconds())
}

func BenchmarkList10000Services(b *testing.B) {
	srv := apiservertest.Start(b)
	fill(b, client(srv.Config, "application/vnd.kubernetes.protobuf"), services)
	for _, ct := range []string{"application/vnd.kubernetes.protobuf", "application/json"} {
		c := client(srv.Config, ct)
		b.Run(ct, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				l, err := c.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if len(l.Items) != services+1 {
					b.Fatalf("%d items", len(l.Items))
				}
			}
		})
	}
}

// BenchmarkWatchFanout10 writes b.N ConfigMap updates and measures until all
// 10 watchers have received every event; it reports delivered events/s.
func BenchmarkWatchFanout10(b *testing.B) {
	srv := apiservertest.Start(b)
	c := client(srv.Config, "application/vnd.kubernetes.protobuf")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const watchers = 10
	var received atomic.Int64
	var ready sync.WaitGroup
	for w := 0; w < watchers; w++ {
		wi, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
		if err != nil {
			b.Fatal(err)
		}
		ready.Add(1)
		go func() {
			ready.Done()
			for range wi.ResultChan() {
				received.Add(1)
			}
		}()
	}
	ready.Wait()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				_, _ = c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%d", b.N, i)}}, metav1.CreateOptions{})
			}
		}()
	}
	for i := 0; i < b.N; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	want := int64(b.N * watchers)
	for received.Load() < want && time.Since(start) < time.Minute {
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	b.StopTimer()
	if received.Load() < want {
		b.Fatalf("watchers got %d of %d events", received.Load(), want)
	}
	b.ReportMetric(float64(want)/el.Seconds(), "events/s")
	received.Store(0)
}

// BenchmarkCreate250Concurrent creates 250 Services at once (one goroutine
// each, a fresh namespace per iteration) and reports the wall time of the
// whole batch: the ClusterIP allocator's cost under contention.
func BenchmarkCreate250Concurrent(b *testing.B) {
	srv := apiservertest.Start(b)
	c := client(srv.Config, "application/vnd.kubernetes.protobuf")
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("batch-%d", i)
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		var failed atomic.Int64
		start := time.Now()
		for j := 0; j < 250; j++ {
			wg.Go(func() {
				svc := &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%03d", j)},
					Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "x"},
						Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
				}
				if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		if failed.Load() > 0 {
			b.Fatalf("%d creates failed", failed.Load())
		}
		b.Logf("250 concurrent Service creates: %v", time.Since(start))
	}
}
