package lbipam

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/internal/metallbmetrics"
)

// The capacities MetalLB's allocator reports for the same pools (worked
// out from its rules: ranges cut into CIDR blocks, 62+ host bits is
// "infinite", avoidBuggyIPs drops IPv4 .0 and .255).
func TestPoolCapacity(t *testing.T) {
	max := float64(math.MaxInt64)
	cases := []struct {
		addrs           []string
		buggy           bool
		total, ip4, ip6 float64
	}{
		{[]string{"192.168.4.10-192.168.4.20"}, false, 11, 11, 0},
		{[]string{"192.168.10.0/24"}, false, 256, 256, 0},
		{[]string{"192.168.10.0/24"}, true, 254, 254, 0},
		{[]string{"192.168.10.0/23"}, true, 508, 508, 0},
		{[]string{"10.0.0.250-10.0.1.5"}, false, 12, 12, 0},
		{[]string{"10.0.0.250-10.0.1.5"}, true, 10, 10, 0}, // .255 and .0 out
		{[]string{"10.0.0.0/30"}, true, 3, 3, 0},
		{[]string{"10.0.0.252/30"}, true, 3, 3, 0},
		{[]string{"10.0.0.4/30"}, true, 4, 4, 0},
		{[]string{"10.0.0.0/24", "fd00::/120"}, true, 510, 254, 256}, // IPv6 never avoided
		{[]string{"fd00::/120"}, false, 256, 0, 256},
		{[]string{"fd00::/67"}, false, 1 << 61, 0, 1 << 61},
		{[]string{"fd00::/66"}, false, max, 0, max},
		{[]string{"fd00::/64", "10.0.0.0/30"}, false, max, 4, max},
		{[]string{"fd00::1-fd00::ffff:ffff:ffff:ffff"}, false, max, 0, max},
		{[]string{"fd00::/67", "fd01::/67", "fd02::/67", "fd03::/67", "fd04::/67"}, false, max, 0, max},
	}
	for _, c := range cases {
		p := mustPool(t, pool("p", nil, c.addrs...))
		p.AvoidBuggyIPs = c.buggy
		total, ip4, ip6 := PoolCapacity(p)
		if total != c.total || ip4 != c.ip4 || ip6 != c.ip6 {
			t.Errorf("%v avoidBuggyIPs=%v: capacity %v/%v/%v, want %v/%v/%v", c.addrs, c.buggy, total, ip4, ip6, c.total, c.ip4, c.ip6)
		}
	}
}

func TestRangeBlocks(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{"10.0.0.250", "10.0.1.5", "[10.0.0.250/31 10.0.0.252/30 10.0.1.0/30 10.0.1.4/31]"},
		{"10.0.0.0", "10.0.0.255", "[10.0.0.0/24]"},
		{"10.0.0.7", "10.0.0.7", "[10.0.0.7/32]"},
		{"0.0.0.0", "255.255.255.255", "[0.0.0.0/0]"},
		{"fd00::1", "fd00::4", "[fd00::1/128 fd00::2/127 fd00::4/128]"},
	} {
		got := fmt.Sprint(rangeBlocks(netip.MustParseAddr(c.from), netip.MustParseAddr(c.to)))
		if got != c.want {
			t.Errorf("%s-%s: %s, want %s", c.from, c.to, got, c.want)
		}
	}
}

const allocHelp = `# HELP metallb_allocator_addresses_in_use_total Number of IP addresses in use, per pool
# TYPE metallb_allocator_addresses_in_use_total gauge
# HELP metallb_allocator_addresses_total Number of usable IP addresses, per pool
# TYPE metallb_allocator_addresses_total gauge
# HELP metallb_allocator_ipv4_addresses_in_use_total Number of IPV4 addresses in use, per pool
# TYPE metallb_allocator_ipv4_addresses_in_use_total gauge
# HELP metallb_allocator_ipv4_addresses_total Number of usable IPV4 addresses, per pool
# TYPE metallb_allocator_ipv4_addresses_total gauge
# HELP metallb_allocator_ipv6_addresses_in_use_total Number of IPV6 addresses in use, per pool
# TYPE metallb_allocator_ipv6_addresses_in_use_total gauge
# HELP metallb_allocator_ipv6_addresses_total Number of usable IPV6 addresses, per pool
# TYPE metallb_allocator_ipv6_addresses_total gauge
# HELP metallb_allocator_services_allocated_total Number of services allocated, per pool
# TYPE metallb_allocator_services_allocated_total gauge
`

var allocNames = []string{"metallb_allocator_addresses_in_use_total", "metallb_allocator_addresses_total",
	"metallb_allocator_ipv4_addresses_in_use_total", "metallb_allocator_ipv4_addresses_total",
	"metallb_allocator_ipv6_addresses_in_use_total", "metallb_allocator_ipv6_addresses_total",
	"metallb_allocator_services_allocated_total"}

// poolSeries is the expected exposition of one pool's gauges.
func poolSeries(pool string, total, ip4, ip6, inUse, in4, in6, svcs int) map[string]string {
	return map[string]string{
		"metallb_allocator_addresses_in_use_total":      fmt.Sprintf(`{pool=%q} %d`, pool, inUse),
		"metallb_allocator_addresses_total":             fmt.Sprintf(`{pool=%q} %d`, pool, total),
		"metallb_allocator_ipv4_addresses_in_use_total": fmt.Sprintf(`{pool=%q} %d`, pool, in4),
		"metallb_allocator_ipv4_addresses_total":        fmt.Sprintf(`{pool=%q} %d`, pool, ip4),
		"metallb_allocator_ipv6_addresses_in_use_total": fmt.Sprintf(`{pool=%q} %d`, pool, in6),
		"metallb_allocator_ipv6_addresses_total":        fmt.Sprintf(`{pool=%q} %d`, pool, ip6),
		"metallb_allocator_services_allocated_total":    fmt.Sprintf(`{pool=%q} %d`, pool, svcs),
	}
}

// expectAlloc compares every allocator series in reg with the pools'
// expected ones (HELP and TYPE included).
func expectAlloc(t *testing.T, reg *prometheus.Registry, pools ...map[string]string) {
	t.Helper()
	var b strings.Builder
	help := strings.Split(strings.TrimSpace(allocHelp), "\n")
	for i, name := range allocNames {
		b.WriteString(help[2*i] + "\n" + help[2*i+1] + "\n")
		for _, p := range pools {
			b.WriteString(name + p[name] + "\n")
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(b.String()), allocNames...); err != nil {
		t.Error(err)
	}
}

func TestAllocatorMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewAllocator()
	a.SetMetrics(NewMetrics(reg))
	dual := mustPool(t, pool("dual", nil, "10.0.0.0/30", "fd00::/126"))
	other := mustPool(t, pool("other", nil, "10.1.0.0/24"))
	other.AvoidBuggyIPs = true
	a.SetPools([]*Pool{dual, other})
	expectAlloc(t, reg, poolSeries("dual", 8, 4, 4, 0, 0, 0, 0), poolSeries("other", 254, 254, 0, 0, 0, 0, 0))

	web, dns := []Port{{"TCP", 80}}, []Port{{"UDP", 53}}
	req := func(key string, ports []Port, share string, policy corev1.IPFamilyPolicy) Request {
		return Request{Key: key, Namespace: "ns", Ports: ports, SharingKey: share, Policy: policy}
	}
	if _, err := a.AllocateFromPool(req("ns/ds", web, "", corev1.IPFamilyPolicyRequireDualStack), DualStack, "dual"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AllocateFromPool(req("ns/web", web, "k", corev1.IPFamilyPolicySingleStack), IPv4, "dual"); err != nil {
		t.Fatal(err)
	}
	// Shares web's address (same key, other port): one address, two Services.
	ips, err := a.AllocateFromPool(req("ns/dns", dns, "k", corev1.IPFamilyPolicySingleStack), IPv4, "dual")
	if err != nil || ips[0] != a.Get("ns/web").IPs[0] {
		t.Fatalf("dns got %v %v, want web's address", ips, err)
	}
	expectAlloc(t, reg, poolSeries("dual", 8, 4, 4, 3, 2, 1, 3), poolSeries("other", 254, 254, 0, 0, 0, 0, 0))

	// Releasing one sharer keeps the address in use.
	a.Unassign("ns/dns")
	expectAlloc(t, reg, poolSeries("dual", 8, 4, 4, 3, 2, 1, 2), poolSeries("other", 254, 254, 0, 0, 0, 0, 0))
	a.Unassign("ns/web")
	expectAlloc(t, reg, poolSeries("dual", 8, 4, 4, 2, 1, 1, 1), poolSeries("other", 254, 254, 0, 0, 0, 0, 0))

	// Pool "dual" replaced by "wide", which contains ds's addresses: they
	// count there now, and dual's series go.
	wide := mustPool(t, pool("wide", nil, "10.0.0.0/29", "fd00::/120"))
	a.SetPools([]*Pool{wide, other})
	expectAlloc(t, reg, poolSeries("other", 254, 254, 0, 0, 0, 0, 0), poolSeries("wide", 264, 8, 256, 2, 1, 1, 1))

	a.StopMetrics()
	expectAlloc(t, reg)
}

// The controller drives the gauges and MetalLB's k8s client metrics from
// the objects: allocation, sharing, release, an invalid pool (stale
// configuration) and its removal.
func TestControllerMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		metallbv1beta1.IPAddressPoolsResource: "IPAddressPoolList",
	})
	// Writing Service c's status fails.
	client.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.UpdateAction); ok && a.GetSubresource() == "status" && u.GetObject().(*corev1.Service).Name == "c" {
			return true, nil, errors.New("injected failure")
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	reg := prometheus.NewRegistry()
	k8s := metallbmetrics.NewK8sClient(reg)
	c := New(client, dyn, factory, dynFactory, record.NewFakeRecorder(100), nil)
	c.SetMetrics(NewMetrics(reg), k8s)
	factory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; factory.Shutdown(); dynFactory.Shutdown() }()

	mc := metallbv1beta1.Client{Dyn: dyn}
	if _, err := mc.CreateIPAddressPool(ctx, pool("first-pool", nil, "192.168.4.10-192.168.4.11")); err != nil {
		t.Fatal(err)
	}
	gauge := func(name, pool string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.Metric {
				if pool == "" || (len(m.Label) == 1 && m.Label[0].GetValue() == pool) {
					if m.Gauge != nil {
						return m.Gauge.GetValue()
					}
					return m.Counter.GetValue()
				}
			}
		}
		return -1 // absent
	}
	waitFor := func(what string, f func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if f() {
				return
			}
		}
		t.Fatalf("timed out waiting for %s", what)
	}
	waitFor("the pool's capacity", func() bool { return gauge("metallb_allocator_addresses_total", "first-pool") == 2 })
	if gauge("metallb_k8s_client_config_loaded_bool", "") != 1 || gauge("metallb_k8s_client_config_stale_bool", "") != 0 {
		t.Errorf("config loaded %v stale %v, want 1 0", gauge("metallb_k8s_client_config_loaded_bool", ""), gauge("metallb_k8s_client_config_stale_bool", ""))
	}
	svc := func(name string, port int32, share string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Annotations: map[string]string{AnnotationLoadBalancerIPs: "192.168.4.10", AnnotationAllowSharedIP: share}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}, Ports: []corev1.ServicePort{{Port: port, Protocol: corev1.ProtocolTCP}}}}
		if _, err := client.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	svc("a", 80, "k")
	svc("b", 443, "k")
	waitFor("two Services on one address", func() bool {
		return gauge("metallb_allocator_services_allocated_total", "first-pool") == 2 &&
			gauge("metallb_allocator_addresses_in_use_total", "first-pool") == 1 &&
			gauge("metallb_allocator_ipv4_addresses_in_use_total", "first-pool") == 1
	})
	if gauge("metallb_k8s_client_updates_total", "") < 2 || gauge("metallb_k8s_client_update_errors_total", "") != 0 {
		t.Errorf("updates_total = %v, update_errors_total = %v; want at least the two Services, no error",
			gauge("metallb_k8s_client_updates_total", ""), gauge("metallb_k8s_client_update_errors_total", ""))
	}
	// A status write that fails (the reactor below) is an update error.
	svc("c", 8080, "k")
	waitFor("an update error", func() bool { return gauge("metallb_k8s_client_update_errors_total", "") >= 1 })
	if err := client.CoreV1().Services("default").Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Services("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("one Service left", func() bool {
		return gauge("metallb_allocator_services_allocated_total", "first-pool") == 1 &&
			gauge("metallb_allocator_addresses_in_use_total", "first-pool") == 1
	})
	if err := client.CoreV1().Services("default").Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the address released", func() bool { return gauge("metallb_allocator_addresses_in_use_total", "first-pool") == 0 })

	// An invalid pool (the fake has no admission) is ignored: stale.
	if _, err := mc.CreateIPAddressPool(ctx, pool("broken", nil, "10.0.0.9-10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	waitFor("stale configuration", func() bool { return gauge("metallb_k8s_client_config_stale_bool", "") == 1 })
	if gauge("metallb_allocator_addresses_total", "broken") != -1 {
		t.Error("the invalid pool has series")
	}
	if err := dyn.Resource(metallbv1beta1.IPAddressPoolsResource).Namespace("metallb-system").Delete(ctx, "broken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("configuration fine again", func() bool { return gauge("metallb_k8s_client_config_stale_bool", "") == 0 })
	if err := dyn.Resource(metallbv1beta1.IPAddressPoolsResource).Namespace("metallb-system").Delete(ctx, "first-pool", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the deleted pool's series gone", func() bool { return gauge("metallb_allocator_addresses_total", "first-pool") == -1 })
}
