// Package testbed builds throwaway network namespaces for tests that send
// real packets. Every namespace it makes is isolated: it is never linked to
// the root namespace, so nothing a test sends can leave the machine, and it
// is deleted (with every process still running in it) when the test ends,
// pass or fail.
//
// Tests that need root or a kernel feature call the Require helpers, which
// skip with a message naming exactly what is missing; a skip is never a pass.
package testbed

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netns"
)

// Prefix starts the name of every namespace this package creates, so that a
// crashed run's leftovers can be found and removed (see Sweep).
const Prefix = "svcnt-"

// RequireRoot skips tb unless the test runs as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("testbed: needs root (network namespaces)")
	}
}

// RequireCommand skips tb unless every named program is on PATH.
func RequireCommand(tb testing.TB, names ...string) {
	tb.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			tb.Skipf("testbed: %s is not installed (run the README's install step)", n)
		}
	}
}

// NetNS is one named network namespace created for a test.
type NetNS struct {
	Name string
	tb   testing.TB

	mu    sync.Mutex
	procs []*exec.Cmd
}

// NewNetNS creates a network namespace whose name starts with Prefix and
// hint, brings its loopback up, and registers its removal with tb.Cleanup.
// The namespace has no interfaces but lo until the test adds some.
func NewNetNS(tb testing.TB, hint string) *NetNS {
	tb.Helper()
	RequireRoot(tb)
	RequireCommand(tb, "ip")
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := Prefix + hint + "-" + hex.EncodeToString(b[:])
	if len(hint) > 20 {
		name = Prefix + hint[:20] + "-" + hex.EncodeToString(b[:])
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		tb.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	n := &NetNS{Name: name, tb: tb}
	tb.Cleanup(n.destroy)
	n.MustRun("ip", "link", "set", "lo", "up")
	return n
}

// Run runs a program inside the namespace and returns its combined output.
func (n *NetNS) Run(args ...string) (string, error) {
	return n.RunContext(context.Background(), args...)
}

// RunContext is Run with a context bounding the program's run time.
func (n *NetNS) RunContext(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in %s: %s: %w: %s", n.Name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// MustRun is Run that fails the test on error.
func (n *NetNS) MustRun(args ...string) string {
	n.tb.Helper()
	out, err := n.Run(args...)
	if err != nil {
		n.tb.Fatal(err)
	}
	return out
}

// Start starts a long-running program inside the namespace. It is killed
// when the test ends (before the namespace is deleted).
func (n *NetNS) Start(args ...string) *exec.Cmd {
	n.tb.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.Name}, args...)...)
	if err := cmd.Start(); err != nil {
		n.tb.Fatalf("start %v in %s: %v", args, n.Name, err)
	}
	n.mu.Lock()
	n.procs = append(n.procs, cmd)
	n.mu.Unlock()
	return cmd
}

// Do runs f on an OS thread switched into the namespace. Sockets that f
// opens belong to the namespace for their whole life, so a Go server can be
// started inside with Do and keep serving after Do returns. The thread is
// switched back before it is released; if that fails it is never reused.
func (n *NetNS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("read current netns: %w", err)
			return
		}
		defer orig.Close()
		h, err := netns.GetFromName(n.Name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", n.Name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			// Set failing leaves the thread where it was.
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", n.Name, err)
			return
		}
		ferr := f()
		// Only a thread back in its original namespace may return to the
		// scheduler's pool; otherwise exiting locked terminates it (or, for
		// the main thread, wedges it), which is what we want.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

func (n *NetNS) destroy() {
	n.mu.Lock()
	for _, p := range n.procs {
		if p.Process != nil {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
	n.procs = nil
	n.mu.Unlock()
	KillAll(n.Name)
	if out, err := exec.Command("ip", "netns", "delete", n.Name).CombinedOutput(); err != nil {
		n.tb.Errorf("ip netns delete %s: %v: %s", n.Name, err, out)
	}
}

// KillAll kills every process still running in the named namespace.
func KillAll(name string) {
	out, _ := exec.Command("ip", "netns", "pids", name).Output()
	self := strconv.Itoa(os.Getpid())
	for _, f := range strings.Fields(string(out)) {
		if f == self {
			// A thread of this process is still in the namespace (see Do);
			// never kill ourselves.
			continue
		}
		_ = exec.Command("kill", "-9", f).Run()
	}
}

// Link connects two namespaces with a veth pair, names the ends ifA (in a)
// and ifB (in b), gives them the addresses (CIDR notation, may be empty) and
// brings both up.
func Link(tb testing.TB, a *NetNS, ifA, addrA string, b *NetNS, ifB, addrB string) {
	tb.Helper()
	tmpA, tmpB := "vt"+randHex(5), "vt"+randHex(5)
	// The pair is created inside a so that it never exists in the root namespace.
	a.MustRun("ip", "link", "add", tmpA, "type", "veth", "peer", "name", tmpB)
	a.MustRun("ip", "link", "set", tmpB, "netns", b.Name)
	a.MustRun("ip", "link", "set", tmpA, "name", ifA)
	b.MustRun("ip", "link", "set", tmpB, "name", ifB)
	if addrA != "" {
		a.MustRun("ip", "addr", "add", addrA, "dev", ifA)
	}
	if addrB != "" {
		b.MustRun("ip", "addr", "add", addrB, "dev", ifB)
	}
	a.MustRun("ip", "link", "set", ifA, "up")
	b.MustRun("ip", "link", "set", ifB, "up")
}

// SweepPrefix deletes the namespaces left behind by an earlier, crashed run
// of one tool: those named Prefix+tool+"-". It never touches the whole
// Prefix, because tests and tools run side by side on one machine (a CI run
// beside a benchmark) and each owns only what it created.
func SweepPrefix(tool string) {
	if tool == "" {
		panic("testbed.SweepPrefix: a tool name is required")
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], Prefix+tool+"-") {
			KillAll(f[0])
			_ = exec.Command("ip", "netns", "delete", f[0]).Run()
		}
	}
}

func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
