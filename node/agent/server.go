package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/svcnet/svcnet/node/sandbox"
)

// Server serves the node's kubelet-style HTTP endpoints from the pod state
// kept under a node data dir:
//
//	GET  /containerLogs/{namespace}/{pod}/{container}?follow=&previous=&timestamps=&tailLines=&limitBytes=
//	POST /exec/{namespace}/{pod}/{container}?command=...&input=1&output=1&error=1&tty=1   (SPDY or WebSocket upgrade)
//	POST /portForward/{namespace}/{pod}                                                  (SPDY or WebSocket upgrade)
//	GET  /healthz
//
// These are the paths the apiserver proxies the pods/log, pods/exec and
// pods/portforward subresources to (kube-apiserver does the same towards the
// kubelet on port 10250). The server speaks plain HTTP.
type Server struct {
	dataDir string
	log     *slog.Logger
	mux     *http.ServeMux
}

// NewServer returns the handler for the pods under dataDir.
func NewServer(dataDir string, log *slog.Logger) *Server {
	s := &Server{dataDir: dataDir, log: log, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", s.logs)
	s.mux.HandleFunc("/exec/{ns}/{pod}/{container}", s.exec)
	s.mux.HandleFunc("/portForward/{ns}/{pod}", s.portForward)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) podDir(r *http.Request) string {
	return sandbox.PodDir(s.dataDir, r.PathValue("ns"), r.PathValue("pod"))
}

// logInstances returns the restart numbers with a log file, ascending.
func logInstances(podDir, container string) []int {
	entries, _ := os.ReadDir(filepath.Join(podDir, "logs", container))
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil {
			out = append(out, n)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	dir, c := s.podDir(r), r.PathValue("container")
	q := r.URL.Query()
	inst := logInstances(dir, c)
	idx := len(inst) - 1
	if q.Get("previous") == "true" {
		idx--
		if idx < 0 {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", c, r.PathValue("pod")), http.StatusBadRequest)
			return
		}
	}
	if idx < 0 {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start", c, r.PathValue("pod")), http.StatusBadRequest)
		return
	}
	path := sandbox.LogPath(dir, c, inst[idx])
	data, err := os.ReadFile(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	ts := q.Get("timestamps") == "true"
	out := sandbox.LogLines(data, ts)
	if n, err := strconv.Atoi(q.Get("tailLines")); err == nil && n >= 0 {
		lines := bytes.SplitAfter(out, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if n < len(lines) {
			lines = lines[len(lines)-n:]
		}
		out = bytes.Join(lines, nil)
	}
	if n, err := strconv.Atoi(q.Get("limitBytes")); err == nil && n >= 0 && n < len(out) {
		out = out[:n]
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(out)
	if q.Get("follow") != "true" || q.Get("previous") == "true" {
		return
	}
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.Seek(int64(len(data)), io.SeekStart)
	br := bufio.NewReader(f)
	var partial []byte
	for {
		line, err := br.ReadBytes('\n')
		partial = append(partial, line...)
		if err == nil {
			_, _ = w.Write(sandbox.LogLines(partial, ts))
			partial = nil
			if fl != nil {
				fl.Flush()
			}
			continue
		}
		// At the end: stop when a newer instance started, or the client left.
		if n := logInstances(dir, c); len(n) > 0 && n[len(n)-1] != inst[idx] {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// podExec runs commands and forwards ports for pods found under a data dir.
type podExec struct{ s *Server }

func (s *Server) loadSandbox(ns, pod string) (*sandbox.Sandbox, error) {
	sb, err := sandbox.Load(sandbox.PodDir(s.dataDir, ns, pod))
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s is not running on this node", ns, pod)
	}
	return sb, nil
}

// ContainerEnv returns the environment a container was last started with,
// so exec sessions see the same variables (as in a real container).
func ContainerEnv(podDir, container string) []string {
	b, err := os.ReadFile(filepath.Join(podDir, "env", container))
	if err != nil || len(b) == 0 {
		return []string{"PATH=" + defaultPath}
	}
	return strings.Split(string(b), "\x00")
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	ns, pod, c := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()["command"]
	if len(cmd) == 0 {
		http.Error(w, "missing command", http.StatusBadRequest)
		return
	}
	remotecommand.ServeExec(w, r, podExec{s}, ns+"/"+pod, "", c, cmd, opts, 4*time.Hour, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

// ExecInContainer implements remotecommand.Executor. name is
// "<namespace>/<pod>". A TTY is not allocated: the command's output is
// streamed as is.
func (e podExec) ExecInContainer(ctx context.Context, name, _ string, container string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	ns, pod, _ := strings.Cut(name, "/")
	sb, err := e.s.loadSandbox(ns, pod)
	if err != nil {
		return err
	}
	env := ContainerEnv(sb.Dir, container)
	wd := "/"
	c := sb.Command(cmd, env, wd)
	run := exec.CommandContext(ctx, c.Path, c.Args[1:]...)
	run.Env = c.Env
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if in != nil {
		run.Stdin = in
	}
	if out != nil {
		run.Stdout = out
	}
	if errw != nil {
		run.Stderr = errw
	} else if tty && out != nil {
		run.Stderr = out
	}
	err = run.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", ee.ExitCode()), Code: ee.ExitCode()}
	}
	return err
}

func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	ns, pod := r.PathValue("ns"), r.PathValue("pod")
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, podExec{s}, ns+"/"+pod, "", opts, 4*time.Hour, 30*time.Second, portforward.SupportedProtocols)
}

// PortForward implements portforward.PortForwarder: it connects to the
// pod's address from the node's network namespace.
func (e podExec) PortForward(ctx context.Context, name, _ string, port int32, stream io.ReadWriteCloser) error {
	ns, pod, _ := strings.Cut(name, "/")
	sb, err := e.s.loadSandbox(ns, pod)
	if err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(sb.IP.String(), strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("forward port %d of pod %s: %w", port, name, err)
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

var (
	_ remotecommand.Executor    = podExec{}
	_ portforward.PortForwarder = podExec{}
)
