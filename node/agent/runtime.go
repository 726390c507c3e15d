package agent

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"time"

	"github.com/svcnet/svcnet/node/sandbox"
)

// Runtime creates pod sandboxes. The Linux one (NamespaceRuntime) uses
// package sandbox; tests use processes on the host.
type Runtime interface {
	// RunPodSandbox creates the pod's sandbox. files is called with the
	// pod's address to produce its resolv.conf, hosts and hostname.
	RunPodSandbox(ctx context.Context, uid, namespace, name string, files func(ip netip.Addr) sandbox.Spec) (PodSandbox, error)
}

// PodSandbox is one pod's namespaces.
type PodSandbox interface {
	IP() netip.Addr
	Dir() string
	StartContainer(argv, env []string, wd, logPath string) (Container, error)
	// Exec runs argv inside the pod and returns its exit code.
	Exec(ctx context.Context, argv, env []string) (int, error)
	Destroy(ctx context.Context) error
}

// Container is one running container instance.
type Container interface {
	Done() <-chan struct{}
	Exit() (code, signal int, finished time.Time)
	StartedAt() time.Time
	Stop(grace time.Duration)
}

// NamespaceRuntime runs pods in Linux namespaces on the node's bridge.
type NamespaceRuntime struct {
	Config sandbox.Config
}

var _ Runtime = (*NamespaceRuntime)(nil)

// RunPodSandbox implements Runtime.
func (r *NamespaceRuntime) RunPodSandbox(ctx context.Context, uid, namespace, name string, files func(ip netip.Addr) sandbox.Spec) (PodSandbox, error) {
	ip, err := r.Config.IPAM.Allocate(uid)
	if err != nil {
		return nil, err
	}
	spec := files(ip)
	spec.UID, spec.Namespace, spec.Name = uid, namespace, name
	sb, err := sandbox.Create(ctx, r.Config, spec)
	if err != nil {
		return nil, err
	}
	return &nsSandbox{sb: sb, cfg: r.Config}, nil
}

type nsSandbox struct {
	sb  *sandbox.Sandbox
	cfg sandbox.Config
}

func (s *nsSandbox) IP() netip.Addr { return s.sb.IP }
func (s *nsSandbox) Dir() string    { return s.sb.Dir }
func (s *nsSandbox) StartContainer(argv, env []string, wd, logPath string) (Container, error) {
	return s.sb.Start(argv, env, wd, logPath)
}
func (s *nsSandbox) Exec(ctx context.Context, argv, env []string) (int, error) {
	cmd := s.sb.Command(argv, env, "")
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Env, c.SysProcAttr = cmd.Env, cmd.SysProcAttr
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}
func (s *nsSandbox) Destroy(ctx context.Context) error { return s.sb.Destroy(ctx, s.cfg) }
