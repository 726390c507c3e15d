package nftables

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n%s", path, got)
	}
}

// The conventions of kube-proxy's own tests: pods 10.0.0.0/8, ClusterIPs
// 172.30.0.0/16, node 192.168.0.2, externalIPs 192.168.99.0/24.
type svcOpt func(*v1.Service)

func service(ns, name, clusterIP string, opts ...svcOpt) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []v1.ServicePort{{Name: "p80", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func ep(ip string, port int, local bool) *proxy.Endpoint {
	return &proxy.Endpoint{Addr: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true, IsLocal: local, Weight: 1}
}

type world struct {
	svcs proxy.ServicePortMap
	eps  proxy.EndpointsMap
}

func newWorld() *world { return &world{svcs: proxy.ServicePortMap{}, eps: proxy.EndpointsMap{}} }

func (w *world) add(s *v1.Service, eps ...*proxy.Endpoint) {
	for _, sp := range proxy.NewServicePorts(s) {
		w.svcs[sp.Name] = sp
		if len(eps) > 0 {
			w.eps[sp.Name] = eps
		} else {
			delete(w.eps, sp.Name)
		}
	}
}

func (w *world) request(full bool, changed ...string) *proxy.SyncRequest {
	r := &proxy.SyncRequest{Full: full, Services: w.svcs, Endpoints: w.eps,
		Node: proxy.NodeInfo{Name: "test-node", IPs: []netip.Addr{netip.MustParseAddr("192.168.0.2")}}}
	r.ServiceResult.UpdatedServices = sets.New[types.NamespacedName]()
	for _, c := range changed {
		ns, name, _ := strings.Cut(c, "/")
		r.ServiceResult.UpdatedServices.Insert(types.NamespacedName{Namespace: ns, Name: name})
	}
	return r
}

func testConfig() Config {
	return Config{
		MasqueradeMark: "0x4000",
		PodCIDRs:       []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		ServiceCIDRs:   []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")},
	}
}

// overallWorld mirrors kube-proxy's TestOverallNFTablesRules, plus the
// seed's three-endpoint ClusterIP Service.
func overallWorld() *world {
	w := newWorld()
	local := v1.ServiceExternalTrafficPolicyLocal
	w.add(service("ns1", "svc1", "172.30.0.41"), ep("10.180.0.1", 80, false))
	w.add(service("ns2", "svc2", "172.30.0.42", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = local
		s.Spec.Ports[0].NodePort = 3001
		s.Spec.ExternalIPs = []string{"192.168.99.22"}
		s.Spec.HealthCheckNodePort = 30000
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "1.2.3.4"}}
	}), ep("10.180.0.2", 80, false))
	w.add(service("ns3", "svc3", "172.30.0.43", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 3003
	}), ep("10.180.0.3", 80, false))
	w.add(service("ns4", "svc4", "172.30.0.44", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.ExternalIPs = []string{"192.168.99.33"}
	}), ep("10.180.0.4", 80, false), ep("10.180.0.5", 80, true))
	w.add(service("ns5", "svc5", "172.30.0.45", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 3002
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "5.6.7.8"}}
		s.Spec.LoadBalancerSourceRanges = []string{" 203.0.113.0/25"}
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		t := int32(10800)
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &t}}
	}), ep("10.180.0.3", 80, false))
	w.add(service("ns6", "svc6", "172.30.0.46"))
	w.add(service("default", "myapp", "172.30.3.215", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Port: 38080, Protocol: v1.ProtocolTCP}}
	}), ep("10.244.1.3", 80, false), ep("10.244.1.4", 80, false), ep("10.244.2.5", 80, true))
	return w
}

// addTwins adds two Services that claim one external address and port
// (the API allows it): the core gives it to twin-a (see proxy/claims.go).
// Their internalTrafficPolicy is Local, so neither is a direct choice of
// the shared layout: twin-a's external chain uses the shared endpoint maps.
func addTwins(w *world) *world {
	for i, name := range []string{"twin-a", "twin-b"} {
		w.add(service("ns7", name, fmt.Sprintf("172.30.0.%d", 47+i), func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"192.168.99.44"}
			local := v1.ServiceInternalTrafficPolicyLocal
			s.Spec.InternalTrafficPolicy = &local
		}), ep(fmt.Sprintf("10.180.0.%d", 7+2*i), 80, false), ep(fmt.Sprintf("10.180.0.%d", 8+2*i), 80, false))
	}
	// As the core hands them to a mode: the address is twin-a's only.
	proxy.ResolveClaims(w.svcs)
	return w
}

func TestOverallRules(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	p := NewProxier(testConfig(), nft)
	if err := p.Sync(context.Background(), overallWorld().request(true)); err != nil {
		t.Fatal(err)
	}
	golden(t, "overall", nft.Dump())
}

func TestIPv6AndNodePortAddresses(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv6Family, TableName)
	cfg := Config{IPv6: true, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10::/64")},
		NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("2001:db8::/64")}}
	p := NewProxier(cfg, nft)
	w := newWorld()
	w.add(&v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "dual"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ClusterIP: "172.30.0.41", ClusterIPs: []string{"172.30.0.41", "fd00:10:96::41"},
			Ports: []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053}}},
	}, ep("10.180.0.1", 53, false), ep("fd00:10::1", 53, true))
	r := w.request(true)
	r.Node.IPs = append(r.Node.IPs, netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db9::1"))
	if err := p.Sync(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	golden(t, "ipv6", nft.Dump())
}

func TestPartialSyncTouchesOnlyChangedServices(t *testing.T) {
	ctx := context.Background()
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	p := NewProxier(testConfig(), nft)
	w := overallWorld()
	if err := p.Sync(ctx, w.request(true)); err != nil {
		t.Fatal(err)
	}
	// svc1 gains an endpoint; svc6 is deleted; svc5 (ClientIP affinity,
	// hence endpoint chains) gains an endpoint.
	w.add(service("ns1", "svc1", "172.30.0.41"), ep("10.180.0.1", 80, false), ep("10.180.0.9", 80, false))
	for n := range w.svcs {
		if n.Name == "svc6" {
			delete(w.svcs, n)
		}
	}
	if err := p.Sync(ctx, w.request(false, "ns1/svc1", "ns6/svc6")); err != nil {
		t.Fatal(err)
	}
	tx := nft.LastTransaction.String()
	if strings.Contains(tx, "svc2") || strings.Contains(tx, "svc5") || strings.Contains(tx, "add table") {
		t.Errorf("partial sync rewrote unchanged services or the base table:\n%s", tx)
	}
	for _, want := range []string{
		"flush chain ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80",
		"add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.1 . 80 , 1 : 10.180.0.9 . 80 }",
		"delete element ip kube-proxy cluster-ips { 172.30.0.46 }",
		"delete element ip kube-proxy no-endpoint-services { 172.30.0.46 . tcp . 80 }",
	} {
		if !strings.Contains(tx, want) {
			t.Errorf("partial sync lacks %q:\n%s", want, tx)
		}
	}
	// A full sync from scratch gives the same ruleset as the partial one.
	fresh := knftables.NewFake(knftables.IPv4Family, TableName)
	if err := NewProxier(testConfig(), fresh).Sync(ctx, w.request(true)); err != nil {
		t.Fatal(err)
	}
	if got, want := nft.Dump(), fresh.Dump(); got != want {
		t.Errorf("partial result differs from a full sync:\n--- partial\n%s\n--- full\n%s", got, want)
	}
	// Without affinity no endpoint chains exist.
	if strings.Contains(nft.Dump(), "endpoint-ULMVA6XW") || strings.Contains(nft.Dump(), "ns1/svc1/tcp/p80__") {
		t.Errorf("endpoint chain for a Service without affinity:\n%s", nft.Dump())
	}
	// svc5 uses ClientIP affinity: adding an endpoint adds its chain and
	// affinity set; removing it again leaves the chain flushed and stale
	// (a later sync deletes it) and deletes the set at once.
	svc5 := w.svcs[proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns5", Name: "svc5"}, Port: "p80", Protocol: v1.ProtocolTCP}]
	w.eps[svc5.Name] = []*proxy.Endpoint{ep("10.180.0.3", 80, false), ep("10.180.0.9", 80, false)}
	if err := p.Sync(ctx, w.request(false, "ns5/svc5")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(nft.Dump(), "ns5/svc5/tcp/p80__10.180.0.9/80") {
		t.Fatalf("no endpoint chain for the affinity Service:\n%s", nft.Dump())
	}
	w.eps[svc5.Name] = []*proxy.Endpoint{ep("10.180.0.3", 80, false)}
	if err := p.Sync(ctx, w.request(false, "ns5/svc5")); err != nil {
		t.Fatal(err)
	}
	if len(p.staleChains) != 1 {
		t.Fatalf("stale chains %v", p.staleChains)
	}
	if strings.Contains(nft.Dump(), "ns5/svc5/tcp/p80__10.180.0.9/80 {") {
		t.Errorf("stale affinity set kept:\n%s", nft.Dump())
	}
	p.now = func() time.Time { return time.Now().Add(2 * time.Second) }
	if err := p.Sync(ctx, w.request(false)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(nft.Dump(), "ns5/svc5/tcp/p80__10.180.0.9") {
		t.Errorf("stale endpoint chain not deleted:\n%s", nft.Dump())
	}
}

func TestSchedulers(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	var unsupported []string
	cfg := testConfig()
	cfg.UnsupportedScheduler = func(n proxy.ServicePortName, s string) { unsupported = append(unsupported, n.String()+"="+s) }
	p := NewProxier(cfg, nft)
	w := newWorld()
	for i, s := range []string{"rr", "wrr", "sh", "dh", "mh", "lc"} {
		sched := s
		ip := netip.AddrFrom4([4]byte{172, 30, 1, byte(i + 1)}).String()
		e1, e2 := ep("10.180.1.1", 80, false), ep("10.180.2.1", 80, false)
		e1.Weight = 3
		w.add(service("sched", sched, ip, func(s *v1.Service) {
			s.Annotations = map[string]string{"service.kubernetes.io/ipvs-scheduler": sched}
		}), e1, e2)
	}
	// With ClientIP affinity the scheduler picks endpoint chains (vmap).
	e1, e2 := ep("10.180.1.1", 80, false), ep("10.180.2.1", 80, false)
	e1.Weight = 3
	w.add(service("sched", "wrr-affinity", "172.30.1.99", func(s *v1.Service) {
		s.Annotations = map[string]string{"service.kubernetes.io/ipvs-scheduler": "wrr"}
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		t := int32(60)
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &t}}
	}), e1, e2)
	if err := p.Sync(context.Background(), w.request(true)); err != nil {
		t.Fatal(err)
	}
	if len(unsupported) != 1 || unsupported[0] != "sched/lc:p80=lc" {
		t.Errorf("unsupported reports %v", unsupported)
	}
	var rules []string
	for _, l := range strings.Split(nft.Dump(), "\n") {
		if (strings.Contains(l, " map {") || strings.Contains(l, " vmap {")) && strings.Contains(l, "sched/") {
			rules = append(rules, l)
		}
	}
	golden(t, "schedulers", strings.Join(rules, "\n")+"\n")
}

func TestCleanupDeletesOnlyOurTable(t *testing.T) {
	ctx := context.Background()
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	m, err := NewModeWithServiceCIDRs(proxy.ModeConfig{IPv4: true}, nil, []NFT{nft})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(ctx, overallWorld().request(true)); err != nil {
		t.Fatal(err)
	}
	if err := m.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if d := nft.Dump(); d != "" {
		t.Errorf("table left after cleanup:\n%s", d)
	}
	if err := m.Cleanup(ctx); err != nil {
		t.Errorf("second cleanup: %v", err)
	}
}

type eventRecorder struct{ events []string }

func (r *eventRecorder) ServiceEvent(svc types.NamespacedName, eventType, reason, message string) {
	r.events = append(r.events, svc.String()+" "+eventType+" "+reason+": "+message)
}

// Schedulers nftables cannot honour become one Warning Event per Service
// (UnsupportedScheduler for known ones, UnknownScheduler otherwise), not one
// per sync.
func TestModeReportsSchedulerFallbacks(t *testing.T) {
	ctx := context.Background()
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	rec := &eventRecorder{}
	m, err := NewModeWithServiceCIDRs(proxy.ModeConfig{IPv4: true, Events: rec}, nil, []NFT{nft})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld()
	for i, sched := range []string{"lc", "bogus", "mh"} {
		sched := sched
		ip := netip.AddrFrom4([4]byte{172, 30, 2, byte(i + 1)}).String()
		w.add(service("ev", "s"+strconv.Itoa(i), ip, func(s *v1.Service) {
			s.Annotations = map[string]string{"service.kubernetes.io/ipvs-scheduler": sched}
		}), ep("10.180.1.1", 80, false))
	}
	for i := 0; i < 2; i++ {
		if err := m.Sync(ctx, w.request(true)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`ev/s0 Warning UnsupportedScheduler: nftables proxy mode cannot balance with scheduler "lc" (annotation service.kubernetes.io/ipvs-scheduler); using random`,
		`ev/s1 Warning UnknownScheduler: unknown scheduler "bogus" in annotation service.kubernetes.io/ipvs-scheduler; nftables proxy mode uses random`,
	}
	if strings.Join(rec.events, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(rec.events, "\n"), strings.Join(want, "\n"))
	}
}

// TestPartialSyncSharedElements: elements several Service ports need (the
// ClusterIP of a multi-port Service, the hairpin element of a local
// endpoint two Services select) stay until the last one lets go, and every
// partial result equals a full sync of the same state.
func TestPartialSyncSharedElements(t *testing.T) {
	ctx := context.Background()
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	p := NewProxier(testConfig(), nft)
	w := newWorld()
	twoPorts := func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "a", Port: 80, Protocol: v1.ProtocolTCP}, {Name: "b", Port: 81, Protocol: v1.ProtocolTCP}}
	}
	w.add(service("ns", "multi", "172.30.0.50", twoPorts), ep("10.180.0.7", 8080, true))
	w.add(service("ns", "other", "172.30.0.51"), ep("10.180.0.7", 8080, true))
	offset := time.Duration(0)
	check := func(what string) {
		t.Helper()
		// Stale chains (flushed) are deleted by the next sync a second
		// later.
		offset += 2 * time.Second
		p.now = func() time.Time { return time.Now().Add(offset) }
		if err := p.Sync(ctx, w.request(false)); err != nil {
			t.Fatal(err)
		}
		fresh := knftables.NewFake(knftables.IPv4Family, TableName)
		if err := NewProxier(testConfig(), fresh).Sync(ctx, w.request(true)); err != nil {
			t.Fatal(err)
		}
		if got, want := nft.Dump(), fresh.Dump(); got != want {
			t.Fatalf("%s: partial result differs from a full sync:\n--- partial\n%s\n--- full\n%s", what, got, want)
		}
	}
	if err := p.Sync(ctx, w.request(true)); err != nil {
		t.Fatal(err)
	}
	check("full")
	// Port b goes: the ClusterIP and the hairpin element stay.
	for n := range w.svcs {
		if n.Name == "multi" && n.Port == "b" {
			delete(w.svcs, n)
			delete(w.eps, n)
		}
	}
	if err := p.Sync(ctx, w.request(false, "ns/multi")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(nft.Dump(), "172.30.0.50") || !strings.Contains(nft.Dump(), "10.180.0.7 . 10.180.0.7 . tcp . 8080") {
		t.Fatalf("shared elements lost:\n%s", nft.Dump())
	}
	check("one port removed")
	// The Service goes: its ClusterIP goes, the hairpin element stays for
	// the other Service.
	for n := range w.svcs {
		if n.Name == "multi" {
			delete(w.svcs, n)
			delete(w.eps, n)
		}
	}
	if err := p.Sync(ctx, w.request(false, "ns/multi")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(nft.Dump(), "172.30.0.50") || !strings.Contains(nft.Dump(), "10.180.0.7 . 10.180.0.7 . tcp . 8080") {
		t.Fatalf("after deleting the Service:\n%s", nft.Dump())
	}
	check("Service removed")
	// The other Service loses its endpoint: the hairpin element goes.
	for n := range w.svcs {
		delete(w.eps, n)
	}
	if err := p.Sync(ctx, w.request(false, "ns/other")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(nft.Dump(), "10.180.0.7 . 10.180.0.7") {
		t.Fatalf("hairpin element kept:\n%s", nft.Dump())
	}
	check("last holder gone")
}

// failingNFT fails every transaction after the first ok ones.
type failingNFT struct {
	*knftables.Fake
	ok int
}

func (f *failingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	if f.ok <= 0 {
		return fmt.Errorf("transaction refused")
	}
	f.ok--
	return f.Fake.Run(ctx, tx)
}

// A failed sync transaction counts in
// kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family}.
func TestSyncFailuresCounted(t *testing.T) {
	cfg := testConfig()
	cfg.Metrics = proxy.NewMetrics(nil)
	p := NewProxier(cfg, &failingNFT{Fake: knftables.NewFake(knftables.IPv4Family, TableName), ok: 1})
	if err := p.Sync(context.Background(), overallWorld().request(true)); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(context.Background(), overallWorld().request(true)); err == nil {
		t.Fatal("second sync succeeded through a refusing nft")
	}
	var m dto.Metric
	if err := cfg.Metrics.NFTablesSyncFailuresTotal.WithLabelValues("IPv4").Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Errorf("sync failures %v, want 1", got)
	}
}
