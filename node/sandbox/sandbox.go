package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config is what one node's sandboxes share.
type Config struct {
	// DataDir holds per-pod directories (pods/<ns>_<name>/) and the IPAM file.
	DataDir string
	// Bridge is the node bridge pods attach to ("cni0").
	Bridge string
	// NSPrefix starts every pod network namespace name; it must be unique
	// per node on the machine (e.g. "<cluster>-<node>-").
	NSPrefix string
	// Exe and InitArgs start the infra process: Exe InitArgs... <flags>.
	// For the svcnet binary that is ("/proc/self/exe" resolved, ["sandbox-init"]).
	Exe      string
	InitArgs []string
	IPAM     *IPAM
	// Shim, when set, is the command that runs each container under a shim
	// (Exe "container-shim"), so that containers survive a crash of the
	// agent and a restarted agent adopts them. Without it containers are the
	// agent's children and log through it.
	Shim []string
	// SecondaryIPAM, on a dual-stack node, gives each pod a second address
	// of the other family (nil: single-stack).
	SecondaryIPAM *IPAM
}

// ipams are the node's IPAMs, primary first.
func (cfg Config) ipams() []*IPAM {
	var out []*IPAM
	for _, m := range []*IPAM{cfg.IPAM, cfg.SecondaryIPAM} {
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// Spec describes one pod's sandbox.
type Spec struct {
	Namespace, Name, UID string
	Hostname             string
	ResolvConf, Hosts    []byte
	// NginxFiles, when non-nil, gives the pod a private NginxRoot seeded
	// with these files (name → content).
	NginxFiles map[string][]byte
	// Mounts are the pod's volumes, bind-mounted in its mount namespace.
	Mounts []Mount
}

// Mount is a bind mount of a node path (a volume under the pod's
// directory) on a path of the pod's private mount namespace.
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

// infraArgs are the infra process's flags: the hostname, the pod's
// directory dir (by which sameInfra knows the process) and the bind
// mounts, ordered by the depth of their target (stably: the pod's own
// files, given first, before a volume at the same depth), as a container
// runtime orders a container's mounts, so that a mount inside another is
// made after it. It sorts binds.
func infraArgs(dir, hostname string, binds []Mount) ([]string, error) {
	args := []string{"--hostname", hostname, "--pod-dir", dir}
	sort.SliceStable(binds, func(i, j int) bool {
		return strings.Count(filepath.Clean(binds[i].Target), "/") < strings.Count(filepath.Clean(binds[j].Target), "/")
	})
	for _, m := range binds {
		if strings.Contains(m.Source, ":") || !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) {
			return nil, fmt.Errorf("mount %s on %s: need absolute paths, the source without ':'", m.Source, m.Target)
		}
		flag := "--bind"
		if m.ReadOnly {
			flag = "--bind-ro"
		}
		args = append(args, flag, m.Source+":"+m.Target)
	}
	return args, nil
}

// NginxRoot is the directory private to each nginx pod.
const NginxRoot = "/usr/share/nginx/html"

// Sandbox is a running pod sandbox. Its fields are saved to sandbox.json in
// its directory so that `svcnet exec` can find it.
type Sandbox struct {
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	UID       string     `json:"uid"`
	NetNS     string     `json:"netns"`
	HostIf    string     `json:"hostInterface"`
	IP        netip.Addr `json:"ip"`
	// IPs are every address of the pod, IP first (two on a dual-stack node).
	IPs      []netip.Addr `json:"ips,omitempty"`
	InfraPID int          `json:"infraPID"`
	Dir      string       `json:"dir"`
	// Env per container, for exec.
	Env map[string][]string `json:"env,omitempty"`
	// HostNetwork: the pod has no network namespace of its own
	// (spec.hostNetwork): its containers run in the node agent's network
	// namespace (and in the UTS and mount namespaces of the infra process),
	// its addresses are the node's.
	HostNetwork bool `json:"hostNetwork,omitempty"`

	infra *exec.Cmd
	shim  []string
}

// PodDir is the directory of a pod under a node's data dir.
func PodDir(dataDir, namespace, name string) string {
	return filepath.Join(dataDir, "pods", namespace+"_"+name)
}

// Create builds the sandbox of spec: network namespace, address, files and
// infra process. On error everything created so far is removed.
func Create(ctx context.Context, cfg Config, spec Spec) (_ *Sandbox, err error) {
	if spec.UID == "" || spec.Name == "" {
		return nil, errors.New("create sandbox: pod needs a name and a UID")
	}
	short := strings.ReplaceAll(spec.UID, "-", "")
	if len(short) > 10 {
		short = short[:10]
	}
	sb := &Sandbox{
		Namespace: spec.Namespace, Name: spec.Name, UID: spec.UID,
		NetNS:  cfg.NSPrefix + short,
		HostIf: "veth" + short,
		Dir:    PodDir(cfg.DataDir, spec.Namespace, spec.Name),
		shim:   cfg.Shim,
	}
	defer func() {
		if err != nil {
			_ = sb.Destroy(context.Background(), cfg)
		}
	}()
	var addrs []netip.Prefix
	var gws []netip.Addr
	for _, m := range cfg.ipams() {
		ip, err := m.Allocate(spec.UID)
		if err != nil {
			return nil, fmt.Errorf("create sandbox %s/%s: %w", spec.Namespace, spec.Name, err)
		}
		sb.IPs = append(sb.IPs, ip)
		addrs = append(addrs, netip.PrefixFrom(ip, m.Prefix().Bits()))
		gws = append(gws, m.Gateway())
	}
	sb.IP = sb.IPs[0]
	if err := os.MkdirAll(sb.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	_ = deleteNetNS(ctx, sb.NetNS) // a leftover of a crashed run
	if err := podNet(ctx, sb.NetNS, sb.HostIf, cfg.Bridge, addrs, gws); err != nil {
		return nil, fmt.Errorf("create sandbox %s/%s network: %w", spec.Namespace, spec.Name, err)
	}
	files := map[string][]byte{
		"resolv.conf": spec.ResolvConf,
		"hosts":       spec.Hosts,
		"hostname":    []byte(spec.Hostname + "\n"),
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(sb.Dir, n), b, 0o644); err != nil {
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
	}
	binds := []Mount{
		{Source: filepath.Join(sb.Dir, "resolv.conf"), Target: "/etc/resolv.conf"},
		{Source: filepath.Join(sb.Dir, "hosts"), Target: "/etc/hosts"},
		{Source: filepath.Join(sb.Dir, "hostname"), Target: "/etc/hostname"},
	}
	if spec.NginxFiles != nil {
		html := filepath.Join(sb.Dir, "html")
		if err := os.MkdirAll(html, 0o755); err != nil {
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
		for n, b := range spec.NginxFiles {
			if err := os.WriteFile(filepath.Join(html, n), b, 0o644); err != nil {
				return nil, fmt.Errorf("create sandbox: %w", err)
			}
		}
		binds = append(binds, Mount{Source: html, Target: NginxRoot})
	}
	initArgs, err := infraArgs(sb.Dir, spec.Hostname, append(binds, spec.Mounts...))
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	// `ip netns exec` enters the network namespace and unshares the mount
	// namespace before it execs the infra process; the clone gives it its
	// UTS namespace.
	args := append(append([]string{"netns", "exec", sb.NetNS, cfg.Exe}, cfg.InitArgs...), initArgs...)
	cmd := exec.Command("ip", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS, Setpgid: true, Pdeathsig: 0}
	if err := sb.startInfra(ctx, cmd); err != nil {
		return nil, err
	}
	if err := sb.Save(); err != nil {
		return nil, err
	}
	return sb, nil
}

// startInfra starts the infra process cmd and waits for its "ready"; its
// standard error goes to infra.log in the pod's directory.
func (sb *Sandbox) startInfra(ctx context.Context, cmd *exec.Cmd) error {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	errLog, err := os.Create(filepath.Join(sb.Dir, "infra.log"))
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	defer errLog.Close()
	cmd.Stderr = errLog
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start infra process: %w", err)
	}
	sb.infra = cmd
	sb.InfraPID = cmd.Process.Pid
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(sb.Dir, "infra.log"))
			return fmt.Errorf("infra process of %s/%s failed: %v: %s", sb.Namespace, sb.Name, err, strings.TrimSpace(string(b)))
		}
	case <-time.After(10 * time.Second):
		return fmt.Errorf("infra process of %s/%s not ready after 10s", sb.Namespace, sb.Name)
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// CreateHost builds the sandbox of a host-network pod: its directory
// (logs, saved environment, sandbox.json), the node's addresses as the
// pod's own, and an infra process in the caller's network namespace (the
// node's) with UTS and mount namespaces of its own, as a container runtime
// gives a host-network pod: the hostname is spec.Hostname (the node's
// name) and spec.Mounts are made there, never in the node's mount
// namespace. There is no network namespace or address to allocate. On
// error everything created so far is removed.
func CreateHost(ctx context.Context, cfg Config, spec Spec, nodeIPs []netip.Addr) (_ *Sandbox, err error) {
	if spec.UID == "" || spec.Name == "" {
		return nil, errors.New("create sandbox: pod needs a name and a UID")
	}
	if len(nodeIPs) == 0 {
		return nil, errors.New("create sandbox: a host-network pod needs the node's address")
	}
	if cfg.Exe == "" {
		return nil, errors.New("create sandbox: no infra process command (Config.Exe)")
	}
	sb := &Sandbox{Namespace: spec.Namespace, Name: spec.Name, UID: spec.UID, HostNetwork: true,
		IP: nodeIPs[0], IPs: append([]netip.Addr(nil), nodeIPs...), Dir: PodDir(cfg.DataDir, spec.Namespace, spec.Name), shim: cfg.Shim}
	defer func() {
		if err != nil {
			_ = sb.Destroy(context.Background(), cfg)
		}
	}()
	if err := os.MkdirAll(sb.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	initArgs, err := infraArgs(sb.Dir, spec.Hostname, append([]Mount(nil), spec.Mounts...))
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	cmd := exec.Command(cfg.Exe, append(append([]string(nil), cfg.InitArgs...), initArgs...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS | syscall.CLONE_NEWNS, Setpgid: true}
	if err := sb.startInfra(ctx, cmd); err != nil {
		return nil, err
	}
	if err := sb.Save(); err != nil {
		return nil, err
	}
	return sb, nil
}

// Save writes sandbox.json.
func (sb *Sandbox) Save() error {
	b, _ := json.MarshalIndent(sb, "", "  ")
	if err := os.WriteFile(filepath.Join(sb.Dir, "sandbox.json"), b, 0o644); err != nil {
		return fmt.Errorf("save sandbox state: %w", err)
	}
	return nil
}

// AdoptSandbox returns the running sandbox an earlier agent created for the
// pod namespace/name with this UID, or ErrNotRunning when there is none or
// its infra process is gone.
func AdoptSandbox(cfg Config, namespace, name, uid string) (*Sandbox, error) {
	sb, err := Load(PodDir(cfg.DataDir, namespace, name))
	if err != nil || sb.UID != uid {
		return nil, ErrNotRunning
	}
	if sb.HostNetwork && sb.InfraPID == 0 {
		// Recorded by an agent whose host-network pods had no infra process:
		// their containers run in the node's namespaces.
		sb.shim = cfg.Shim
		return sb, nil
	}
	if sb.InfraPID <= 0 || !sb.sameInfra() {
		return nil, ErrNotRunning
	}
	sb.shim = cfg.Shim
	return sb, nil
}

// Load reads a sandbox saved in dir.
func Load(dir string) (*Sandbox, error) {
	b, err := os.ReadFile(filepath.Join(dir, "sandbox.json"))
	if err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := json.Unmarshal(b, &sb); err != nil {
		return nil, fmt.Errorf("parse %s: %w", dir, err)
	}
	return &sb, nil
}

// Destroy kills the infra process, deletes the network namespace, releases
// the address and removes the pod directory. Containers must be stopped
// first. It is safe to call on a half-built or already destroyed sandbox.
func (sb *Sandbox) Destroy(ctx context.Context, cfg Config) error {
	var errs []error
	if sb.infra != nil && sb.infra.Process != nil {
		_ = sb.infra.Process.Kill()
		_ = sb.infra.Wait()
		sb.infra = nil
	} else if sb.InfraPID > 0 && sb.sameInfra() {
		_ = syscall.Kill(sb.InfraPID, syscall.SIGKILL)
	}
	if sb.HostNetwork {
		if sb.Dir != "" {
			if err := os.RemoveAll(sb.Dir); err != nil {
				return err
			}
		}
		return nil
	}
	if err := deleteHostIf(sb.HostIf); err != nil {
		errs = append(errs, err)
	}
	if err := deleteNetNS(ctx, sb.NetNS); err != nil {
		errs = append(errs, err)
	}
	for _, m := range cfg.ipams() {
		if err := m.Release(sb.UID); err != nil {
			errs = append(errs, err)
		}
	}
	if sb.Dir != "" {
		if err := os.RemoveAll(sb.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sameInfra checks that the saved PID is still our infra process before
// it is killed or adopted: `ip netns exec` replaced itself with the
// sandbox-init process, whose command line names the pod directory
// (--pod-dir, and its bind mounts) and, but for a host-network pod's, the
// network namespace.
func (sb *Sandbox) sameInfra() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(sb.InfraPID) + "/cmdline")
	if err != nil || sb.Dir == "" {
		return false
	}
	cmdline := string(b)
	return strings.Contains(cmdline, "\x00"+sb.Dir+"\x00") || strings.Contains(cmdline, sb.Dir+"/") ||
		(sb.NetNS != "" && strings.Contains(cmdline, sb.NetNS))
}

// Command returns a command that runs argv inside the pod's namespaces with
// env and working directory wd ("/" when empty). The process gets its own
// process group, so Stop can signal everything it started.
func (sb *Sandbox) Command(argv []string, env []string, wd string) *exec.Cmd {
	if wd == "" {
		wd = "/"
	}
	if sb.HostNetwork && sb.InfraPID <= 0 {
		// A host-network pod of an agent that gave them no infra process.
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env, cmd.Dir = env, wd
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	pid := strconv.Itoa(sb.InfraPID)
	args := append([]string{"-t", pid, "-n", "-u", "-m", "--wd=" + wd, "--"}, argv...)
	cmd := exec.Command("nsenter", args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// CleanupStale destroys every sandbox recorded under cfg.DataDir: those a
// previous node agent left when it crashed (a clean exit destroys its own).
// It returns how many it removed; failures are joined in the error.
func CleanupStale(ctx context.Context, cfg Config) (int, error) {
	return CleanupStaleExcept(ctx, cfg, nil)
}

// CleanupStaleExcept is CleanupStale keeping the sandboxes of the pod UIDs
// keep accepts (a restarted agent's pods, which it adopts).
func CleanupStaleExcept(ctx context.Context, cfg Config, keep func(uid string) bool) (int, error) {
	dirs, _ := filepath.Glob(filepath.Join(cfg.DataDir, "pods", "*", "sandbox.json"))
	var errs []error
	n := 0
	for _, f := range dirs {
		sb, err := Load(filepath.Dir(f))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if keep != nil && keep(sb.UID) {
			continue
		}
		if err := sb.Destroy(ctx, cfg); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
