package speaker

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/internal/metallbmetrics"
)

// TestIgnoreExcludeLB: with --ignore-exclude-lb a node labelled
// node.kubernetes.io/exclude-from-external-load-balancers is a candidate
// (and can win); NotReady and NetworkUnavailable nodes still are not.
func TestIgnoreExcludeLB(t *testing.T) {
	excluded := map[string]string{corev1.LabelNodeExcludeBalancers: ""}
	netDown := node("n3", true, nil)
	netDown.Status.Conditions = append(netDown.Status.Conditions,
		corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue})
	in := &ServiceInput{
		Key:              types.NamespacedName{Namespace: "default", Name: "web"},
		Service:          &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}},
		IPs:              []netip.Addr{netip.MustParseAddr("172.18.0.200")},
		L2Advertisements: []*metallbv1beta1.L2Advertisement{{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: "metallb-system"}}},
		Slices:           slice(ep("n2", true)),
		Nodes: map[string]*corev1.Node{
			"n1": node("n1", true, excluded),
			"n2": node("n2", false, excluded), // NotReady
			"n3": netDown,
		},
		Speakers: map[string]bool{"n1": true, "n2": true, "n3": true},
		MyNode:   "n1",
	}
	l2 := &Layer2{Responder: &fakeResponder{}}
	if w, why := ElectL2(in); w != "" || why != "notOwner" {
		t.Errorf("without the flag: winner %q (%s), want none: n1 is excluded, n2 not Ready, n3 NetworkUnavailable", w, why)
	}
	if why := l2.ShouldAnnounce(in); why != "notOwner" {
		t.Errorf("without the flag n1 should not announce; got %q", why)
	}
	in.IgnoreExcludeLB = true
	if w, why := ElectL2(in); w != "n1" {
		t.Errorf("with the flag: winner %q (%s), want n1 (the other two remain unusable)", w, why)
	}
	if why := l2.ShouldAnnounce(in); why != "" {
		t.Errorf("with the flag n1 should announce; got %q", why)
	}
	// Every node computes the same answer.
	for _, me := range []string{"n2", "n3"} {
		in.MyNode = me
		if why := l2.ShouldAnnounce(in); why != "notOwner" {
			t.Errorf("%s: %q, want notOwner", me, why)
		}
	}
	if ok, why := NodeUsableWith(in.Nodes["n2"], true); ok || why != "not Ready" {
		t.Errorf("NodeUsableWith(NotReady, true) = %v %q", ok, why)
	}
	if ok, why := NodeUsableWith(in.Nodes["n1"], false); ok || !strings.Contains(why, "exclude-from-external-load-balancers") {
		t.Errorf("NodeUsableWith(excluded, false) = %v %q", ok, why)
	}
}

type fakeStatus struct{ announcing, notAnnouncing int }

func (f *fakeStatus) Announcing(context.Context, *corev1.Service, []string) error {
	f.announcing++
	return nil
}

func (f *fakeStatus) NotAnnouncing(context.Context, types.NamespacedName) error {
	f.notAnnouncing++
	return nil
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestAnnounceFailed: an advertisement naming only interfaces this node
// lacks gives one Warning announceFailed per address, with MetalLB's
// message, and no ServiceL2Status; once one of them exists (or the
// advertisement names none) there is none.
func TestAnnounceFailed(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	st := &fakeStatus{}
	resp := &fakeResponder{}
	have := []string{"lo", "eth0"}
	l2 := &Layer2{Responder: resp, Status: st, Recorder: rec, Interfaces: func() ([]string, error) { return have, nil }}
	ad := &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "metallb-system"},
		Spec: metallbv1beta1.L2AdvertisementSpec{Interfaces: []string{"eth9", "bond0"}}}
	in := &ServiceInput{Key: types.NamespacedName{Namespace: "default", Name: "web"},
		Service:          &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}},
		IPs:              []netip.Addr{netip.MustParseAddr("172.18.0.200"), netip.MustParseAddr("fd00::200")},
		L2Advertisements: []*metallbv1beta1.L2Advertisement{ad},
		Nodes:            map[string]*corev1.Node{"n1": node("n1", true, nil)}, MyNode: "n1"}
	ctx := context.Background()
	if err := l2.SetBalancer(ctx, in); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`Warning announceFailed the interfaces specified by LB IP "172.18.0.200" doesn't exist in assigned node "n1" with protocol "layer2"`,
		`Warning announceFailed the interfaces specified by LB IP "fd00::200" doesn't exist in assigned node "n1" with protocol "layer2"`,
	}
	if got := drain(rec); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if st.announcing != 0 {
		t.Errorf("a ServiceL2Status was written though no interface exists")
	}
	// bond0 appears: announced, no event.
	have = append(have, "bond0")
	if err := l2.SetBalancer(ctx, in); err != nil {
		t.Fatal(err)
	}
	if got := drain(rec); len(got) != 0 || st.announcing != 1 {
		t.Errorf("with bond0 present: events %q, status writes %d", got, st.announcing)
	}
	// No interfaces named: every interface, nothing to check.
	have = nil
	ad.Spec.Interfaces = nil
	if err := l2.SetBalancer(ctx, in); err != nil {
		t.Fatal(err)
	}
	if got := drain(rec); len(got) != 0 || st.announcing != 2 {
		t.Errorf("without interfaces: events %q, status writes %d", got, st.announcing)
	}
}

// announcedValue is metallb_speaker_announced for the labels, -1 when the
// series does not exist.
func announcedValue(t *testing.T, reg *prometheus.Registry, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "metallb_speaker_announced" {
			continue
		}
	metrics:
		for _, m := range mf.Metric {
			if len(m.Label) != len(labels) {
				continue
			}
			for _, l := range m.Label {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.Gauge.GetValue()
		}
	}
	return -1
}

func gaugeOrCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			if g := mf.Metric[0].Gauge; g != nil {
				return g.GetValue()
			}
			return mf.Metric[0].Counter.GetValue()
		}
	}
	return -1
}

// TestSpeakerMetricsAndEvents runs a Speaker on fake clients: the
// announced gauge appears for each address once the Service is announced
// and goes when it is withdrawn; the k8s client metrics count the syncs
// and show the configuration loaded, then stale while an invalid pool is
// ignored; announceFailed reaches the Speaker's recorder.
func TestSpeakerMetricsAndEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := true
	client := fake.NewClientset(
		node("n1", true, nil),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "172.18.0.200"}, {IP: "fd00::200"}}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}},
	)
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		metallbv1beta1.IPAddressPoolsResource:   "IPAddressPoolList",
		metallbv1beta1.L2AdvertisementsResource: "L2AdvertisementList",
	})
	mc := metallbv1beta1.Client{Dyn: dyn}
	if _, err := mc.CreateIPAddressPool(ctx, &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "metallb-system"},
		Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"172.18.0.200-172.18.0.210", "fd00::200/124"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CreateL2Advertisement(ctx, &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "l2", Namespace: "metallb-system"},
		Spec: metallbv1beta1.L2AdvertisementSpec{Interfaces: []string{"eth9"}}}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rec := record.NewFakeRecorder(100)
	resp := &lockedResponder{}
	sp := New(Config{Client: client, Dynamic: dyn, NodeName: "n1", LeaseDuration: 3 * time.Second, Recorder: rec,
		Metrics: NewMetrics(reg), ClientMetrics: metallbmetrics.NewK8sClient(reg),
		Protocols: []Protocol{&Layer2{Responder: resp, Interfaces: func() ([]string, error) { return []string{"lo", "eth0"}, nil }}}})
	done := make(chan error, 1)
	go func() { done <- sp.Run(ctx) }()

	labels := func(ip string) map[string]string {
		return map[string]string{"service": "default/web", "protocol": "layer2", "node": "n1", "ip": ip}
	}
	waitFor(t, "both addresses announced", func() bool {
		return announcedValue(t, reg, labels("172.18.0.200")) == 1 && announcedValue(t, reg, labels("fd00::200")) == 1
	})
	const help = `# HELP metallb_speaker_announced Services being announced from this node. This is desired state, it does not guarantee that the routing protocols have converged.
# TYPE metallb_speaker_announced gauge
metallb_speaker_announced{ip="172.18.0.200",node="n1",protocol="layer2",service="default/web"} 1
metallb_speaker_announced{ip="fd00::200",node="n1",protocol="layer2",service="default/web"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(help), "metallb_speaker_announced"); err != nil {
		t.Error(err)
	}
	// eth9 does not exist on n1: announceFailed through the Speaker's
	// recorder, after nodeAssigned (MetalLB records both).
	waitFor(t, "announceFailed events", func() bool {
		for _, e := range drain(rec) {
			if strings.HasPrefix(e, `Warning announceFailed the interfaces specified by LB IP "fd00::200" doesn't exist in assigned node "n1"`) {
				return true
			}
		}
		return false
	})
	if v := gaugeOrCounter(t, reg, "metallb_k8s_client_config_loaded_bool"); v != 1 {
		t.Errorf("config_loaded_bool = %v", v)
	}
	if v := gaugeOrCounter(t, reg, "metallb_k8s_client_config_stale_bool"); v != 0 {
		t.Errorf("config_stale_bool = %v", v)
	}
	if v := gaugeOrCounter(t, reg, "metallb_k8s_client_updates_total"); v < 2 {
		t.Errorf("updates_total = %v, want the configuration and the Service at least", v)
	}
	// An invalid pool is ignored: the configuration is stale.
	if _, err := mc.CreateIPAddressPool(ctx, &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "metallb-system"},
		Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"10.9.9.9-10.9.9.1"}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stale configuration", func() bool { return gaugeOrCounter(t, reg, "metallb_k8s_client_config_stale_bool") == 1 })

	// The Service loses its endpoints: withdrawn, the series go.
	if err := client.DiscoveryV1().EndpointSlices("default").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the announced series deleted", func() bool {
		return announcedValue(t, reg, labels("172.18.0.200")) == -1 && announcedValue(t, reg, labels("fd00::200")) == -1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if calls := resp.get(); !slices.Contains(calls, "set default/web") || !slices.Contains(calls, "delete default/web") {
		t.Errorf("responder calls %v", calls)
	}
}

// lockedResponder records the calls; the speaker's worker makes them.
type lockedResponder struct {
	mu    sync.Mutex
	calls []string
}

func (l *lockedResponder) SetBalancer(key string, _ []netip.Addr, _ []string) { l.add("set " + key) }
func (l *lockedResponder) DeleteBalancer(key string)                          { l.add("delete " + key) }

func (l *lockedResponder) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *lockedResponder) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
