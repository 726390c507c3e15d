package endpointslice

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
)

// Cases from the differential run against kube-apiserver 1.36's validation
// code; the expected values are Kubernetes' complete, ordered error lists.

func errLines(l field.ErrorList) string {
	var out []string
	for _, e := range l {
		out = append(out, e.Error())
	}
	return strings.Join(out, "\n")
}

func slice(ep discoveryv1.Endpoint, ports ...discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Namespace: "default", ResourceVersion: "3"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{ep},
		Ports:       ports,
	}
	SetDefaults(s)
	return s
}

func TestOracleEndpointSliceCases(t *testing.T) {
	cases := []struct {
		name string
		s    *discoveryv1.EndpointSlice
		want string
	}{
		{"node hint must be a DNS subdomain",
			slice(discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"},
				Hints: &discoveryv1.EndpointHints{ForNodes: []discoveryv1.ForNode{{Name: "Node_1"}}}}),
			`endpoints[0].hints.forNodes[0].name: Invalid value: "Node_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"wrong family on the addresses list, then the range check",
			slice(discoveryv1.Endpoint{Addresses: []string{"fe80::1"}}),
			`endpoints[0].addresses: Invalid value: "fe80::1": must be an IPv4 address` + "\n" +
				`endpoints[0].addresses[0]: Invalid value: "fe80::1": may not be in the link-local range (169.254.0.0/16, fe80::/10)`},
		{"IPv4-mapped IPv6 refused by the strict syntax check alone",
			slice(discoveryv1.Endpoint{Addresses: []string{"::ffff:10.0.0.1"}}),
			`endpoints[0].addresses[0]: Invalid value: "::ffff:10.0.0.1": must not be an IPv4-mapped IPv6 address`},
		{"ports are checked before endpoints",
			slice(discoveryv1.Endpoint{Addresses: []string{"127.0.0.1"}}, discoveryv1.EndpointPort{Name: ptr("a_b")}),
			`ports[0].name: Invalid value: "a_b": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')` + "\n" +
				`endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := errLines(ValidateEndpointSlice(tc.s, nil)); got != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestOracleEndpointSliceUpdate(t *testing.T) {
	st := NewStrategy()
	ctx := context.Background()
	old := slice(discoveryv1.Endpoint{Addresses: []string{"010.0.0.1"}}) // stored under looser rules
	upd := old.DeepCopy()
	upd.Labels = map[string]string{"edited": "yes"}
	if errs := st.ValidateUpdate(ctx, upd, old); len(errs) != 0 {
		t.Fatalf("unchanged endpoints must not be re-validated: %v", errs.ToAggregate())
	}
	// Metadata update rules are the generic registry's job, as in
	// kube-apiserver's EndpointSlice strategy: no "field is immutable" here.
	upd.Name = "other"
	if errs := st.ValidateUpdate(ctx, upd, old); len(errs) != 0 {
		t.Fatalf("strategy must leave metadata update rules to the store: %v", errs.ToAggregate())
	}
	upd.Endpoints[0].Hostname = ptr("web-0")
	want := `endpoints[0].addresses[0]: Invalid value: "010.0.0.1": must not have leading 0s`
	if got := errLines(st.ValidateUpdate(ctx, upd, old)); got != want {
		t.Fatalf("changed endpoints:\n got:\n%s\n want:\n%s", got, want)
	}
}

// Kubernetes 1.37 validates addressType and the address count declaratively
// (beta rules, enforced): those errors come after the handwritten ones, the
// "at least 1 address" detail is gone, and a changed addressType is reported
// as both required and immutable. Checked through registry.ValidateCreate /
// ValidateUpdate, which is what the store runs.
func TestOracleEndpointSliceDeclarative137(t *testing.T) {
	st := NewStrategy()
	ctx := context.Background()
	nodeErr := `endpoints[0].nodeName: Invalid value: "Bad_Node": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`

	s := slice(discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, NodeName: ptr("Bad_Node")})
	s.AddressType = "Bogus"
	want := nodeErr + "\n" + `addressType: Unsupported value: "Bogus": supported values: "FQDN", "IPv4", "IPv6"`
	if got := errLines(registry.ValidateCreate(ctx, st, true, s)); got != want {
		t.Errorf("bad addressType:\n got:\n%s\n want:\n%s", got, want)
	}

	s = slice(discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}}, discoveryv1.EndpointPort{Name: ptr("a_b")})
	s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{})
	want = `ports[0].name: Invalid value: "a_b": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')` + "\n" +
		`endpoints[1].addresses: Required value`
	if got := errLines(registry.ValidateCreate(ctx, st, true, s)); got != want {
		t.Errorf("endpoint without addresses:\n got:\n%s\n want:\n%s", got, want)
	}

	old := slice(discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}})
	old.UID = "uid-3"
	upd := old.DeepCopy()
	upd.AddressType = ""
	want = "addressType: Required value\naddressType: Invalid value: null: field is immutable"
	if got := errLines(registry.ValidateUpdate(ctx, st, true, upd, old)); got != want {
		t.Errorf("addressType cleared:\n got:\n%s\n want:\n%s", got, want)
	}
}

// deprecatedTopology is dropped on writes through v1, as kube-apiserver does;
// an update that leaves the endpoints alone keeps it, and a node name kept
// only in the old kubernetes.io/hostname label moves to nodeName.
func TestOracleEndpointSliceDeprecatedTopology(t *testing.T) {
	st := NewStrategy()
	ctx := context.Background()
	topo := map[string]string{corev1.LabelHostname: "node-9"}

	s := slice(discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, DeprecatedTopology: topo})
	st.PrepareForCreate(ctx, s)
	if s.Endpoints[0].DeprecatedTopology != nil {
		t.Errorf("create kept deprecatedTopology %v", s.Endpoints[0].DeprecatedTopology)
	}

	old := slice(discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, DeprecatedTopology: topo})
	upd := old.DeepCopy()
	upd.Labels = map[string]string{"edited": "yes"}
	st.PrepareForUpdate(ctx, upd, old)
	if upd.Endpoints[0].DeprecatedTopology == nil {
		t.Error("update with unchanged endpoints dropped deprecatedTopology")
	}

	upd = old.DeepCopy()
	upd.Endpoints = append(upd.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.3"}})
	st.PrepareForUpdate(ctx, upd, old)
	if e := upd.Endpoints[0]; e.DeprecatedTopology != nil || e.NodeName == nil || *e.NodeName != "node-9" {
		t.Errorf("changed endpoints: deprecatedTopology %v nodeName %v, want nil and node-9", e.DeprecatedTopology, e.NodeName)
	}
}
