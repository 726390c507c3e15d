package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
)

func TestNodeName(t *testing.T) {
	for i, want := range map[int]string{1: "svcnet-control-plane", 2: "svcnet-worker", 3: "svcnet-worker2", 4: "svcnet-worker3"} {
		if got := NodeName("svcnet", i); got != want {
			t.Errorf("NodeName(%d) = %q, want %q", i, got, want)
		}
	}
}

func TestDownWithoutState(t *testing.T) {
	if err := Down(context.Background(), t.TempDir()); err != nil {
		t.Errorf("Down on an empty data dir: %v", err)
	}
}

// svcnet up --nodes 2 inside a test namespace: the cluster comes up, a DNS
// pod on one node answers a pod on the other across the node network, and
// SIGTERM leaves no namespace, interface or process behind.
func TestUpDown(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "nsenter", "iptables-restore", "dig")
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster")
	}
	bin := filepath.Join(t.TempDir(), "svcnet")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/svcnet/svcnet/cmd/svcnet")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	lab := testbed.NewNetNS(t, "up")
	var rb [3]byte
	_, _ = rand.Read(rb[:])
	prefix := "svcnt-t" + hex.EncodeToString(rb[:])
	dir := t.TempDir()
	up := exec.Command("ip", "netns", "exec", lab.Name, bin, "up", "--nodes", "2", "--data-dir", dir, "--prefix", prefix, "--proxy-mode", "iptables")
	stdout, _ := up.StdoutPipe()
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = up.Process.Signal(syscall.SIGTERM)
			_ = up.Wait()
		}
		_ = Down(context.Background(), dir)
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "export KUBECONFIG=") {
				ready <- sc.Text()
			}
		}
	}()
	start := time.Now()
	select {
	case line := <-ready:
		if line != "export KUBECONFIG="+filepath.Join(dir, "kubeconfig") {
			t.Errorf("printed %q", line)
		}
		t.Logf("cluster ready after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(90 * time.Second):
		t.Fatal("svcnet up did not print the KUBECONFIG line within 90s")
	}
	// From the DNS pod on node 2, ask the DNS pod on node 1.
	exe := func(pod string, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"exec", "--data-dir", dir, "-n", "kube-system", pod, "--"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("svcnet exec %s %v: %v\n%s", pod, args, err, out)
		}
		return string(out)
	}
	if got := exe("coredns-2", "hostname"); got != "coredns-2\n" {
		t.Errorf("hostname %q", got)
	}
	if got := exe("coredns-2", "dig", "+short", "+time=2", "@10.244.1.2", "kubernetes.default.svc.cluster.local"); got != "10.96.0.1\n" {
		t.Errorf("cross-node DNS answer %q", got)
	}
	// Ctrl-C: everything goes.
	_ = up.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- up.Wait() }()
	select {
	case <-done:
		stopped = true
	case <-time.After(30 * time.Second):
		t.Fatal("svcnet up did not stop within 30s of SIGTERM")
	}
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
	if out, _ := lab.Run("ip", "-o", "link", "show"); strings.Contains(out, prefix[:6]) {
		t.Errorf("interfaces left in the lab namespace:\n%s", out)
	}
	if out, _ := exec.Command("ip", "netns", "pids", lab.Name).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("processes left in the lab namespace: %s", out)
	}
}
