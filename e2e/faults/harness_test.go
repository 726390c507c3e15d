// Package faults is svcnet's fault suite: each case kills a real svcnet
// (or etcd) process with SIGKILL in the middle of real work, restarts it,
// and checks that nothing acknowledged was lost. Every case prints its
// figures (t.Logf; run with -v to see them when it passes).
package faults

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// bin is the svcnet binary TestMain builds; empty in -short mode.
var bin string

func TestMain(m *testing.M) {
	code := func() int {
		if isShort() {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "svcnet-faults-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", filepath.Join(dir, "svcnet"),
			"github.com/svcnet/svcnet/cmd/svcnet").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go build ./cmd/svcnet: %v\n%s", err, out)
			return 1
		}
		bin = filepath.Join(dir, "svcnet")
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

func needBinary(t *testing.T) {
	if testing.Short() || bin == "" {
		t.Skip("builds the svcnet binary and kills real processes")
	}
}

// proc is a started process whose standard error is kept.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

type lockedWriter struct{ p *proc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.logs.Write(b)
}

// start runs name args... until the test ends (SIGKILL at cleanup).
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Stdout = lockedWriter{p}
	p.cmd.Stderr = lockedWriter{p}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitAPI waits until the apiserver under dataDir answers /readyz with
// its admin kubeconfig and returns a client configuration.
func waitAPI(t *testing.T, p *proc, dataDir string, within time.Duration) *rest.Config {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		select {
		case <-p.done:
			t.Fatalf("apiserver exited:\n%s", p.output())
		default:
		}
		if cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig")); err == nil {
			cfg.QPS, cfg.Burst = -1, 0
			c := kubernetes.NewForConfigOrDie(cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			cancel()
			if err == nil {
				return cfg
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("apiserver not ready within %s:\n%s", within, p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var _ = strconv.Itoa
