package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/internal/uptest"
)

// proc is a process of the cluster, identified by pid and start time (so
// that a reused pid is not taken for it).
type proc struct {
	pid   int
	start string
	ppid  int
	args  []string
}

func (p proc) String() string { return fmt.Sprintf("%d %s", p.pid, strings.Join(p.args, " ")) }

// readProc reads /proc/pid; ok is false for a process that is gone or a
// zombie (it has exited; only its parent's wait is missing).
func readProc(pid int) (p proc, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return p, false
	}
	// The command name (field 2) may hold spaces; the rest follows ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return p, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return p, false
	}
	p.pid = pid
	p.ppid, _ = strconv.Atoi(f[1])
	p.start = f[19] // field 22, starttime
	cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	for _, a := range bytes.Split(bytes.TrimRight(cmd, "\x00"), []byte{0}) {
		p.args = append(p.args, string(a))
	}
	return p, true
}

// alive reports whether p is still running (same pid, same start time).
func (p proc) alive() bool {
	q, ok := readProc(p.pid)
	return ok && q.start == p.start
}

// descendants lists every running process below pid (children, their
// children, ...: components, pods' infra processes, shims and containers).
func descendants(pid int) []proc {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]proc{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(n); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// role is the svcnet subcommand a process runs ("" for other programs).
func (p proc) role(bin string) string {
	if len(p.args) > 1 && p.args[0] == bin {
		return p.args[1]
	}
	// Components run as nsenter --net=... -- <bin> <role>, exec'd in place.
	for i, a := range p.args {
		if a == bin && i+1 < len(p.args) {
			return p.args[i+1]
		}
	}
	return ""
}

// waitGone waits (up to within) until none of procs runs and returns how
// long that took; the test fails naming the survivors.
func waitGone(t *testing.T, what string, procs []proc, within time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	for {
		var alive []string
		for _, p := range procs {
			if p.alive() {
				alive = append(alive, p.String())
			}
		}
		if len(alive) == 0 {
			return time.Since(t0)
		}
		if time.Since(t0) > within {
			t.Fatalf("%s: %d processes still running after %v:\n%s", what, len(alive), within, strings.Join(alive, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leftovers lists the cluster's namespaces (nodes' and pods') and the
// interfaces of the lab namespace that are the cluster's (bridge, veths).
func leftovers(lab *testbed.NetNS, prefix string) []string {
	var out []string
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			out = append(out, "netns "+e.Name())
		}
	}
	links, _ := lab.Run("ip", "-o", "link", "show")
	for _, l := range strings.Split(links, "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], prefix[:6]) {
			out = append(out, "link "+strings.TrimSuffix(f[1], ":"))
		}
	}
	return out
}

func waitNoLeftovers(t *testing.T, what string, lab *testbed.NetNS, prefix string, within time.Duration) {
	t.Helper()
	t0 := time.Now()
	for {
		l := leftovers(lab, prefix)
		if len(l) == 0 {
			return
		}
		if time.Since(t0) > within {
			t.Fatalf("%s: left behind after %v:\n%s", what, within, strings.Join(l, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestUpKilled: a `svcnet up` killed with SIGKILL leaves nothing running.
// First the up process and its guard are both killed: every component up
// started dies with it (parent-death signal), and `svcnet down` removes
// the rest (pods, namespaces, bridge). Then a second up on the same data
// dir starts cleanly, and killing only the up process lets its guard remove
// everything (every process by pid, every namespace and interface) with no
// command run.
func TestUpKilled(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "nsenter", "iptables-restore")
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster")
	}
	bin := filepath.Join(t.TempDir(), "svcnet")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/svcnet/svcnet/cmd/svcnet")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	lab := testbed.NewNetNS(t, "upkill")
	var rb [3]byte
	_, _ = rand.Read(rb[:])
	prefix := "svcnt-k" + hex.EncodeToString(rb[:])
	dir := t.TempDir()
	logs := t.TempDir()
	start := func(run int) (*uptest.Up, int, []proc) {
		t.Helper()
		up := uptest.Start(t, uptest.Options{Bin: bin, Lab: lab, DataDir: dir, LogPath: filepath.Join(logs, fmt.Sprintf("up-%d.log", run)),
			Args: []string{"--nodes", "2", "--prefix", prefix, "--proxy-mode", "iptables"}, Ready: 180 * time.Second,
			Label: fmt.Sprintf("[run %d]", run)})
		pid := up.Cmd.Process.Pid
		procs := descendants(pid)
		roles := map[string]int{}
		for _, p := range procs {
			roles[p.role(bin)]++
		}
		for _, want := range []string{"apiserver", "controllers", "node", "proxy", "netpol", "speaker", "up-guard", "sandbox-init", "dns"} {
			if roles[want] == 0 {
				t.Fatalf("[run %d] no %s process below svcnet up (pid %d); processes:\n%v", run, want, pid, procs)
			}
		}
		var names []string
		for r, n := range roles {
			names = append(names, fmt.Sprintf("%s=%d", r, n))
		}
		sort.Strings(names)
		t.Logf("[run %d] %d processes below svcnet up: %s", run, len(procs), strings.Join(names, " "))
		return up, pid, procs
	}
	down := func() {
		t.Helper()
		if out, err := lab.Run(bin, "down", "--data-dir", dir); err != nil {
			t.Fatalf("svcnet down: %v\n%s", err, out)
		}
	}

	// Run 1: the guard is killed first, then up.
	up, pid, procs := start(1)
	var direct, guard []proc
	for _, p := range procs {
		switch {
		case p.role(bin) == "up-guard":
			guard = append(guard, p)
		case p.ppid == pid:
			direct = append(direct, p)
		}
	}
	for _, p := range guard {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	waitGone(t, "guard", guard, 30*time.Second)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	<-up.Exited
	took := waitGone(t, "components started by the killed svcnet up", direct, 60*time.Second)
	t.Logf("[run 1] the %d components up started were gone %v after SIGKILL", len(direct), took.Round(time.Millisecond))
	if len(leftovers(lab, prefix)) == 0 {
		t.Errorf("[run 1] no namespace or interface left to remove: the case tests nothing")
	}
	down()
	waitGone(t, "processes after svcnet down", procs, 60*time.Second)
	waitNoLeftovers(t, "after svcnet down", lab, prefix, 60*time.Second)

	// Run 2: up again on the same data dir; only up is killed.
	up, pid, procs = start(2)
	t0 := time.Now()
	_ = syscall.Kill(pid, syscall.SIGKILL)
	<-up.Exited
	waitGone(t, "processes after the guard's cleanup", procs, 90*time.Second)
	waitNoLeftovers(t, "after the guard's cleanup", lab, prefix, 60*time.Second)
	t.Logf("[run 2] every process, namespace and interface gone %v after SIGKILL", time.Since(t0).Round(time.Millisecond))
	if _, err := os.Stat(filepath.Join(dir, "cluster.json")); err == nil {
		t.Errorf("[run 2] cluster.json kept after the guard's cleanup")
	}
	down() // nothing left: a no-op that succeeds
	if l := leftovers(lab, prefix); len(l) > 0 {
		t.Errorf("after svcnet down: %v", l)
	}
}
