package core

import (
	"context"
	"fmt"
	"time"

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

// AdmissionPlugins are the kube-apiserver admission plugins svcnet runs on
// pods, in kube-apiserver's order; --disable-admission-plugins takes these
// names.
var AdmissionPlugins = []string{PluginServiceAccount, PluginPriority, PluginDefaultTolerationSeconds}

const (
	PluginServiceAccount           = "ServiceAccount"
	PluginPriority                 = "Priority"
	PluginDefaultTolerationSeconds = "DefaultTolerationSeconds"
)

// PodAdmission is what kube-apiserver's default admission plugins do to a
// pod beyond its strategy:
//   - ServiceAccount (create): spec.serviceAccountName defaults to
//     "default"; the service account must exist (a missing "default" is
//     looked up again for up to about 2 s, as the plugin does, since the
//     service account controller makes it right after the namespace); unless
//     the pod or the service account opts out, every container and init
//     container gets the kube-api-access-XXXXX projected volume (token, CA,
//     namespace) at /var/run/secrets/kubernetes.io/serviceaccount; the
//     service account's image pull secrets are copied to a pod without any;
//     a mirror pod may not name a service account, reference secrets or
//     project a token;
//   - DefaultTolerationSeconds (create and update): a pod that does not
//     tolerate node.kubernetes.io/not-ready or .../unreachable NoExecute
//     gets a toleration of each for 300 s;
//   - Priority (create): spec.priority from spec.priorityClassName (0, and
//     preemptionPolicy PreemptLowerPriority, without one: there is no
//     global default class), an unknown class or a priority or policy that
//     differs from the class's is Forbidden; an update that leaves out
//     the priority or the preemption policy gets the stored one back.
type PodAdmission struct {
	// Disabled plugins, by name.
	Disabled map[string]bool
	// ServiceAccounts looks a service account up (a NotFound error when it
	// does not exist). Without it the ServiceAccount plugin does not run.
	ServiceAccounts func(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	// GenerateName makes the token volume's name from its prefix (default:
	// five random characters appended, as names.SimpleNameGenerator).
	GenerateName func(prefix string) string
	// Sleep waits between lookups of a missing default service account
	// (default time.Sleep).
	Sleep func(time.Duration)
}

// admitPod is the admission of a pod strategy no server has configured:
// every plugin but ServiceAccount, which needs the service accounts.
func admitPod(ctx context.Context, obj, old runtime.Object) error {
	return (&PodAdmission{}).Admit(ctx, obj, old)
}

// Admit runs the plugins on a pod create (old nil) or update.
func (a *PodAdmission) Admit(ctx context.Context, obj, old runtime.Object) error {
	pod := obj.(*corev1.Pod)
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	if name == "" {
		name = "Unknown"
	}
	forbidden := func(format string, args ...any) error {
		return apierrors.NewForbidden(corev1.Resource("pods"), name, fmt.Errorf(format, args...))
	}
	if old == nil && !a.Disabled[PluginServiceAccount] && a.ServiceAccounts != nil {
		if err := a.admitServiceAccount(ctx, pod, forbidden); err != nil {
			return err
		}
	}
	if !a.Disabled[PluginDefaultTolerationSeconds] {
		addDefaultTolerations(&pod.Spec)
	}
	if !a.Disabled[PluginPriority] {
		if err := admitPriority(pod, old, forbidden); err != nil {
			return err
		}
	}
	return nil
}

func admitPriority(pod *corev1.Pod, old runtime.Object, forbidden func(string, ...any) error) error {
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
