package proxy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/proxy/lb"
)

// The svcnet.io/endpoint-weights annotation on a slice gives its endpoints
// their weights; endpoints it does not name, and a slice without it, keep 1.
// A weight change alone is a change the tracker applies.
func TestEndpointWeightsFromSliceAnnotation(t *testing.T) {
	tr := NewEndpointsChangeTracker("node1")
	m := EndpointsMap{}
	pn := ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}, Protocol: v1.ProtocolTCP}
	s := testSlice("ns", "web", "web-1", 80, v1.ProtocolTCP, ep("10.244.1.2", "node1", true), ep("10.244.2.2", "node2", true))
	tr.EndpointSliceUpdate(s, false)
	tr.Apply(m)
	for _, e := range m[pn] {
		if e.Weight != 1 {
			t.Fatalf("default weight of %s = %d, want 1", e.Addr, e.Weight)
		}
	}
	s = s.DeepCopy()
	s.Annotations = map[string]string{lb.EndpointWeightsAnnotation: "10.244.2.2=3"}
	tr.EndpointSliceUpdate(s, false)
	tr.Apply(m)
	got := map[string]int{}
	for _, e := range m[pn] {
		got[e.Addr.String()] = e.Weight
	}
	if got["10.244.1.2"] != 1 || got["10.244.2.2"] != 3 {
		t.Fatalf("weights = %v, want 10.244.1.2=1 10.244.2.2=3", got)
	}
}
