package agent

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/node/sandbox"
)

// hostRuntime runs "pods" as plain processes on the host with address
// 127.0.0.1, so the agent's logic can be tested without root.
type hostRuntime struct {
	dir string
	mu  sync.Mutex
	sbs map[string]*hostSandbox
}

type hostSandbox struct {
	dir       string
	spec      sandbox.Spec
	destroyed atomic.Bool // Destroy runs in the pod's worker
	adopted   bool
}

func (r *hostRuntime) RunPodSandbox(_ context.Context, uid, ns, name string, spec SpecFunc) (PodSandbox, error) {
	sb := &hostSandbox{dir: filepath.Join(r.dir, ns+"_"+name)}
	s, err := spec(netip.MustParseAddr("127.0.0.1"), sb.dir)
	if err != nil {
		return nil, err
	}
	sb.spec = s
	if err := os.MkdirAll(sb.dir, 0o755); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.sbs[ns+"/"+name] = sb
	r.mu.Unlock()
	return sb, nil
}

func (s *hostSandbox) IP() netip.Addr    { return netip.MustParseAddr("127.0.0.1") }
func (s *hostSandbox) IPs() []netip.Addr { return []netip.Addr{s.IP()} }
func (s *hostSandbox) Dir() string       { return s.dir }
func (s *hostSandbox) StartContainer(argv, env []string, wd, logPath string) (Container, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.SysProcAttr = env, &syscall.SysProcAttr{Setpgid: true}
	cmd.Dir = wd
	if wd == "" {
		cmd.Dir = s.dir
	}
	return sandbox.StartProcess(cmd, logPath)
}
func (s *hostSandbox) Exec(ctx context.Context, argv, env []string) (int, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, s.dir
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, err
}
func (s *hostSandbox) Destroy(context.Context) error { s.destroyed.Store(true); return nil }

type env struct {
	t      *testing.T
	client *fake.Clientset
	rt     *hostRuntime
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T) *env {
	t.Helper()
	return startWith(t, nil)
}

// startWith starts an agent whose configuration opt may change, with
// objs in the fake API.
func startWith(t *testing.T, opt func(*Config), objs ...runtime.Object) *env {
	t.Helper()
	return startAgent(t, fake.NewClientset(objs...), nil, opt)
}

// startAgent starts an agent on client whose runtime is a hostRuntime, or
// what wrap makes of it, and whose configuration opt may change.
func startAgent(t *testing.T, client *fake.Clientset, wrap func(*hostRuntime) Runtime, opt func(*Config)) *env {
	t.Helper()
	rt := &hostRuntime{dir: t.TempDir(), sbs: map[string]*hostSandbox{}}
	cfg := Config{NodeName: "node-1", NodeIP: netip.MustParseAddr("172.18.0.2"), PodCIDR: netip.MustParsePrefix("10.244.1.0/24"),
		ClusterDNS: []string{"10.96.0.10"}, DataDir: rt.dir, BackoffBase: 200 * time.Millisecond, BackoffMax: 400 * time.Millisecond}
	if opt != nil {
		opt(&cfg)
	}
	var r Runtime = rt
	if wrap != nil {
		r = wrap(rt)
	}
	a, err := New(cfg, client, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, client: client, rt: rt, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			t.Error("agent did not stop")
		}
	})
	return e
}

func (e *env) eventually(what string, f func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ok, s := f()
		if ok {
			return
		}
		last = s
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("timed out waiting for %s; last: %s", what, last)
}

func (e *env) pod(name string) *v1.Pod {
	p, err := e.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func newPod(name string, c v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{c}},
	}
}

func ready(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func TestNodeRegistration(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.eventually("node and lease", func() (bool, string) {
		n, err := e.client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if _, err := e.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-1", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		ok := n.Spec.PodCIDR == "10.244.1.0/24" && len(n.Status.Addresses) == 2 && n.Status.Addresses[0].Address == "172.18.0.2" &&
			n.Labels["kubernetes.io/hostname"] == "node-1"
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				ok = ok && c.Status == v1.ConditionTrue && c.Reason == "KubeletReady"
			}
		}
		return ok, n.String()
	})
}

func TestPodLifecycle(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	svcs := e.client.CoreV1().Services("default")
	_, _ = svcs.Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []v1.ServicePort{{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}}}}, metav1.CreateOptions{})
	_, _ = svcs.Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "myapp"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.3.215", Ports: []v1.ServicePort{{Port: 38080, Protocol: v1.ProtocolTCP}}}}, metav1.CreateOptions{})
	time.Sleep(300 * time.Millisecond) // let the service informer see them
	grace := int64(5)
	p := newPod("myapp-1", v1.Container{Name: "app", Image: "busybox",
		Command: []string{"sh", "-c"}, Args: []string{"env | sort > envdump; echo $(GREETING) $(MY_POD); trap 'echo bye; exit 0' TERM; while :; do sleep 0.05; done"},
		Env:            []v1.EnvVar{{Name: "GREETING", Value: "hello"}, {Name: "MY_POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "ready-flag"}}}, PeriodSeconds: 1},
	})
	p.Spec.TerminationGracePeriodSeconds = &grace
	if _, err := e.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("Running but not Ready", func() (bool, string) {
		p := e.pod("myapp-1")
		return p != nil && p.Status.Phase == v1.PodRunning && !ready(p) && p.Status.PodIP == "127.0.0.1" && p.Status.HostIP == "172.18.0.2", p.String()
	})
	dir := filepath.Join(e.rt.dir, "default_myapp-1")
	var dump string
	e.eventually("env dump", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(dir, "envdump"))
		dump = string(b)
		return strings.Contains(dump, "PATH="), dump
	})
	for _, want := range []string{"MYAPP_SERVICE_HOST=10.96.3.215\n", "MYAPP_PORT_38080_TCP=tcp://10.96.3.215:38080\n",
		"KUBERNETES_SERVICE_PORT_HTTPS=443\n", "HOSTNAME=myapp-1\n", "MY_POD=myapp-1\n", "GREETING=hello\n"} {
		if !strings.Contains(dump, want) {
			t.Errorf("env lacks %q:\n%s", want, dump)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ready-flag"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.eventually("Ready", func() (bool, string) {
		p := e.pod("myapp-1")
		return p != nil && ready(p), p.String()
	})
	if spec := e.rt.sbs["default/myapp-1"].spec; !strings.Contains(string(spec.ResolvConf), "search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n") ||
		!strings.Contains(string(spec.Hosts), "127.0.0.1\tmyapp-1\n") {
		t.Errorf("sandbox files:\n%s\n%s", spec.ResolvConf, spec.Hosts)
	}
	// Graceful deletion: the apiserver sets deletionTimestamp; the agent stops
	// the process and finishes the deletion.
	cur := e.pod("myapp-1")
	now := metav1.Now()
	cur.DeletionTimestamp, cur.DeletionGracePeriodSeconds = &now, &grace
	if _, err := e.client.CoreV1().Pods("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("pod deleted", func() (bool, string) { return e.pod("myapp-1") == nil, "" })
	logb, _ := os.ReadFile(sandbox.LogPath(dir, "app", 0))
	if got := string(sandbox.LogLines(logb, false)); got != "hello myapp-1\nbye\n" {
		t.Errorf("log %q", got)
	}
	if !e.rt.sbs["default/myapp-1"].destroyed.Load() {
		t.Error("sandbox not destroyed")
	}
}

func TestRestartsAndFailures(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	crash := newPod("crash", v1.Container{Name: "c", Image: "busybox", Command: []string{"sh", "-c", "exit 3"}})
	never := newPod("once", v1.Container{Name: "c", Image: "busybox", Command: []string{"true"}})
	never.Spec.RestartPolicy = v1.RestartPolicyNever
	noimg := newPod("noimg", v1.Container{Name: "c", Image: "redis:7"})
	for _, p := range []*v1.Pod{crash, never, noimg} {
		if _, err := e.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually("crash loop", func() (bool, string) {
		p := e.pod("crash")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, ""
		}
		cs := p.Status.ContainerStatuses[0]
		lt := cs.LastTerminationState.Terminated
		return cs.RestartCount >= 2 && lt != nil && lt.ExitCode == 3 && lt.Reason == "Error" && p.Status.Phase == v1.PodRunning, p.Status.String()
	})
	e.eventually("Succeeded", func() (bool, string) {
		p := e.pod("once")
		return p != nil && p.Status.Phase == v1.PodSucceeded && p.Status.ContainerStatuses[0].State.Terminated.Reason == "Completed", p.Status.String()
	})
	e.eventually("ErrImagePull", func() (bool, string) {
		p := e.pod("noimg")
		if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false, ""
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return p.Status.Phase == v1.PodPending && w.Reason == "ErrImagePull" &&
			w.Message == "image redis:7 is not available to svcnet; give the container a command or use a built-in image", w.String()
	})
}

func TestLivenessRestarts(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	g := int64(1)
	p := newPod("live", v1.Container{Name: "c", Image: "busybox", Command: []string{"sh", "-c", "while :; do sleep 0.05; done"},
		LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}, PeriodSeconds: 1, FailureThreshold: 1}})
	p.Spec.TerminationGracePeriodSeconds = &g
	if _, err := e.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("liveness restart", func() (bool, string) {
		p := e.pod("live")
		return p != nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= 1, p.Status.String()
	})
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"$(A)-$(B)": "1-two", "$$(A)": "$(A)", "$(C)": "$(C)", "x$": "x$", "$(A": "$(A", "$A": "$A",
	} {
		if got := Expand(in, lookup); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}
