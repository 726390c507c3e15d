package userspace

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

// TestKernelScenarios runs the shared real-packet scenarios with userspace
// mode on every node of a namespace cluster. The listeners must live in the
// node's namespace, so each node's proxy is a child process started there
// (TestHelperUserspaceProxy); the test process keeps the core (informer
// events, policy, Plan) and sends each node its listener table.
func TestKernelScenarios(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "iptables-restore", "ip6tables-restore")
	proxytest.RunKernelScenarios(t, func(n *proxytest.Node, cfg proxy.ModeConfig) (proxy.Provider, error) {
		return startNodeProcess(t, n.NS, cfg.Scheduler)
	},
		proxytest.SourceFromNode(),
		// loadBalancerSourceRanges are not enforced in user space
		// (docs/proxy-modes.md; the behaviour table skips its rows too).
		proxytest.Skip("LoadBalancerSourceRanges", "userspace mode does not enforce loadBalancerSourceRanges (docs/proxy-modes.md)"),
		// By design: userspace proxies every connection in its own
		// process (it is the connection's far end towards the client), so
		// a proxy restart ends the established connections; kube-proxy's
		// userspace mode behaved the same.
		proxytest.Skip("ProxyRestartKeepsConnections", "a userspace proxy holds the connections it proxies: a restart ends them (by design)"),
	)
}

// nodeProcess is a proxy.Provider whose data plane is userspace's Proxier
// in a child process inside one node's network namespace.
type nodeProcess struct {
	ns    *testbed.NetNS
	sched string
	cmd   *exec.Cmd
	mu    sync.Mutex
	stdin io.WriteCloser
	out   *bufio.Reader
	once  sync.Once
	err   error
}

func startNodeProcess(t *testing.T, ns *testbed.NetNS, sched string) (*nodeProcess, error) {
	p := &nodeProcess{ns: ns, sched: sched}
	p.cmd = exec.Command("ip", "netns", "exec", ns.Name, os.Args[0], "-test.run=^TestHelperUserspaceProxy$", "-test.v=false")
	p.cmd.Env = append(os.Environ(), helperEnv+"=dual")
	p.cmd.Stderr = os.Stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.out = bufio.NewReader(out)
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	// The cluster cleans up through Cleanup; this is for a test that
	// fails before its cluster registered that.
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	return p, nil
}

// Sync implements proxy.Provider: Plan here, listeners and rules there.
func (p *nodeProcess) Sync(_ context.Context, req *proxy.SyncRequest) error {
	data, err := json.Marshal(Plan(req, p.sched, nil))
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.stdin.Write(append(data, '\n')); err != nil {
		return err
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "ok" {
		return errors.New(line)
	}
	return nil
}

// Cleanup implements proxy.Provider: it stops the process (closing its
// listeners) and removes its rules of both families.
func (p *nodeProcess) Cleanup(ctx context.Context) error {
	p.once.Do(func() {
		p.stdin.Close()
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
		var errs []error
		for _, v6 := range []bool{false, true} {
			nf := Iptables{IPv6: v6, Exec: proxy.OSExecutor{NetNS: p.ns.Name}}
			if err := nf.Cleanup(ctx, Jumps()); err != nil {
				errs = append(errs, fmt.Errorf("cleanup (ipv6=%v): %w", v6, err))
			}
		}
		p.err = errors.Join(errs...)
	})
	return p.err
}
