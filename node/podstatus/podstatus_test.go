package podstatus

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(policy v1.RestartPolicy, names ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: v1.PodSpec{RestartPolicy: policy}}
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return p
}

func TestPhaseAndConditions(t *testing.T) {
	now := time.Unix(2000, 0)
	run := func(n string, ready bool) Container {
		return Container{Name: n, ID: "abc", Running: true, StartedAt: now, Ready: ready, Started: true}
	}
	done := func(n string, code int32) Container {
		return Container{Name: n, Terminated: &Termination{ExitCode: code, StartedAt: now, FinishedAt: now}}
	}
	crash := func(n string) Container {
		return Container{Name: n, WaitingReason: "CrashLoopBackOff", LastTermination: &Termination{ExitCode: 1}, RestartCount: 2}
	}
	cases := []struct {
		name   string
		pod    *v1.Pod
		cs     []Container
		phase  v1.PodPhase
		ready  v1.ConditionStatus
		reason string
		msg    string
	}{
		{"creating", pod("", "a"), nil, v1.PodPending, v1.ConditionFalse, "ContainersNotReady", "containers with unready status: [a]"},
		{"running ready", pod("", "a", "b"), []Container{run("a", true), run("b", true)}, v1.PodRunning, v1.ConditionTrue, "", ""},
		{"running one unready", pod("", "a", "b"), []Container{run("a", true), run("b", false)}, v1.PodRunning, v1.ConditionFalse, "ContainersNotReady", "containers with unready status: [b]"},
		{"crash loop is Running", pod("", "a"), []Container{crash("a")}, v1.PodRunning, v1.ConditionFalse, "ContainersNotReady", "containers with unready status: [a]"},
		{"never: all ok", pod(v1.RestartPolicyNever, "a"), []Container{done("a", 0)}, v1.PodSucceeded, v1.ConditionFalse, "PodCompleted", ""},
		{"never: one failed", pod(v1.RestartPolicyNever, "a", "b"), []Container{done("a", 0), done("b", 2)}, v1.PodFailed, v1.ConditionFalse, "PodFailed", ""},
		{"onfailure: failed restarts", pod(v1.RestartPolicyOnFailure, "a"), []Container{done("a", 1)}, v1.PodRunning, v1.ConditionFalse, "ContainersNotReady", "containers with unready status: [a]"},
		{"never: one still running", pod(v1.RestartPolicyNever, "a", "b"), []Container{run("a", true), done("b", 0)}, v1.PodRunning, v1.ConditionFalse, "ContainersNotReady", "containers with unready status: [b]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := Compute(Input{Pod: c.pod, Containers: c.cs, SandboxReady: true, PodIPs: []string{"10.244.1.5"}, HostIP: "172.18.0.3", Now: now, RuntimeScheme: "svcnet://"})
			if st.Phase != c.phase {
				t.Errorf("phase %s, want %s", st.Phase, c.phase)
			}
			var types []v1.PodConditionType
			for _, cd := range st.Conditions {
				types = append(types, cd.Type)
				if cd.Type == v1.PodReady && (cd.Status != c.ready || cd.Reason != c.reason || cd.Message != c.msg) {
					t.Errorf("Ready = %s %q %q, want %s %q %q", cd.Status, cd.Reason, cd.Message, c.ready, c.reason, c.msg)
				}
			}
			want := []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled}
			if len(types) != len(want) {
				t.Fatalf("conditions %v", types)
			}
			for i := range want {
				if types[i] != want[i] {
					t.Errorf("conditions %v, want %v", types, want)
				}
			}
			if st.PodIP != "10.244.1.5" || st.PodIPs[0].IP != "10.244.1.5" || st.HostIP != "172.18.0.3" || st.QOSClass != v1.PodQOSBestEffort {
				t.Errorf("addresses/qos: %+v", st)
			}
		})
	}
}

func TestContainerStatusDetails(t *testing.T) {
	now := time.Unix(2000, 0)
	p := pod("", "a")
	st := Compute(Input{Pod: p, Now: now, RuntimeScheme: "svcnet://", Containers: []Container{{
		Name: "a", ID: "c1", WaitingReason: "CrashLoopBackOff", WaitingMessage: "back-off 10s restarting failed container=a pod=p_default(uid)",
		LastTermination: &Termination{ExitCode: 137, Signal: 9, StartedAt: now, FinishedAt: now}, RestartCount: 3,
	}}})
	cs := st.ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.RestartCount != 3 {
		t.Errorf("state %+v", cs)
	}
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 137 || lt.Reason != "Error" {
		t.Errorf("last termination %+v", cs.LastTerminationState)
	}
	if cs.ContainerID != "svcnet://c1" || cs.Ready {
		t.Errorf("id/ready %+v", cs)
	}
	// Transition times survive an unchanged status.
	p.Status = st
	later := Compute(Input{Pod: p, Now: now.Add(time.Minute), Containers: []Container{{Name: "a", WaitingReason: "CrashLoopBackOff", LastTermination: &Termination{ExitCode: 1}}}})
	for i, c := range later.Conditions {
		if !c.LastTransitionTime.Equal(&st.Conditions[i].LastTransitionTime) {
			t.Errorf("%s transition time moved", c.Type)
		}
	}
}

func TestFailedAdmission(t *testing.T) {
	st := Compute(Input{Pod: pod("", "a"), Now: time.Unix(1, 0), FailedReason: "NodePorts", FailedMessage: "hostPort 8080/TCP is in use"})
	if st.Phase != v1.PodFailed || st.Reason != "NodePorts" {
		t.Errorf("got %s %s", st.Phase, st.Reason)
	}
}

// The Ready transition's precise time goes with the status that carries the
// transition and stays while the condition keeps its status; the condition
// itself holds the same moment in whole seconds.
func TestReadyTransition(t *testing.T) {
	p := pod("", "a")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.UTC)
	notReady := Compute(Input{Pod: p, Now: t0})
	v, ok := ReadyTransition(p, notReady, t0)
	if !ok || v != "2026-01-02T03:04:05.6789Z" {
		t.Fatalf("first status: %q %v", v, ok)
	}
	p.Status, p.Annotations = notReady, map[string]string{ReadyTransitionAnnotation: v}

	// Still not ready a second later: the stored value is kept.
	t1 := t0.Add(1500 * time.Millisecond)
	again := Compute(Input{Pod: p, Now: t1})
	if v2, ok := ReadyTransition(p, again, t1); !ok || v2 != v {
		t.Fatalf("unchanged Ready: %q %v, want %q", v2, ok, v)
	}

	// The container becomes ready: the new moment, within the condition's second.
	t2 := t0.Add(2250 * time.Millisecond)
	ready := Compute(Input{Pod: p, Now: t2, Containers: []Container{{Name: "a", ID: "x", Running: true, StartedAt: t2, Ready: true, Started: true}}})
	v3, ok := ReadyTransition(p, ready, t2)
	if !ok || v3 != "2026-01-02T03:04:07.9289Z" {
		t.Fatalf("Ready transition: %q %v", v3, ok)
	}
	var cond v1.PodCondition
	for _, c := range ready.Conditions {
		if c.Type == v1.PodReady {
			cond = c
		}
	}
	precise, _ := time.Parse(time.RFC3339Nano, v3)
	if cond.Status != v1.ConditionTrue || !cond.LastTransitionTime.Time.Equal(precise.Truncate(time.Second)) {
		t.Fatalf("condition %+v does not match %s", cond, v3)
	}

	// No stored value and no transition: nothing to write.
	p2 := pod("", "a")
	p2.Status = notReady
	if v, ok := ReadyTransition(p2, notReady, t1); ok {
		t.Fatalf("no transition, no stored value: got %q", v)
	}
}

// Init containers, as the kubelet reports them: not started yet they and
// the app containers wait in PodInitializing; a regular one is ready once
// completed; the Initialized condition names the incomplete ones; the phase
// is Pending until the app containers run, Failed when one failed under
// restartPolicy Never; a sidecar is done once started and counts for
// readiness.
func TestInitContainers(t *testing.T) {
	now := time.Unix(2000, 0)
	always := v1.ContainerRestartPolicyAlways
	withInit := func(policy v1.RestartPolicy, sidecar bool) *v1.Pod {
		p := pod(policy, "app")
		p.Spec.InitContainers = []v1.Container{{Name: "a", Image: "busybox"}, {Name: "b", Image: "busybox"}}
		if sidecar {
			p.Spec.InitContainers[0].RestartPolicy = &always
		}
		return p
	}
	run := func(n string, ready bool) Container {
		return Container{Name: n, ID: n + "1", Running: true, StartedAt: now, Ready: ready, Started: true}
	}
	done := func(n string, code int32) Container {
		return Container{Name: n, ID: n + "1", Terminated: &Termination{ExitCode: code, StartedAt: now, FinishedAt: now}}
	}
	crash := Container{Name: "a", ID: "a1", WaitingReason: "CrashLoopBackOff", LastTermination: &Termination{ExitCode: 1}, RestartCount: 2}
	notStarted := run("a", false)
	notStarted.Started = false
	cases := []struct {
		name        string
		pod         *v1.Pod
		cs          []Container
		phase       v1.PodPhase
		initialized v1.ConditionStatus
		initMsg     string
		states      string // init a, init b, app
		ready       [2]bool
		podReady    string // Ready's reason
	}{
		{"nothing started", withInit("", false), nil, v1.PodPending, v1.ConditionFalse, "containers with incomplete status: [a b]",
			"PodInitializing PodInitializing PodInitializing", [2]bool{}, "ContainersNotReady"},
		{"first running", withInit("", false), []Container{run("a", true)}, v1.PodPending, v1.ConditionFalse, "containers with incomplete status: [a b]",
			"running PodInitializing PodInitializing", [2]bool{}, "ContainersNotReady"},
		{"second running", withInit("", false), []Container{done("a", 0), run("b", false)}, v1.PodPending, v1.ConditionFalse, "containers with incomplete status: [b]",
			"Completed running PodInitializing", [2]bool{true, false}, "ContainersNotReady"},
		{"crash loop", withInit(v1.RestartPolicyOnFailure, false), []Container{crash}, v1.PodPending, v1.ConditionFalse, "containers with incomplete status: [a b]",
			"CrashLoopBackOff PodInitializing PodInitializing", [2]bool{}, "ContainersNotReady"},
		{"failed under Never", withInit(v1.RestartPolicyNever, false), []Container{done("a", 1)}, v1.PodFailed, v1.ConditionFalse, "containers with incomplete status: [a b]",
			"Error PodInitializing PodInitializing", [2]bool{}, "PodFailed"},
		{"initialized", withInit("", false), []Container{done("a", 0), done("b", 0), run("app", true)}, v1.PodRunning, v1.ConditionTrue, "",
			"Completed Completed running", [2]bool{true, true}, ""},
		{"succeeded", withInit(v1.RestartPolicyNever, false), []Container{done("a", 0), done("b", 0), done("app", 0)}, v1.PodSucceeded, v1.ConditionTrue, "",
			"Completed Completed Completed", [2]bool{true, true}, "PodCompleted"},
		{"sidecar not started", withInit("", true), []Container{notStarted}, v1.PodPending, v1.ConditionFalse, "containers with incomplete status: [a b]",
			"running PodInitializing PodInitializing", [2]bool{}, "ContainersNotReady"},
		{"sidecar started", withInit("", true), []Container{run("a", false), run("b", false)}, v1.PodPending, v1.ConditionFalse, "containers with incomplete status: [b]",
			"running running PodInitializing", [2]bool{}, "ContainersNotReady"},
		{"sidecar unready", withInit("", true), []Container{run("a", false), done("b", 0), run("app", true)}, v1.PodRunning, v1.ConditionTrue, "",
			"running Completed running", [2]bool{false, true}, "ContainersNotReady"},
		{"sidecar ready", withInit("", true), []Container{run("a", true), done("b", 0), run("app", true)}, v1.PodRunning, v1.ConditionTrue, "",
			"running Completed running", [2]bool{true, true}, ""},
		{"sidecar restarting after init", withInit("", true), []Container{{Name: "a", ID: "a2", WaitingReason: "CrashLoopBackOff", LastTermination: &Termination{ExitCode: 1}}, done("b", 0), run("app", true)},
			v1.PodRunning, v1.ConditionTrue, "", "CrashLoopBackOff Completed running", [2]bool{false, true}, "ContainersNotReady"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := Compute(Input{Pod: c.pod, Containers: c.cs, SandboxReady: true, Now: now, RuntimeScheme: "svcnet://"})
			if st.Phase != c.phase {
				t.Errorf("phase %s, want %s", st.Phase, c.phase)
			}
			var states []string
			for _, cs := range append(append([]v1.ContainerStatus(nil), st.InitContainerStatuses...), st.ContainerStatuses...) {
				switch {
				case cs.State.Running != nil:
					states = append(states, "running")
				case cs.State.Terminated != nil:
					states = append(states, cs.State.Terminated.Reason)
				default:
					states = append(states, cs.State.Waiting.Reason)
				}
			}
			if got := strings.Join(states, " "); got != c.states {
				t.Errorf("states %q, want %q", got, c.states)
			}
			if len(st.InitContainerStatuses) != 2 || st.InitContainerStatuses[0].Name != "a" || st.InitContainerStatuses[1].Name != "b" {
				t.Fatalf("init container statuses %+v", st.InitContainerStatuses)
			}
			for i, want := range c.ready {
				if st.InitContainerStatuses[i].Ready != want {
					t.Errorf("init container %d ready %v, want %v", i, st.InitContainerStatuses[i].Ready, want)
				}
			}
			for _, cd := range st.Conditions {
				switch cd.Type {
				case v1.PodInitialized:
					reason := ""
					switch {
					case c.initialized == v1.ConditionFalse:
						reason = "ContainersNotInitialized"
					case c.phase == v1.PodSucceeded:
						reason = "PodCompleted"
					}
					if cd.Status != c.initialized || cd.Message != c.initMsg || cd.Reason != reason {
						t.Errorf("Initialized %s %q %q, want %s %q %q", cd.Status, cd.Reason, cd.Message, c.initialized, reason, c.initMsg)
					}
				case v1.PodReady:
					if cd.Reason != c.podReady {
						t.Errorf("Ready %s %q %q, want reason %q", cd.Status, cd.Reason, cd.Message, c.podReady)
					}
				}
			}
		})
	}
}
