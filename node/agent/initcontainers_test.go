package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/apiserver/tables"
	"github.com/svcnet/svcnet/node/sandbox"
)

// kubectlCells are the READY and STATUS columns kubectl get pods shows for
// p, from the API server's table printer.
func kubectlCells(t *testing.T, p *v1.Pod) (string, string) {
	t.Helper()
	tbl, err := tables.Convert(schema.GroupResource{Resource: "pods"}, []runtime.Object{p}, tables.Options{})
	if err != nil || len(tbl.Rows) != 1 {
		t.Fatalf("table: %v", err)
	}
	return tbl.Rows[0].Cells[1].(string), tbl.Rows[0].Cells[2].(string)
}

func shc(name, script string) v1.Container {
	return v1.Container{Name: name, Image: "busybox:1.28", Command: []string{"sh", "-c", script}}
}

func condition(p *v1.Pod, t v1.PodConditionType) v1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}

// statusOf is the status of the (init or app) container name.
func statusOf(p *v1.Pod, name string) v1.ContainerStatus {
	for _, cs := range append(append([]v1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if cs.Name == name {
			return cs
		}
	}
	return v1.ContainerStatus{}
}

func waitingReason(cs v1.ContainerStatus) string {
	if cs.State.Waiting == nil {
		return ""
	}
	return cs.State.Waiting.Reason
}

func initPod(name string, inits []v1.Container, app v1.Container) *v1.Pod {
	p := newPod(name, app)
	p.Spec.InitContainers = inits
	return p
}

func (e *env) create(p *v1.Pod) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) touch(pod, file string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.rt.dir, "default_"+pod, file), nil, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// Init containers run one at a time, in order, each to its completion,
// with the environment app containers get; app containers start after
// the last. The status says so at each step, as the kubelet's does.
func TestInitContainersRunInOrder(t *testing.T) {
	e := start(t)
	first := shc("first", "echo first-start $POD >> order; until [ -f gate1 ]; do sleep 0.05; done; echo first-end >> order")
	first.Env = []v1.EnvVar{{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	second := shc("second", "echo second-start >> order; until [ -f gate2 ]; do sleep 0.05; done; echo second-end >> order")
	app := shc("app", "echo app >> order; trap 'exit 0' TERM; while :; do sleep 0.05; done")
	e.create(initPod("ordered", []v1.Container{first, second}, app))
	order := filepath.Join(e.rt.dir, "default_ordered", "order")

	// The first init container runs; nothing else has started.
	e.eventually("the first init container running", func() (bool, string) {
		p := e.pod("ordered")
		if p == nil || len(p.Status.InitContainerStatuses) != 2 {
			return false, p.String()
		}
		_, st := kubectlCells(t, p)
		init := condition(p, v1.PodInitialized)
		f, s, a := statusOf(p, "first"), statusOf(p, "second"), statusOf(p, "app")
		return p.Status.Phase == v1.PodPending && st == "Init:0/2" &&
			init.Status == v1.ConditionFalse && init.Reason == "ContainersNotInitialized" &&
			init.Message == "containers with incomplete status: [first second]" &&
			f.State.Running != nil && !f.Ready && f.Image == "busybox:1.28" && strings.HasPrefix(f.ContainerID, RuntimeScheme) &&
			waitingReason(s) == "PodInitializing" && s.ContainerID == "" &&
			waitingReason(a) == "PodInitializing" && condition(p, v1.PodReady).Status == v1.ConditionFalse, p.Status.String()
	})
	time.Sleep(300 * time.Millisecond)
	if got := readFile(order); got != "first-start ordered\n" {
		t.Fatalf("order before the first completed: %q", got)
	}

	// The first completes: the second runs.
	e.touch("ordered", "gate1")
	e.eventually("the second init container running", func() (bool, string) {
		p := e.pod("ordered")
		if p == nil {
			return false, ""
		}
		_, st := kubectlCells(t, p)
		f, s, a := statusOf(p, "first"), statusOf(p, "second"), statusOf(p, "app")
		init := condition(p, v1.PodInitialized)
		return st == "Init:1/2" && p.Status.Phase == v1.PodPending &&
			f.State.Terminated != nil && f.State.Terminated.Reason == "Completed" && f.State.Terminated.ExitCode == 0 && f.Ready &&
			f.State.Terminated.ContainerID == f.ContainerID &&
			s.State.Running != nil && waitingReason(a) == "PodInitializing" &&
			init.Message == "containers with incomplete status: [second]", p.Status.String()
	})
	time.Sleep(300 * time.Millisecond)
	if got := readFile(order); got != "first-start ordered\nfirst-end\nsecond-start\n" {
		t.Fatalf("order before the second completed: %q", got)
	}

	// The second completes: the app container runs, the pod is initialized.
	e.touch("ordered", "gate2")
	e.eventually("Running", func() (bool, string) {
		p := e.pod("ordered")
		if p == nil {
			return false, ""
		}
		rd, st := kubectlCells(t, p)
		init := condition(p, v1.PodInitialized)
		s := statusOf(p, "second")
		return p.Status.Phase == v1.PodRunning && st == "Running" && rd == "1/1" && ready(p) &&
			init.Status == v1.ConditionTrue && init.Reason == "" && init.Message == "" &&
			s.State.Terminated != nil && s.Ready && statusOf(p, "app").State.Running != nil, p.Status.String()
	})
	if got := readFile(order); got != "first-start ordered\nfirst-end\nsecond-start\nsecond-end\napp\n" {
		t.Errorf("order: %q", got)
	}
}

// A failing init container is retried with the crash back-off while the
// pod stays Pending (restartPolicy OnFailure or Always), until it
// succeeds; under restartPolicy Never the pod fails at once.
func TestInitContainerFailures(t *testing.T) {
	e := start(t)
	app := shc("app", "echo app > app-ran; trap 'exit 0' TERM; while :; do sleep 0.05; done")

	loop := initPod("crashloop", []v1.Container{shc("init", "exit 1")}, app)
	loop.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	retry := initPod("retry", []v1.Container{shc("init", "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; [ $n -ge 2 ]")}, app)
	retry.Spec.RestartPolicy = v1.RestartPolicyAlways
	never := initPod("never", []v1.Container{shc("init", "exit 3")}, app)
	never.Spec.RestartPolicy = v1.RestartPolicyNever
	for _, p := range []*v1.Pod{loop, retry, never} {
		e.create(p)
	}

	e.eventually("Init:CrashLoopBackOff", func() (bool, string) {
		p := e.pod("crashloop")
		if p == nil {
			return false, ""
		}
		_, st := kubectlCells(t, p)
		cs := statusOf(p, "init")
		lt := cs.LastTerminationState.Terminated
		init := condition(p, v1.PodInitialized)
		return st == "Init:CrashLoopBackOff" && p.Status.Phase == v1.PodPending && cs.RestartCount >= 2 &&
			waitingReason(cs) == "CrashLoopBackOff" && strings.Contains(cs.State.Waiting.Message, "restarting failed container=init") &&
			lt != nil && lt.ExitCode == 1 && lt.Reason == "Error" && !cs.Ready &&
			init.Status == v1.ConditionFalse && init.Message == "containers with incomplete status: [init]" &&
			waitingReason(statusOf(p, "app")) == "PodInitializing", p.Status.String()
	})
	e.eventually("retried to success", func() (bool, string) {
		p := e.pod("retry")
		if p == nil {
			return false, ""
		}
		_, st := kubectlCells(t, p)
		cs := statusOf(p, "init")
		lt := cs.LastTerminationState.Terminated
		return p.Status.Phase == v1.PodRunning && st == "Running" && cs.RestartCount == 2 && cs.Ready &&
			cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 && lt != nil && lt.ExitCode == 1 &&
			condition(p, v1.PodInitialized).Status == v1.ConditionTrue, p.Status.String()
	})
	if got := readFile(filepath.Join(e.rt.dir, "default_retry", "count")); got != "3\n" {
		t.Errorf("the retried init container ran %q times", got)
	}
	e.eventually("Failed", func() (bool, string) {
		p := e.pod("never")
		if p == nil {
			return false, ""
		}
		_, st := kubectlCells(t, p)
		cs := statusOf(p, "init")
		rd := condition(p, v1.PodReady)
		return p.Status.Phase == v1.PodFailed && st == "Init:Error" && cs.State.Terminated != nil &&
			cs.State.Terminated.ExitCode == 3 && cs.State.Terminated.Reason == "Error" && cs.RestartCount == 0 &&
			rd.Status == v1.ConditionFalse && rd.Reason == "PodFailed" &&
			condition(p, v1.PodInitialized).Status == v1.ConditionFalse &&
			waitingReason(statusOf(p, "app")) == "PodInitializing", p.Status.String()
	})
	time.Sleep(500 * time.Millisecond)
	if p := e.pod("never"); statusOf(p, "init").RestartCount != 0 || p.Status.Phase != v1.PodFailed {
		t.Errorf("the failed pod changed: %s", p.Status.String())
	}
	for _, name := range []string{"crashloop", "never"} {
		if _, err := os.Stat(filepath.Join(e.rt.dir, "default_"+name, "app-ran")); err == nil {
			t.Errorf("%s: the app container ran", name)
		}
	}
}

// A sidecar (an init container with restartPolicy Always) starts before
// the next init container, which waits for its startup probe; it keeps
// running with the app container, is restarted when it exits (restartPolicy
// Never is the pod's, not the sidecar's), counts in READY, and is stopped
// once the app container completed: the pod Succeeds.
func TestSidecarInitContainer(t *testing.T) {
	e := start(t)
	always := v1.ContainerRestartPolicyAlways
	proxy := shc("proxy", "echo proxy-start >> order; trap 'echo proxy-stop >> order; exit 0' TERM; "+
		"while :; do if [ -f exit-once ]; then rm exit-once; exit 0; fi; sleep 0.05; done")
	proxy.RestartPolicy = &always
	proxy.StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "proxy-ready"}}}, PeriodSeconds: 1}
	setup := shc("setup", "echo setup >> order")
	app := shc("app", "echo app >> order; until [ -f app-done ]; do sleep 0.05; done")
	p := initPod("side", []v1.Container{proxy, setup}, app)
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	g := int64(5)
	p.Spec.TerminationGracePeriodSeconds = &g
	e.create(p)
	order := filepath.Join(e.rt.dir, "default_side", "order")

	e.eventually("the sidecar running, not started", func() (bool, string) {
		p := e.pod("side")
		if p == nil {
			return false, ""
		}
		rd, st := kubectlCells(t, p)
		px := statusOf(p, "proxy")
		return p.Status.Phase == v1.PodPending && st == "Init:0/2" && rd == "0/2" && px.State.Running != nil &&
			px.Started != nil && !*px.Started && waitingReason(statusOf(p, "setup")) == "PodInitializing" &&
			condition(p, v1.PodInitialized).Message == "containers with incomplete status: [proxy setup]", p.Status.String()
	})
	time.Sleep(300 * time.Millisecond)
	if got := readFile(order); got != "proxy-start\n" {
		t.Fatalf("before the sidecar's startup probe succeeded: %q", got)
	}
	e.touch("side", "proxy-ready")
	e.eventually("Running with the sidecar", func() (bool, string) {
		p := e.pod("side")
		if p == nil {
			return false, ""
		}
		rd, st := kubectlCells(t, p)
		px := statusOf(p, "proxy")
		return p.Status.Phase == v1.PodRunning && st == "Running" && rd == "2/2" && ready(p) &&
			px.State.Running != nil && px.Ready && *px.Started && statusOf(p, "setup").State.Terminated != nil &&
			condition(p, v1.PodInitialized).Status == v1.ConditionTrue, p.Status.String()
	})
	if got := readFile(order); got != "proxy-start\nsetup\napp\n" {
		t.Fatalf("order: %q", got)
	}

	// The sidecar exits: it is restarted, the app container runs on.
	e.touch("side", "exit-once")
	e.eventually("the sidecar restarted", func() (bool, string) {
		p := e.pod("side")
		if p == nil {
			return false, ""
		}
		px, a := statusOf(p, "proxy"), statusOf(p, "app")
		lt := px.LastTerminationState.Terminated
		return px.RestartCount == 1 && px.State.Running != nil && lt != nil && lt.ExitCode == 0 &&
			a.State.Running != nil && a.RestartCount == 0 && p.Status.Phase == v1.PodRunning, p.Status.String()
	})

	// The app container completes: the sidecar is stopped, the pod is done.
	e.touch("side", "app-done")
	e.eventually("Succeeded", func() (bool, string) {
		p := e.pod("side")
		if p == nil {
			return false, ""
		}
		_, st := kubectlCells(t, p)
		px := statusOf(p, "proxy")
		return p.Status.Phase == v1.PodSucceeded && st == "Completed" && px.State.Terminated != nil && px.State.Terminated.ExitCode == 0, p.Status.String()
	})
	if got := readFile(order); got != "proxy-start\nsetup\napp\nproxy-start\nproxy-stop\n" {
		t.Errorf("order: %q", got)
	}
}

// A pod being deleted stops its app containers first, then its sidecars in
// reverse order.
func TestSidecarsStopAfterAppContainers(t *testing.T) {
	e := start(t)
	always := v1.ContainerRestartPolicyAlways
	stopper := func(name string, delay string) v1.Container {
		c := shc(name, fmt.Sprintf("trap 'sleep %s; echo %s >> stopped; exit 0' TERM; while :; do sleep 0.05; done", delay, name))
		return c
	}
	s1, s2 := stopper("s1", "0"), stopper("s2", "0")
	s1.RestartPolicy, s2.RestartPolicy = &always, &always
	p := initPod("stops", []v1.Container{s1, s2}, stopper("app", "0.3"))
	g := int64(5)
	p.Spec.TerminationGracePeriodSeconds = &g
	e.create(p)
	e.eventually("Running", func() (bool, string) {
		p := e.pod("stops")
		if p == nil {
			return false, ""
		}
		rd, _ := kubectlCells(t, p)
		return p.Status.Phase == v1.PodRunning && rd == "3/3", p.Status.String()
	})
	cur := e.pod("stops")
	now := metav1.Now()
	cur.DeletionTimestamp, cur.DeletionGracePeriodSeconds = &now, &g
	if _, err := e.client.CoreV1().Pods("default").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("pod deleted", func() (bool, string) { return e.pod("stops") == nil, "" })
	if got := readFile(filepath.Join(e.rt.dir, "default_stops", "stopped")); got != "app\ns2\ns1\n" {
		t.Errorf("stop order %q, want app, s2, s1", got)
	}
}

// adoptingRuntime is a hostRuntime whose pods of the UIDs in adoptable
// have a sandbox an earlier agent left, with the running container
// instances and exit records given by log path.
type adoptingRuntime struct {
	*hostRuntime
	adoptable map[string]bool
	running   map[string]Container
	exits     map[string]sandbox.ExitRecord
}

type adoptingSandbox struct {
	*hostSandbox
	r *adoptingRuntime
}

func (r *adoptingRuntime) AdoptPodSandbox(uid, ns, name string) (PodSandbox, error) {
	if !r.adoptable[uid] {
		return nil, sandbox.ErrNotRunning
	}
	sb := &hostSandbox{dir: filepath.Join(r.dir, ns+"_"+name), adopted: true}
	r.mu.Lock()
	r.sbs[ns+"/"+name] = sb
	r.mu.Unlock()
	return &adoptingSandbox{hostSandbox: sb, r: r}, nil
}

func (r *adoptingRuntime) CleanupExcept(context.Context, func(string) bool) (int, error) {
	return 0, nil
}

func (s *adoptingSandbox) AdoptContainer(logPath string) (Container, error) {
	if c, ok := s.r.running[logPath]; ok {
		return c, nil
	}
	return nil, sandbox.ErrNotRunning
}

func (s *adoptingSandbox) ContainerExit(logPath string) (sandbox.ExitRecord, error) {
	if e, ok := s.r.exits[logPath]; ok {
		return e, nil
	}
	return sandbox.ExitRecord{}, sandbox.ErrNotRunning
}

// A restarted agent that adopts a pod does not run its completed init
// containers again: not in a pod whose app container runs (initialized),
// nor in one whose first init container had completed when the earlier
// agent went (the next one runs then, and the app container after it).
func TestAdoptedPodKeepsInitContainersDone(t *testing.T) {
	dir := t.TempDir()
	rt := &adoptingRuntime{adoptable: map[string]bool{"uid-done": true, "uid-midway": true},
		running: map[string]Container{}, exits: map[string]sandbox.ExitRecord{}}
	started := time.Now().Add(-time.Minute)
	// What the earlier agent left: in "done", the init container completed
	// and the app container runs; in "midway", "one" completed.
	for _, l := range []struct{ pod, c string }{{"done", "init"}, {"midway", "one"}} {
		log := sandbox.LogPath(filepath.Join(dir, "default_"+l.pod), l.c, 0)
		if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(log, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rt.exits[log] = sandbox.ExitRecord{StartedAt: started, FinishedAt: started.Add(time.Second)}
	}
	appLog := sandbox.LogPath(filepath.Join(dir, "default_done"), "app", 0)
	cmd := exec.Command("sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.05; done")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := sandbox.StartProcess(cmd, appLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Stop(0) })
	rt.running[appLog] = proc

	rerun := "echo ran >> init-ran"
	app := shc("app", "echo app >> app-ran; trap 'exit 0' TERM; while :; do sleep 0.05; done")
	done := initPod("done", []v1.Container{shc("init", rerun)}, app)
	midway := initPod("midway", []v1.Container{shc("one", rerun), shc("two", "echo two >> two-ran")}, app)
	client := fake.NewClientset(done, midway)
	e := startAgent(t, client, func(hr *hostRuntime) Runtime {
		hr.dir, rt.hostRuntime = dir, hr
		return rt
	}, func(c *Config) { c.DataDir = dir })

	e.eventually("done: Running, initialized", func() (bool, string) {
		p := e.pod("done")
		if p == nil {
			return false, ""
		}
		_, st := kubectlCells(t, p)
		cs, a := statusOf(p, "init"), statusOf(p, "app")
		return p.Status.Phase == v1.PodRunning && st == "Running" && condition(p, v1.PodInitialized).Status == v1.ConditionTrue &&
			cs.State.Terminated != nil && cs.State.Terminated.Reason == "Completed" && cs.Ready &&
			cs.ContainerID == RuntimeScheme+containerID("uid-done", "init", 0) &&
			a.State.Running != nil && a.RestartCount == 0 && a.State.Running.StartedAt.Time.Equal(proc.StartedAt().Truncate(time.Second)), p.Status.String()
	})
	e.eventually("midway: Running", func() (bool, string) {
		p := e.pod("midway")
		if p == nil {
			return false, ""
		}
		one := statusOf(p, "one")
		return p.Status.Phase == v1.PodRunning && one.State.Terminated != nil && one.Ready && one.RestartCount == 0 &&
			statusOf(p, "two").State.Terminated != nil, p.Status.String()
	})
	for _, f := range []string{"default_done/init-ran", "default_done/app-ran", "default_midway/init-ran"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s: ran again", f)
		}
	}
	if readFile(filepath.Join(dir, "default_midway", "two-ran")) != "two\n" || readFile(filepath.Join(dir, "default_midway", "app-ran")) != "app\n" {
		t.Error("midway: the second init container or the app container did not run")
	}
}
