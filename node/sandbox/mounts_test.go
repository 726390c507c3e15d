package sandbox

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
)

// mountPoints are the mount points of the calling process's mount
// namespace (the node's, for a test), less the named network namespaces
// that `ip netns add` mounts there.
func mountPoints(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && !strings.HasPrefix(f[4], "/run/netns") && !strings.HasPrefix(f[4], "/var/run/netns") {
			out[f[4]] = true
		}
	}
	return out
}

// checkNoNewMounts fails t if the node's mount namespace gained a mount
// point since before.
func checkNoNewMounts(t *testing.T, before map[string]bool) {
	t.Helper()
	for m := range mountPoints(t) {
		if !before[m] {
			t.Errorf("mount point %s appeared in the node's mount namespace", m)
		}
	}
}

// volumeFixture makes a volume directory with a file, a read-write
// directory and a single file to mount, all under t's temporary
// directory; the mount targets are there too (missing, to be created).
func volumeFixture(t *testing.T) (dir string, mounts []Mount) {
	t.Helper()
	dir = t.TempDir()
	for _, d := range []string{"vol-ro", "vol-rw"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "vol-ro", "namespace"), []byte("default"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "single"), []byte("one file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	return dir, []Mount{
		// Deeper first: the sandbox orders them by depth.
		{Source: filepath.Join(dir, "single"), Target: target + "/etc/app/single.conf"},
		{Source: filepath.Join(dir, "vol-ro"), Target: target + "/secrets/sa", ReadOnly: true},
		{Source: filepath.Join(dir, "vol-rw"), Target: target + "/data"},
	}
}

// checkMounts checks, through run (a command in the pod), the mounts of
// volumeFixture: content, read-only, read-write, single file.
func checkMounts(t *testing.T, dir string, run func(argv ...string) (string, error)) {
	t.Helper()
	target := filepath.Join(dir, "target")
	if got, err := run("cat", target+"/secrets/sa/namespace"); err != nil || got != "default" {
		t.Errorf("read-only volume: %q %v", got, err)
	}
	if out, err := run("touch", target+"/secrets/sa/x"); err == nil || !strings.Contains(out, "Read-only file system") {
		t.Errorf("write to a read-only volume: %q %v", out, err)
	}
	if out, err := run("sh", "-c", "echo written > "+target+"/data/f"); err != nil {
		t.Errorf("write to a read-write volume: %q %v", out, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "vol-rw", "f")); string(b) != "written\n" {
		t.Errorf("the pod's write is not in the volume: %q", b)
	}
	if got, err := run("cat", target+"/etc/app/single.conf"); err != nil || got != "one file\n" {
		t.Errorf("file mount: %q %v", got, err)
	}
	// On the node the mount points exist (empty), the volumes do not show.
	if fi, err := os.Stat(target + "/secrets/sa"); err != nil || !fi.IsDir() {
		t.Errorf("mount point on the node: %v", err)
	}
	if entries, _ := os.ReadDir(target + "/secrets/sa"); len(entries) != 0 {
		t.Errorf("the node sees the pod's volume: %v", entries)
	}
	if b, err := os.ReadFile(target + "/etc/app/single.conf"); err != nil || len(b) != 0 {
		t.Errorf("file mount point on the node: %q %v", b, err)
	}
}

// A pod's volumes are bind-mounted in its own mount namespace, read-only
// where asked; the node's mount namespace gets nothing.
func TestSandboxMounts(t *testing.T) {
	testbed.RequireCommand(t, "ip", "nsenter")
	node := testbed.NewNetNS(t, "sbmount")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	before := mountPoints(t)
	dir, mounts := volumeFixture(t)
	data := t.TempDir()
	ipam, err := NewIPAM(netip.MustParsePrefix("10.244.2.0/24"), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: data, Bridge: "cni0", NSPrefix: "svcnt-m" + strconv.Itoa(os.Getpid()%100000) + "-", Exe: exe,
		InitArgs: []string{"sandbox-init"}, IPAM: ipam}
	var sb *Sandbox
	t.Cleanup(func() {
		if sb != nil {
			_ = inNS(node, func() error { return sb.Destroy(context.Background(), cfg) })
		}
	})
	err = inNS(node, func() error {
		if err := EnsureBridge(context.Background(), "cni0", netip.MustParsePrefix("10.244.2.1/24")); err != nil {
			return err
		}
		sb, err = Create(context.Background(), cfg, Spec{Namespace: "default", Name: "vols", UID: "uid-vols-0123456789", Hostname: "vols",
			ResolvConf: []byte("nameserver 10.96.0.10\n"), Hosts: []byte("127.0.0.1\tlocalhost\n"), Mounts: mounts})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checkMounts(t, dir, func(argv ...string) (string, error) {
		out, err := sb.Command(argv, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, "").CombinedOutput()
		return string(out), err
	})
	checkNoNewMounts(t, before)
}

// A host-network pod's sandbox: an infra process in the node's network
// namespace with UTS and mount namespaces of its own (hostname, volumes),
// adopted by a restarted agent through its --pod-dir, and destroyed.
func TestHostSandbox(t *testing.T) {
	testbed.RequireCommand(t, "ip", "nsenter", "hostname", "readlink")
	node := testbed.NewNetNS(t, "sbhost")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	myHost, _ := os.Hostname()
	before := mountPoints(t)
	dir, mounts := volumeFixture(t)
	cfg := Config{DataDir: t.TempDir(), Exe: exe, InitArgs: []string{"sandbox-init"}}
	nodeIP := netip.MustParseAddr("172.18.0.2")
	var sb *Sandbox
	t.Cleanup(func() {
		if sb != nil {
			_ = sb.Destroy(context.Background(), cfg)
		}
	})
	err = inNS(node, func() error {
		sb, err = CreateHost(context.Background(), cfg, Spec{Namespace: "kube-system", Name: "proxy", UID: "uid-proxy", Hostname: "node-7", Mounts: mounts},
			[]netip.Addr{nodeIP})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(argv ...string) (string, error) {
		out, err := sb.Command(argv, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, "").CombinedOutput()
		return string(out), err
	}
	if got, err := run("hostname"); err != nil || got != "node-7\n" {
		t.Errorf("hostname in the pod: %q %v", got, err)
	}
	if h, _ := os.Hostname(); h != myHost {
		t.Errorf("the machine's hostname changed to %q", h)
	}
	nodeNet := strings.TrimSpace(node.MustRun("readlink", "/proc/self/ns/net"))
	if got, err := run("readlink", "/proc/self/ns/net"); err != nil || strings.TrimSpace(got) != nodeNet {
		t.Errorf("network namespace in the pod %q (%v), the node's is %q", got, err, nodeNet)
	}
	if sb.IP != nodeIP || !sb.HostNetwork {
		t.Errorf("sandbox %+v", sb)
	}
	checkMounts(t, dir, run)
	checkNoNewMounts(t, before)

	// A restarted agent adopts it (the same UID), not another pod's.
	if _, err := AdoptSandbox(cfg, "kube-system", "proxy", "uid-other"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("adopted with another UID: %v", err)
	}
	adopted, err := AdoptSandbox(cfg, "kube-system", "proxy", "uid-proxy")
	if err != nil {
		t.Fatalf("adopt: %v", err)
	}
	if adopted.InfraPID != sb.InfraPID {
		t.Errorf("adopted infra %d, want %d", adopted.InfraPID, sb.InfraPID)
	}
	pid := sb.InfraPID
	if err := adopted.Destroy(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	_, _ = sb.infra.Process.Wait() // the adopted one only signals it
	sb.infra = nil
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("infra process %d still there: %v", pid, err)
	}
	if _, err := os.Stat(sb.Dir); !os.IsNotExist(err) {
		t.Errorf("pod directory left: %v", err)
	}
}

// An infra process that shares its parent's mount namespace refuses to
// mount anything. It runs under a helper in a mount namespace of its own,
// so that a regression could not touch the node's.
func TestInitRefusesSharedMountNamespace(t *testing.T) {
	testbed.RequireRoot(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "src"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// One that does not refuse would wait for a signal: the helper is
	// killed (and its child with it) after a while.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "spawn-init", "--bind", filepath.Join(dir, "src")+":"+filepath.Join(dir, "dst"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to mount") {
		t.Errorf("sandbox-init in its parent's mount namespace: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "dst")); !os.IsNotExist(err) {
		t.Errorf("mount point created: %v", err)
	}
}
