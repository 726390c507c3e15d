package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Process is one running container instance.
type Process struct {
	cmd      *exec.Cmd // nil for an adopted instance
	pid      int       // the container's main process and process group
	shimPID  int       // 0 without a shim
	exitPath string    // the shim's exit record
	done     chan struct{}
	started  time.Time
	finished time.Time
	exitCode int
	signal   int
	logFile  *os.File
	copiers  sync.WaitGroup
}

// LogPath is where the instance restart of container writes its log.
func LogPath(podDir, container string, restart int) string {
	return filepath.Join(podDir, "logs", container, fmt.Sprintf("%d.log", restart))
}

// Start runs argv in the sandbox. Output goes to logPath in the CRI log
// format ("<RFC3339Nano time> stdout|stderr F <line>"), which LogLines
// reads back.
func (sb *Sandbox) Start(argv, env []string, wd, logPath string) (*Process, error) {
	if len(argv) == 0 {
		return nil, errors.New("start container: empty command")
	}
	if len(sb.shim) > 0 {
		return startShim(sb.shim, sb.Command(argv, env, wd), logPath)
	}
	return StartProcess(sb.Command(argv, env, wd), logPath)
}

// StartProcess starts cmd (which must not have its output set) with its
// output logged to logPath in the CRI log format. cmd should run in its own
// process group (SysProcAttr.Setpgid) for Stop to reach its children.
func StartProcess(cmd *exec.Cmd, logPath string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("start container: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start container: %w", err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), logFile: f}
	var mu sync.Mutex
	outR, err := p.cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	errR, err := p.cmd.StderrPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start container %q: %w", cmd.Path, err)
	}
	p.started = time.Now()
	p.pid = cmd.Process.Pid
	for stream, r := range map[string]io.Reader{"stdout": outR, "stderr": errR} {
		p.copiers.Add(1)
		go func() {
			defer p.copiers.Done()
			copyLog(f, &mu, stream, r)
		}()
	}
	go func() {
		p.copiers.Wait()
		err := p.cmd.Wait()
		p.finished = time.Now()
		p.exitCode, p.signal = exitStatus(p.cmd, err)
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func copyLog(w io.Writer, mu *sync.Mutex, stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, 16*1024)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			tag := "F"
			if line[len(line)-1] != '\n' {
				tag = "P"
				line = append(line, '\n')
			}
			mu.Lock()
			fmt.Fprintf(w, "%s %s %s %s", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, line)
			mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func exitStatus(cmd *exec.Cmd, err error) (code, sig int) {
	if cmd.ProcessState == nil {
		return 128, 0
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode(), 0
}

// PID is the container's main process.
func (p *Process) PID() int { return p.pid }

// Done is closed when the process has exited and its output is flushed.
func (p *Process) Done() <-chan struct{} { return p.done }

// StartedAt is when the process started.
func (p *Process) StartedAt() time.Time { return p.started }

// Exit returns the exit code (128+n when killed by signal n), the signal,
// and when it finished. Only valid after Done.
func (p *Process) Exit() (code, signal int, finished time.Time) {
	return p.exitCode, p.signal, p.finished
}

// Stop sends SIGTERM to the container's main process (as a container
// runtime signals PID 1), waits up to grace for it to exit, then sends
// SIGKILL to its whole process group. Whatever is left in the group when
// the main process has gone is killed too, as a PID namespace would. It
// returns once the process is gone.
func (p *Process) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	pgid := p.pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Anything left in the group (daemonized children) goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// LogLines converts a CRI-format log to what `kubectl logs` prints: the
// message of each line, prefixed with its RFC3339Nano time when timestamps
// is set. Partial lines are joined with the next part.
func LogLines(data []byte, timestamps bool) []byte {
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		f := bytes.SplitN(line, []byte(" "), 4)
		if len(f) < 4 {
			continue
		}
		msg := f[3]
		if string(f[2]) == "P" {
			msg = bytes.TrimSuffix(msg, []byte("\n"))
		}
		if timestamps {
			out.Write(f[0])
			out.WriteByte(' ')
		}
		out.Write(msg)
	}
	return out.Bytes()
}
