package lbipam

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
)

func pool(name string, auto *bool, addrs ...string) *metallbv1beta1.IPAddressPool {
	return &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "metallb-system"},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: addrs, AutoAssign: auto},
	}
}

func TestParseAndValidatePools(t *testing.T) {
	cases := []struct {
		addr string
		err  string
	}{
		{"192.168.4.10-192.168.4.20", ""},
		{"192.168.10.0/24", ""},
		{"fc00:f853:ccd:e799::/124", ""},
		{"192.168.4.20-192.168.4.10", `pool "p": invalid IP range "192.168.4.20-192.168.4.10": start IP 192.168.4.20 is after the end IP 192.168.4.10`},
		{"192.168.4.300-192.168.4.310", `pool "p": invalid IP range "192.168.4.300-192.168.4.310": invalid start IP "192.168.4.300"`},
		{"192.168.4.1-fc00::1", `pool "p": invalid IP range "192.168.4.1-fc00::1": start and end IPs are of different address families`},
		{"10.0.0.0/33", `pool "p": invalid CIDR "10.0.0.0/33"`},
	}
	for _, c := range cases {
		_, err := ParsePool(pool("p", nil, c.addr))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.addr, err)
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%s: error %v, want prefix %q", c.addr, err, c.err)
		}
	}
	others := []metallbv1beta1.IPAddressPool{*pool("first-pool", nil, "192.168.4.10-192.168.4.20")}
	err := ValidatePool(pool("second", nil, "192.168.4.0/24"), others)
	if err == nil || err.Error() != `CIDR "192.168.4.0/24" in pool "second" overlaps with already defined CIDR "192.168.4.10-192.168.4.20" in pool "first-pool"` {
		t.Errorf("overlap: %v", err)
	}
}

func mustPool(t *testing.T, p *metallbv1beta1.IPAddressPool) *Pool {
	pp, err := ParsePool(p)
	if err != nil {
		t.Fatal(err)
	}
	return pp
}

func TestAllocatorScenario(t *testing.T) {
	a := NewAllocator()
	no := false
	a.SetPools([]*Pool{mustPool(t, pool("first-pool", nil, "192.168.4.10-192.168.4.11")), mustPool(t, pool("manual", &no, "10.9.0.1/32"))})
	web := []Port{{"TCP", 80}}
	dns := []Port{{"UDP", 53}}
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	req := func(key string, ports []Port, share string) Request {
		return Request{Key: key, Namespace: "default", Ports: ports, SharingKey: share, Policy: corev1.IPFamilyPolicySingleStack}
	}
	steps := []struct {
		name string
		do   func() ([]netip.Addr, error)
		want string
	}{
		{"first auto", func() ([]netip.Addr, error) { return a.Allocate(req("a", web, ""), IPv4) }, "[192.168.4.10]"},
		{"second auto", func() ([]netip.Addr, error) { return a.Allocate(req("b", web, ""), IPv4) }, "[192.168.4.11]"},
		{"exhausted (manual pool not auto-assigned)", func() ([]netip.Addr, error) { return a.Allocate(req("c", web, ""), IPv4) }, "err: no available IPs"},
		{"pool by name", func() ([]netip.Addr, error) { return a.AllocateFromPool(req("c", web, ""), IPv4, "manual") }, "[10.9.0.1]"},
		{"requested IP held by another, no sharing", func() ([]netip.Addr, error) {
			return ip("192.168.4.10"), a.Assign(req("d", dns, ""), ip("192.168.4.10"))
		}, `err: can't change sharing key for "d", address also in use by a`},
		{"requested IP outside pools", func() ([]netip.Addr, error) { return nil, a.Assign(req("d", dns, ""), ip("8.8.8.8")) }, `err: ["8.8.8.8"] is not allowed in config`},
		{"release a", func() ([]netip.Addr, error) { a.Unassign("a"); return nil, nil }, "[]"},
		{"sharing with the same key and other ports", func() ([]netip.Addr, error) {
			if err := a.Assign(req("e", web, "k"), ip("192.168.4.10")); err != nil {
				return nil, err
			}
			return ip("192.168.4.10"), a.Assign(req("f", dns, "k"), ip("192.168.4.10"))
		}, "[192.168.4.10]"},
		{"sharing refused on a port clash", func() ([]netip.Addr, error) { return nil, a.Assign(req("g", web, "k"), ip("192.168.4.10")) }, `err: port TCP/80 is already in use on "192.168.4.10"`},
	}
	for _, s := range steps {
		got, err := s.do()
		res := fmt.Sprint(got)
		if err != nil {
			res = "err: " + err.Error()
		}
		if res != s.want {
			t.Fatalf("step %q: got %s, want %s", s.name, res, s.want)
		}
	}
	// Overlapping pools: the later one is dropped and reported.
	errs := a.SetPools([]*Pool{mustPool(t, pool("a", nil, "10.0.0.0/24")), mustPool(t, pool("b", nil, "10.0.0.128/25"))})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `pool "b" overlaps`) {
		t.Errorf("overlap errors = %v", errs)
	}
}

func TestControllerStates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	// The dynamic fake must hold unstructured objects only.
	scheme := runtime.NewScheme()
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		metallbv1beta1.IPAddressPoolsResource:   "IPAddressPoolList",
		metallbv1beta1.L2AdvertisementsResource: "L2AdvertisementList",
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	rec := record.NewFakeRecorder(100)
	c := New(client, dyn, factory, dynFactory, rec, nil)
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; factory.Shutdown(); dynFactory.Shutdown() }()

	mc := metallbv1beta1.Client{Dyn: dyn}
	if _, err := mc.CreateIPAddressPool(ctx, pool("first-pool", nil, "192.168.4.10-192.168.4.11")); err != nil {
		t.Fatal(err)
	}
	lb := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	}
	ingress := func(name string) string {
		s, err := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "gone"
		}
		var ips []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
		}
		if len(ips) == 0 {
			return "<pending>"
		}
		return strings.Join(ips, ",")
	}
	expect := func(step, name, want string) {
		t.Helper()
		var got string
		for i := 0; i < 300; i++ {
			if got = ingress(name); got == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("step %q: %s ingress = %s, want %s", step, name, got, want)
	}
	create := func(s *corev1.Service) {
		t.Helper()
		if _, err := client.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(lb("nginx"))
	expect("first service", "nginx", "192.168.4.10")
	s2 := lb("pinned")
	s2.Spec.LoadBalancerIP = "192.168.4.11"
	create(s2)
	expect("spec.loadBalancerIP honoured", "pinned", "192.168.4.11")
	create(lb("third"))
	expect("exhausted", "third", "<pending>")
	waitEvent(t, rec, `Warning AllocationFailed Failed to allocate IP for "default/third": no available IPs`)
	// nginx becomes ClusterIP: its address is released and goes to third.
	cur, _ := client.CoreV1().Services("default").Get(ctx, "nginx", metav1.GetOptions{})
	cur.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err := client.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("type change clears ingress", "nginx", "<pending>")
	// third is retried when something changes about it; poke it.
	th, _ := client.CoreV1().Services("default").Get(ctx, "third", metav1.GetOptions{})
	th.Labels = map[string]string{"poke": "1"}
	client.CoreV1().Services("default").Update(ctx, th, metav1.UpdateOptions{})
	expect("released address reused", "third", "192.168.4.10")
	// The pool annotation is a separate write from the status (as MetalLB
	// does it), so it may land a moment after the ingress address.
	var got *corev1.Service
	for i := 0; i < 500; i++ {
		got, _ = client.CoreV1().Services("default").Get(ctx, "third", metav1.GetOptions{})
		if got.Annotations[AnnotationAllocatedFrom] == "first-pool" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got.Annotations[AnnotationAllocatedFrom] != "first-pool" {
		t.Errorf("annotations = %v", got.Annotations)
	}
	// Annotation-requested address, shared by key.
	sh := lb("shared-dns")
	sh.Spec.Ports = []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}}
	sh.Annotations = map[string]string{AnnotationLoadBalancerIPs: "192.168.4.11", AnnotationAllowSharedIP: "k"}
	create(sh)
	expect("sharing refused without a common key", "shared-dns", "<pending>")
	p, _ := client.CoreV1().Services("default").Get(ctx, "pinned", metav1.GetOptions{})
	p.Annotations = map[string]string{AnnotationAllowSharedIP: "k"}
	client.CoreV1().Services("default").Update(ctx, p, metav1.UpdateOptions{})
	// A pending Service is retried when something changes about it. The poke
	// may reach the controller before its informer has seen pinned's new
	// key, so poke until the address is shared (or the deadline passes).
	for i := 0; i < 30 && ingress("shared-dns") != "192.168.4.11"; i++ {
		sh2, _ := client.CoreV1().Services("default").Get(ctx, "shared-dns", metav1.GetOptions{})
		sh2.Labels = map[string]string{"poke": strconv.Itoa(i)}
		client.CoreV1().Services("default").Update(ctx, sh2, metav1.UpdateOptions{})
		time.Sleep(100 * time.Millisecond)
	}
	expect("sharing with the same key", "shared-dns", "192.168.4.11")
}

func waitEvent(t *testing.T, rec *record.FakeRecorder, want string) {
	t.Helper()
	deadline := time.After(3 * time.Second)
	for {
		select {
		case e := <-rec.Events:
			if e == want {
				return
			}
		case <-deadline:
			t.Fatalf("no event %q", want)
		}
	}
}
