package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// What happens to a cluster when `svcnet up` dies without running Stop
// (SIGKILL, the OOM killer, a crash):
//
//   - Every component Up starts gets the parent-death signal SIGKILL
//     (PR_SET_PDEATHSIG). The kernel ties that signal to the thread that
//     forked the child, not to the process, so the children are started from
//     one goroutine locked to an OS thread that never exits (startLocked).
//   - The pods the node agents started (infra processes, container shims,
//     cluster DNS) outlive an agent by design (a restarted agent adopts
//     them), and the namespaces and interfaces outlive every process. A
//     guard process (`svcnet up-guard`, in its own process group) holds the
//     read end of a pipe whose only writer is the up process; when the pipe
//     reports end of file, up is gone, and the guard runs Down on the data
//     dir: processes, namespaces, bridge.
//   - The up process and its guard share an exclusive lock on
//     <data-dir>/up.lock, so a second `svcnet up` on the data dir waits for
//     the guard's cleanup instead of racing it (and refuses to run beside a
//     live up).
//
// When the guard is killed too, `svcnet down` (or the next `svcnet up`,
// which begins with Down) removes the leftovers.

// lockDataDir takes the exclusive lock of dataDir (up.lock), waiting up to
// wait for an earlier up or its guard to release it.
func lockDataDir(dataDir string, wait time.Duration, log *slog.Logger) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dataDir, "up.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for logged := false; ; logged = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		if time.Now().After(deadline) {
			f.Close()
			pid, _ := os.ReadFile(filepath.Join(dataDir, "up.pid"))
			return nil, fmt.Errorf("data dir %s is in use by another svcnet up (pid %s) or its cleanup",
				dataDir, strings.TrimSpace(string(pid)))
		}
		if !logged {
			log.Info("waiting for another svcnet up of this data dir (or its cleanup) to finish", "dataDir", dataDir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// guard is the running `svcnet up-guard` of a cluster.
type guard struct {
	// pipe is the write end of the guard's standard input. It is
	// referenced here for the life of the cluster: were it collected, its
	// finalizer would close it, and the guard would take up for dead.
	pipe *os.File
	done chan struct{}
}

// keep holds every guard pipe for the life of the process.
var keep struct {
	sync.Mutex
	pipes []*os.File
}

// startGuard starts `exe up-guard` for dataDir, sharing the data dir lock.
func startGuard(exe, dataDir string, lock *os.File) (*guard, error) {
	logDir := filepath.Join(dataDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(logDir, "guard.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(exe, "up-guard", "--data-dir", dataDir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, logf, logf
	cmd.ExtraFiles = []*os.File{lock} // fd 3
	// Its own process group: a Ctrl-C at the terminal stops up, which then
	// tears down itself; the guard only acts when up is gone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the cleanup guard: %w", err)
	}
	g := &guard{pipe: w, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(g.done) }()
	keep.Lock()
	keep.pipes = append(keep.pipes, w)
	keep.Unlock()
	return g, nil
}

// release tells the guard that up has torn the cluster down itself (any
// byte before end of file says so) and waits for it to exit.
func (g *guard) release() {
	_, _ = g.pipe.WriteString("stopped\n")
	_ = g.pipe.Close()
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
	}
}

// Guard is `svcnet up-guard`: it waits until standard input reports end of
// file. If nothing was written before it, its svcnet up has died (however:
// a clean stop writes to the pipe first); the guard waits for that process
// to be gone and runs Down on dataDir. File descriptor 3, when open, is
// the data dir lock, held until the cleanup is done.
func Guard(ctx context.Context, dataDir string, log *slog.Logger) error {
	syscall.CloseOnExec(3) // the lock stays with this process, not with ip(8)
	// A terminal's hangup or interrupt is not a reason to leave the cluster
	// behind; only SIGTERM/SIGKILL stop the guard without cleaning up.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT)
	parent := os.Getppid()
	done := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, os.Stdin)
		done <- n
	}()
	select {
	case <-ctx.Done():
		return nil
	case n := <-done:
		if n > 0 {
			return nil // released by Stop
		}
	}
	// The pipe closes while the kernel is still tearing the up process
	// down; once this process is reparented, up has sent its children their
	// parent-death signal, and nothing of up's can start another process.
	for deadline := time.Now().Add(10 * time.Second); os.Getppid() == parent; {
		if time.Now().After(deadline) {
			return fmt.Errorf("svcnet up (pid %d) closed the guard's pipe but is still running; not cleaning up", parent)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "cluster.json")); errors.Is(err, os.ErrNotExist) {
		return nil // up tore the cluster down itself
	}
	log.Info("svcnet up exited without tearing down; removing the cluster", "pid", parent, "dataDir", dataDir)
	err := Down(context.Background(), dataDir)
	if err != nil {
		log.Warn("cleanup", "err", err)
	}
	return err
}
