package endpoints

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEndpoints(t *testing.T) {
	mk := func(ips []string, ports []corev1.EndpointPort) *corev1.Endpoints {
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
		ss := corev1.EndpointSubset{Ports: ports}
		for _, ip := range ips {
			ss.Addresses = append(ss.Addresses, corev1.EndpointAddress{IP: ip})
		}
		ep.Subsets = []corev1.EndpointSubset{ss}
		return ep
	}
	cases := []struct {
		name string
		ep   *corev1.Endpoints
		want string
	}{
		{"valid", mk([]string{"10.244.1.5"}, []corev1.EndpointPort{{Port: 8080}}), ""},
		{"no addresses", mk(nil, []corev1.EndpointPort{{Port: 8080}}), "subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"},
		{"loopback", mk([]string{"127.0.0.1"}, nil), `subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`},
		{"link-local", mk([]string{"169.254.169.254"}, nil), `subsets[0].addresses[0].ip: Invalid value: "169.254.169.254": may not be in the link-local range (169.254.0.0/16, fe80::/10)`},
		{"link-local multicast", mk([]string{"224.0.0.1"}, nil), `subsets[0].addresses[0].ip: Invalid value: "224.0.0.1": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)`},
		{"unspecified", mk([]string{"0.0.0.0"}, nil), `subsets[0].addresses[0].ip: Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)`},
		{"not an IP", mk([]string{"10.1.2"}, nil), `subsets[0].addresses[0].ip: Invalid value: "10.1.2": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`},
		{"two ports need names", mk([]string{"10.244.1.5"}, []corev1.EndpointPort{{Name: "a", Port: 1}, {Port: 2}}), "subsets[0].ports[1].name: Required value"},
		{"bad protocol", mk([]string{"10.244.1.5"}, []corev1.EndpointPort{{Port: 1, Protocol: "ICMP"}}),
			`subsets[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`},
	}
	s := NewStrategy()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.Default(tc.ep)
			errs := s.Validate(context.Background(), tc.ep)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("want accepted, got %v", errs.ToAggregate())
				}
				if p := tc.ep.Subsets[0].Ports; len(p) > 0 && p[0].Protocol != corev1.ProtocolTCP {
					t.Fatalf("protocol not defaulted: %q", p[0].Protocol)
				}
				return
			}
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tc.want) {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
		})
	}
}
