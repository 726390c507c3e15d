// Package bgp tests MetalLB's BGP mode end to end: `svcnet up` starts
// `svcnet speaker` on every node, Debian's bird2 runs as the router on the
// host side of the node bridge (the "outside" network) and peers with every
// node, and a client namespace behind the router reaches a LoadBalancer
// Service through the routes bird learned. The cluster runs inside a
// network namespace the test creates, with no route out.
//
// Needs root, ip, curl, bird and birdc (Debian's bird2); skipped without
// them and with -short.
package bgp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/internal/uptest"
)

type cluster struct {
	lab    *testbed.NetNS
	dir    string
	prefix string
	bin    string
	kc     string
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "curl", "bird", "birdc")
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "svcnet")
	if out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/svcnet/svcnet/cmd/svcnet").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var rb [2]byte
	_, _ = rand.Read(rb[:])
	c := &cluster{lab: testbed.NewNetNS(t, "bgp-lab"), dir: dir, prefix: "bgp" + hex.EncodeToString(rb[:]), bin: bin}
	up := uptest.Start(t, uptest.Options{Bin: bin, Lab: c.lab, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "up.log"),
		Args: []string{"--nodes", "3", "--prefix", c.prefix}, Ready: 240 * time.Second,
		OnFailure: func() {
			b, _ := os.ReadFile(filepath.Join(dir, "up.log"))
			t.Logf("up.log:\n%s", b)
			logs, _ := filepath.Glob(filepath.Join(dir, "data", "logs", "speaker-*.log"))
			for _, f := range logs {
				b, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", filepath.Base(f), b)
			}
		}})
	c.kc = up.Kubeconfig
	return c
}

func (c *cluster) kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c.lab.RunContext(ctx, append([]string{c.bin, "kubectl", "--kubeconfig", c.kc}, args...)...)
}

func (c *cluster) apply(t *testing.T, yaml string) {
	t.Helper()
	f := filepath.Join(c.dir, fmt.Sprintf("m%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.kubectl("apply", "-f", f); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, f func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, ok := f()
		if ok {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v; last output:\n%s", what, timeout, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

var viaRE = regexp.MustCompile(`via (\d+\.\d+\.\d+\.\d+)`)

const config = `apiVersion: v1
kind: Namespace
metadata:
  name: metallb-system
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: bgp-pool
  namespace: metallb-system
spec:
  addresses:
    - 10.99.0.0/28
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata:
  name: router
  namespace: metallb-system
spec:
  myASN: 64512
  peerASN: 64500
  peerAddress: 172.18.0.1
  holdTime: 9s
---
apiVersion: metallb.io/v1beta1
kind: Community
metadata:
  name: communities
  namespace: metallb-system
spec:
  communities:
    - name: no-advertise
      value: "65535:65282"
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata:
  name: bgp
  namespace: metallb-system
spec:
  ipAddressPools:
    - bgp-pool
  communities:
    - no-advertise
`

const app = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - image: jocatalin/kubernetes-bootcamp:v1
        name: web
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: LoadBalancer
  selector:
    app: web
  ports:
  - port: 80
    targetPort: 8080
`

// TestBGPWithBird is issue 15's BGP check: bird2 peers with every node;
// the LoadBalancer /32 has one ECMP next hop per announcing node (every
// node with Cluster policy, only the pod's node with Local), a client
// behind the router reaches the Service, and deleting the Service
// withdraws the route.
func TestBGPWithBird(t *testing.T) {
	c := startCluster(t)
	nodeIPs := map[string]string{}
	for i, name := range []string{c.prefix + "-control-plane", c.prefix + "-worker", c.prefix + "-worker2"} {
		nodeIPs[name] = fmt.Sprintf("172.18.0.%d", i+2)
	}

	// bird on the host side of the node bridge, peering with every node;
	// it installs what it learns (ECMP merged) into the lab's kernel.
	conf := "router id 172.18.0.1;\nprotocol device {}\nprotocol kernel { ipv4 { export all; }; merge paths yes; }\n"
	for i := 2; i <= 4; i++ {
		conf += fmt.Sprintf("protocol bgp node%d { local 172.18.0.1 as 64500; neighbor 172.18.0.%d as 64512; hold time 9; ipv4 { import all; export none; }; }\n", i, i)
	}
	confFile, sock := filepath.Join(c.dir, "bird.conf"), filepath.Join(c.dir, "bird.ctl")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c.lab.Start("bird", "-f", "-c", confFile, "-s", sock, "-P", filepath.Join(c.dir, "bird.pid"))
	birdc := func(args ...string) string {
		out, _ := c.lab.Run(append([]string{"birdc", "-s", sock}, args...)...)
		return out
	}
	// The client sits behind the router: its only route is a default
	// route through it.
	client := testbed.NewNetNS(t, "bgp-client")
	testbed.Link(t, c.lab, "bgpcli", "10.30.0.1/24", client, "eth0", "10.30.0.2/24")
	client.MustRun("ip", "route", "add", "default", "via", "10.30.0.1")

	c.apply(t, config)
	eventually(t, 90*time.Second, "a BGP session with every node", func() (string, bool) {
		out := birdc("show", "protocols")
		return out, strings.Count(out, "Established") == 3
	})
	c.apply(t, app)
	lbIP := eventually(t, 90*time.Second, "a LoadBalancer IP", func() (string, bool) {
		out, _ := c.kubectl("get", "svc", "web", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		return out, strings.HasPrefix(out, "10.99.0.")
	})
	hops := func() ([]string, string) {
		out := birdc("show", "route", lbIP+"/32")
		var h []string
		for _, m := range viaRE.FindAllStringSubmatch(out, -1) {
			h = append(h, m[1])
		}
		sort.Strings(h)
		return h, out
	}
	all := []string{"172.18.0.2", "172.18.0.3", "172.18.0.4"}
	eventually(t, 90*time.Second, "the /32 with one next hop per node (Cluster policy)", func() (string, bool) {
		h, out := hops()
		return out, slices.Equal(h, all)
	})
	if out := birdc("show", "route", lbIP+"/32", "all"); !strings.Contains(out, "BGP.community: (65535,65282)") {
		t.Errorf("community alias not announced:\n%s", out)
	}
	bgpStatus := func() (string, bool, []string) {
		out, err := c.kubectl("get", "servicebgpstatuses", "-n", "metallb-system", "-l", "metallb.io/service-name=web,metallb.io/service-namespace=default",
			"-o", `jsonpath={range .items[*]}{.status.node} {.status.serviceName} {.status.peers}{"\n"}{end}`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if strings.TrimSpace(out) == "" {
			lines = nil
		}
		sort.Strings(lines)
		return out, err == nil, lines
	}
	var wantAll []string
	for _, n := range []string{c.prefix + "-control-plane", c.prefix + "-worker", c.prefix + "-worker2"} {
		wantAll = append(wantAll, n+` web ["router"]`)
	}
	sort.Strings(wantAll)
	eventually(t, 60*time.Second, "a ServiceBGPStatus per announcing node", func() (string, bool) {
		out, ok, lines := bgpStatus()
		return out, ok && slices.Equal(lines, wantAll)
	})
	eventually(t, 30*time.Second, "ECMP route in the router's kernel", func() (string, bool) {
		out, _ := c.lab.Run("ip", "route", "show", lbIP)
		return out, strings.Count(out, "nexthop via") == 3
	})
	eventually(t, 60*time.Second, "the client reaches the Service through the router", func() (string, bool) {
		out, err := client.Run("curl", "-sS", "--max-time", "5", "http://"+lbIP+"/")
		return out, err == nil && strings.Contains(out, "Hello Kubernetes bootcamp!")
	})

	// Local policy: only the node running the pod announces.
	podNode, err := c.kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[0].spec.nodeName}")
	if err != nil || nodeIPs[podNode] == "" {
		t.Fatalf("pod node: %q %v", podNode, err)
	}
	if out, err := c.kubectl("patch", "svc", "web", "-p", `{"spec":{"externalTrafficPolicy":"Local"}}`); err != nil {
		t.Fatalf("patch: %v %s", err, out)
	}
	eventually(t, 60*time.Second, "only the pod's node announces (Local policy)", func() (string, bool) {
		h, out := hops()
		return out, slices.Equal(h, []string{nodeIPs[podNode]})
	})
	eventually(t, 60*time.Second, "only the pod's node keeps a ServiceBGPStatus", func() (string, bool) {
		out, ok, lines := bgpStatus()
		return out, ok && slices.Equal(lines, []string{podNode + ` web ["router"]`})
	})
	eventually(t, 60*time.Second, "the client still reaches the Service", func() (string, bool) {
		out, err := client.Run("curl", "-sS", "--max-time", "5", "http://"+lbIP+"/")
		return out, err == nil && strings.Contains(out, "Hello Kubernetes bootcamp!")
	})

	if out, err := c.kubectl("delete", "svc", "web"); err != nil {
		t.Fatalf("delete: %v %s", err, out)
	}
	eventually(t, 60*time.Second, "route withdrawn after the Service is deleted", func() (string, bool) {
		out := birdc("show", "route", lbIP+"/32")
		return out, strings.Contains(out, "Network not found")
	})
	eventually(t, 30*time.Second, "kernel route gone", func() (string, bool) {
		out, _ := c.lab.Run("ip", "route", "show", lbIP)
		return out, strings.TrimSpace(out) == ""
	})
	eventually(t, 60*time.Second, "no ServiceBGPStatus left", func() (string, bool) {
		out, ok, lines := bgpStatus()
		return out, ok && len(lines) == 0
	})
}
