package endpointslice

import (
	"context"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
