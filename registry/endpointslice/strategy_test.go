package endpointslice

import (
	"context"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func TestEndpointSlice(t *testing.T) {
	mk := func(at discoveryv1.AddressType, addrs ...string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Namespace: "default"},
			AddressType: at,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: addrs}},
			Ports:       []discoveryv1.EndpointPort{{Port: ptr(int32(8080))}},
		}
	}
	cases := []struct {
		name string
		s    *discoveryv1.EndpointSlice
		want string
	}{
		{"valid v4", mk("IPv4", "10.244.1.5"), ""},
		{"valid v6", mk("IPv6", "fd00::5"), ""},
		{"valid fqdn", mk("FQDN", "db.example.com"), ""},
		{"v6 in v4 slice", mk("IPv4", "fd00::5"), `endpoints[0].addresses: Invalid value: "fd00::5": must be an IPv4 address`},
		{"loopback", mk("IPv4", "127.0.0.1"), `endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`},
		{"link-local v6", mk("IPv6", "fe80::1"), `endpoints[0].addresses[0]: Invalid value: "fe80::1": may not be in the link-local range (169.254.0.0/16, fe80::/10)`},
		{"no address", mk("IPv4"), "endpoints[0].addresses: Required value: must contain at least 1 address"},
		{"bad address type", mk("IPv5", "10.0.0.1"), `addressType: Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6"`},
	}
	st := NewStrategy()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st.Default(tc.s)
			if tc.s.Ports[0].Name == nil || *tc.s.Ports[0].Name != "" || tc.s.Ports[0].Protocol == nil || *tc.s.Ports[0].Protocol != "TCP" {
				t.Fatalf("port defaults not applied: %+v", tc.s.Ports[0])
			}
			errs := st.Validate(context.Background(), tc.s)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("want accepted, got %v", errs.ToAggregate())
				}
				return
			}
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tc.want) {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
		})
	}
	old := mk("IPv4", "10.244.1.5")
	st.Default(old)
	upd := old.DeepCopy()
	upd.AddressType = "IPv6"
	upd.Endpoints[0].Addresses = []string{"fd00::1"}
	if got := st.ValidateUpdate(context.Background(), upd, old).ToAggregate(); got == nil ||
		!strings.Contains(got.Error(), `addressType: Invalid value: "IPv6": field is immutable`) {
		t.Fatalf("addressType change: got %v", got)
	}
}
