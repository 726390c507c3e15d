package core

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/registry"
)

// hack/apidiff compares these warnings with kube-apiserver's on random
// inputs; this pins a few by hand.
func TestPodWarnings(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web.0", Annotations: map[string]string{"scheduler.alpha.kubernetes.io/critical-pod": ""}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"failure-domain.beta.kubernetes.io/zone": "a", "beta.kubernetes.io/arch": "amd64", "disk": "ssd"},
			Containers: []corev1.Container{{Name: "app", Image: "nginx",
				Env:   []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "$(A)-2"}, {Name: "A", Value: "3"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}},
			HostAliases: []corev1.HostAlias{{IP: "fd00:0::1"}},
		},
	}
	st := NewPodStrategy()
	got := st.(registry.CreateWarner).WarningsOnCreate(context.Background(), pod)
	want := []string{
		`metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]`,
		`spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use "kubernetes.io/arch" instead`,
		`spec.nodeSelector[failure-domain.beta.kubernetes.io/zone]: deprecated since v1.17; use "topology.kubernetes.io/zone" instead`,
		`metadata.annotations[scheduler.alpha.kubernetes.io/critical-pod]: non-functional in v1.16+; use the "priorityClassName" field instead`,
		`spec.containers[0].env[2]: hides previous definition of "A", which may be dropped when using apply`,
		`spec.containers[0].ports[1]: duplicate port definition with spec.containers[0].ports[0]`,
		`spec.hostAliases[0].ip: IPv6 address "fd00:0::1" should be in RFC 5952 canonical format ("fd00::1")`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	// No warnings on updates of the pod itself.
	if w := st.(registry.UpdateWarner).WarningsOnUpdate(context.Background(), pod, pod); w != nil {
		t.Errorf("update warnings %q", w)
	}
}

func TestTemplateWarningsOnUpdate(t *testing.T) {
	grace := int64(-1)
	old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace}}}}
	st := NewDeploymentStrategy().(registry.UpdateWarner)
	if w := st.WarningsOnUpdate(context.Background(), old.DeepCopy(), old); w != nil {
		t.Errorf("same generation: %q", w)
	}
	d := old.DeepCopy()
	d.Generation = 3
	want := []string{"spec.template.spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will be treated as 1"}
	if w := st.WarningsOnUpdate(context.Background(), d, old); !slices.Equal(w, want) {
		t.Errorf("got %q, want %q", w, want)
	}
}
