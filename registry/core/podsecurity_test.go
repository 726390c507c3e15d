package core

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
)

// A new Pod's AppArmor annotations become its containers' fields (unless
// the container has its own or the pod's says the same), with
// kube-apiserver's warnings, sent to the request's warning sink.
func TestAppArmorAnnotationsBecomeFields(t *testing.T) {
	key := func(c string) string { return corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + c }
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{
			key("init"): "localhost/p1",    // copied
			key("app"):  "runtime/default", // the pod's already: not copied, no warning
			key("own"):  "unconfined",      // has its own field: left alone
			key("bad"):  "localhost/ p1",   // no valid profile: warned, not copied
		}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}},
			InitContainers:  []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers: []corev1.Container{{Name: "app", Image: "nginx"}, {Name: "bad", Image: "nginx"},
				{Name: "own", Image: "nginx", SecurityContext: &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}}},
		},
	}
	st := NewPodStrategy()
	st.Default(pod)
	var got []string
	st.PrepareForCreate(registry.WithWarningSink(context.Background(), func(w string) { got = append(got, w) }), pod)
	if p := pod.Spec.InitContainers[0].SecurityContext; p == nil || p.AppArmorProfile == nil || p.AppArmorProfile.Type != corev1.AppArmorProfileTypeLocalhost || *p.AppArmorProfile.LocalhostProfile != "p1" {
		t.Errorf("init container: %+v", p)
	}
	for _, c := range pod.Spec.Containers[:2] {
		if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
			t.Errorf("container %s got %+v", c.Name, c.SecurityContext.AppArmorProfile)
		}
	}
	want := []string{
		`metadata.annotations[container.apparmor.security.beta.kubernetes.io/init]: deprecated since v1.30; use the "appArmorProfile" field instead`,
		`metadata.annotations[container.apparmor.security.beta.kubernetes.io/bad]: deprecated since v1.30; use the "appArmorProfile" field instead`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

}

// The deprecated annotations' values, and their agreement with the fields
// on create.
func TestSecurityAnnotations(t *testing.T) {
	spec := &corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{
			SeccompProfile:  &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: func() *string { s := "p1"; return &s }()},
		},
		Containers: []corev1.Container{{Name: "app"}, {Name: "side", SecurityContext: &corev1.SecurityContext{
			SeccompProfile:  &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
			AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}}},
	}
	meta := &metav1.ObjectMeta{Annotations: map[string]string{
		corev1.SeccompPodAnnotationKey:                                     "docker/default",
		corev1.SeccompContainerAnnotationKeyPrefix + "side":                "runtime/default",
		corev1.SeccompContainerAnnotationKeyPrefix + "app":                 "localhost/../x",
		corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app":  "localhost/p2",
		corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "side": "unconfined",
		corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "gone": "bogus",
	}}
	var got []string
	for _, e := range append(validateSecurityAnnotations(meta.Annotations, spec, field.NewPath("metadata", "annotations")),
		validateSecurityAnnotationsMatch(meta, spec, field.NewPath("spec"))...) {
		got = append(got, e.Error())
	}
	want := []string{
		`metadata.annotations.container.seccomp.security.alpha.kubernetes.io/app: Invalid value: "../x": must not contain '..'`,
		`metadata.annotations[container.apparmor.security.beta.kubernetes.io/gone]: Invalid value: "gone": container not found`,
		`metadata.annotations[container.apparmor.security.beta.kubernetes.io/gone]: Invalid value: "bogus": invalid AppArmor profile name: "bogus"`,
		`spec.containers[1].securityContext.seccompProfile.type: Forbidden: seccomp type in annotation and field must match`,
		`spec.containers[0].securityContext.appArmorProfile.localhostProfile: Forbidden: apparmor profile in annotation and field must match`,
		`spec.containers[1].securityContext.appArmorProfile.type: Forbidden: apparmor type in annotation and field must match`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
