package proxy

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// statsProvider reports fixed per-family Local-policy counts, as a mode does.
type statsProvider struct{ recordingProvider }

func (s *statsProvider) Sync(ctx context.Context, req *SyncRequest) error {
	req.Stats.AddNoLocal(false, 1, 2)
	req.Stats.AddNoLocal(true, 3, 4)
	return s.recordingProvider.Sync(ctx, req)
}

// gathered returns the metric family name's series, keyed by their labels
// in "name=value,..." form (label order as exposed).
func gathered(t *testing.T, reg *prometheus.Registry, name string) map[string]*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Metric{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			key := ""
			for i, l := range m.Label {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			out[key] = m
		}
	}
	return out
}

// The sync metrics carry kube-proxy 1.37's ip_family label: a dual-stack
// proxy records its one sync under both families, a mode's per-family
// figures under their own family, and a trigger time under the family of
// the slice that carried it.
func TestMetricsIPFamily(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	prov := &statsProvider{}
	p := NewProxier(Config{Provider: prov, Node: NodeInfo{Name: "n1"}, Metrics: m, Families: []bool{false, true}})
	p.OnServiceAdd(testService("default", "web", "10.96.0.20", v1.ServicePort{Port: 80, Protocol: v1.ProtocolTCP}))
	slice := testSlice("default", "web", "web-1", 80, v1.ProtocolTCP, ep("10.0.0.1", "n1", true))
	// After the proxy started (earlier trigger times are ignored).
	slice.Annotations = map[string]string{AnnotationLastChangeTriggerTime: time.Now().Format(time.RFC3339Nano)}
	p.OnEndpointSliceAdd(slice)
	time.Sleep(100 * time.Millisecond)
	if err := p.SyncNow(context.Background()); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"kubeproxy_sync_proxy_rules_duration_seconds", "kubeproxy_sync_full_proxy_rules_duration_seconds"} {
		got := gathered(t, reg, name)
		for _, fam := range []string{"ip_family=IPv4", "ip_family=IPv6"} {
			if got[fam] == nil || got[fam].GetHistogram().GetSampleCount() != 1 {
				t.Errorf("%s{%s}: %v, want one observation", name, fam, got[fam])
			}
		}
		if len(got) != 2 {
			t.Errorf("%s: series %v, want exactly the two families", name, keys(got))
		}
	}
	if got := gathered(t, reg, "kubeproxy_sync_partial_proxy_rules_duration_seconds"); len(got) != 0 {
		t.Errorf("partial sync histogram has series after a full sync: %v", keys(got))
	}
	ts := gathered(t, reg, "kubeproxy_sync_proxy_rules_last_timestamp_seconds")
	for _, fam := range []string{"ip_family=IPv4", "ip_family=IPv6"} {
		if ts[fam] == nil || ts[fam].GetGauge().GetValue() < float64(time.Now().Add(-time.Minute).Unix()) {
			t.Errorf("last timestamp {%s}: %v", fam, ts[fam])
		}
	}
	np := gathered(t, reg, "kubeproxy_network_programming_duration_seconds")
	if np["ip_family=IPv4"] == nil || np["ip_family=IPv4"].GetHistogram().GetSampleCount() != 1 || np["ip_family=IPv4"].GetHistogram().GetSampleSum() < 0.1 {
		t.Errorf("network programming {IPv4}: %v, want one observation of at least 0.1 s", np["ip_family=IPv4"])
	}
	if np["ip_family=IPv6"] != nil {
		t.Errorf("network programming {IPv6} observed an IPv4 slice's trigger time: %v", np["ip_family=IPv6"])
	}
	nl := gathered(t, reg, "kubeproxy_sync_proxy_rules_no_local_endpoints_total")
	for key, want := range map[string]float64{
		"ip_family=IPv4,traffic_policy=internal": 1, "ip_family=IPv4,traffic_policy=external": 2,
		"ip_family=IPv6,traffic_policy=internal": 3, "ip_family=IPv6,traffic_policy=external": 4,
	} {
		if nl[key] == nil || nl[key].GetGauge().GetValue() != want {
			t.Errorf("no local endpoints {%s}: %v, want %v", key, nl[key], want)
		}
	}

	// An IPv6 slice's trigger time counts under IPv6 only.
	s6 := testSlice("default", "web", "web-2", 80, v1.ProtocolTCP, ep("fd00::1", "n1", true))
	s6.AddressType = discovery.AddressTypeIPv6
	s6.Annotations = map[string]string{AnnotationLastChangeTriggerTime: time.Now().Format(time.RFC3339Nano)}
	p.OnEndpointSliceAdd(s6)
	if err := p.SyncNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	np = gathered(t, reg, "kubeproxy_network_programming_duration_seconds")
	if c4, c6 := np["ip_family=IPv4"].GetHistogram().GetSampleCount(), np["ip_family=IPv6"].GetHistogram().GetSampleCount(); c4 != 1 || c6 != 1 {
		t.Errorf("network programming after an IPv6 slice: IPv4 %d, IPv6 %d observations, want 1 and 1", c4, c6)
	}
	if got := gathered(t, reg, "kubeproxy_sync_partial_proxy_rules_duration_seconds"); got["ip_family=IPv6"].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("partial sync {IPv6}: %v", got["ip_family=IPv6"])
	}
}

// A proxier configured without families records IPv4, the single-stack
// default.
func TestMetricsDefaultFamily(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := NewProxier(Config{Provider: &recordingProvider{}, Node: NodeInfo{Name: "n1"}, Metrics: NewMetrics(reg)})
	if err := p.SyncNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := gathered(t, reg, "kubeproxy_sync_proxy_rules_duration_seconds")
	if len(got) != 1 || got["ip_family=IPv4"] == nil {
		t.Errorf("series %v, want ip_family=IPv4 only", keys(got))
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// /healthz and /livez answers are counted by status code, as kube-proxy's
// proxy_healthz_total and proxy_livez_total.
func TestHealthzLivezCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := NewProxyHealth(time.Minute)
	h.Metrics = NewMetrics(reg)
	get := func(path string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	}
	get("/healthz")
	get("/healthz")
	get("/livez")
	h.SetNodeEligible(false) // a Node being deleted: healthz 503, livez 200
	get("/healthz")
	get("/livez")
	for name, want := range map[string]map[string]float64{
		"kubeproxy_proxy_healthz_total": {"code=200": 2, "code=503": 1},
		"kubeproxy_proxy_livez_total":   {"code=200": 2},
	} {
		got := gathered(t, reg, name)
		if len(got) != len(want) {
			t.Errorf("%s: %d series, want %d", name, len(got), len(want))
		}
		for k, v := range want {
			if m := got[k]; m == nil || m.GetCounter().GetValue() != v {
				t.Errorf("%s{%s} = %v, want %v", name, k, m.GetCounter().GetValue(), v)
			}
		}
	}
}

// The parts of network programming latency: a slice's trigger time is
// observed at delivery (under its family), and the wait from the first
// queued change to the sync that programs it once per sync.
func TestNetworkProgrammingParts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	p := NewProxier(Config{Provider: &recordingProvider{}, Node: NodeInfo{Name: "n1"}, Metrics: m})
	p.OnServiceAdd(testService("default", "web", "10.96.0.20", v1.ServicePort{Port: 80, Protocol: v1.ProtocolTCP}))
	time.Sleep(350 * time.Millisecond)
	slice := testSlice("default", "web", "web-1", 80, v1.ProtocolTCP, ep("10.0.0.1", "n1", true))
	slice.Annotations = map[string]string{AnnotationLastChangeTriggerTime: time.Now().Add(-300 * time.Millisecond).Format(time.RFC3339Nano)}
	p.OnEndpointSliceAdd(slice)
	time.Sleep(50 * time.Millisecond)
	if err := p.SyncNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := gathered(t, reg, "svcnet_proxy_trigger_delivery_seconds")["ip_family=IPv4"].GetHistogram()
	if d.GetSampleCount() != 1 || d.GetSampleSum() < 0.3 || d.GetSampleSum() > 5 {
		t.Errorf("trigger delivery: %d observations, sum %.3f s, want one of about 0.3 s", d.GetSampleCount(), d.GetSampleSum())
	}
	w := gathered(t, reg, "svcnet_proxy_sync_queue_wait_seconds")[""].GetHistogram()
	if w.GetSampleCount() != 1 || w.GetSampleSum() < 0.35 {
		t.Errorf("queue wait: %d observations, sum %.3f s, want one of at least 0.35 s (from the Service's add)", w.GetSampleCount(), w.GetSampleSum())
	}
	// A sync with nothing queued observes no wait.
	if err := p.SyncNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := gathered(t, reg, "svcnet_proxy_sync_queue_wait_seconds")[""].GetHistogram(); w.GetSampleCount() != 1 {
		t.Errorf("queue wait after a sync with nothing queued: %d observations, want still 1", w.GetSampleCount())
	}
}

// As kube-proxy's tracker: trigger times from before the tracker started
// (the initial list's slices) are not measured, and a slice's deletion
// drops the Service's pending ones (its time is that of the last update).
func TestTriggerTimesAsKubeProxy(t *testing.T) {
	tr := NewEndpointsChangeTracker("n1")
	at := func(s *discovery.EndpointSlice, ts time.Time) *discovery.EndpointSlice {
		s.Annotations = map[string]string{AnnotationLastChangeTriggerTime: ts.Format(time.RFC3339Nano)}
		return s
	}
	web := func(res EndpointsUpdateResult) []time.Time {
		for nn, ts := range res.LastChangeTriggerTimes[0] {
			if nn.Name == "web" {
				return ts
			}
		}
		return nil
	}
	m := EndpointsMap{}
	tr.EndpointSliceUpdate(at(testSlice("default", "web", "web-1", 80, v1.ProtocolTCP, ep("10.0.0.1", "n1", true)), tr.Started().Add(-time.Minute)), false)
	if got := web(tr.Apply(m)); len(got) != 0 {
		t.Errorf("a trigger time from before the start was kept: %v", got)
	}
	later := tr.Started().Add(time.Second)
	tr.EndpointSliceUpdate(at(testSlice("default", "web", "web-2", 80, v1.ProtocolTCP, ep("10.0.0.2", "n1", true)), later), false)
	tr.EndpointSliceUpdate(testSlice("default", "web", "web-1", 80, v1.ProtocolTCP), true)
	if got := web(tr.Apply(m)); len(got) != 0 {
		t.Errorf("a slice's deletion kept the pending trigger times: %v", got)
	}
	tr.EndpointSliceUpdate(at(testSlice("default", "web", "web-2", 80, v1.ProtocolTCP, ep("10.0.0.3", "n1", true)), later), false)
	if got := web(tr.Apply(m)); len(got) != 1 || !got[0].Equal(later) {
		t.Errorf("trigger times %v, want [%v]", got, later)
	}
}
