package endpoints

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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

func oneAddress(ip string) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "3"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: ip}},
			Ports:     []corev1.EndpointPort{{Port: 8080, Protocol: corev1.ProtocolTCP}},
		}},
	}
}

func TestOracleEndpointsAddressErrors(t *testing.T) {
	cases := []struct{ ip, want string }{
		// Not an IP: reported by the syntax check and again by the
		// endpoint-IP check.
		{"abc", `subsets[0].addresses[0].ip: Invalid value: "abc": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)` + "\n" +
			`subsets[0].addresses[0].ip: Invalid value: "abc": must be a valid IP address`},
		// Leading zeros: refused by the strict syntax check, and still read
		// (as decimal) for the range checks.
		{"0127.0.0.1", `subsets[0].addresses[0].ip: Invalid value: "0127.0.0.1": must not have leading 0s` + "\n" +
			`subsets[0].addresses[0].ip: Invalid value: "0127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`},
		{"10.0.0.1", ""},
	}
	for _, tc := range cases {
		if got := errLines(ValidateEndpoints(oneAddress(tc.ip), nil)); got != tc.want {
			t.Errorf("%s:\n got:\n%s\n want:\n%s", tc.ip, got, tc.want)
		}
	}
}

func TestOracleEndpointsUpdateKeepsUnchangedSubsets(t *testing.T) {
	s := NewStrategy()
	ctx := context.Background()
	old := oneAddress("010.0.0.1") // stored under older, looser rules
	upd := old.DeepCopy()
	upd.Labels = map[string]string{"edited": "yes"}
	if errs := s.ValidateUpdate(ctx, upd, old); len(errs) != 0 {
		t.Fatalf("unchanged subsets must not be re-validated: %v", errs.ToAggregate())
	}
	// Any change to the subsets re-validates all of them, including the
	// address that was already stored.
	upd.Subsets[0].Ports[0].Port = 8081
	want := `subsets[0].addresses[0].ip: Invalid value: "010.0.0.1": must not have leading 0s`
	if got := errLines(s.ValidateUpdate(ctx, upd, old)); got != want {
		t.Fatalf("changed subsets:\n got:\n%s\n want:\n%s", got, want)
	}
}
