package core

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Cases from the differential run against Kubernetes 1.37.2's v1 defaulting
// (hack/apidiff, kinds pod-default and deployment-default); each expected
// value is what Kubernetes' SetDefaults produced for the same input.

func int64p(v int64) *int64 { return &v }

func TestOraclePodDefaultCases(t *testing.T) {
	cases := []struct {
		name  string
		in    func(p *corev1.Pod)
		check func(t *testing.T, p *corev1.Pod)
	}{
		{"serviceAccount alias follows serviceAccountName (1.37 defaulting)",
			func(p *corev1.Pod) { p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount = "sa1", "sa2" },
			func(t *testing.T, p *corev1.Pod) {
				if p.Spec.ServiceAccountName != "sa1" || p.Spec.DeprecatedServiceAccount != "sa1" {
					t.Errorf("serviceAccountName %q serviceAccount %q, want sa1/sa1", p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount)
				}
			}},
		{"serviceAccountName taken from the alias",
			func(p *corev1.Pod) { p.Spec.DeprecatedServiceAccount = "sa2" },
			func(t *testing.T, p *corev1.Pod) {
				if p.Spec.ServiceAccountName != "sa2" || p.Spec.DeprecatedServiceAccount != "sa2" {
					t.Errorf("serviceAccountName %q serviceAccount %q, want sa2/sa2", p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount)
				}
			}},
		{"negative grace period becomes 1 on a Pod (1.37 defaulting)",
			func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = int64p(-5) },
			func(t *testing.T, p *corev1.Pod) {
				if *p.Spec.TerminationGracePeriodSeconds != 1 {
					t.Errorf("terminationGracePeriodSeconds %d, want 1", *p.Spec.TerminationGracePeriodSeconds)
				}
			}},
		{"podIPs defaulted from podIP (1.37 defaulting)",
			func(p *corev1.Pod) { p.Status.PodIP = "10.244.1.5" },
			func(t *testing.T, p *corev1.Pod) {
				if d := cmp.Diff([]corev1.PodIP{{IP: "10.244.1.5"}}, p.Status.PodIPs); d != "" {
					t.Error(d)
				}
			}},
		{"podIP defaulted from podIPs",
			func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.6"}, {IP: "fd00::6"}} },
			func(t *testing.T, p *corev1.Pod) {
				if p.Status.PodIP != "10.244.1.6" || len(p.Status.PodIPs) != 2 {
					t.Errorf("podIP %q podIPs %v", p.Status.PodIP, p.Status.PodIPs)
				}
			}},
		{"podIP wins over a different podIPs",
			func(p *corev1.Pod) {
				p.Status.PodIP = "10.244.1.5"
				p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.6"}, {IP: "fd00::6"}}
			},
			func(t *testing.T, p *corev1.Pod) {
				if d := cmp.Diff([]corev1.PodIP{{IP: "10.244.1.5"}}, p.Status.PodIPs); d != "" {
					t.Error(d)
				}
			}},
		{"host-network ports get hostPort = containerPort",
			func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			func(t *testing.T, p *corev1.Pod) {
				if hp := p.Spec.Containers[0].Ports[0].HostPort; hp != 8080 {
					t.Errorf("hostPort %d, want 8080", hp)
				}
			}},
		{"requests default to limits, rounded up to milli-units",
			func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0001")}
			},
			func(t *testing.T, p *corev1.Pod) {
				r := p.Spec.Containers[0].Resources
				if q := r.Requests[corev1.ResourceCPU]; q.String() != "1m" {
					t.Errorf("cpu request %s, want 1m", q.String())
				}
				if q := r.Limits[corev1.ResourceCPU]; q.String() != "1m" {
					t.Errorf("cpu limit %s, want 1m", q.String())
				}
			}},
		{"lifecycle httpGet gets path and scheme",
			func(p *corev1.Pod) {
				p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
			},
			func(t *testing.T, p *corev1.Pod) {
				g := p.Spec.Containers[0].Lifecycle.PreStop.HTTPGet
				if g.Path != "/" || g.Scheme != corev1.URISchemeHTTP {
					t.Errorf("preStop httpGet %+v", g)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
			}
			tc.in(p)
			NewPodStrategy().Default(p)
			tc.check(t, p)
		})
	}
}

// A pod template gets the spec defaults (the serviceAccount alias included)
// but not the Pod-only ones.
func TestOracleDeploymentTemplateDefaults(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			ServiceAccountName: "sa1", DeprecatedServiceAccount: "sa2", TerminationGracePeriodSeconds: int64p(-5), HostNetwork: true,
			Containers: []corev1.Container{{Name: "app", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}},
		}}},
	}
	NewDeploymentStrategy().Default(d)
	s := d.Spec.Template.Spec
	if s.DeprecatedServiceAccount != "sa1" {
		t.Errorf("serviceAccount %q, want sa1", s.DeprecatedServiceAccount)
	}
	if *s.TerminationGracePeriodSeconds != -5 || s.Containers[0].Ports[0].HostPort != 0 || s.EnableServiceLinks != nil {
		t.Errorf("template got Pod-only defaults: %+v", s)
	}
}
