package proxy

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func testService(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, Ports: ports},
	}
}

func testSlice(ns, svc, name string, port int32, proto v1.Protocol, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To(""), Port: ptr.To(port), Protocol: ptr.To(proto)}},
		Endpoints:   eps,
	}
}

func ep(ip, node string, ready bool) discovery.Endpoint {
	return discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node), Conditions: discovery.EndpointConditions{Ready: ptr.To(ready)}}
}

func TestServicePortNameString(t *testing.T) {
	n := ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "nginx"}, Protocol: v1.ProtocolTCP}
	if got := n.String(); got != "default/nginx" {
		t.Errorf("unnamed port: got %q", got)
	}
	n.Port = "http"
	if got := n.String(); got != "default/nginx:http" {
		t.Errorf("named port: got %q", got)
	}
}

func TestFormatProbability(t *testing.T) {
	for n, want := range map[int]string{3: "0.3333333333", 2: "0.5000000000", 10: "0.1000000000"} {
		if got := FormatProbability(n); got != want {
			t.Errorf("FormatProbability(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestServiceChangeTracker(t *testing.T) {
	tr := NewServiceChangeTracker()
	m := ServicePortMap{}
	svc := testService("ns", "a", "10.96.0.5", v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)})
	if !tr.Update(nil, svc) {
		t.Fatal("add not recorded")
	}
	res := tr.Apply(m)
	if len(m) != 1 || !res.UpdatedServices.Has(types.NamespacedName{Namespace: "ns", Name: "a"}) {
		t.Fatalf("after add: map %v result %v", m, res)
	}
	// An update that changes nothing the proxy uses is not a change.
	same := svc.DeepCopy()
	same.Labels = map[string]string{"x": "y"}
	if tr.Update(svc, same) {
		t.Error("no-op update recorded as change")
	}
	// Add then delete before a sync collapses to nothing.
	other := testService("ns", "b", "10.96.0.6", v1.ServicePort{Port: 80, Protocol: v1.ProtocolTCP})
	tr.Update(nil, other)
	if tr.Update(other, nil) {
		t.Error("add+delete left a pending change")
	}
	if tr.Pending() != 0 {
		t.Errorf("pending = %d", tr.Pending())
	}
	tr.Update(same, nil)
	res = tr.Apply(m)
	if len(m) != 0 || !res.DeletedUDPClusterIPs.Has("10.96.0.5") {
		t.Errorf("after delete: map %v deleted UDP %v", m, res.DeletedUDPClusterIPs)
	}
}

// TestChangedPorts: the tracker's index gives a partial sync the current
// ports of each changed Service, the same as a scan of the map, as ports
// come, change and go.
func TestChangedPorts(t *testing.T) {
	tr := NewServiceChangeTracker()
	m := ServicePortMap{}
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	svcA := testService("ns", "a", "10.96.0.5", v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP},
		v1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP})
	svcB := testService("ns", "b", "10.96.0.6", v1.ServicePort{Port: 80, Protocol: v1.ProtocolTCP})
	check := func(step string, res ServiceUpdateResult, want map[types.NamespacedName]int) {
		t.Helper()
		req := &SyncRequest{Services: m, ServiceResult: res}
		got := req.ChangedPorts()
		req.ServiceResult.Ports = nil
		scanned := req.ChangedPorts()
		if len(got) != len(want) || len(scanned) != len(want) {
			t.Fatalf("%s: index %v, scan %v, want %v ports", step, got, scanned, want)
		}
		for nn, n := range want {
			if len(got[nn]) != n || len(scanned[nn]) != n {
				t.Errorf("%s: %s has %v by the index, %v by a scan, want %d ports", step, nn, got[nn], scanned[nn], n)
			}
			for _, pn := range got[nn] {
				if m[pn] == nil || !slices.Contains(scanned[nn], pn) {
					t.Errorf("%s: index lists %v, not in the map", step, pn)
				}
			}
		}
	}
	tr.Update(nil, svcA)
	tr.Update(nil, svcB)
	check("both added", tr.Apply(m), map[types.NamespacedName]int{a: 2, b: 1})
	one := svcA.DeepCopy()
	one.Spec.Ports = one.Spec.Ports[:1]
	tr.Update(svcA, one)
	res := tr.Apply(m)
	check("a port removed", res, map[types.NamespacedName]int{a: 1})
	if len(res.Deleted) != 1 || res.Deleted[0].Name.Port != "dns-tcp" {
		t.Errorf("deleted ports %v", res.Deleted)
	}
	tr.Update(svcB, nil)
	check("b deleted", tr.Apply(m), map[types.NamespacedName]int{})
	check("nothing changed", tr.Apply(m), map[types.NamespacedName]int{})
}

func TestNewServicePortsPolicies(t *testing.T) {
	svc := testService("ns", "lb", "10.96.0.7", v1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP})
	svc.Spec.Type = v1.ServiceTypeLoadBalancer
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 32000
	svc.Spec.LoadBalancerSourceRanges = []string{" 192.168.0.0/16 "}
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "172.18.0.200"}}
	ps := NewServicePorts(svc)
	if len(ps) != 1 {
		t.Fatalf("got %d ports", len(ps))
	}
	p := ps[0]
	if !p.ExternalPolicyLocal || p.HealthCheckNodePort != 32000 || p.NodePort != 30080 || p.StickyMaxAgeSeconds != 10800 ||
		len(p.LoadBalancerVIPs) != 1 || len(p.LoadBalancerSourceRanges) != 1 {
		t.Errorf("unexpected port %+v", p)
	}
	headless := testService("ns", "h", "None", v1.ServicePort{Port: 80})
	if got := NewServicePorts(headless); len(got) != 0 {
		t.Errorf("headless service gave %d ports", len(got))
	}
}

func TestEndpointsChangeTrackerUDP(t *testing.T) {
	tr := NewEndpointsChangeTracker("node1")
	m := EndpointsMap{}
	pn := ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "dns"}, Protocol: v1.ProtocolUDP}
	s1 := testSlice("ns", "dns", "dns-1", 53, v1.ProtocolUDP, ep("10.244.1.2", "node1", true), ep("10.244.2.2", "node2", true))
	tr.EndpointSliceUpdate(s1, false)
	res := tr.Apply(m)
	if len(m[pn]) != 2 || len(res.NewlyActiveUDPServices) != 1 {
		t.Fatalf("first apply: %v %+v", m, res)
	}
	if !m[pn][0].IsLocal || m[pn][1].IsLocal {
		t.Errorf("locality wrong: %+v %+v", m[pn][0], m[pn][1])
	}
	s2 := testSlice("ns", "dns", "dns-1", 53, v1.ProtocolUDP, ep("10.244.2.2", "node2", true))
	tr.EndpointSliceUpdate(s2, false)
	res = tr.Apply(m)
	if len(res.DeletedUDPEndpoints) != 1 || res.DeletedUDPEndpoints[0].Endpoint != "10.244.1.2:53" {
		t.Errorf("deleted: %+v", res.DeletedUDPEndpoints)
	}
	if len(res.NewlyActiveUDPServices) != 0 {
		t.Errorf("newly active on N->N-1: %v", res.NewlyActiveUDPServices)
	}
	tr.EndpointSliceUpdate(s2, true)
	tr.Apply(m)
	if _, ok := m[pn]; ok {
		t.Errorf("endpoints left after slice delete: %v", m[pn])
	}
}

func mkEP(ip string, local, ready, serving, terminating bool) *Endpoint {
	return &Endpoint{Addr: netip.MustParseAddr(ip), Port: 80, IsLocal: local, Ready: ready, Serving: serving, Terminating: terminating}
}

func TestCategorizeEndpoints(t *testing.T) {
	localReady := mkEP("10.0.0.1", true, true, true, false)
	remoteReady := mkEP("10.0.0.2", false, true, true, false)
	localTerm := mkEP("10.0.0.3", true, false, true, true)
	remoteTerm := mkEP("10.0.0.4", false, false, true, true)
	notServing := mkEP("10.0.0.5", false, false, false, true)
	cases := []struct {
		name                string
		svc                 ServicePort
		eps                 []*Endpoint
		cluster, local, all int
		hasAny              bool
	}{
		{"cluster policy uses ready only", ServicePort{}, []*Endpoint{localReady, remoteReady, localTerm}, 2, 0, 2, true},
		{"cluster falls back to serving terminating", ServicePort{}, []*Endpoint{localTerm, remoteTerm, notServing}, 2, 0, 2, true},
		{"no usable endpoints", ServicePort{}, []*Endpoint{notServing}, 0, 0, 0, false},
		{"internal local", ServicePort{InternalPolicyLocal: true}, []*Endpoint{localReady, remoteReady}, 0, 1, 1, true},
		{"internal local none local", ServicePort{InternalPolicyLocal: true}, []*Endpoint{remoteReady}, 0, 0, 0, true},
		{"external local", ServicePort{NodePort: 30000, ExternalPolicyLocal: true}, []*Endpoint{localReady, remoteReady}, 2, 1, 2, true},
		{"external local falls back to local terminating", ServicePort{NodePort: 30000, ExternalPolicyLocal: true}, []*Endpoint{localTerm, remoteReady}, 1, 1, 2, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl, lo, all, has := CategorizeEndpointsForNode(c.eps, &c.svc, "", nil)
			if len(cl) != c.cluster || len(lo) != c.local || len(all) != c.all || has != c.hasAny {
				t.Errorf("got cluster=%d local=%d all=%d hasAny=%v", len(cl), len(lo), len(all), has)
			}
		})
	}
}

func TestBoundedFrequencyRunner(t *testing.T) {
	var mu sync.Mutex
	runs := 0
	r := NewBoundedFrequencyRunner("t", func() { mu.Lock(); runs++; mu.Unlock() }, 200*time.Millisecond, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Loop(ctx)
	time.Sleep(50 * time.Millisecond)
	for i := 0; i < 20; i++ {
		r.Run()
	}
	time.Sleep(400 * time.Millisecond)
	mu.Lock()
	got := runs
	mu.Unlock()
	// One initial run, then the 20 requests coalesce into one.
	if got != 2 {
		t.Errorf("runs = %d, want 2", got)
	}
}

// TestBoundedFrequencyRunnerBurst: with Burst 2, one request right after a
// run runs at once; the next waits for MinInterval (10 s here, so the test
// does not depend on timing: it only polls for what must happen well before,
// and checks that the third run has not happened half a second later).
func TestBoundedFrequencyRunnerBurst(t *testing.T) {
	var runs atomic.Int32
	r := NewBoundedFrequencyRunner("t", func() { runs.Add(1) }, 10*time.Second, time.Hour)
	r.Burst = 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Loop(ctx)
	waitRuns := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(8 * time.Second)
		for runs.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("runs = %d, want %d well before the 10s minimum interval", runs.Load(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitRuns(1) // the initial run
	r.Run()
	waitRuns(2) // the burst's second token
	r.Run()
	time.Sleep(500 * time.Millisecond)
	if got := runs.Load(); got != 2 {
		t.Errorf("runs = %d after the burst was spent, want 2 until the minimum interval passes", got)
	}
}

func TestServiceHealthServer(t *testing.T) {
	var addr string
	s := NewServiceHealthServer(nil, NewProxyHealth(time.Minute), func(port uint16) (net.Listener, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			addr = ln.Addr().String()
		}
		return ln, err
	})
	defer s.Close()
	name := types.NamespacedName{Namespace: "default", Name: "lb"}
	if err := s.SyncServices(map[types.NamespacedName]uint16{name: 32000}); err != nil {
		t.Fatal(err)
	}
	get := func() (int, map[string]any) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("body %q: %v", b, err)
		}
		return resp.StatusCode, body
	}
	code, body := get()
	if code != 503 || body["localEndpoints"].(float64) != 0 {
		t.Errorf("no endpoints: %d %v", code, body)
	}
	s.SyncEndpoints(map[types.NamespacedName]int{name: 2})
	code, body = get()
	svc := body["service"].(map[string]any)
	if code != 200 || body["localEndpoints"].(float64) != 2 || svc["namespace"] != "default" || svc["name"] != "lb" {
		t.Errorf("two endpoints: %d %v", code, body)
	}
}

// recordingProvider is a Provider that records each request.
type recordingProvider struct {
	mu   sync.Mutex
	reqs []*SyncRequest
	fail bool
}

func (r *recordingProvider) Sync(_ context.Context, req *SyncRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cp := *req
	r.reqs = append(r.reqs, &cp)
	if r.fail {
		return errFake
	}
	return nil
}
func (r *recordingProvider) Cleanup(context.Context) error { return nil }

type fakeErr struct{}

func (fakeErr) Error() string { return "fake failure" }

var errFake error = fakeErr{}

func TestProxierWithInformers(t *testing.T) {
	svc := testService("default", "web", "10.96.0.20", v1.ServicePort{Port: 80, Protocol: v1.ProtocolTCP})
	slice := testSlice("default", "web", "web-abc", 8080, v1.ProtocolTCP, ep("10.244.1.5", "n1", true))
	client := fake.NewSimpleClientset(svc, slice, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "172.18.0.2"}}}})
	prov := &recordingProvider{}
	p := NewProxier(Config{Provider: prov, Node: NodeInfo{Name: "n1"}, MinSyncPeriod: 10 * time.Millisecond, SyncPeriod: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := StartInformers(ctx, client, p, "n1", 0); err != nil {
		t.Fatal(err)
	}
	go p.Run(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		prov.mu.Lock()
		var last *SyncRequest
		if len(prov.reqs) > 0 {
			last = prov.reqs[len(prov.reqs)-1]
		}
		prov.mu.Unlock()
		if last != nil && len(last.Services) == 1 && len(last.Endpoints) == 1 && len(last.Node.IPs) == 1 {
			pn := SortedServicePorts(last.Services)[0]
			eps := last.Endpoints[pn]
			if len(eps) != 1 || eps[0].String() != "10.244.1.5:8080" || !eps[0].IsLocal {
				t.Fatalf("endpoints %v", eps)
			}
			if !prov.reqs[0].Full {
				t.Error("first sync not full")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sync with the expected state; last %+v", last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTopologyHints(t *testing.T) {
	a := mkEP("10.0.0.1", false, true, true, false)
	a.Hints = &Hints{Zones: []string{"zone-a"}}
	b := mkEP("10.0.0.2", false, true, true, false)
	b.Hints = &Hints{Zones: []string{"zone-b"}}
	svc := &ServicePort{}
	cl, _, _, _ := CategorizeEndpointsForNode([]*Endpoint{a, b}, svc, "n1", map[string]string{v1.LabelTopologyZone: "zone-a"})
	if len(cl) != 1 || cl[0] != a {
		t.Errorf("zone hints: got %v", cl)
	}
	// A zone no endpoint is hinted for: hints are ignored.
	cl, _, _, _ = CategorizeEndpointsForNode([]*Endpoint{a, b}, svc, "n1", map[string]string{v1.LabelTopologyZone: "zone-c"})
	if len(cl) != 2 {
		t.Errorf("unmatched zone: got %d endpoints", len(cl))
	}
	// Not every endpoint has hints: hints are ignored.
	c := mkEP("10.0.0.3", false, true, true, false)
	cl, _, _, _ = CategorizeEndpointsForNode([]*Endpoint{a, b, c}, svc, "n1", map[string]string{v1.LabelTopologyZone: "zone-a"})
	if len(cl) != 3 {
		t.Errorf("partial hints: got %d endpoints", len(cl))
	}
	// Node hints win over zone hints.
	a.Hints.Nodes, b.Hints.Nodes = []string{"n2"}, []string{"n1"}
	cl, _, _, _ = CategorizeEndpointsForNode([]*Endpoint{a, b}, svc, "n1", map[string]string{v1.LabelTopologyZone: "zone-a"})
	if len(cl) != 1 || cl[0] != b {
		t.Errorf("node hints: got %v", cl)
	}
}

// everySyncPeriod is a provider whose periodic full sync is due every
// --sync-period (as IPVS's).
type everySyncPeriod struct{ recordingProvider }

func (*everySyncPeriod) FullSyncDue(since, period time.Duration) bool { return since >= period }

// TestPeriodicFullSync checks kube-proxy 1.37's schedule: the periodic sync
// every --sync-period is partial, a full sync comes once per
// DefaultFullSyncPeriod, and a mode can ask for another schedule.
func TestPeriodicFullSync(t *testing.T) {
	ctx := context.Background()
	fulls := func(prov Provider, sinceLastFull ...time.Duration) []bool {
		p := NewProxier(Config{Provider: prov, Node: NodeInfo{Name: "n1"}, SyncPeriod: 30 * time.Second})
		var out []bool
		if err := p.sync(ctx); err != nil { // the first sync is full
			t.Fatal(err)
		}
		for _, d := range sinceLastFull {
			p.lastFullSync = time.Now().Add(-d)
			if err := p.sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var reqs []*SyncRequest
		switch r := prov.(type) {
		case *recordingProvider:
			reqs = r.reqs
		case *everySyncPeriod:
			reqs = r.reqs
		}
		for _, r := range reqs {
			out = append(out, r.Full)
		}
		return out
	}
	since := []time.Duration{time.Second, 31 * time.Second, 59 * time.Minute, 61 * time.Minute}
	if got, want := fulls(&recordingProvider{}, since...), []bool{true, false, false, false, true}; !slices.Equal(got, want) {
		t.Errorf("default schedule: full = %v, want %v", got, want)
	}
	if got, want := fulls(&everySyncPeriod{}, since...), []bool{true, false, true, true, true}; !slices.Equal(got, want) {
		t.Errorf("every sync period: full = %v, want %v", got, want)
	}
}

// TestServiceCIDRsFromObjects: the proxy reads the ServiceCIDR objects'
// ranges (as kube-proxy does), sends them to the mode, and a change makes
// the next sync full.
func TestServiceCIDRsFromObjects(t *testing.T) {
	sc := &networking.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec: networking.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "fd00:10:96::/112"}}}
	client := fake.NewSimpleClientset(sc)
	client.Fake.Resources = []*metav1.APIResourceList{{GroupVersion: "networking.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "servicecidrs", Kind: "ServiceCIDR"}}}}
	prov := &recordingProvider{}
	p := NewProxier(Config{Provider: prov, Node: NodeInfo{Name: "n1"}, SyncPeriod: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ok, err := WatchServiceCIDRs(ctx, client, p, 5*time.Second)
	if !ok || err != nil {
		t.Fatalf("WatchServiceCIDRs = %v, %v", ok, err)
	}
	p.setSynced(true, true)
	sync := func() *SyncRequest {
		t.Helper()
		if err := p.SyncNow(ctx); err != nil {
			t.Fatal(err)
		}
		return prov.reqs[len(prov.reqs)-1]
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")}
	if r := sync(); !slices.Equal(r.ServiceCIDRs, want) {
		t.Fatalf("ServiceCIDRs = %v, want %v", r.ServiceCIDRs, want)
	}
	if r := sync(); r.Full {
		t.Error("a sync with the same ranges is full")
	}
	// A second ServiceCIDR extends the ranges: the next sync is full.
	if _, err := client.NetworkingV1().ServiceCIDRs().Create(ctx, &networking.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "more"},
		Spec: networking.ServiceCIDRSpec{CIDRs: []string{"10.97.0.0/16"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.nodeMu.Lock()
		n := len(p.svcCIDRs)
		p.nodeMu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new ServiceCIDR never reached the proxier")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := sync(); !r.Full || len(r.ServiceCIDRs) != 3 {
		t.Errorf("after a new ServiceCIDR: full=%v ranges %v", r.Full, r.ServiceCIDRs)
	}
	// An API server without ServiceCIDRs: nothing is watched.
	old := fake.NewSimpleClientset()
	if ok, err := WatchServiceCIDRs(ctx, old, NewProxier(Config{Provider: prov}), time.Second); ok || err != nil {
		t.Errorf("without the resource: %v, %v", ok, err)
	}
}

// TestLocalReadyEndpoints: the health-check counts cover exactly the
// Services with a health check node port, count each local ready address
// once across the Service's ports, and are the same with the tracker's
// port index as without it.
func TestLocalReadyEndpoints(t *testing.T) {
	lb := types.NamespacedName{Namespace: "default", Name: "lb"}
	other := types.NamespacedName{Namespace: "default", Name: "other"}
	none := types.NamespacedName{Namespace: "default", Name: "none"}
	web := ServicePortName{NamespacedName: lb, Port: "http", Protocol: v1.ProtocolTCP}
	https := ServicePortName{NamespacedName: lb, Port: "https", Protocol: v1.ProtocolTCP}
	o := ServicePortName{NamespacedName: other, Protocol: v1.ProtocolTCP}
	n := ServicePortName{NamespacedName: none, Protocol: v1.ProtocolTCP}
	ep := func(a string, local, ready bool) *Endpoint {
		return &Endpoint{Addr: netip.MustParseAddr(a), Port: 80, IsLocal: local, Ready: ready}
	}
	eps := EndpointsMap{
		web:   {ep("10.0.0.1", true, true), ep("10.0.0.2", true, false), ep("10.0.1.1", false, true)},
		https: {ep("10.0.0.1", true, true), ep("10.0.0.3", true, true)},
		o:     {ep("10.0.0.4", true, true)},
		n:     {ep("10.0.1.2", false, true)},
	}
	hc := map[types.NamespacedName]uint16{lb: 32000, none: 32001}
	want := map[types.NamespacedName]int{lb: 2}
	index := PortIndex{lb: {web, https}, other: {o}, none: {n}}
	for _, ports := range []PortIndex{index, nil} {
		if got := eps.LocalReadyEndpoints(hc, ports); !maps.Equal(got, want) {
			t.Errorf("index %v: got %v, want %v", ports != nil, got, want)
		}
	}
}

type countingCleaner struct{ calls int }

func (c *countingCleaner) CleanStaleEntries(context.Context, ServicePortMap, EndpointsMap, func(ServicePortName) int) error {
	c.calls++
	return nil
}

// TestConntrackOnlyWithUDP: the stale-flow cleaner (a conntrack dump per
// sync) runs only while some Service has a UDP port; which Services do is
// followed through the changes, not found by walking every Service.
func TestConntrackOnlyWithUDP(t *testing.T) {
	ctx := context.Background()
	ct := &countingCleaner{}
	p := NewProxier(Config{Provider: &recordingProvider{}, Node: NodeInfo{Name: "n1"}, SyncPeriod: time.Hour, Conntrack: ct})
	p.setSynced(true, true)
	tcp := testService("default", "web", "10.96.0.20", v1.ServicePort{Port: 80, Protocol: v1.ProtocolTCP})
	dns := testService("kube-system", "dns", "10.96.0.10", v1.ServicePort{Name: "tcp", Port: 53, Protocol: v1.ProtocolTCP})
	dnsUDP := testService("kube-system", "dns", "10.96.0.10", v1.ServicePort{Name: "tcp", Port: 53, Protocol: v1.ProtocolTCP},
		v1.ServicePort{Name: "udp", Port: 53, Protocol: v1.ProtocolUDP})
	step := func(name string, change func(), want int) {
		t.Helper()
		change()
		before := ct.calls
		if err := p.SyncNow(ctx); err != nil {
			t.Fatal(err)
		}
		if got := ct.calls - before; got != want {
			t.Errorf("%s: cleaner ran %d times, want %d", name, got, want)
		}
	}
	step("TCP only", func() { p.OnServiceAdd(tcp); p.OnServiceAdd(dns) }, 0)
	step("a UDP port added", func() { p.OnServiceUpdate(dns, dnsUDP) }, 1)
	// Only changes of UDP Services (or none at all: the periodic sync)
	// can leave stale UDP entries.
	step("an unrelated change", func() { p.OnServiceDelete(tcp) }, 0)
	step("the periodic sync, nothing changed", func() {}, 1)
	step("the UDP Service's endpoints change", func() {
		p.OnEndpointSliceAdd(testSlice("kube-system", "dns", "dns-1", 53, v1.ProtocolUDP, ep("10.0.0.9", "n1", true)))
	}, 1)
	step("a TCP Service's endpoints change", func() {
		p.OnServiceAdd(tcp)
		p.OnEndpointSliceAdd(testSlice("default", "web", "web-1", 80, v1.ProtocolTCP, ep("10.0.0.8", "n1", true)))
	}, 0)
	step("the UDP port removed", func() { p.OnServiceUpdate(dnsUDP, dns) }, 0)
	step("a UDP Service again", func() { p.OnServiceUpdate(dns, dnsUDP) }, 1)
	step("and deleted", func() { p.OnServiceDelete(dnsUDP) }, 0)
}

// TestEndpointSlicesOfAService: a Service's endpoints are the union of its
// current slices, whatever order they come, are replaced and go in.
func TestEndpointSlicesOfAService(t *testing.T) {
	tr := NewEndpointsChangeTracker("node1")
	m := EndpointsMap{}
	pn := ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}, Protocol: v1.ProtocolTCP}
	slice := func(name, ip string) *discovery.EndpointSlice {
		return testSlice("ns", "web", name, 80, v1.ProtocolTCP, ep(ip, "node2", true))
	}
	addrs := func() string {
		tr.Apply(m)
		var out []string
		for _, e := range m[pn] {
			out = append(out, e.Addr.String())
		}
		return strings.Join(out, " ")
	}
	for _, s := range []*discovery.EndpointSlice{slice("web-c", "10.0.0.3"), slice("web-a", "10.0.0.1"), slice("web-b", "10.0.0.2")} {
		tr.EndpointSliceUpdate(s, false)
	}
	if got := addrs(); got != "10.0.0.1 10.0.0.2 10.0.0.3" {
		t.Errorf("three slices: %q", got)
	}
	tr.EndpointSliceUpdate(slice("web-b", "10.0.0.4"), false)
	tr.EndpointSliceUpdate(slice("web-a", "10.0.0.1"), true)
	if got := addrs(); got != "10.0.0.3 10.0.0.4" {
		t.Errorf("one replaced, one gone: %q", got)
	}
	tr.EndpointSliceUpdate(slice("web-x", "10.0.0.9"), true) // not known: nothing
	tr.EndpointSliceUpdate(slice("web-b", "10.0.0.4"), true)
	tr.EndpointSliceUpdate(slice("web-c", "10.0.0.3"), true)
	if got := addrs(); got != "" || len(tr.slices) != 0 {
		t.Errorf("all gone: %q, %d Services kept", got, len(tr.slices))
	}
}
