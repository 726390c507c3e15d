package service

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
)

// These cases came out of the differential run against kube-apiserver 1.36's
// own validation code (docs/service-semantics.md); the expected lists are the
// complete, ordered error lists Kubernetes produced.

func errLines(l field.ErrorList) string {
	var out []string
	for _, e := range l {
		out = append(out, e.Error())
	}
	return strings.Join(out, "\n")
}

func storedClusterIPService() *corev1.Service {
	cluster := corev1.ServiceInternalTrafficPolicyCluster
	single := corev1.IPFamilyPolicySingleStack
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "5", UID: "uid-1"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.77", ClusterIPs: []string{"10.96.0.77"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
			Ports:           []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
			Selector:        map[string]string{"app": "web"},
			SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: &cluster,
		},
	}
}

func TestOracleServiceUpdateCases(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name   string
		mutate func(svc *corev1.Service)
		want   string
	}{
		{
			// On update the name syntax is not checked again; only the
			// metadata update rules apply.
			name:   "renamed to an invalid name",
			mutate: func(svc *corev1.Service) { svc.Name = "web.x" },
			want:   `metadata.name: Invalid value: "web.x": field is immutable`,
		},
		{
			// loadBalancerClass on a non-LoadBalancer update is reported
			// twice by ValidateServiceUpdate (update check, then create-time
			// check); the store's declarative step then drops the repeat
			// (TestOracleServiceUpdateRepeatedErrors137).
			name:   "loadBalancerClass on ClusterIP",
			mutate: func(svc *corev1.Service) { svc.Spec.LoadBalancerClass = str("lb") },
			want: "spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'\n" +
				"spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := storedClusterIPService()
			svc := old.DeepCopy()
			tc.mutate(svc)
			if got := errLines(ValidateServiceUpdate(svc, old)); got != tc.want {
				t.Fatalf("errors\n got:\n%s\n want:\n%s", got, tc.want)
			}
		})
	}

	// A LoadBalancer whose class changes to an invalid one: the immutability
	// error, then the format error twice.
	lb := storedClusterIPService()
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb.Spec.Ports[0].NodePort = 31000
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	yes := true
	lb.Spec.AllocateLoadBalancerNodePorts = &yes
	lb.Spec.LoadBalancerClass = str("example.com/lb")
	upd := lb.DeepCopy()
	upd.Spec.LoadBalancerClass = str("bad class!")
	got := errLines(ValidateServiceUpdate(upd, lb))
	if n := strings.Count(got, `spec.loadBalancerClass: Invalid value: "bad class!": name part must consist of alphanumeric characters`); n != 2 ||
		!strings.HasPrefix(got, `spec.loadBalancerClass: Invalid value: "bad class!": may not change once set`) {
		t.Fatalf("loadBalancerClass change errors:\n%s", got)
	}
}

func TestOracleServiceCreateNameChecked(t *testing.T) {
	svc := storedClusterIPService()
	svc.Name = "web.x"
	want := `metadata.name: Invalid value: "web.x": must not contain dots`
	if got := errLines(ValidateService(svc)); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestOracleHeadlessNoneMovedToSecondPlace(t *testing.T) {
	old := storedClusterIPService()
	old.Spec.ClusterIP, old.Spec.ClusterIPs = "None", []string{"None"}
	svc := old.DeepCopy()
	svc.Spec.ClusterIPs = []string{"10.96.0.5", "None"}
	require := corev1.IPFamilyPolicyRequireDualStack
	svc.Spec.IPFamilyPolicy = &require
	got := errLines(ValidateServiceUpdate(svc, old))
	// "None" is accepted as an old value by the syntax check, so the
	// dual-stack check meets it and fails internally, as in kube-apiserver.
	for _, want := range []string{
		`spec.clusterIPs: Internal error: failed to check for dual stack with error:invalid IP[1]: None`,
		`spec.clusterIPs: Invalid value: ["10.96.0.5","None"]: may specify no more than one IP for each IP family`,
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("missing %q in:\n%s", want, got)
		}
	}
}

// Kubernetes 1.37's Service strategy opts in to declarative validation, and
// that step removes repeated errors: through the store's validation (what a
// client sees) the loadBalancerClass error and an annotation error that
// both the generic and the Service metadata checks find appear once.
func TestOracleServiceUpdateRepeatedErrors137(t *testing.T) {
	str := func(s string) *string { return &s }
	st := &Strategy{}
	ctx := context.Background()
	old := storedClusterIPService()
	svc := old.DeepCopy()
	svc.Spec.LoadBalancerClass = str("lb")
	svc.Annotations = map[string]string{"bad key!": "x"}
	want := `metadata.annotations: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')` + "\n" +
		"spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'"
	if got := errLines(registry.ValidateUpdate(ctx, st, true, svc, old)); got != want {
		t.Fatalf("errors\n got:\n%s\n want:\n%s", got, want)
	}
}
