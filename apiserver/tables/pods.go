package tables

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// nodeUnreachablePodReason is the status reason the node lifecycle
// controller gives pods on a lost node; such a pod being deleted prints as
// Unknown rather than Terminating.
const nodeUnreachablePodReason = "NodeLost"

var podPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
		{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
		{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
		ageColumn,
		{Name: "IP", Type: "string", Priority: 1, Description: podStatusDoc["podIP"]},
		{Name: "Node", Type: "string", Priority: 1, Description: podSpecDoc["nodeName"]},
		{Name: "Nominated Node", Type: "string", Priority: 1, Description: podStatusDoc["nominatedNodeName"]},
		{Name: "Readiness Gates", Type: "string", Priority: 1, Description: podSpecDoc["readinessGates"]},
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, wrongType("Pod", obj)
		}
		return podCells(pod, now), nil
	},
}

var (
	podSucceededConditions = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	podFailedConditions    = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
)

// rowConditions marks finished pods as Completed rows (kubectl hides them
// from some outputs); other objects have none.
func rowConditions(obj runtime.Object) []metav1.TableRowCondition {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return podSucceededConditions
	case corev1.PodFailed:
		return podFailedConditions
	}
	return nil
}

func isRestartable(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// podCells computes READY, STATUS and RESTARTS the way kube-apiserver does:
// STATUS starts from the phase (or status.reason), becomes SchedulingGated,
// Init:<reason>/Init:N/M while init containers run or fail, then the last
// waiting/terminated container reason (CrashLoopBackOff, ContainerCreating,
// Completed, Error, ExitCode:N, Signal:N), Running/NotReady when a container
// still runs after others completed, and Terminating (or Unknown on a lost
// node) for a pod being deleted. Sidecar (restartable init) containers count
// towards READY and RESTARTS.
func podCells(pod *corev1.Pod, now time.Time) []any {
	restarts := 0
	sidecarRestarts := 0
	total := len(pod.Spec.Containers)
	ready := 0
	var lastRestart, lastSidecarRestart time.Time

	phase := pod.Status.Phase
	reason := string(phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	initContainers := map[string]*corev1.Container{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		initContainers[c.Name] = c
		if isRestartable(c) {
			total++
		}
	}

	later := func(cur time.Time, st corev1.ContainerState) time.Time {
		if st.Terminated != nil && cur.Before(st.Terminated.FinishedAt.Time) {
			return st.Terminated.FinishedAt.Time
		}
		return cur
	}

	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		restarts += int(cs.RestartCount)
		lastRestart = later(lastRestart, cs.LastTerminationState)
		sidecar := isRestartable(initContainers[cs.Name])
		if sidecar {
			sidecarRestarts += int(cs.RestartCount)
			lastSidecarRestart = later(lastSidecarRestart, cs.LastTerminationState)
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case sidecar && cs.Started != nil && *cs.Started:
			if cs.Ready {
				ready++
			}
			continue
		case cs.State.Terminated != nil:
			switch {
			case cs.State.Terminated.Reason != "":
				reason = "Init:" + cs.State.Terminated.Reason
			case cs.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", cs.State.Terminated.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", cs.State.Terminated.ExitCode)
			}
			initializing = true
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + cs.State.Waiting.Reason
			initializing = true
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
			initializing = true
		}
		break
	}

	if !initializing || podInitialized(&pod.Status) {
		restarts = sidecarRestarts
		lastRestart = lastSidecarRestart
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			restarts += int(cs.RestartCount)
			lastRestart = later(lastRestart, cs.LastTerminationState)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				reason = cs.State.Waiting.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
				reason = cs.State.Terminated.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", cs.State.Terminated.Signal)
			case cs.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		if reason == "Completed" && hasRunning {
			if podReady(pod.Status.Conditions) {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}

	if pod.DeletionTimestamp != nil && pod.Status.Reason == nodeUnreachablePodReason {
		reason = "Unknown"
	} else if pod.DeletionTimestamp != nil && phase != corev1.PodSucceeded && phase != corev1.PodFailed {
		reason = "Terminating"
	}

	restartsCell := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsCell = fmt.Sprintf("%d (%s ago)", restarts, age(metav1.NewTime(lastRestart), now))
	}

	ip := "<none>"
	if len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != "" {
		ip = pod.Status.PodIPs[0].IP
	}
	node := pod.Spec.NodeName
	if node == "" {
		node = "<none>"
	}
	nominated := pod.Status.NominatedNodeName
	if nominated == "" {
		nominated = "<none>"
	}
	gates := "<none>"
	if len(pod.Spec.ReadinessGates) > 0 {
		trueCount := 0
		for _, g := range pod.Spec.ReadinessGates {
			for _, c := range pod.Status.Conditions {
				if c.Type == g.ConditionType {
					if c.Status == corev1.ConditionTrue {
						trueCount++
					}
					break
				}
			}
		}
		gates = fmt.Sprintf("%d/%d", trueCount, len(pod.Spec.ReadinessGates))
	}

	return []any{pod.Name, fmt.Sprintf("%d/%d", ready, total), reason, restartsCell, age(pod.CreationTimestamp, now),
		ip, node, nominated, gates}
}

func podReady(conds []corev1.PodCondition) bool {
	for _, c := range conds {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func podInitialized(s *corev1.PodStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == corev1.PodInitialized {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
