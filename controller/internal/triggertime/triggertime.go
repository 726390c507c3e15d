// Package triggertime computes the value of the
// endpoints.kubernetes.io/last-change-trigger-time annotation: the time of
// the earliest change (a pod becoming ready or not ready, a pod or Service
// being created) that the current sync of a Service's endpoints is the first
// to observe. Network-programming latency is measured from it. A pod's
// Ready transition is read to the nanosecond from the node agent's
// svcnet.io/ready-transition-time annotation when it agrees with the
// condition's whole-second time.
//
// The tracker remembers, per Service, the trigger time it last saw for each
// pod and for the Service itself. A sync that sees nothing new gets the zero
// time, and the controllers then drop the annotation, as Kubernetes does.
package triggertime

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/controller/internal/podutil"
	"github.com/svcnet/svcnet/node/podstatus"
)

// Tracker is safe for concurrent use by several workers; one Service is never
// synced by two workers at once (the workqueue guarantees it).
type Tracker struct {
	mu    sync.Mutex
	state map[string]serviceState
}

type serviceState struct {
	service time.Time
	pods    map[string]time.Time
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{state: map[string]serviceState{}}
}

// Compute returns the earliest trigger time among the Service and the pods
// that changed since the previous call for the same Service key, and records
// the current trigger times. Pods with no Ready condition contribute their
// creation time only on first sight.
func (t *Tracker) Compute(key string, svc *corev1.Service, pods []*corev1.Pod) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, seen := t.state[key]
	next := serviceState{service: svc.CreationTimestamp.Time, pods: make(map[string]time.Time, len(pods))}
	var min time.Time
	consider := func(ts time.Time) {
		if ts.IsZero() {
			return
		}
		if min.IsZero() || ts.Before(min) {
			min = ts
		}
	}
	if !seen || !old.service.Equal(next.service) {
		consider(next.service)
	}
	for _, p := range pods {
		ts := podTriggerTime(p)
		next.pods[p.Name] = ts
		if prev, ok := old.pods[p.Name]; !ok || !prev.Equal(ts) {
			consider(ts)
		}
	}
	t.state[key] = next
	return min
}

// Forget drops the state of a deleted Service.
func (t *Tracker) Forget(key string) {
	t.mu.Lock()
	delete(t.state, key)
	t.mu.Unlock()
}

// podTriggerTime is the time of the pod's Ready transition, or its creation
// time before it has one. The condition's time is whole seconds (metav1.Time);
// the node agent's podstatus.ReadyTransitionAnnotation gives the same moment
// to the nanosecond and is preferred while it lies within the condition's
// second, which shows that it describes this transition (a writer that
// changed the condition without it leaves a stale value, which is then
// ignored). Either way the trigger time is never later than the transition.
func podTriggerTime(p *corev1.Pod) time.Time {
	if c := podutil.GetPodCondition(&p.Status, corev1.PodReady); c != nil && !c.LastTransitionTime.IsZero() {
		t := c.LastTransitionTime.Time
		if s, ok := p.Annotations[podstatus.ReadyTransitionAnnotation]; ok {
			if precise, err := time.Parse(time.RFC3339Nano, s); err == nil && !precise.Before(t) && precise.Before(t.Add(time.Second)) {
				return precise
			}
		}
		return t
	}
	return p.CreationTimestamp.Time
}
