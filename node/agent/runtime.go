package agent

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"time"

	"github.com/svcnet/svcnet/node/sandbox"
)

// Runtime creates pod sandboxes. The Linux one (NamespaceRuntime) uses
// package sandbox; tests use processes on the host.
type Runtime interface {
	// RunPodSandbox creates the pod's sandbox. spec is called first, with
	// the pod's address and directory.
	RunPodSandbox(ctx context.Context, uid, namespace, name string, spec SpecFunc) (PodSandbox, error)
}

// SpecFunc produces the sandbox of a pod with address ip whose directory
// is dir: its resolv.conf, hosts and hostname, and its volumes, which it
// writes under dir before the sandbox (and any container) exists. An
// error fails the sandbox's creation; nothing of it exists then.
type SpecFunc func(ip netip.Addr, dir string) (sandbox.Spec, error)

// HostRuntime is a Runtime that also runs host-network pods
// (spec.hostNetwork): their containers run in the agent's own network
// namespace, with the node's addresses. spec is called with the first of
// them.
type HostRuntime interface {
	RunHostSandbox(ctx context.Context, uid, namespace, name string, nodeIPs []netip.Addr, spec SpecFunc) (PodSandbox, error)
}

// PodSandbox is one pod's namespaces.
type PodSandbox interface {
	IP() netip.Addr
	// IPs are all the pod's addresses, IP first (one per family).
	IPs() []netip.Addr
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

// Adopter is a Runtime whose sandboxes outlive a crashed agent: a
// restarted agent adopts its pods' sandboxes instead of recreating them,
// and removes the ones no pod of the node claims.
type Adopter interface {
	// AdoptPodSandbox returns the running sandbox of the pod, or an error
	// when there is none.
	AdoptPodSandbox(uid, namespace, name string) (PodSandbox, error)
	// CleanupExcept destroys the saved sandboxes whose pod UID keep rejects.
	CleanupExcept(ctx context.Context, keep func(uid string) bool) (int, error)
}

// ContainerAdopter is a PodSandbox whose container instances outlive a
// crashed agent (they run under a shim).
type ContainerAdopter interface {
	// AdoptContainer returns the running instance whose log is logPath, or
	// an error when it is not running.
	AdoptContainer(logPath string) (Container, error)
	// ContainerExit returns how the instance whose log is logPath ended,
	// or an error when that is not known (it runs, or left no record).
	ContainerExit(logPath string) (sandbox.ExitRecord, error)
}

// NamespaceRuntime runs pods in Linux namespaces on the node's bridge.
type NamespaceRuntime struct {
	Config sandbox.Config
}

var (
	_ Runtime          = (*NamespaceRuntime)(nil)
	_ HostRuntime      = (*NamespaceRuntime)(nil)
	_ Adopter          = (*NamespaceRuntime)(nil)
	_ ContainerAdopter = (*nsSandbox)(nil)
)

// AdoptPodSandbox implements Adopter.
func (r *NamespaceRuntime) AdoptPodSandbox(uid, namespace, name string) (PodSandbox, error) {
	sb, err := sandbox.AdoptSandbox(r.Config, namespace, name, uid)
	if err != nil {
		return nil, err
	}
	return &nsSandbox{sb: sb, cfg: r.Config}, nil
}

// CleanupExcept implements Adopter.
func (r *NamespaceRuntime) CleanupExcept(ctx context.Context, keep func(uid string) bool) (int, error) {
	return sandbox.CleanupStaleExcept(ctx, r.Config, keep)
}

// AdoptContainer implements ContainerAdopter.
func (s *nsSandbox) AdoptContainer(logPath string) (Container, error) {
	if len(s.cfg.Shim) == 0 {
		return nil, sandbox.ErrNotRunning
	}
	return sandbox.Adopt(logPath)
}

// ContainerExit implements ContainerAdopter.
func (s *nsSandbox) ContainerExit(logPath string) (sandbox.ExitRecord, error) {
	return sandbox.ReadExit(logPath)
}

// RunPodSandbox implements Runtime.
func (r *NamespaceRuntime) RunPodSandbox(ctx context.Context, uid, namespace, name string, spec SpecFunc) (PodSandbox, error) {
	ip, err := r.Config.IPAM.Allocate(uid)
	if err != nil {
		return nil, err
	}
	dir := sandbox.PodDir(r.Config.DataDir, namespace, name)
	s, err := spec(ip, dir)
	if err != nil {
		// As a failed sandbox.Create: nothing is left, and the next
		// attempt gets the same address again.
		_ = r.Config.IPAM.ReleaseUnused(uid)
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.UID, s.Namespace, s.Name = uid, namespace, name
	sb, err := sandbox.Create(ctx, r.Config, s)
	if err != nil {
		return nil, err
	}
	return &nsSandbox{sb: sb, cfg: r.Config}, nil
}

// RunHostSandbox implements HostRuntime.
func (r *NamespaceRuntime) RunHostSandbox(ctx context.Context, uid, namespace, name string, nodeIPs []netip.Addr, spec SpecFunc) (PodSandbox, error) {
	if len(nodeIPs) == 0 {
		return nil, errors.New("create sandbox: a host-network pod needs the node's address")
	}
	dir := sandbox.PodDir(r.Config.DataDir, namespace, name)
	s, err := spec(nodeIPs[0], dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.UID, s.Namespace, s.Name = uid, namespace, name
	sb, err := sandbox.CreateHost(ctx, r.Config, s, nodeIPs)
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
func (s *nsSandbox) IPs() []netip.Addr {
	if len(s.sb.IPs) == 0 {
		return []netip.Addr{s.sb.IP}
	}
	return s.sb.IPs
}
func (s *nsSandbox) Dir() string { return s.sb.Dir }
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
