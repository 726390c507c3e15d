package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// nodeGrace is the --node-monitor-grace-period TestClusterFaults gives
// `svcnet up` (kube-controller-manager's default is 50 s; node agents
// renew their Lease every 10 s).
const nodeGrace = 20 * time.Second

// findProc returns the PID and argv of the process running bin with
// subcommand sub and all of the given arguments.
func findProc(t *testing.T, sub string, args ...string) (int, []string) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err != nil || strings.TrimSuffix(exe, " (deleted)") != bin {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(argv) < 2 || argv[1] != sub {
			continue
		}
		joined := "\x00" + strings.Join(argv, "\x00") + "\x00"
		all := true
		for _, a := range args {
			all = all && strings.Contains(joined, "\x00"+a+"\x00")
		}
		if all {
			return pid, argv
		}
	}
	t.Fatalf("no running `svcnet %s %s`", sub, strings.Join(args, " "))
	return 0, nil
}

// nodeAgentKill: the node agent of a worker gets SIGKILL while two of its
// pods serve HTTP (plus one on another node, all behind a Service), and is
// started again once its Node has gone NotReady. Pass: no request to the
// pods (by pod IP) or to the Service fails at any time; the Node's Ready
// condition turns Unknown after the grace period (tainted unreachable, its
// pods not ready) and back to True after the restart; the restarted agent
// adopts the pods: same UID, same container instance (ID, start time,
// restart count 0, same process), ready again.
func nodeAgentKill(t *testing.T, c *upCluster) {
	ctx := context.Background()
	pods := c.client.CoreV1().Pods("default")
	victim := c.nodeName(3)
	mk := func(name string, node int) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "steady"}},
			Spec: corev1.PodSpec{NodeName: c.nodeName(node), Containers: []corev1.Container{{Name: "steady",
				Image: "jocatalin/kubernetes-bootcamp:v1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1}}}}}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("steady-a", 3)
	mk("steady-b", 3)
	mk("steady-c", 2)
	svc, err := c.client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "steady"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "steady"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	before := map[string]*corev1.Pod{}
	waitUntil(t, 90*time.Second, "steady pods ready", func() (bool, string) {
		for _, n := range []string{"steady-a", "steady-b", "steady-c"} {
			p, err := pods.Get(ctx, n, metav1.GetOptions{})
			if err != nil || !ready(p) {
				return false, n + " not ready"
			}
			before[n] = p
		}
		return true, ""
	})
	// The container's main process, as its shim recorded it.
	mainPID := func(pod string) int {
		b, err := os.ReadFile(filepath.Join(c.dir, "nodes", victim, "pods", "default_"+pod, "logs", "steady", "0.log.shim"))
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			PID int `json:"pid"`
		}
		_ = json.Unmarshal(b, &st)
		return st.PID
	}
	pids := map[string]int{"steady-a": mainPID("steady-a"), "steady-b": mainPID("steady-b")}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: dialFrom(c.clientPod(t, 1, "prober")), DisableKeepAlives: true}}
	targets := map[string]string{
		"Service":        "http://" + svc.Spec.ClusterIP + "/",
		"steady-a (pod)": "http://" + before["steady-a"].Status.PodIP + ":8080/",
		"steady-b (pod)": "http://" + before["steady-b"].Status.PodIP + ":8080/",
	}
	get := func(url string) error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && (resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("bootcamp"))) {
			err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
		}
		return err
	}
	waitUntil(t, 60*time.Second, "the Service answers from the client pod", func() (bool, string) {
		err := get(targets["Service"])
		return err == nil, fmt.Sprint(err)
	})
	counts := map[string]*counter{}
	for k := range targets {
		counts[k] = &counter{}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var outage atomic.Bool
	var duringOutage atomic.Int64
	for k, url := range targets {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				err := get(url)
				counts[k].record(err)
				if err == nil && outage.Load() {
					duringOutage.Add(1)
				}
			}
		})
	}

	pid, argv := findProc(t, "node", "--node-name", victim)
	proxyPID, _ := findProc(t, "proxy", "--hostname-override", victim)
	upPID, err := os.ReadFile(filepath.Join(c.dir, "up.pid"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	outage.Store(true)
	waitUntil(t, 10*time.Second, "node agent gone", func() (bool, string) {
		_, err := os.Stat(fmt.Sprintf("/proc/%d/cmdline", pid))
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(b), ") Z "), "still running"
	})
	nodeCond := func() (corev1.ConditionStatus, *corev1.Node) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return "", nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status, n
			}
		}
		return "", n
	}
	var notReadyAfter time.Duration
	waitUntil(t, nodeGrace+60*time.Second, "Node "+victim+" Ready=Unknown", func() (bool, string) {
		s, _ := nodeCond()
		notReadyAfter = time.Since(killedAt)
		return s == corev1.ConditionUnknown, fmt.Sprintf("Ready=%s", s)
	})
	// The status and the taints are two writes (as kube-controller-manager
	// makes them): the taints follow within a monitor period.
	waitUntil(t, 10*time.Second, "Node "+victim+" tainted "+corev1.TaintNodeUnreachable, func() (bool, string) {
		_, n := nodeCond()
		if n == nil {
			return false, "no node"
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == corev1.TaintNodeUnreachable {
				return true, ""
			}
		}
		return false, fmt.Sprintf("taints %v", n.Spec.Taints)
	})
	if out, err := c.kubectl("get", "node", victim); err != nil || !strings.Contains(out, "NotReady") {
		t.Errorf("kubectl get node %s: want NotReady: %v\n%s", victim, err, out)
	}
	waitUntil(t, 30*time.Second, "pods of the silent node not ready", func() (bool, string) {
		for _, name := range []string{"steady-a", "steady-b"} {
			if p, err := pods.Get(ctx, name, metav1.GetOptions{}); err != nil || ready(p) {
				return false, name + " still ready"
			}
		}
		return true, ""
	})
	time.Sleep(3 * time.Second) // traffic while the node is NotReady

	restartedAt := time.Now()
	logf, err := os.Create(filepath.Join(c.dir, "logs", "node-3-restarted.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// The agent goes back into its node's network namespace and svcnet up's
	// mount namespace (where the pods' named namespaces are mounted).
	agent := start(t, "nsenter", append([]string{"--mount=/proc/" + strings.TrimSpace(string(upPID)) + "/ns/mnt",
		fmt.Sprintf("--net=/proc/%d/ns/net", proxyPID), "--"}, argv...)...)
	t.Cleanup(func() {
		if t.Failed() {
			_ = agent.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, in the log
			time.Sleep(time.Second)
			out := agent.output()
			if len(out) > 6000 {
				out = out[len(out)-6000:]
			}
			t.Logf("restarted node agent's log (tail):\n%s", out)
		}
	})
	var readyAgainAfter time.Duration
	waitUntil(t, 90*time.Second, "Node "+victim+" Ready=True again, untainted", func() (bool, string) {
		select {
		case <-agent.done:
			t.Fatalf("restarted node agent exited:\n%s", agent.output())
		default:
		}
		s, n := nodeCond()
		readyAgainAfter = time.Since(restartedAt)
		return s == corev1.ConditionTrue && n != nil && len(n.Spec.Taints) == 0, fmt.Sprintf("Ready=%s", s)
	})
	waitUntil(t, 60*time.Second, "adopted pods ready again", func() (bool, string) {
		for _, name := range []string{"steady-a", "steady-b"} {
			if p, err := pods.Get(ctx, name, metav1.GetOptions{}); err != nil || !ready(p) {
				return false, name + " not ready"
			}
		}
		return true, ""
	})
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	for _, name := range []string{"steady-a", "steady-b"} {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old, cur := before[name].Status.ContainerStatuses[0], p.Status.ContainerStatuses[0]
		if p.UID != before[name].UID || cur.ContainerID != old.ContainerID || cur.RestartCount != 0 ||
			cur.State.Running == nil || !cur.State.Running.StartedAt.Equal(&old.State.Running.StartedAt) {
			t.Errorf("%s not adopted: before uid %s %s started %v restarts %d; after uid %s %s state %+v restarts %d", name,
				before[name].UID, old.ContainerID, old.State.Running.StartedAt, old.RestartCount, p.UID, cur.ContainerID, cur.State, cur.RestartCount)
		}
		if got := mainPID(name); got != pids[name] {
			t.Errorf("%s: container process %d replaced by %d", name, pids[name], got)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pids[name])); err != nil {
			t.Errorf("%s: container process %d gone", name, pids[name])
		}
	}
	t.Logf("node agent of %s killed (SIGKILL): Node Ready=Unknown %s later (grace %s after its last heartbeat), agent restarted %s after the kill, Node Ready again %s after the restart; pods adopted (same container, restarts 0)",
		victim, notReadyAfter.Round(100*time.Millisecond), nodeGrace, restartedAt.Sub(killedAt).Round(100*time.Millisecond), readyAgainAfter.Round(100*time.Millisecond))
	for k, cnt := range counts {
		t.Logf("requests to %s from a pod on another node: %s", k, cnt)
		if cnt.failed.Load() > 0 || cnt.ok.Load() == 0 {
			t.Errorf("%s: %s", k, cnt)
		}
	}
	t.Logf("%d requests answered between the kill and the end", duringOutage.Load())
}
