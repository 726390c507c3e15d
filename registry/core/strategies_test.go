package core

import (
	"context"
	"github.com/svcnet/svcnet/registry"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNamespaceDefaults(t *testing.T) {
	s := NewNamespaceStrategy()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	s.Default(ns)
	s.PrepareForCreate(context.Background(), ns)
	if ns.Labels[LabelMetadataName] != "team-a" {
		t.Errorf("labels %v", ns.Labels)
	}
	if ns.Status.Phase != corev1.NamespaceActive || len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != "kubernetes" {
		t.Errorf("phase %q finalizers %v", ns.Status.Phase, ns.Spec.Finalizers)
	}
	// The label cannot be changed away from the name.
	ns.Labels[LabelMetadataName] = "other"
	s.Default(ns)
	if ns.Labels[LabelMetadataName] != "team-a" {
		t.Errorf("label not restored: %v", ns.Labels)
	}
}

const testDigest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func TestPodDefaults(t *testing.T) {
	cases := []struct {
		image  string
		policy corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.25", corev1.PullIfNotPresent},
		{"registry:5000/app", corev1.PullAlways},
		{"registry:5000/app:v1", corev1.PullIfNotPresent},
		{"app@sha256:" + testDigest, corev1.PullIfNotPresent},
		{"app:latest@sha256:" + testDigest, corev1.PullAlways},
		{"app:v1@sha256:" + testDigest, corev1.PullIfNotPresent},
		// A reference that does not parse (digest too short, upper case)
		// gets IfNotPresent, as in Kubernetes.
		{"app:latest@sha256:abcd", corev1.PullIfNotPresent},
		{"Nginx", corev1.PullIfNotPresent},
	}
	for _, tc := range cases {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: tc.image, Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
		NewPodStrategy().Default(pod)
		s := pod.Spec
		if s.DNSPolicy != corev1.DNSClusterFirst || s.RestartPolicy != corev1.RestartPolicyAlways || !*s.EnableServiceLinks ||
			*s.TerminationGracePeriodSeconds != 30 || s.SchedulerName != "default-scheduler" {
			t.Errorf("pod spec defaults: %+v", s)
		}
		c := s.Containers[0]
		if c.ImagePullPolicy != tc.policy {
			t.Errorf("%s: imagePullPolicy %s, want %s", tc.image, c.ImagePullPolicy, tc.policy)
		}
		if c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != corev1.TerminationMessageReadFile || c.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Errorf("container defaults: %+v", c)
		}
	}
}

func TestPodGracePeriod(t *testing.T) {
	s := NewPodStrategy().(registry.GracefulDeleter)
	pod := &corev1.Pod{}
	if _, graceful := s.GracePeriod(pod, nil); graceful {
		t.Error("unscheduled pod deleted gracefully")
	}
	pod.Spec.NodeName = "n1"
	if g, graceful := s.GracePeriod(pod, nil); !graceful || g != 30 {
		t.Errorf("bound pod: %d %v", g, graceful)
	}
	zero := int64(0)
	if _, graceful := s.GracePeriod(pod, &zero); graceful {
		t.Error("grace 0 must delete at once")
	}
	pod.Status.Phase = corev1.PodSucceeded
	if _, graceful := s.GracePeriod(pod, nil); graceful {
		t.Error("terminated pod deleted gracefully")
	}
}

func TestDeploymentValidation(t *testing.T) {
	s := NewDeploymentStrategy()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "default", ResourceVersion: "1"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}},
		},
	}
	s.Default(d)
	if *d.Spec.Replicas != 1 || *d.Spec.RevisionHistoryLimit != 10 || *d.Spec.ProgressDeadlineSeconds != 600 ||
		d.Spec.Strategy.RollingUpdate.MaxSurge.StrVal != "25%" {
		t.Errorf("deployment defaults: %+v", d.Spec)
	}
	errs := s.Validate(context.Background(), d)
	if len(errs) != 1 || errs[0].Field != "spec.template.metadata.labels" || !strings.Contains(errs[0].Detail, "`selector` does not match template `labels`") {
		t.Errorf("errors: %v", errs)
	}
	d.Spec.Template.Labels["app"] = "a"
	if errs := s.Validate(context.Background(), d); len(errs) != 0 {
		t.Errorf("valid deployment: %v", errs)
	}
	old := d.DeepCopy()
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a", "x": "y"}}
	d.Spec.Template.Labels["x"] = "y"
	if errs := s.ValidateUpdate(context.Background(), d, old); len(errs) == 0 || errs[0].Field != "spec.selector" {
		t.Errorf("selector change: %v", errs)
	}
}

func TestStatusStrategyKeepsSpec(t *testing.T) {
	s := NewDeploymentStrategy().(interface{ StatusStrategy() registry.Strategy }).StatusStrategy()
	r1, r2 := int32(1), int32(5)
	old := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &r1}}
	upd := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &r2}, Status: appsv1.DeploymentStatus{Replicas: 3}}
	s.PrepareForUpdate(context.Background(), upd, old)
	if *upd.Spec.Replicas != 1 || upd.Status.Replicas != 3 {
		t.Errorf("status update: spec %d status %d", *upd.Spec.Replicas, upd.Status.Replicas)
	}
	main := NewDeploymentStrategy()
	upd2 := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &r2}, Status: appsv1.DeploymentStatus{Replicas: 9}}
	main.PrepareForUpdate(context.Background(), upd2, old)
	if upd2.Status.Replicas != 0 || *upd2.Spec.Replicas != 5 {
		t.Errorf("main update: spec %d status %d", *upd2.Spec.Replicas, upd2.Status.Replicas)
	}
}

// Kubernetes defaults enableServiceLinks on Pods only: on a Deployment's or
// ReplicaSet's template it stays unset (it is part of the pod-template-hash).
func TestEnableServiceLinksOnlyOnPods(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}
	DefaultDeployment(d)
	if d.Spec.Template.Spec.EnableServiceLinks != nil {
		t.Errorf("deployment template enableServiceLinks = %v, want unset", *d.Spec.Template.Spec.EnableServiceLinks)
	}
	if d.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("deployment template dnsPolicy = %q", d.Spec.Template.Spec.DNSPolicy)
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	NewPodStrategy().Default(pod)
	if pod.Spec.EnableServiceLinks == nil || !*pod.Spec.EnableServiceLinks {
		t.Errorf("pod enableServiceLinks = %v, want true", pod.Spec.EnableServiceLinks)
	}
}
