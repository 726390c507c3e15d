package controller_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/controller"
)

type countingRT struct {
	next   http.RoundTripper
	writes *atomic.Int64
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		c.writes.Add(1)
	}
	return c.next.RoundTrip(r)
}

// BenchmarkConverge2000Pods500Services measures how long the Endpoints and
// EndpointSlice controllers take to converge on 500 Services of 4 ready
// pods each (2,000 pods on 4 nodes) from a cold start against svcnet's real
// apiserver (embedded etcd), and how many API writes they make (counted by
// a wrapping transport). Objects are created before the clock starts. Run:
//
//	go test -run '^$' -bench Converge -benchtime 1x ./controller/
func BenchmarkConverge2000Pods500Services(b *testing.B) {
	srv := apiservertest.Start(b)
	setup := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	for n := 0; n < 4; n++ {
		if _, err := setup.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", n)}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	workqueue.ParallelizeUntil(ctx, 16, 500, func(s int) {
		sel := map[string]string{"app": fmt.Sprintf("svc-%d", s)}
		_, err := setup.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", s)},
			Spec:       corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Error(err)
			return
		}
		for p := 0; p < 4; p++ {
			k := s*4 + p
			pod, err := setup.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d-%d", s, p), Labels: sel},
				Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", p), Containers: []corev1.Container{{Name: "c", Image: "x"}}},
			}, metav1.CreateOptions{})
			if err != nil {
				b.Error(err)
				return
			}
			pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.244.%d.%d", k/250, k%250+1),
				PodIPs:     []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", k/250, k%250+1)}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
			if _, err := setup.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if b.Failed() {
		return
	}
	for i := 0; i < b.N; i++ {
		var writes atomic.Int64
		cfg := rest.CopyConfig(srv.Config)
		cfg.QPS, cfg.Burst = 500, 1000
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingRT{rt, &writes} }
		client := kubernetes.NewForConfigOrDie(cfg)
		// Start from nothing: drop what a previous iteration wrote.
		setup.CoreV1().Endpoints("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		setup.DiscoveryV1().EndpointSlices("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			done <- controller.Run(rctx, client, nil, controller.Options{Controllers: []string{controller.Endpoints, controller.EndpointSlice}, Workers: 20},
				slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		for {
			eps, _ := setup.CoreV1().Endpoints("default").List(ctx, metav1.ListOptions{})
			slices, _ := setup.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{})
			full, fullSlices := 0, 0
			for _, ep := range eps.Items {
				if len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 4 {
					full++
				}
			}
			for _, s := range slices.Items {
				if len(s.Endpoints) == 4 {
					fullSlices++
				}
			}
			if full == 500 && fullSlices == 500 {
				break
			}
			if time.Since(start) > 2*time.Minute {
				b.Fatalf("not converged: %d endpoints, %d slices", full, fullSlices)
			}
			time.Sleep(50 * time.Millisecond)
		}
		elapsed := time.Since(start)
		cancel()
		<-done
		b.ReportMetric(elapsed.Seconds(), "converge-s")
		b.ReportMetric(float64(writes.Load()), "api-writes")
	}
}
