package main

import (
	"math/rand"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	"github.com/svcnet/svcnet/registry/core"
)

func randProbe(r *rand.Rand) *corev1.Probe {
	if maybe(r, 0.5) {
		return nil
	}
	p := &corev1.Probe{
		TimeoutSeconds: pick[int32](r, 0, 5), PeriodSeconds: pick[int32](r, 0, 3),
		SuccessThreshold: pick[int32](r, 0, 1), FailureThreshold: pick[int32](r, 0, 6),
	}
	switch r.Intn(3) {
	case 0:
		p.HTTPGet = &corev1.HTTPGetAction{Path: pick(r, "", "/healthz"), Port: intstr.FromInt32(8080),
			Scheme: pick(r, corev1.URIScheme(""), corev1.URISchemeHTTPS)}
	case 1:
		p.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromString("http")}
	case 2:
		p.Exec = &corev1.ExecAction{Command: []string{"true"}}
	}
	return p
}

func randContainer(r *rand.Rand, name string) corev1.Container {
	c := corev1.Container{
		Name:                     name,
		Image:                    pick(r, "nginx", "nginx:latest", "nginx:1.25", "nginx@sha256:0123", "nginx:latest@sha256:0123", "nginx@sha256:"+digest, "nginx:latest@sha256:"+digest, "nginx:1.25@sha256:"+digest, "registry:5000/nginx", "registry:5000/nginx:v1", ""),
		ImagePullPolicy:          pick(r, corev1.PullPolicy(""), corev1.PullPolicy(""), corev1.PullAlways, corev1.PullNever),
		TerminationMessagePath:   pick(r, "", "/tmp/msg"),
		TerminationMessagePolicy: pick(r, corev1.TerminationMessagePolicy(""), corev1.TerminationMessageFallbackToLogsOnError),
		LivenessProbe:            randProbe(r), ReadinessProbe: randProbe(r), StartupProbe: randProbe(r),
	}
	for i, n := 0, r.Intn(3); i < n; i++ {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: pick(r, "", "http"), ContainerPort: pick[int32](r, 80, 8080),
			HostPort: pick[int32](r, 0, 0, 8080), Protocol: pick(r, corev1.Protocol(""), corev1.ProtocolUDP)})
	}
	if maybe(r, 0.2) {
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
	}
	if maybe(r, 0.2) {
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(pick(r, "500m", "0.0001", "1"))}
		if maybe(r, 0.5) {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		}
	}
	return c
}

func randPodSpec(r *rand.Rand) corev1.PodSpec {
	s := corev1.PodSpec{
		DNSPolicy:          pick(r, corev1.DNSPolicy(""), corev1.DNSDefault, corev1.DNSClusterFirstWithHostNet),
		RestartPolicy:      pick(r, corev1.RestartPolicy(""), corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure),
		SchedulerName:      pick(r, "", "my-scheduler"),
		ServiceAccountName: pick(r, "", "", "sa1"),
		// The deprecated alias, as old clients send it.
		DeprecatedServiceAccount:      pick(r, "", "", "sa1", "sa2"),
		TerminationGracePeriodSeconds: pick(r, nil, ptr[int64](30), ptr[int64](0), ptr[int64](-5)),
		EnableServiceLinks:            pick(r, nil, ptr(false)),
		HostNetwork:                   maybe(r, 0.2),
		SecurityContext:               pick(r, nil, &corev1.PodSecurityContext{RunAsUser: ptr[int64](1000)}),
		NodeName:                      pick(r, "", "node-1"),
	}
	for i, n := 0, 1+r.Intn(2); i < n; i++ {
		s.Containers = append(s.Containers, randContainer(r, pick(r, "app", "side")))
	}
	if maybe(r, 0.2) {
		s.InitContainers = append(s.InitContainers, randContainer(r, "init"))
	}
	return s
}

func podDefaultCase(r *rand.Rand) string {
	in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: namespace}, Spec: randPodSpec(r)}
	if maybe(r, 0.3) {
		in.Status.PodIP = pick(r, "", "10.244.1.5")
		in.Status.PodIPs = pick(r, nil, []corev1.PodIP{{IP: "10.244.1.5"}}, []corev1.PodIP{{IP: "10.244.1.6"}, {IP: "fd00::6"}})
	}
	k := in.DeepCopy()
	legacyscheme.Scheme.Default(k)
	s := in.DeepCopy()
	core.NewPodStrategy().Default(s)
	return withInput(compareObjs("defaulted", k, s), in)
}

func deploymentDefaultCase(r *rand.Rand) string {
	in := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas:                pick(r, nil, ptr[int32](3)),
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template:                corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: randPodSpec(r)},
			RevisionHistoryLimit:    pick(r, nil, ptr[int32](2)),
			ProgressDeadlineSeconds: pick(r, nil, ptr[int32](60)),
		},
	}
	switch r.Intn(4) {
	case 1:
		in.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	case 2:
		in.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
		in.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr(intstr.FromInt32(1))}
	case 3:
		in.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr(intstr.FromString("50%"))}
	}
	k := in.DeepCopy()
	legacyscheme.Scheme.Default(k)
	s := in.DeepCopy()
	core.NewDeploymentStrategy().Default(s)
	return withInput(compareObjs("defaulted", k, s), in)
}

const digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
