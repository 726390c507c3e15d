package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/internal/uptest"
)

// upCluster is one `svcnet up --nodes 3` running in its own lab network
// namespace, shared by the subtests of a group.
type upCluster struct {
	lab     *testbed.NetNS
	dir     string
	prefix  string
	kubecfg string
	client  *kubernetes.Clientset
}

// startUp runs `svcnet up --nodes 3 --proxy-mode mode` in a new lab
// namespace and waits for its export KUBECONFIG line. Everything goes at
// the end of the test (SIGTERM to up, then svcnet down).
func startUp(t *testing.T, mode string, extra ...string) *upCluster {
	t.Helper()
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "nsenter", "iptables-restore", "nft")
	lab := testbed.NewNetNS(t, "flt-"+mode)
	var rb [2]byte
	_, _ = rand.Read(rb[:])
	c := &upCluster{lab: lab, dir: t.TempDir(), prefix: "flt" + hex.EncodeToString(rb[:])}
	up := uptest.Start(t, uptest.Options{Bin: bin, Lab: lab, DataDir: c.dir, LogPath: filepath.Join(c.dir, "up.log"),
		Args:  append([]string{"--nodes", "3", "--proxy-mode", mode, "--prefix", c.prefix}, extra...),
		Ready: 180 * time.Second, Label: "[" + mode + "]"})
	c.kubecfg = up.Kubeconfig
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubecfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = inNS(lab) // the apiserver listens on the lab's node bridge
	cfg.QPS, cfg.Burst = -1, 0
	c.client = kubernetes.NewForConfigOrDie(cfg)
	return c
}

// nodeName is the name `svcnet up` gives node i (as kind does).
func (c *upCluster) nodeName(i int) string {
	switch i {
	case 1:
		return c.prefix + "-control-plane"
	case 2:
		return c.prefix + "-worker"
	}
	return fmt.Sprintf("%s-worker%d", c.prefix, i-1)
}

// kubectl runs the real kubectl built into svcnet against the cluster, as
// a user in the lab namespace would.
func (c *upCluster) kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.lab.Name, bin, "kubectl", "--kubeconfig", c.kubecfg}, args...)...)
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// podNetNS is the network namespace of a pod of node i, as a path that
// works from any mount namespace: /proc/<infra pid>/ns/net, from the sandbox
// the node agent recorded. (The named namespace under /run/netns is mounted
// only in svcnet up's mount namespace when that is a private one, as under
// ip netns exec.)
func (c *upCluster) podNetNS(t *testing.T, node int, namespace, pod string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, "nodes", c.nodeName(node), "pods", namespace+"_"+pod, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sb struct {
		InfraPID int `json:"infraPID"`
	}
	if err := json.Unmarshal(b, &sb); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("/proc/%d/ns/net", sb.InfraPID)
}

// dialFrom dials from inside the network namespace at path.
func dialFrom(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		res := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			orig, err := netns.Get()
			if err != nil {
				res <- result{nil, err}
				return
			}
			defer orig.Close()
			h, err := netns.GetFromPath(path)
			if err != nil {
				runtime.UnlockOSThread()
				res <- result{nil, err}
				return
			}
			defer h.Close()
			if err := netns.Set(h); err != nil {
				runtime.UnlockOSThread()
				res <- result{nil, err}
				return
			}
			c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
			if netns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
			res <- result{c, err}
		}()
		r := <-res
		return r.c, r.err
	}
}

// clientPod starts a pod that only sleeps on node i and returns its
// network namespace: the tests send their traffic from there, as a client
// pod of that node would.
func (c *upCluster) clientPod(t *testing.T, node int, name string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": "client"}},
		Spec: corev1.PodSpec{NodeName: c.nodeName(node), Containers: []corev1.Container{{Name: "sleep", Image: "busybox",
			Command: []string{"sleep", "100000"}}}}}
	if _, err := c.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 90*time.Second, "client pod "+name+" running", func() (bool, string) {
		p, err := c.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", fmt.Sprintf("phase %s", p.Status.Phase)
	})
	return c.podNetNS(t, node, "default", name)
}

// waitUntil polls f every 200 ms until it holds; after within it fails
// with f's last description.
func waitUntil(t *testing.T, within time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, last := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last: %s)", what, within, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
