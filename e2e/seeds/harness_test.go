package seeds

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/internal/uptest"
)

// bin is the svcnet binary TestMain builds; empty when the suite cannot run.
var bin string

// kubectlBin is the kubectl the suite drives (see TestMain).
var kubectlBin = "kubectl"

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "svcnet-e2e-seeds-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if os.Geteuid() == 0 && !isShort() {
			out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", filepath.Join(dir, "svcnet"),
				"github.com/svcnet/svcnet/cmd/svcnet").CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "go build ./cmd/svcnet: %v\n%s", err, out)
				return 1
			}
			bin = filepath.Join(dir, "svcnet")
			// SVCNET_E2E_KUBECTL=svcnet drives every step with the kubectl
			// built into svcnet (a link named kubectl, as scripts/install.sh
			// makes on a machine without one) instead of the one on PATH.
			if os.Getenv("SVCNET_E2E_KUBECTL") == "svcnet" {
				kubectlBin = filepath.Join(dir, "kubectl")
				if err := os.Symlink(bin, kubectlBin); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 1
				}
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

func isShort() bool {
	for _, a := range os.Args[1:] {
		if a == "-test.short" || a == "-test.short=true" {
			return true
		}
	}
	return false
}

// cluster is one running `svcnet up --nodes 3` in its lab namespace.
type cluster struct {
	mode    string
	lab     *testbed.NetNS
	host    *testbed.NetNS // 192.0.2.10, a machine outside the cluster
	dir     string
	prefix  string
	upPID   string
	kubecfg string
}

const nodes = 3

// nodeIP is the address `svcnet up` gives node i (1-based); nodeIP6 its
// IPv6 address (--ip-family dual or ipv6).
func nodeIP(i int) string  { return fmt.Sprintf("172.18.0.%d", i+1) }
func nodeIP6(i int) string { return fmt.Sprintf("fd00:172:18::%x", i+1) }

var transcriptMu sync.Mutex

// record appends a command and its output to $SVCNET_E2E_TRANSCRIPT.
func record(where string, args []string, out string) {
	path := os.Getenv("SVCNET_E2E_TRANSCRIPT")
	if path == "" {
		return
	}
	transcriptMu.Lock()
	defer transcriptMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "### [%s] %s\n%s\n", where, strings.Join(args, " "), out)
}

func runCmd(timeout time.Duration, where string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v", timeout)
	}
	return string(out), err
}

// startCluster runs `svcnet up --ip-family dual` (IPv4 primary: the seeds'
// Services stay IPv4 unless they ask for both families) in a new lab
// namespace and waits for the export KUBECONFIG line. Everything is torn
// down by t.Cleanup.
func startCluster(t *testing.T, mode string) *cluster {
	t.Helper()
	return startClusterFamily(t, mode, "dual", nodes, "172.18.0.0/24,fd00:172:18::/64")
}

// startClusterFamily runs `svcnet up --ip-family family --nodes n` with
// --nodeport-addresses npAddrs.
func startClusterFamily(t *testing.T, mode, family string, n int, npAddrs string) *cluster {
	t.Helper()
	lab := testbed.NewNetNS(t, "seeds-"+mode)
	var rb [2]byte
	_, _ = rand.Read(rb[:])
	c := &cluster{mode: mode, lab: lab, dir: t.TempDir(), prefix: "e2e" + hex.EncodeToString(rb[:])}
	if p := os.Getenv("SVCNET_E2E_PREFIX"); p != "" {
		// For captured outputs that name nodes as a user's cluster does
		// (svcnet-worker); one mode at a time then.
		c.prefix = p
	}
	up := uptest.Start(t, uptest.Options{Bin: bin, Lab: lab, DataDir: c.dir, LogPath: filepath.Join(c.dir, "up.log"),
		Args: []string{"--nodes", fmt.Sprint(n), "--proxy-mode", mode, "--ip-family", family, "--prefix", c.prefix,
			"--nodeport-addresses", npAddrs},
		Ready: 120 * time.Second, Label: "[" + mode + "]"})
	c.kubecfg = up.Kubeconfig
	c.upPID = up.PID(t)

	// A machine outside the cluster network, still inside the sandbox:
	// 192.0.2.10 serves HTTP on port 80 (the seed's 47.93.22.98).
	c.host = testbed.NewNetNS(t, "seeds-host")
	testbed.Link(t, lab, "seedhost", "192.0.2.1/24", c.host, "eth0", "192.0.2.10/24")
	c.host.MustRun("ip", "route", "add", "default", "via", "192.0.2.1")
	err := c.host.Do(func() error {
		ln, err := net.Listen("tcp", "192.0.2.10:80")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "external host 192.0.2.10 | client %s\n", r.RemoteAddr)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		return nil
	})
	if err != nil {
		t.Fatalf("[%s] test host: %v", mode, err)
	}
	return c
}

// nodeNS is the network namespace of node i.
func (c *cluster) nodeNS(i int) string { return fmt.Sprintf("%s-node-%d", c.prefix, i) }

// kubectl runs the real kubectl against the cluster (from the lab namespace,
// where the apiserver listens on the node bridge).
// Its standard error (warnings such as kube-apiserver's deprecation notice
// for v1 Endpoints) is returned only when kubectl fails.
func (c *cluster) kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.lab.Name, kubectlBin, "--kubeconfig", c.kubecfg}, args...)...)
	cmd.WaitDelay = 2 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after 60s")
	}
	out := string(stdout)
	record(c.mode+" machine", append([]string{"kubectl"}, args...), stderr.String()+out)
	if err != nil {
		out = stderr.String() + out
	}
	return out, err
}

// nodeName is the name `svcnet up` gives node i (as kind does).
func (c *cluster) nodeName(i int) string {
	switch i {
	case 1:
		return c.prefix + "-control-plane"
	case 2:
		return c.prefix + "-worker"
	}
	return fmt.Sprintf("%s-worker%d", c.prefix, i-1)
}

// onNode runs a command on node i as a user does: svcnet node-exec.
func (c *cluster) onNode(i int, args ...string) (string, error) {
	full := append([]string{bin, "node-exec", "--data-dir", c.dir, c.nodeName(i), "--"}, args...)
	out, err := runCmd(30*time.Second, "node", full...)
	record(fmt.Sprintf("%s node %d", c.mode, i), args, out)
	return out, err
}

// onLab runs a command on the machine hosting the cluster (outside every node).
func (c *cluster) onLab(args ...string) (string, error) {
	out, err := c.lab.RunContext(context.Background(), args...)
	record(c.mode+" machine", args, out)
	return out, err
}

// inPod runs a command inside a pod with the real `kubectl exec`, through
// the apiserver's pods/exec proxy to the node agent (as a user would).
func (c *cluster) inPod(ns, pod string, args ...string) (string, error) {
	return c.kubectl(append([]string{"exec", "-n", ns, pod, "--"}, args...)...)
}

// scenario carries a subtest's context into failure messages.
type scenario struct {
	*testing.T
	c    *cluster
	name string
}

func (s *scenario) failf(cmd []string, out string, err error, format string, a ...any) {
	s.Helper()
	s.Fatalf("scenario %q, mode %s: %s\ncommand: %s\nerror: %v\noutput:\n%s", s.name, s.c.mode, fmt.Sprintf(format, a...), strings.Join(cmd, " "), err, out)
}

func (s *scenario) errorf(cmd []string, out string, format string, a ...any) {
	s.Helper()
	s.Errorf("scenario %q, mode %s: %s\ncommand: %s\noutput:\n%s", s.name, s.c.mode, fmt.Sprintf(format, a...), strings.Join(cmd, " "), out)
}

// kubectl runs kubectl and fails the scenario when it fails.
func (s *scenario) kubectl(args ...string) string {
	s.Helper()
	out, err := s.c.kubectl(args...)
	if err != nil {
		s.failf(append([]string{"kubectl"}, args...), out, err, "kubectl failed")
	}
	return out
}

// kubectlFails runs kubectl expecting a refusal and returns its output.
func (s *scenario) kubectlFails(args ...string) string {
	s.Helper()
	out, err := s.c.kubectl(args...)
	if err == nil {
		s.failf(append([]string{"kubectl"}, args...), out, nil, "kubectl succeeded; want a refusal")
	}
	return out
}

func (s *scenario) apply(file string) string {
	s.Helper()
	abs, _ := filepath.Abs(filepath.Join("testdata", file))
	return s.kubectl("apply", "-f", abs)
}

func (s *scenario) onNode(i int, args ...string) string {
	s.Helper()
	out, err := s.c.onNode(i, args...)
	if err != nil {
		s.failf(append([]string{"(node " + fmt.Sprint(i) + ")"}, args...), out, err, "command failed on node %d", i)
	}
	return out
}

func (s *scenario) inPod(pod string, args ...string) string {
	s.Helper()
	out, err := s.c.inPod("default", pod, args...)
	if err != nil {
		s.failf(append([]string{"kubectl exec " + pod + " --"}, args...), out, err, "command failed in pod %s", pod)
	}
	return out
}

// eventually retries f (which returns the command, its output and whether
// the condition holds) until it holds or the timeout passes, then fails with
// the last command and output.
func (s *scenario) eventually(timeout time.Duration, what string, f func() ([]string, string, bool)) string {
	s.Helper()
	deadline := time.Now().Add(timeout)
	for {
		cmd, out, ok := f()
		if ok {
			return out
		}
		if time.Now().After(deadline) {
			s.failf(cmd, out, nil, "%s: not true after %v", what, timeout)
		}
		time.Sleep(time.Second)
	}
}

// podsOf lists the names and IPs of the Running pods matching a selector.
func (s *scenario) podsOf(selector string) (names, ips []string) {
	s.Helper()
	out := s.kubectl("get", "pods", "-l", selector, "-o",
		`jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name} {.status.podIP} {.metadata.deletionTimestamp}{"\n"}{end}`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			names = append(names, f[0])
			ips = append(ips, f[1])
		}
	}
	return names, ips
}

// waitPods waits until exactly n Running, Ready, not-terminating pods match
// the selector and returns their names and IPs.
func (s *scenario) waitPods(selector string, n int) (names, ips []string) {
	s.Helper()
	s.eventually(90*time.Second, fmt.Sprintf("%d ready pods with %s", n, selector), func() ([]string, string, bool) {
		args := []string{"get", "pods", "-l", selector, "-o", "wide"}
		out, _ := s.c.kubectl(args...)
		names, ips = s.podsOf(selector)
		ready := 0
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[1] == "1/1" && f[2] == "Running" {
				ready++
			}
		}
		return append([]string{"kubectl"}, args...), out, len(names) == n && ready == n && strings.Count(out, "\n") == n+1
	})
	return names, ips
}

// curlSpread curls url from node 1 until every wanted substring has been
// seen in some answer (at most tries times) and returns the answers.
func (s *scenario) curlSpread(node int, url string, want []string, tries int) []string {
	s.Helper()
	seen := map[string]bool{}
	var answers []string
	for i := 0; i < tries && len(seen) < len(want); i++ {
		out, err := s.c.onNode(node, "curl", "-sS", "-m", "3", url)
		if err != nil {
			s.failf([]string{"curl", "-sS", "-m", "3", url}, out, err, "curl from node %d failed", node)
		}
		answers = append(answers, strings.TrimSpace(out))
		for _, w := range want {
			if strings.Contains(out, w) {
				seen[w] = true
			}
		}
	}
	for _, w := range want {
		if !seen[w] {
			s.errorf([]string{"curl", url}, strings.Join(answers, "\n"), "no answer from %q in %d curls", w, len(answers))
		}
	}
	return answers
}
