package agent

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/node/sandbox"
)

// nodeRuntime runs NamespaceRuntime's sandboxes as if the agent ran in the
// network namespace node: what creates or removes links, namespaces and
// the infra process runs on a thread inside it. Containers enter their pod
// with nsenter, from anywhere.
type nodeRuntime struct {
	rt   *NamespaceRuntime
	node *testbed.NetNS
}

type nodeSandbox struct {
	PodSandbox
	node *testbed.NetNS
}

func (r *nodeRuntime) RunPodSandbox(ctx context.Context, uid, ns, name string, spec SpecFunc) (PodSandbox, error) {
	var sb PodSandbox
	err := r.node.Do(func() (err error) { sb, err = r.rt.RunPodSandbox(ctx, uid, ns, name, spec); return err })
	if err != nil {
		return nil, err
	}
	return &nodeSandbox{PodSandbox: sb, node: r.node}, nil
}

func (r *nodeRuntime) RunHostSandbox(ctx context.Context, uid, ns, name string, nodeIPs []netip.Addr, spec SpecFunc) (PodSandbox, error) {
	var sb PodSandbox
	err := r.node.Do(func() (err error) { sb, err = r.rt.RunHostSandbox(ctx, uid, ns, name, nodeIPs, spec); return err })
	if err != nil {
		return nil, err
	}
	return &nodeSandbox{PodSandbox: sb, node: r.node}, nil
}

func (s *nodeSandbox) Destroy(ctx context.Context) error {
	return s.node.Do(func() error { return s.PodSandbox.Destroy(ctx) })
}

// mountPointsOf are the mount points of this process's mount namespace
// (the machine's), less the named network namespaces.
func mountPointsOf(t *testing.T) map[string]bool {
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

// Real pods, a pod network one and a host-network one, each with the
// kube-api-access volume: their processes read the token, CA and
// namespace at /var/run/secrets/kubernetes.io/serviceaccount, which is
// read-only, and the host-network pod has the node's name as hostname,
// the node's network namespace and a mount namespace of its own; the
// machine's mount namespace gets no mount. The mount point directory is
// created on the machine (an empty directory; see node/README.md).
func TestVolumesInSandboxes(t *testing.T) {
	testbed.RequireCommand(t, "ip", "nsenter", "sh", "cat", "hostname", "readlink")
	node, cfg := sandboxNode(t, "agvol", "10.244.3.1/24")
	dataDir := cfg.DataDir
	before := mountPointsOf(t)
	myHost, _ := os.Hostname()

	client := fake.NewClientset(rootCA("default"))
	newTokenServer(client, time.Hour)
	e := startAgent(t, client, func(*hostRuntime) Runtime { return &nodeRuntime{rt: &NamespaceRuntime{Config: cfg}, node: node} },
		func(c *Config) { c.DataDir = dataDir })
	ctx := context.Background()
	script := `cd ` + saMountPath + ` && cat namespace && echo && cat ca.crt && cat token && echo && stat -c %a token && ` +
		`{ touch x 2>/dev/null && echo writable || echo read-only; } && hostname && readlink /proc/self/ns/net`
	reader := v1.Container{Name: "reader", Image: "busybox", Command: []string{"sh", "-c", script}}
	var pods []*v1.Pod
	for _, name := range []string{"in-pod-net", "in-host-net"} {
		p := saPod(name, reader)
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		p.Spec.HostNetwork = name == "in-host-net"
		pods = append(pods, p)
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodeNet := strings.TrimSpace(node.MustRun("readlink", "/proc/self/ns/net"))
	for _, p := range pods {
		e.eventually(p.Name+" Succeeded", func() (bool, string) {
			cur := e.pod(p.Name)
			return cur != nil && cur.Status.Phase == v1.PodSucceeded, cur.String()
		})
		b, _ := os.ReadFile(sandbox.LogPath(sandbox.PodDir(dataDir, "default", p.Name), "reader", 0))
		lines := strings.Split(string(sandbox.LogLines(b, false)), "\n")
		if len(lines) < 9 {
			t.Errorf("%s: log %q", p.Name, lines)
			continue
		}
		host, netns := p.Name, lines[8]
		if p.Spec.HostNetwork {
			host = "node-1"
			if netns != nodeNet {
				t.Errorf("%s: network namespace %s, the node's is %s", p.Name, netns, nodeNet)
			}
		} else if netns == nodeNet {
			t.Errorf("%s: runs in the node's network namespace", p.Name)
		}
		want := []string{"default", "-----BEGIN CERTIFICATE-----", "fake", "-----END CERTIFICATE-----", "token-", "644", "read-only", host}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("%s: line %d of the log is %q, want %q; log:\n%s", p.Name, i+1, lines[i], w, strings.Join(lines, "\n"))
				break
			}
		}
	}
	// A hostPath volume is the node's directory, bind-mounted where the
	// container asks: it reads what the node put there and writes back.
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "in"), []byte("from the node"), 0o644); err != nil {
		t.Fatal(err)
	}
	hp := newPod("host-path", v1.Container{Name: "c", Image: "busybox", Command: []string{"sh", "-c", "cat /mnt/node/in > /mnt/node/out && echo ok"},
		VolumeMounts: []v1.VolumeMount{{Name: "node", MountPath: "/mnt/node"}}})
	hp.Spec.RestartPolicy = v1.RestartPolicyNever
	dirType := v1.HostPathDirectory
	hp.Spec.Volumes = []v1.Volume{{Name: "node", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir, Type: &dirType}}}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, hp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("host-path Succeeded", func() (bool, string) {
		cur := e.pod("host-path")
		return cur != nil && cur.Status.Phase == v1.PodSucceeded, cur.String()
	})
	if b, err := os.ReadFile(filepath.Join(hostDir, "out")); err != nil || string(b) != "from the node" {
		t.Errorf("hostPath: the pod wrote %q (%v), want %q", b, err, "from the node")
	}
	if h, _ := os.Hostname(); h != myHost {
		t.Errorf("the machine's hostname changed to %q", h)
	}
	for m := range mountPointsOf(t) {
		if !before[m] {
			t.Errorf("mount point %s appeared in the machine's mount namespace", m)
		}
	}
}

// sandboxNode is a test network namespace playing a node (name is its
// prefix), with the bridge cni0 holding gateway (the first address of the
// pod CIDR, as "10.244.3.1/24"), and the sandbox configuration of pods in
// it. Its cleanup, registered before the test starts an agent and so run
// after the agent stopped, removes whatever sandbox a failure left, then
// any pod network namespace.
func sandboxNode(t *testing.T, name, gateway string) (*testbed.NetNS, sandbox.Config) {
	t.Helper()
	node := testbed.NewNetNS(t, name)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gw := netip.MustParsePrefix(gateway)
	ipam, err := sandbox.NewIPAM(gw.Masked(), "")
	if err != nil {
		t.Fatal(err)
	}
	tool := name + strconv.Itoa(os.Getpid()%100000)
	cfg := sandbox.Config{DataDir: t.TempDir(), Bridge: "cni0", NSPrefix: testbed.Prefix + tool + "-", Exe: exe,
		InitArgs: []string{"sandbox-init"}, IPAM: ipam}
	t.Cleanup(func() {
		_ = node.Do(func() error { _, err := sandbox.CleanupStale(context.Background(), cfg); return err })
		testbed.SweepPrefix(tool)
	})
	if err := node.Do(func() error { return sandbox.EnsureBridge(context.Background(), "cni0", gw) }); err != nil {
		t.Fatal(err)
	}
	return node, cfg
}
