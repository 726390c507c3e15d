package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// A container runs under a shim (`svcnet container-shim`), as under
// containerd's shim or conmon: the shim is the container's parent, writes
// its output to the CRI log and, when it exits, its exit status to
// <log>.exit. The shim runs in its own session, so a node agent that
// crashes (SIGKILL) takes neither the shim nor the container with it, and
// the output never goes through a pipe the agent holds (a container
// writing its log would die of SIGPIPE). The agent records the shim in
// <log>.shim; a restarted agent adopts the instance from there (Adopt).

// shimState is <log>.shim: what an agent needs to adopt the instance.
type shimState struct {
	ShimPID   int       `json:"shimPID"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"startedAt"`
}

// shimExit is <log>.exit, written by the shim when the container exits.
type shimExit struct {
	ExitCode   int       `json:"exitCode"`
	Signal     int       `json:"signal"`
	FinishedAt time.Time `json:"finishedAt"`
}

// ShimMain is `svcnet container-shim --log PATH -- ARGV...`. It starts
// ARGV in its own process group with the shim's environment, prints "pid
// <pid>" on standard output and closes it, logs the output to PATH in the
// CRI format, forwards SIGTERM (ctx's end) to the container's main process
// and, when that exits, writes PATH.exit and returns.
func ShimMain(ctx context.Context, args []string) error {
	fs := pflag.NewFlagSet("container-shim", pflag.ContinueOnError)
	logPath := fs.String("log", "", "CRI log file of the container")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if *logPath == "" || len(argv) == 0 {
		return errors.New("usage: container-shim --log PATH -- ARGV...")
	}
	f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start container %q: %w", argv[0], err)
	}
	fmt.Printf("pid %d\n", cmd.Process.Pid)
	os.Stdout.Close()
	var mu sync.Mutex
	var copiers sync.WaitGroup
	for stream, r := range map[string]io.Reader{"stdout": outR, "stderr": errR} {
		copiers.Go(func() { copyLog(f, &mu, stream, r) })
	}
	exited := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		case <-exited:
		}
	}()
	copiers.Wait()
	err = cmd.Wait()
	close(exited)
	code, sig := exitStatus(cmd, err)
	b, _ := json.Marshal(shimExit{ExitCode: code, Signal: sig, FinishedAt: time.Now()})
	tmp := *logPath + ".exit.tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, *logPath+".exit")
}

// startShim runs cmd (an nsenter into the pod) under the shim shimArgv
// and records it in logPath.shim.
func startShim(shimArgv []string, cmd *exec.Cmd, logPath string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("start container: %w", err)
	}
	_ = os.Remove(logPath + ".exit")
	args := append(append(append([]string(nil), shimArgv[1:]...), "--log", logPath, "--", cmd.Path), cmd.Args[1:]...)
	shim := exec.Command(shimArgv[0], args...)
	shim.Env, shim.Dir = cmd.Env, cmd.Dir // a host-network container's working directory
	shim.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := shim.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := shim.Start(); err != nil {
		return nil, fmt.Errorf("start container shim: %w", err)
	}
	p := &Process{cmd: shim, done: make(chan struct{}), started: time.Now(), shimPID: shim.Process.Pid, exitPath: logPath + ".exit"}
	line, _ := io.ReadAll(io.LimitReader(out, 64))
	pid, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(string(line)), "pid "))
	if perr != nil {
		_ = shim.Wait()
		return nil, fmt.Errorf("start container %q: %s", cmd.Args, p.readExitMessage(logPath))
	}
	p.pid = pid
	b, _ := json.Marshal(shimState{ShimPID: p.shimPID, PID: pid, StartedAt: p.started})
	if err := os.WriteFile(logPath+".shim", b, 0o644); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = shim.Wait()
		return nil, fmt.Errorf("record container shim: %w", err)
	}
	go func() {
		_ = shim.Wait()
		p.collectExit()
	}()
	return p, nil
}

func (p *Process) readExitMessage(logPath string) string {
	b, _ := os.ReadFile(logPath)
	return strings.TrimSpace(string(LogLines(b, false)))
}

// collectExit reads the shim's exit record (a shim killed before writing
// it counts as a container killed by SIGKILL) and closes done.
func (p *Process) collectExit() {
	var e shimExit
	b, err := os.ReadFile(p.exitPath)
	if err == nil {
		err = json.Unmarshal(b, &e)
	}
	if err != nil {
		e = shimExit{ExitCode: 128 + int(syscall.SIGKILL), Signal: int(syscall.SIGKILL), FinishedAt: time.Now()}
	}
	p.exitCode, p.signal, p.finished = e.ExitCode, e.Signal, e.FinishedAt
	close(p.done)
}

// ErrNotRunning is returned by Adopt when the instance has no live shim.
var ErrNotRunning = errors.New("container instance is not running")

// Adopt takes over the container instance whose log is logPath, started
// by an earlier agent, if its shim is still running: a restarted agent
// keeps the container as it is (same process, same start time).
func Adopt(logPath string) (*Process, error) {
	b, err := os.ReadFile(logPath + ".shim")
	if err != nil {
		return nil, ErrNotRunning
	}
	var st shimState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("adopt %s: %w", logPath, err)
	}
	// The PID is the shim only if its command line names this log.
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(st.ShimPID) + "/cmdline")
	if err != nil || !strings.Contains(string(cmdline), logPath) {
		return nil, ErrNotRunning
	}
	fd, err := unix.PidfdOpen(st.ShimPID, 0)
	if err != nil {
		return nil, ErrNotRunning
	}
	p := &Process{done: make(chan struct{}), started: st.StartedAt, shimPID: st.ShimPID, pid: st.PID, exitPath: logPath + ".exit"}
	go func() {
		// A pidfd becomes readable when the process exits; the shim is
		// reaped by whoever inherited it.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
				break
			}
		}
		unix.Close(fd)
		p.collectExit()
	}()
	return p, nil
}

// ExitRecord is how a container instance run under a shim ended.
type ExitRecord struct {
	ExitCode, Signal      int
	StartedAt, FinishedAt time.Time
}

// ReadExit returns how the instance whose log is logPath ended, from the
// exit status its shim wrote (and the start recorded with the shim), so
// that a restarted agent knows which containers an earlier one saw
// complete. An instance without an exit record (still running, or killed
// with its shim) is an error.
func ReadExit(logPath string) (ExitRecord, error) {
	var e shimExit
	b, err := os.ReadFile(logPath + ".exit")
	if err == nil {
		err = json.Unmarshal(b, &e)
	}
	if err != nil {
		return ExitRecord{}, fmt.Errorf("exit record of %s: %w", logPath, err)
	}
	r := ExitRecord{ExitCode: e.ExitCode, Signal: e.Signal, FinishedAt: e.FinishedAt, StartedAt: e.FinishedAt}
	var st shimState
	if b, err := os.ReadFile(logPath + ".shim"); err == nil && json.Unmarshal(b, &st) == nil && !st.StartedAt.IsZero() {
		r.StartedAt = st.StartedAt
	}
	return r, nil
}
