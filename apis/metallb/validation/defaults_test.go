package validation

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDefaultIPAddressPool: the CRD's defaults (autoAssign true,
// avoidBuggyIPs false) fill what is missing and keep what is set; an
// object without spec gets none, as kube-apiserver defaults only the
// properties of an object that is there.
func TestDefaultIPAddressPool(t *testing.T) {
	parse := func(y string) map[string]any {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(y), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		yaml string
		want map[string]any
	}{
		{"spec: {addresses: [10.0.0.0/24]}", map[string]any{"addresses": []any{"10.0.0.0/24"}, "autoAssign": true, "avoidBuggyIPs": false}},
		{"spec: {autoAssign: false, avoidBuggyIPs: true}", map[string]any{"autoAssign": false, "avoidBuggyIPs": true}},
		{"spec: {}", map[string]any{"autoAssign": true, "avoidBuggyIPs": false}},
	} {
		m := parse(tc.yaml)
		DefaultIPAddressPool(m)
		if got := m["spec"]; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: spec %v, want %v", tc.yaml, got, tc.want)
		}
	}
	m := parse("metadata: {name: p}")
	DefaultIPAddressPool(m)
	if _, ok := m["spec"]; ok {
		t.Errorf("no spec: defaulted to %v", m)
	}
}
