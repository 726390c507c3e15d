package endpointslice

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
)

// topoNode is a ready node with cpu cores in zone ("" for no zone label).
func topoNode(name, zone, cpu string, ready bool, lbls ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	for _, l := range lbls {
		n.Labels[l] = ""
	}
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	if cpu != "" {
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	return n
}

// topoEndpoints makes ready endpoints from "zone" strings ("" = no zone,
// "!zone" = not ready).
func topoEndpoints(zones ...string) []*discoveryv1.Endpoint {
	var out []*discoveryv1.Endpoint
	for i, z := range zones {
		ready := !strings.HasPrefix(z, "!")
		z = strings.TrimPrefix(z, "!")
		ep := &discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", i+1)}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
		if z != "" {
			zz := z
			ep.Zone = &zz
		}
		out = append(out, ep)
	}
	return out
}

// hinted renders each endpoint's hint: its zone, or "-".
func hinted(eps []*discoveryv1.Endpoint) string {
	var out []string
	for _, ep := range eps {
		if ep.Hints == nil {
			out = append(out, "-")
			continue
		}
		var zs []string
		for _, z := range ep.Hints.ForZones {
			zs = append(zs, z.Name)
		}
		out = append(out, strings.Join(zs, "+"))
	}
	return strings.Join(out, " ")
}

func events(evs []TopologyEvent) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return strings.Join(out, "; ")
}

// The allocation table: kube-controller-manager's topology cache decides
// the same on each of these inputs (CPU shares, the 0.2 overload threshold,
// its refusals and their Event messages).
func TestTopologyAutoHints(t *testing.T) {
	threeZones := []*corev1.Node{topoNode("a", "zone-a", "4", true), topoNode("b", "zone-b", "4", true), topoNode("c", "zone-c", "4", true)}
	twoZones := []*corev1.Node{topoNode("a", "zone-a", "4", true), topoNode("b", "zone-b", "4", true)}
	enabled := "Normal TopologyAwareHintsEnabled: Topology Aware Hints has been enabled, addressType: IPv4"
	cases := []struct {
		name       string
		nodes      []*corev1.Node
		eps        []string
		published  map[string]string
		wantHints  string
		wantEvents string
	}{
		{"one endpoint per zone", threeZones, []string{"zone-a", "zone-b", "zone-c"}, nil, "zone-a zone-b zone-c", enabled},
		{"not-ready endpoints get none and do not count", threeZones, []string{"zone-a", "!zone-a", "zone-b", "zone-c"}, nil, "zone-a - zone-b zone-c", enabled},
		{"fewer endpoints than zones", threeZones, []string{"zone-a", "zone-b"}, nil, "- -",
			"Warning TopologyAwareHintsDisabled: Insufficient number of endpoints (2 endpoints, 3 zones), addressType: IPv4"},
		{"minimum exceeds the threshold", threeZones, []string{"zone-a", "zone-a", "zone-b", "zone-c"}, nil, "- - - -",
			"Warning TopologyAwareHintsDisabled: Unable to allocate minimum required endpoints to each zone without exceeding overload threshold (4 endpoints, 3 zones), addressType: IPv4"},
		{"surplus moves to the zone short of its share", twoZones, []string{"zone-a", "zone-a", "zone-a", "zone-a"}, nil, "zone-b zone-b zone-a zone-a", enabled},
		{"shares follow CPU", []*corev1.Node{topoNode("a", "zone-a", "6", true), topoNode("b", "zone-b", "2", true)},
			[]string{"zone-b", "zone-b", "zone-b", "zone-b"}, nil, "zone-a zone-a zone-a zone-b", enabled},
		{"an endpoint without zone", twoZones, []string{"zone-a", ""}, nil, "- -",
			"Warning TopologyAwareHintsDisabled: One or more endpoints do not have a zone specified, addressType: IPv4"},
		{"a node without zone", []*corev1.Node{topoNode("a", "zone-a", "4", true), topoNode("b", "", "4", true)}, []string{"zone-a", "zone-a"}, nil, "- -",
			"Warning TopologyAwareHintsDisabled: Insufficient Node information: allocatable CPU or zone not specified on one or more nodes, addressType: IPv4"},
		{"a node without CPU", []*corev1.Node{topoNode("a", "zone-a", "4", true), topoNode("b", "zone-b", "", true)}, []string{"zone-a", "zone-b"}, nil, "- -",
			"Warning TopologyAwareHintsDisabled: Insufficient Node information: allocatable CPU or zone not specified on one or more nodes, addressType: IPv4"},
		{"one zone", []*corev1.Node{topoNode("a", "zone-a", "4", true), topoNode("b", "zone-a", "4", true)}, []string{"zone-a", "zone-a"}, nil, "- -",
			"Warning TopologyAwareHintsDisabled: Insufficient Node information: allocatable CPU or zone not specified on one or more nodes, addressType: IPv4"},
		{"not-ready and control-plane nodes do not count", append([]*corev1.Node{topoNode("x", "zone-x", "64", false), topoNode("cp", "zone-cp", "64", true, "node-role.kubernetes.io/control-plane")}, twoZones...),
			[]string{"zone-a", "zone-b"}, nil, "zone-a zone-b", enabled},
		{"published hints stay within the maximum", twoZones, []string{"zone-a", "zone-a", "zone-b", "zone-b"},
			map[string]string{"10.0.0.1": "zone-b", "10.0.0.3": "zone-a"}, "zone-b zone-a zone-a zone-b", enabled},
		{"published hints for unknown zones are redone", twoZones, []string{"zone-a", "zone-b"},
			map[string]string{"10.0.0.1": "zone-gone"}, "zone-a zone-b", enabled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc := NewTopologyCache()
			tc.SetNodes(c.nodes)
			eps := topoEndpoints(c.eps...)
			evs := tc.AddHints("ns/s", discoveryv1.AddressTypeIPv4, eps, c.published)
			if got := hinted(eps); got != c.wantHints {
				t.Errorf("hints %q, want %q", got, c.wantHints)
			}
			if got := events(evs); got != c.wantEvents {
				t.Errorf("events %q, want %q", got, c.wantEvents)
			}
		})
	}
}

// Enabled is recorded once; disabling through the annotation says so once
// (for the first address type), and a node change that starves a zone
// marks the Service for a resync.
func TestTopologyLifecycle(t *testing.T) {
	tc := NewTopologyCache()
	tc.SetNodes([]*corev1.Node{topoNode("a", "zone-a", "4", true), topoNode("b", "zone-b", "4", true)})
	for i := 0; i < 2; i++ {
		evs := tc.AddHints("ns/s", discoveryv1.AddressTypeIPv4, topoEndpoints("zone-a", "zone-b"), nil)
		evs = append(evs, tc.AddHints("ns/s", discoveryv1.AddressTypeIPv6, topoEndpoints("zone-a", "zone-b"), nil)...)
		want := ""
		if i == 0 {
			want = "Normal TopologyAwareHintsEnabled: Topology Aware Hints has been enabled, addressType: IPv4"
		}
		if got := events(evs); got != want {
			t.Errorf("sync %d: events %q, want %q", i, got, want)
		}
	}
	if got := tc.Overloaded(); len(got) != 0 {
		t.Errorf("overloaded %v with balanced zones", got)
	}
	tc.SetNodes([]*corev1.Node{topoNode("a", "zone-a", "4", true), topoNode("b", "zone-b", "4", true), topoNode("c", "zone-c", "4", true)})
	if got := tc.Overloaded(); fmt.Sprint(got) != "[ns/s]" {
		t.Errorf("overloaded %v after a third zone appeared, want [ns/s]", got)
	}
	evs := tc.DisableHints("ns/s", discoveryv1.AddressTypeIPv4)
	evs = append(evs, tc.DisableHints("ns/s", discoveryv1.AddressTypeIPv6)...)
	if got, want := events(evs), "Warning TopologyAwareHintsDisabled: Topology Aware Hints has been disabled, addressType: IPv4"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
	if got := events(tc.DisableHints("ns/s", discoveryv1.AddressTypeIPv4)); got != "" {
		t.Errorf("second disable: events %q", got)
	}
}

// The controller with a topology-mode Auto Service: hints by zone in the
// slice, the Enabled Event on the Service, trafficDistribution ignored while
// the annotation is set, and the hints gone with the annotation.
func TestTopologyModeAutoController(t *testing.T) {
	h := newHarness(t, 100)
	rec := record.NewFakeRecorder(20)
	h.c.recorder = rec
	ready := func(name string) {
		n, err := h.client.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		if _, err := h.client.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.eventually(func() bool { n, _ := h.c.nodes.Get(name); return n != nil && nodeReady(n) })
	}
	ready("node-1")
	ready("node-2")
	h.c.checkTopology()
	sel := map[string]string{"app": "t"}
	for i, n := range []string{"node-1", "node-1", "node-1", "node-2"} {
		h.pod(mkpod(fmt.Sprintf("t%d", i), fmt.Sprintf("10.244.0.%d", i+1), n, true, sel))
	}
	svc := mksvc("t", sel, corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP})
	pc := "PreferClose"
	svc.Spec.TrafficDistribution = &pc
	h.service(svc)
	setAnnotation := func(v string) {
		s, _ := h.client.CoreV1().Services("default").Get(h.ctx, "t", metav1.GetOptions{})
		if v == "" {
			delete(s.Annotations, corev1.AnnotationTopologyMode)
		} else {
			s.Annotations[corev1.AnnotationTopologyMode] = v
		}
		s.Annotations["gen"] = v
		if _, err := h.client.CoreV1().Services("default").Update(h.ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.eventually(func() bool {
			got, _ := h.c.services.Services("default").Get("t")
			return got != nil && got.Annotations["gen"] == v
		})
	}
	next := func() string {
		select {
		case e := <-rec.Events:
			return e
		case <-time.After(5 * time.Second):
			return "(no event)"
		}
	}
	setAnnotation("Auto")
	h.sync("default/t")
	// hints counts the endpoints hinted for each zone ("-" for none).
	hints := func() string {
		count := map[string]int{}
		for _, s := range h.apiSlices() {
			for _, ep := range s.Endpoints {
				z := "-"
				if ep.Hints != nil {
					z = ""
					for _, f := range ep.Hints.ForZones {
						z += f.Name
					}
				}
				count[z]++
			}
		}
		var out []string
		for z, n := range count {
			out = append(out, fmt.Sprintf("%s=%d", z, n))
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	// Three endpoints in zone-a, one in zone-b, equal CPU: zone-a gives one
	// to zone-b.
	if got, want := hints(), "zone-a=2 zone-b=2"; got != want {
		t.Errorf("hints %s, want %s", got, want)
	}
	if got, want := next(), "Normal TopologyAwareHintsEnabled Topology Aware Hints has been enabled, addressType: IPv4"; got != want {
		t.Errorf("event %q, want %q", got, want)
	}
	setAnnotation("")
	h.sync("default/t")
	// Back to trafficDistribution: each endpoint's own zone, and the
	// Disabled Event.
	if got, want := hints(), "zone-a=3 zone-b=1"; got != want {
		t.Errorf("hints %s, want %s", got, want)
	}
	if got, want := next(), "Warning TopologyAwareHintsDisabled Topology Aware Hints has been disabled, addressType: IPv4"; got != want {
		t.Errorf("event %q, want %q", got, want)
	}
	// Auto with too few endpoints for the zones: no hints, a Warning.
	h.deletePod("t3")
	setAnnotation("Auto")
	h.sync("default/t")
	if got, want := hints(), "-=3"; got != want {
		t.Errorf("hints %s, want %s", got, want)
	}
	if got, want := next(), "Warning TopologyAwareHintsDisabled Unable to allocate minimum required endpoints to each zone without exceeding overload threshold (3 endpoints, 2 zones), addressType: IPv4"; got != want {
		t.Errorf("event %q, want %q", got, want)
	}
}
