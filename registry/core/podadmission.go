package core

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// The PriorityClasses kube-apiserver creates at start (scheduling.k8s.io;
// svcnet serves no PriorityClass objects, so these two are the only
// names a pod may give).
var systemPriorityClasses = map[string]int32{
	"system-node-critical":    2000001000,
	"system-cluster-critical": 2000000000,
}

// DefaultNotReadyTolerationSeconds is kube-apiserver's
// --default-not-ready-toleration-seconds and
// --default-unreachable-toleration-seconds.
const DefaultNotReadyTolerationSeconds = 300

// admitPod is what kube-apiserver's default admission plugins do to a pod
// beyond its strategy:
//   - DefaultTolerationSeconds (create and update): a pod that does not
//     tolerate node.kubernetes.io/not-ready or .../unreachable NoExecute
//     gets a toleration of each for 300 s;
//   - Priority (create): spec.priority from spec.priorityClassName (0, and
//     preemptionPolicy PreemptLowerPriority, without one: there is no
//     global default class), an unknown class or a priority or policy that
//     differs from the class's is Forbidden; an update that leaves out
//     the priority or the preemption policy gets the stored one back.
func admitPod(_ context.Context, obj, old runtime.Object) error {
	pod := obj.(*corev1.Pod)
	addDefaultTolerations(&pod.Spec)
	if old != nil {
		// What the create computed comes back when an update leaves it
		// out; a different value is left for validation to refuse.
		o := old.(*corev1.Pod)
		if pod.Spec.Priority == nil {
			pod.Spec.Priority = o.Spec.Priority
		}
		if pod.Spec.PreemptionPolicy == nil {
			pod.Spec.PreemptionPolicy = o.Spec.PreemptionPolicy
		}
		return nil
	}
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	forbidden := func(format string, a ...any) error {
		return apierrors.NewForbidden(corev1.Resource("pods"), name, fmt.Errorf(format, a...))
	}
	priority := int32(0)
	policy := corev1.PreemptLowerPriority
	if c := pod.Spec.PriorityClassName; c != "" {
		v, ok := systemPriorityClasses[c]
		if !ok {
			return forbidden("no PriorityClass with name %v was found", c)
		}
		priority = v
	}
	if p := pod.Spec.Priority; p != nil && *p != priority {
		return forbidden("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *p, priority)
	}
	pod.Spec.Priority = &priority
	if p := pod.Spec.PreemptionPolicy; p != nil && *p != policy {
		return forbidden("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *p, policy)
	}
	pod.Spec.PreemptionPolicy = &policy
	return nil
}

// addDefaultTolerations is the DefaultTolerationSeconds plugin.
func addDefaultTolerations(spec *corev1.PodSpec) {
	notReady, unreachable := false, false
	for _, t := range spec.Tolerations {
		noExecute := t.Effect == corev1.TaintEffectNoExecute || t.Effect == ""
		notReady = notReady || noExecute && (t.Key == corev1.TaintNodeNotReady || t.Key == "")
		unreachable = unreachable || noExecute && (t.Key == corev1.TaintNodeUnreachable || t.Key == "")
	}
	for _, add := range []struct {
		key  string
		have bool
	}{{corev1.TaintNodeNotReady, notReady}, {corev1.TaintNodeUnreachable, unreachable}} {
		if !add.have {
			secs := int64(DefaultNotReadyTolerationSeconds)
			spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: add.key, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs})
		}
	}
}
