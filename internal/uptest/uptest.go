// Package uptest runs `svcnet up` for end-to-end tests: inside a lab
// network namespace the test created (internal/testbed), with its standard
// output watched for the export KUBECONFIG line, and removed when the test
// ends, pass or fail: SIGTERM (Ctrl-C's teardown), then `svcnet down` as the
// last resort for whatever a failed teardown left.
package uptest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
)

// Options says how to run `svcnet up`.
type Options struct {
	// Bin is the svcnet binary.
	Bin string
	// Lab is the namespace up runs in (its node bridge and apiserver live
	// there).
	Lab *testbed.NetNS
	// DataDir is passed as --data-dir (and to svcnet down).
	DataDir string
	// Args are the other flags of up (--nodes, --prefix, ...).
	Args []string
	// LogPath receives up's standard error.
	LogPath string
	// Ready bounds the wait for the KUBECONFIG line.
	Ready time.Duration
	// Label starts the messages of a failed start or stop ("[iptables]").
	Label string
	// OnFailure runs at the end of a failed test, after the teardown (to log
	// component logs, say).
	OnFailure func()
}

// Up is a running `svcnet up`.
type Up struct {
	// Cmd is `ip netns exec <lab> svcnet up ...`; ip, and svcnet's own
	// re-execution into the host mount namespace, exec in place, so its pid
	// is the up process's.
	Cmd *exec.Cmd
	// Kubeconfig is the path the export KUBECONFIG line named.
	Kubeconfig string
	// Exited is closed once up has exited.
	Exited <-chan struct{}
	opts   Options
}

func (o Options) label() string {
	if o.Label == "" {
		return ""
	}
	return o.Label + " "
}

// Start runs up and waits for its export KUBECONFIG line; the test fails
// (with up's log) when up exits first or prints no such line in time.
func Start(t testing.TB, o Options) *Up {
	t.Helper()
	logf, err := os.Create(o.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"netns", "exec", o.Lab.Name, o.Bin, "up", "--data-dir", o.DataDir}, o.Args...)
	cmd := exec.Command("ip", args...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = logf
	// If the test binary dies without its cleanups (a -timeout panic, a
	// signal), the cluster still goes: svcnet up tears down on SIGTERM.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	u := &Up{Cmd: cmd, Exited: exited, opts: o}
	t.Cleanup(func() {
		u.stop(t)
		// Last resort for whatever a failed teardown left.
		if out, err := exec.Command("ip", "netns", "exec", o.Lab.Name, o.Bin, "down", "--data-dir", o.DataDir).CombinedOutput(); err != nil {
			t.Errorf("%ssvcnet down: %v\n%s", o.label(), err, out)
		}
		logf.Close()
		if t.Failed() && o.OnFailure != nil {
			o.OnFailure()
		}
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "export KUBECONFIG="); ok {
				ready <- s
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(exited) }()
	t0 := time.Now()
	select {
	case u.Kubeconfig = <-ready:
		t.Logf("%scluster ready after %v", o.label(), time.Since(t0).Round(time.Millisecond))
	case <-exited:
		log, _ := os.ReadFile(o.LogPath)
		t.Fatalf("%ssvcnet up exited before the cluster was ready:\n%s", o.label(), log)
	case <-time.After(o.Ready):
		log, _ := os.ReadFile(o.LogPath)
		t.Fatalf("%ssvcnet up printed no KUBECONFIG line within %v:\n%s", o.label(), o.Ready, log)
	}
	return u
}

// stop sends SIGTERM (a no-op once up has exited) and waits up to 30s,
// then kills it.
func (u *Up) stop(t testing.TB) {
	_ = u.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-u.Exited:
	case <-time.After(30 * time.Second):
		t.Errorf("%ssvcnet up did not stop within 30s of SIGTERM; killing it", u.opts.label())
		_ = u.Cmd.Process.Kill()
		<-u.Exited
	}
}

// PID is the pid svcnet up recorded in its data dir (up.pid), as a string
// for command lines (nsenter -t); the test fails without it.
func (u *Up) PID(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(u.opts.DataDir, "up.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(pid); err != nil {
		t.Fatalf("up.pid: %q", b)
	}
	return pid
}
