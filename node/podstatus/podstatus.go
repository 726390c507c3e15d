// Package podstatus computes a pod's status from what the node agent knows
// about its containers, with the kubelet's rules for the phase, the
// conditions (PodReadyToStartContainers, Initialized, Ready,
// ContainersReady, PodScheduled, in the kubelet's order) and the container
// statuses.
//
// Condition transition times are kept from the previous status while a
// condition's status does not change, so repeated updates do not churn.
package podstatus

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Termination describes a finished container instance.
type Termination struct {
	ExitCode   int32
	Signal     int32
	Reason     string // "Completed" or "Error" when empty
	Message    string
	StartedAt  time.Time
	FinishedAt time.Time
}

// Container is the node agent's view of one container of the pod.
type Container struct {
	Name string
	// ID of the current (or last) instance, without the runtime scheme.
	ID string
	// Exactly one of Running (with StartedAt), Terminated or Waiting
	// describes the current state. With none, the container is waiting in
	// ContainerCreating.
	Running    bool
	StartedAt  time.Time
	Terminated *Termination
	// Waiting reason and message, e.g. CrashLoopBackOff or ErrImagePull.
	WaitingReason, WaitingMessage string
	LastTermination               *Termination
	RestartCount                  int32
	// Ready is the readiness probe's verdict (true if there is none).
	Ready bool
	// Started is the startup probe's verdict (true if there is none).
	Started bool
}

// Input is everything the status depends on.
type Input struct {
	Pod *v1.Pod
	// Containers in any order; missing ones count as ContainerCreating.
	Containers []Container
	// SandboxReady is true once the pod's namespaces and network exist.
	SandboxReady bool
	PodIPs       []string
	HostIP       string
	// HostIPs are all the node's InternalIPs, HostIP first (dual-stack);
	// empty means just HostIP.
	HostIPs   []string
	StartTime time.Time
	Now       time.Time
	// RuntimeScheme prefixes container IDs ("svcnet://").
	RuntimeScheme string
	// Failed, when set, makes the pod Failed with this reason and message
	// (e.g. rejected at admission for a hostPort conflict).
	FailedReason, FailedMessage string
}

// ReadyTransitionAnnotation holds the moment the pod's Ready condition last
// changed, in RFC 3339 with nanoseconds. The condition's own
// lastTransitionTime is a metav1.Time, which the API serializes in whole
// seconds; network-programming latency (the EndpointSlice controller's
// last-change-trigger-time, the proxies' histogram) is measured from this
// time, so the truncation would add up to a second to every observation.
// The node agent writes it with the status that carries the transition;
// readers use it only while it falls within the condition's second.
const ReadyTransitionAnnotation = "svcnet.io/ready-transition-time"

// ReadyTransition returns the value of ReadyTransitionAnnotation for the new
// status st of pod (whose Status is still the stored one), now being the
// time st describes: now when st changes the Ready condition's status, the
// stored value while it does not, and false when there is none to write (no
// Ready condition, or no recorded transition to keep).
func ReadyTransition(pod *v1.Pod, st v1.PodStatus, now time.Time) (string, bool) {
	var before, after *v1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			before = &pod.Status.Conditions[i]
		}
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1.PodReady {
			after = &st.Conditions[i]
		}
	}
	if after == nil {
		return "", false
	}
	if before == nil || before.Status != after.Status {
		return now.UTC().Format(time.RFC3339Nano), true
	}
	v, ok := pod.Annotations[ReadyTransitionAnnotation]
	return v, ok
}

// Compute returns the pod's new status.
func Compute(in Input) v1.PodStatus {
	pod := in.Pod
	prev := pod.Status
	byName := map[string]Container{}
	for _, c := range in.Containers {
		byName[c.Name] = c
	}
	st := v1.PodStatus{QOSClass: qosClass(pod)}
	if in.HostIP != "" {
		st.HostIP = in.HostIP
		st.HostIPs = []v1.HostIP{{IP: in.HostIP}}
		for _, ip := range in.HostIPs {
			if ip != in.HostIP {
				st.HostIPs = append(st.HostIPs, v1.HostIP{IP: ip})
			}
		}
	}
	if len(in.PodIPs) > 0 {
		st.PodIP = in.PodIPs[0]
		for _, ip := range in.PodIPs {
			st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip})
		}
	}
	if !in.StartTime.IsZero() {
		t := metav1.NewTime(in.StartTime.Truncate(time.Second))
		st.StartTime = &t
	}
	// A pod with init containers shows PodInitializing for the containers
	// not started yet (init and app ones), as the kubelet does.
	defaultWaiting := "ContainerCreating"
	if len(pod.Spec.InitContainers) > 0 {
		defaultWaiting = "PodInitializing"
	}
	convert := func(spec v1.Container) v1.ContainerStatus {
		c, ok := byName[spec.Name]
		cs := v1.ContainerStatus{Name: spec.Name, Image: spec.Image, ImageID: "", RestartCount: c.RestartCount}
		if ok && c.ID != "" {
			cs.ContainerID = in.RuntimeScheme + c.ID
		}
		switch {
		case ok && c.Running:
			cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt.Truncate(time.Second))}
			cs.Ready = c.Ready && c.Started
			started := c.Started
			cs.Started = &started
		case ok && c.Terminated != nil:
			cs.State.Terminated = terminated(c.Terminated, cs.ContainerID)
			f := false
			cs.Started = &f
		default:
			reason, msg := defaultWaiting, ""
			if ok && c.WaitingReason != "" {
				reason, msg = c.WaitingReason, c.WaitingMessage
			}
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: msg}
			f := false
			cs.Started = &f
		}
		if ok && c.LastTermination != nil {
			cs.LastTerminationState.Terminated = terminated(c.LastTermination, "")
		}
		return cs
	}
	// Init containers: a regular one is ready once it has completed (exit
	// code 0), and done then; a sidecar (restartPolicy Always) is done once
	// it has started, and its readiness counts for the pod's, as an app
	// container's does.
	var unready, incomplete []string
	for _, spec := range pod.Spec.InitContainers {
		cs := convert(spec)
		if IsSidecar(&spec) {
			if !cs.Ready {
				unready = append(unready, spec.Name)
			}
			if cs.Started == nil || !*cs.Started {
				incomplete = append(incomplete, spec.Name)
			}
		} else {
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
			if !cs.Ready {
				incomplete = append(incomplete, spec.Name)
			}
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	// Once an app container has started, the pod has been initialized (a
	// sidecar restarting later does not take that back).
	appStarted := false
	for _, spec := range pod.Spec.Containers {
		cs := convert(spec)
		if c, ok := byName[spec.Name]; ok && c.ID != "" {
			appStarted = true
		}
		if !cs.Ready {
			unready = append(unready, spec.Name)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	initialized := appStarted || len(incomplete) == 0
	st.Phase = phase(pod, st.InitContainerStatuses, st.ContainerStatuses, initialized)
	if in.FailedReason != "" {
		st.Phase = v1.PodFailed
		st.Reason, st.Message = in.FailedReason, in.FailedMessage
	}

	cond := func(t v1.PodConditionType, ok bool, reason, msg string) v1.PodCondition {
		s := v1.ConditionFalse
		if ok {
			s = v1.ConditionTrue
		}
		c := v1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(in.Now.Truncate(time.Second))}
		for _, p := range prev.Conditions {
			if p.Type == t && p.Status == s {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
		return c
	}
	containersReady := len(unready) == 0
	readyReason, readyMsg := "", ""
	if !containersReady {
		readyReason = "ContainersNotReady"
		readyMsg = fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	}
	switch st.Phase {
	case v1.PodSucceeded:
		containersReady = false
		readyReason, readyMsg = "PodCompleted", ""
	case v1.PodFailed:
		containersReady = false
		readyReason, readyMsg = "PodFailed", ""
	}
	initReason, initMsg := "", ""
	switch {
	case st.Phase == v1.PodSucceeded:
		initialized, initReason = true, "PodCompleted"
	case !initialized:
		initReason = "ContainersNotInitialized"
		initMsg = fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " "))
	}
	podReady := containersReady && readinessGatesPass(pod)
	podReadyReason, podReadyMsg := readyReason, readyMsg
	if containersReady && !podReady {
		podReadyReason, podReadyMsg = "ReadinessGatesNotReady", "corresponding condition of pod readiness gate is not true"
	}
	st.Conditions = []v1.PodCondition{
		cond(v1.PodReadyToStartContainers, in.SandboxReady, "", ""),
		cond(v1.PodInitialized, initialized, initReason, initMsg),
		cond(v1.PodReady, podReady, podReadyReason, podReadyMsg),
		cond(v1.ContainersReady, containersReady, readyReason, readyMsg),
		cond(v1.PodScheduled, true, "", ""),
	}
	// Conditions set by others (readiness gates, DisruptionTarget) are kept.
	own := map[v1.PodConditionType]bool{v1.PodReadyToStartContainers: true, v1.PodInitialized: true, v1.PodReady: true, v1.ContainersReady: true, v1.PodScheduled: true}
	for _, p := range prev.Conditions {
		if !own[p.Type] {
			st.Conditions = append(st.Conditions, p)
		}
	}
	return st
}

func terminated(t *Termination, id string) *v1.ContainerStateTerminated {
	reason := t.Reason
	if reason == "" {
		reason = "Completed"
		if t.ExitCode != 0 {
			reason = "Error"
		}
	}
	return &v1.ContainerStateTerminated{
		ExitCode: t.ExitCode, Signal: t.Signal, Reason: reason, Message: t.Message,
		StartedAt: metav1.NewTime(t.StartedAt.Truncate(time.Second)), FinishedAt: metav1.NewTime(t.FinishedAt.Truncate(time.Second)),
		ContainerID: id,
	}
}

func readinessGatesPass(pod *v1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		ok := false
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == v1.ConditionTrue {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// IsSidecar tells whether an init container is a sidecar: restartPolicy
// Always, kept running for the pod's life (Kubernetes' native sidecars).
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// phase follows the kubelet's getPhase. Regular init containers: one that
// has not completed keeps the pod Pending, one that failed makes it Failed
// under restartPolicy Never (it is restarted otherwise). Sidecars count as
// app containers, except that one not started yet keeps a pod not yet
// initialized Pending and a stopped one is not counted. App containers: one
// waiting for its first start keeps the pod Pending; a running one makes it
// Running; when all have stopped, the restart policy decides between
// Running (they will restart), Succeeded and Failed.
func phase(pod *v1.Pod, inits, statuses []v1.ContainerStatus, initialized bool) v1.PodPhase {
	policy := pod.Spec.RestartPolicy
	if policy == "" {
		policy = v1.RestartPolicyAlways
	}
	pendingInit, failedInit, pendingSidecars := 0, 0, 0
	var running, waiting, stopped, succeeded int
	for i, cs := range inits {
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			switch {
			case cs.State.Running != nil:
				running++
				if cs.Started == nil || !*cs.Started {
					pendingSidecars++
				}
			case cs.State.Waiting != nil && cs.LastTerminationState.Terminated == nil:
				waiting++
				pendingSidecars++
			}
			continue
		}
		switch {
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			if cs.LastTerminationState.Terminated.ExitCode != 0 {
				failedInit++
			}
		default:
			pendingInit++
		}
	}
	for _, cs := range statuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
				if cs.LastTerminationState.Terminated.ExitCode == 0 {
					succeeded++
				}
			} else {
				waiting++
			}
		}
	}
	switch {
	case failedInit > 0 && policy == v1.RestartPolicyNever:
		return v1.PodFailed
	case pendingInit > 0 || (pendingSidecars > 0 && !initialized) || waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		if policy == v1.RestartPolicyAlways {
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		if policy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
		return v1.PodRunning
	}
	return v1.PodPending
}

// qosClass is Guaranteed when every container has equal, non-empty cpu and
// memory requests and limits; BestEffort when none has any; else Burstable.
func qosClass(pod *v1.Pod) v1.PodQOSClass {
	any, guaranteed := false, true
	for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
			any = true
		}
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			l, okl := c.Resources.Limits[r]
			q, okq := c.Resources.Requests[r]
			if !okl || (okq && q.Cmp(l) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}
