package controller_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/controller"
)

// TestSeedWalkthroughAgainstAPIServer runs every controller against svcnet's
// real apiserver (embedded etcd) with a fake kubelet that gives scheduled
// pods an IP and readiness, and follows the seed walkthrough.
func TestSeedWalkthroughAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the apiserver")
	}
	srv := apiservertest.Start(t)
	client := kubernetes.NewForConfigOrDie(srv.Config)
	dyn := dynamic.NewForConfigOrDie(srv.Config)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		done <- controller.Run(ctx, client, dyn, controller.Options{SchedulerFallbackUpdate: true}, log)
	}()
	t.Cleanup(func() { cancel(); <-done })

	for _, n := range []string{"node-1", "node-2"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{corev1.LabelTopologyZone: "zone-" + n}}}
		got, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Fake kubelet: scheduled pods without an IP get one and become Ready.
	notReady := atomic.Value{}
	notReady.Store("")
	go func() {
		n := 0
		for ctx.Err() == nil {
			pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range pods.Items {
					if p.DeletionTimestamp != nil {
						// The containers stopped: finish the graceful deletion.
						client.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
						continue
					}
					if p.Spec.NodeName == "" || p.Status.PodIP != "" {
						continue
					}
					n++
					p.Status.Phase = corev1.PodRunning
					p.Status.PodIP = fmt.Sprintf("10.244.%s.%d", strings.TrimPrefix(p.Spec.NodeName, "node-"), n+1)
					p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
					client.CoreV1().Pods("default").UpdateStatus(ctx, &p, metav1.UpdateOptions{})
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	deploy := func(name, version string, n int32) *appsv1.Deployment {
		lbls := map[string]string{"app": "myapp", "version": version}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(n),
				Selector: &metav1.LabelSelector{MatchLabels: lbls},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "myapp", Image: "kubernetes-bootcamp:v1",
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}},
			},
		}
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, deploy("myapp", "v1", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "myapp", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "myapp"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// endpoints renders "ready: ip:port,... notready: ..." sorted.
	endpoints := func() (ready, notReady []string) {
		ep, err := client.CoreV1().Endpoints("default").Get(ctx, "myapp", metav1.GetOptions{})
		if err != nil {
			return nil, nil
		}
		for _, s := range ep.Subsets {
			for _, p := range s.Ports {
				for _, a := range s.Addresses {
					ready = append(ready, fmt.Sprintf("%s:%d", a.IP, p.Port))
				}
				for _, a := range s.NotReadyAddresses {
					notReady = append(notReady, fmt.Sprintf("%s:%d", a.IP, p.Port))
				}
			}
		}
		sort.Strings(ready)
		sort.Strings(notReady)
		return
	}
	sliceCounts := func() (ready, notReady int) {
		l, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=myapp"})
		if err != nil {
			return -1, -1
		}
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready++
				} else {
					notReady++
				}
			}
		}
		return
	}
	waitFor := func(step string, wantReady, wantNotReady int) {
		t.Helper()
		var r, nr []string
		var sr, snr int
		for i := 0; i < 1500; i++ {
			r, nr = endpoints()
			sr, snr = sliceCounts()
			if len(r) == wantReady && len(nr) == wantNotReady && sr == wantReady && snr == wantNotReady {
				for _, a := range append(r, nr...) {
					if !strings.HasSuffix(a, ":8080") {
						t.Fatalf("step %q: address %s is not IP:8080", step, a)
					}
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("step %q: endpoints ready=%v notReady=%v slices ready=%d notReady=%d; want %d/%d", step, r, nr, sr, snr, wantReady, wantNotReady)
	}
	scale := func(name string, n int32) {
		t.Helper()
		// The Scale carries the Deployment's resourceVersion, which the
		// controllers' status writes move on: retry on conflict, as clients do.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := client.AppsV1().Deployments("default").GetScale(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = n
			_, err = client.AppsV1().Deployments("default").UpdateScale(ctx, name, s, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	waitFor("3 replicas", 3, 0)
	t.Logf("3 endpoints after %v", time.Since(start))
	// kubectl get deploy shows READY 3/3.
	for i := 0; ; i++ {
		d, _ := client.AppsV1().Deployments("default").Get(ctx, "myapp", metav1.GetOptions{})
		if d.Status.ReadyReplicas == 3 && d.Status.AvailableReplicas == 3 && d.Status.UpdatedReplicas == 3 {
			break
		}
		if i > 500 {
			t.Fatalf("deployment status %+v", d.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	scale("myapp", 5)
	waitFor("scale to 5", 5, 0)
	scale("myapp", 2)
	waitFor("scale to 2", 2, 0)
	if _, err := client.AppsV1().Deployments("default").Create(ctx, deploy("myapp-v2", "v2", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("v2 joins", 4, 0)

	// One pod loses readiness.
	pods, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "version=v2"})
	p := pods.Items[0]
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
	if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("readiness lost", 3, 1)

	// Deleting the Service removes its Endpoints and, through the owner
	// reference, its EndpointSlices.
	if err := client.CoreV1().Services("default").Delete(ctx, "myapp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		_, err := client.CoreV1().Endpoints("default").Get(ctx, "myapp", metav1.GetOptions{})
		sr, snr := sliceCounts()
		if err != nil && sr == 0 && snr == 0 {
			break
		}
		if i > 500 {
			t.Fatalf("endpoints/slices survive their service: err=%v slices=%d/%d", err, sr, snr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMetalLBSeedAgainstAPIServer applies the seed's MetalLB pool and
// L2Advertisement through the dynamic client and checks that a LoadBalancer
// Service gets the first address of the pool, and gives it back when it
// stops being a LoadBalancer.
func TestMetalLBSeedAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the apiserver")
	}
	srv := apiservertest.Start(t)
	client := kubernetes.NewForConfigOrDie(srv.Config)
	dyn := dynamic.NewForConfigOrDie(srv.Config)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(ctx, client, dyn, controller.Options{Controllers: []string{controller.LBIPAM}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "metallb-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc := metallbv1beta1.Client{Dyn: dyn}
	if _, err := mc.CreateIPAddressPool(ctx, &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "first-pool", Namespace: "metallb-system"},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.168.4.10-192.168.4.20"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CreateL2Advertisement(ctx, &metallbv1beta1.L2Advertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "example-advertisement", Namespace: "metallb-system"},
		Spec:       metallbv1beta1.L2AdvertisementSpec{IPAddressPools: []string{"first-pool"}},
	}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-service", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "nginx"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingress := func() string {
		s, err := client.CoreV1().Services("default").Get(ctx, "nginx-service", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return "<pending>"
		}
		return s.Status.LoadBalancer.Ingress[0].IP
	}
	wait := func(want string) {
		t.Helper()
		var got string
		for i := 0; i < 500; i++ {
			if got = ingress(); got == want {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("EXTERNAL-IP = %s, want %s", got, want)
	}
	wait("192.168.4.10")
	// The LB IPAM controller writes the Service's status and annotations
	// concurrently, so the type change retries on conflict as kubectl edit
	// would.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client.CoreV1().Services("default").Get(ctx, "nginx-service", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Type = corev1.ServiceTypeClusterIP
		cur.Spec.Ports[0].NodePort = 0
		_, err = client.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wait("<pending>")
}
