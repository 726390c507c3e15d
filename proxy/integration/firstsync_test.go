package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/iptables"
)

// firstSync wraps a mode and records what its first sync programmed.
type firstSync struct {
	proxy.Provider
	fake *iptables.Fake
	once sync.Once
	done chan struct{}
	// services is the number of Service ports handed to the first sync;
	// chains the number of KUBE-SVC- chains in the kernel (fake) after it.
	services, chains int
}

func (f *firstSync) Sync(ctx context.Context, req *proxy.SyncRequest) error {
	err := f.Provider.Sync(ctx, req)
	f.once.Do(func() {
		f.services = len(req.Services)
		f.chains = strings.Count(f.fake.Dump(false), ":KUBE-SVC-")
		close(f.done)
	})
	return err
}

// TestFirstSyncAfterRestartProgramsEveryService creates thousands of
// Services, each with one ready endpoint, in a real apiserver, then starts
// a proxy (iptables mode over its fake) twice, as after a restart: each
// time the very first sync must program every Service. Before the proxy
// waited for its handlers (not just the informer caches), the first sync
// saw only the Services whose events had been handled so far.
func TestFirstSyncAfterRestartProgramsEveryService(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	api := apiservertest.Start(t)
	client := kubernetes.NewForConfigOrDie(api.Config)
	ctx := t.Context()
	start := time.Now()
	createServices(t, ctx, client, n)
	t.Logf("created %d Services and EndpointSlices in %v", n, time.Since(start).Round(time.Millisecond))

	for run := 1; run <= 2; run++ {
		rec := startProxy(t, client)
		select {
		case <-rec.done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("start %d: no sync within 2 minutes", run)
		}
		t.Logf("start %d: first sync had %d Service ports and left %d KUBE-SVC chains", run, rec.services, rec.chains)
		// n Services plus default/kubernetes (no endpoints: no chain).
		if rec.services != n+1 || rec.chains != n {
			t.Errorf("start %d: first sync programmed %d Service ports (%d chains), want %d (%d)", run, rec.services, rec.chains, n+1, n)
		}
	}
}

func startProxy(t *testing.T, client kubernetes.Interface) *firstSync {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fake := iptables.NewFake()
	mode := iptables.New(proxy.ModeConfig{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}, fake)
	rec := &firstSync{Provider: mode, fake: fake, done: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := proxy.NewProxier(proxy.Config{Log: log, Provider: rec, Node: proxy.NodeInfo{Name: "node-1"},
		MinSyncPeriod: 0, SyncPeriod: time.Hour})
	if err := proxy.StartInformers(ctx, client, p, "node-1", 0); err != nil {
		t.Fatal(err)
	}
	go p.Run(ctx)
	return rec
}

func createServices(t *testing.T, ctx context.Context, client kubernetes.Interface, n int) {
	t.Helper()
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := createService(ctx, client, i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func createService(ctx context.Context, client kubernetes.Interface, i int) error {
	name := fmt.Sprintf("s%05d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}
	if err := retryCreate(ctx, func() error {
		_, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create Service %s: %w", name, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-x", Namespace: "default", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "test.svcnet.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.244.%d.%d", 1+i/250, 1+i%250)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To("node-2")}},
	}
	if err := retryCreate(ctx, func() error {
		_, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create EndpointSlice %s: %w", slice.Name, err)
	}
	return nil
}

// retryCreate retries a create that a loaded machine's etcd timed out (500
// or 504; the write may still have happened, so AlreadyExists counts as
// done). The test is about the proxy's first sync, not the write path.
func retryCreate(ctx context.Context, create func() error) error {
	var err error
	for attempt := 0; attempt < 6; attempt++ {
		err = create()
		switch {
		case err == nil || (attempt > 0 && apierrors.IsAlreadyExists(err)):
			return nil
		case !apierrors.IsInternalError(err) && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTooManyRequests(err):
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 500 * time.Millisecond):
		}
	}
	return err
}
