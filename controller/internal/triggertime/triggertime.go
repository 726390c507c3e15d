// Package triggertime computes the value of the
// endpoints.kubernetes.io/last-change-trigger-time annotation, with
// kube-controller-manager's rules (its TriggerTimeTracker, shared by the
// EndpointSlice and Endpoints controllers):
//   - the first sync of a Service returns the Service's creation time;
//   - a later sync returns the earliest trigger time that moved forward
//     since the previous sync: a pod's Ready condition transition, or the
//     Service's creation time (a Service deleted and made again);
//   - a pod without a Ready condition (or with no transition time on it)
//     has no trigger time: its creation alone triggers nothing;
//   - a sync that sees nothing new gets the zero time, and the controllers
//     then drop the annotation.
//
// Network-programming latency is measured from it. A pod's Ready transition
// is read to the nanosecond from the node agent's
// svcnet.io/ready-transition-time annotation when it agrees with the
// condition's whole-second time.
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

// Compute returns the trigger time of the current sync of the Service key
// (see the package comment) and records the trigger times it saw.
func (t *Tracker) Compute(key string, svc *corev1.Service, pods []*corev1.Pod) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, seen := t.state[key]
	next := serviceState{service: svc.CreationTimestamp.Time, pods: make(map[string]time.Time, len(pods))}
	var min time.Time
	consider := func(ts time.Time) {
		if min.IsZero() || ts.Before(min) {
			min = ts
		}
	}
	for _, p := range pods {
		ts := podTriggerTime(p)
		if ts.IsZero() {
			continue
		}
		next.pods[p.Name] = ts
		if ts.After(old.pods[p.Name]) {
			consider(ts)
		}
	}
	if next.service.After(old.service) {
		consider(next.service)
	}
	t.state[key] = next
	if !seen {
		return next.service
	}
	return min
}

// Forget drops the state of a deleted Service.
func (t *Tracker) Forget(key string) {
	t.mu.Lock()
	delete(t.state, key)
	t.mu.Unlock()
}

// podTriggerTime is the time of the pod's Ready transition, zero while it
// has none. The condition's time is whole seconds (metav1.Time); the node
// agent's podstatus.ReadyTransitionAnnotation gives the same moment to the
// nanosecond and is preferred while it lies within the condition's second,
// which shows that it describes this transition (a writer that changed the
// condition without it leaves a stale value, which is then ignored). Either
// way the trigger time is never later than the transition.
func podTriggerTime(p *corev1.Pod) time.Time {
	c := podutil.GetPodCondition(&p.Status, corev1.PodReady)
	if c == nil || c.LastTransitionTime.IsZero() {
		return time.Time{}
	}
	t := c.LastTransitionTime.Time
	if s, ok := p.Annotations[podstatus.ReadyTransitionAnnotation]; ok {
		if precise, err := time.Parse(time.RFC3339Nano, s); err == nil && !precise.Before(t) && precise.Before(t.Add(time.Second)) {
			return precise
		}
	}
	return t
}
