// Package speaker tests MetalLB's layer-2 mode end to end: `svcnet up`
// starts `svcnet speaker` on every node, and a client on the node network
// (a namespace on the cluster's bridge with nothing but its connected route)
// reaches a LoadBalancer Service's address through ARP, as a machine next to
// bare-metal nodes does. One cluster serves every check; it runs inside a
// network namespace the test creates, with no route out.
//
// When svcnet up has --ip-family, the cluster is dual-stack and an IPv6
// Service is checked the same way over NDP (the client's own kernel
// resolves the address).
//
// Needs root, ip, nsenter, curl and arping (iputils-arping); skipped
// without them and with -short.
package speaker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/internal/uptest"
)

type cluster struct {
	// dual: svcnet up has --ip-family and runs dual-stack, so the IPv6
	// checks (NDP) run too.
	dual   bool
	lab    *testbed.NetNS
	dir    string
	prefix string
	bin    string
	kc     string
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "nsenter", "curl", "arping")
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
	c := &cluster{lab: testbed.NewNetNS(t, "speaker-lab"), dir: dir, prefix: "spk" + hex.EncodeToString(rb[:]), bin: bin}
	args := []string{"--nodes", "3", "--prefix", c.prefix}
	if help, _ := exec.Command(bin, "up", "--help").CombinedOutput(); strings.Contains(string(help), "--ip-family") {
		c.dual = true
		args = append(args, "--ip-family", "dual")
	}
	up := uptest.Start(t, uptest.Options{Bin: bin, Lab: c.lab, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "up.log"),
		Args: args, Ready: 180 * time.Second,
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

func (c *cluster) nodeName(i int) string {
	switch i {
	case 1:
		return c.prefix + "-control-plane"
	case 2:
		return c.prefix + "-worker"
	}
	return fmt.Sprintf("%s-worker%d", c.prefix, i-1)
}

// kubectl runs svcnet's built-in kubectl (the real k8s.io/kubectl) from the
// lab namespace, where the apiserver listens.
func (c *cluster) kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c.lab.RunContext(ctx, append([]string{c.bin, "kubectl", "--kubeconfig", c.kc}, args...)...)
}

func (c *cluster) onNode(node string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.bin, append([]string{"node-exec", "--data-dir", filepath.Join(c.dir, "data"), node, "--"}, args...)...).CombinedOutput()
	return string(out), err
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

var macRE = regexp.MustCompile(`(?i)\[([0-9a-f:]{17})\]`)

// arping returns the distinct MACs answering ARP for ip on the client.
func arping(client *testbed.NetNS, ip string) (map[string]bool, string) {
	out, _ := client.Run("arping", "-c", "3", "-w", "4", "-I", "eth0", ip)
	macs := map[string]bool{}
	for _, m := range macRE.FindAllStringSubmatch(out, -1) {
		macs[strings.ToLower(m[1])] = true
	}
	return macs, out
}

var assignedRE = regexp.MustCompile(`announcing from node "([^"]+)" with protocol "layer2"`)

// announcers lists the nodes named by the Service's nodeAssigned events,
// newest last.
func (c *cluster) announcers(svc string) ([]string, string) {
	out, err := c.kubectl("get", "events", "--field-selector", "involvedObject.kind=Service,involvedObject.name="+svc+",reason=nodeAssigned",
		"--sort-by", ".metadata.creationTimestamp", "-o", `jsonpath={range .items[*]}{.source.component} {.message}{"\n"}{end}`)
	if err != nil {
		return nil, out
	}
	var nodes []string
	for _, m := range assignedRE.FindAllStringSubmatch(out, -1) {
		nodes = append(nodes, m[1])
	}
	return nodes, out
}

// wantL2Status waits until the Service's ServiceL2Status objects (MetalLB's
// status kind, in metallb-system) are exactly one naming node (none when
// node is "").
func (c *cluster) wantL2Status(t *testing.T, svc, node string) {
	t.Helper()
	want := ""
	if node != "" {
		want = node + " " + svc + " default"
	}
	eventually(t, 30*time.Second, fmt.Sprintf("ServiceL2Status of %s naming %q", svc, node), func() (string, bool) {
		out, err := c.kubectl("get", "servicel2statuses", "-n", "metallb-system", "-l", "metallb.io/service-name="+svc+",metallb.io/service-namespace=default",
			"-o", `jsonpath={range .items[*]}{.status.node} {.status.serviceName} {.status.serviceNamespace}|{.metadata.labels.metallb\.io/node}{"\n"}{end}`)
		if err != nil {
			return out, false
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if want == "" {
			return out, strings.TrimSpace(out) == ""
		}
		return out, len(lines) == 1 && lines[0] == want+"|"+node
	})
}

// speakerPID finds the speaker process of a node of this cluster.
func (c *cluster) speakerPID(node string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && args[1] == "speaker" && slices.Contains(args, node) && strings.Contains(string(b), c.dir) {
			return pid
		}
	}
	return 0
}

// preferredCheck creates Service web-preferred (172.18.0.202, labelled
// l2=preferred) and an L2Advertisement for it alone whose
// preferredNodeSelectors name the node last in hash order for that address,
// then checks that this node announces it: the nodeAssigned event, the
// ServiceL2Status and the one MAC answering ARP. It returns the node.
func (c *cluster) preferredCheck(t *testing.T, client *testbed.NetNS, macOf map[string]string) string {
	t.Helper()
	nodes := []string{c.nodeName(1), c.nodeName(2), c.nodeName(3)}
	hash := func(n string) string {
		h := sha256.Sum256([]byte(n + "#172.18.0.202"))
		return hex.EncodeToString(h[:])
	}
	slices.SortFunc(nodes, func(a, b string) int { return strings.Compare(hash(a), hash(b)) })
	want := nodes[2]
	manifest := fmt.Sprintf(`apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: preferred
  namespace: metallb-system
spec:
  ipAddressPools: [node-network]
  serviceSelectors:
  - matchLabels: {l2: preferred}
  preferredNodeSelectors:
  - weight: 50
    preference:
      matchLabels: {kubernetes.io/hostname: %s}
---
apiVersion: v1
kind: Service
metadata:
  name: web-preferred
  labels: {l2: preferred}
spec:
  type: LoadBalancer
  loadBalancerIP: 172.18.0.202
  selector: {app: web}
  ports:
  - {port: 80, targetPort: 8080}
`, want)
	f := filepath.Join(c.dir, "preferred.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.kubectl("apply", "-f", f); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	var got string
	eventually(t, 60*time.Second, "a nodeAssigned event on Service web-preferred", func() (string, bool) {
		nodes, out := c.announcers("web-preferred")
		if len(nodes) > 0 {
			got = nodes[len(nodes)-1]
		}
		return out, len(nodes) > 0
	})
	if got != want {
		t.Fatalf("web-preferred announced by %s, want the preferred node %s (hash order %v)", got, want, nodes)
	}
	c.wantL2Status(t, "web-preferred", want)
	eventually(t, 30*time.Second, "only the preferred node's MAC answers ARP for 172.18.0.202", func() (string, bool) {
		macs, out := arping(client, "172.18.0.202")
		return fmt.Sprintf("%v (want %s)\n%s", macs, macOf[want], out), len(macs) == 1 && macs[macOf[want]]
	})
	return want
}

func TestLayer2(t *testing.T) {
	c := startCluster(t)
	abs, _ := filepath.Abs("testdata/l2.yaml")
	if out, err := c.kubectl("apply", "-f", abs); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	// A machine on the node network: a port of the cluster's bridge, an
	// address in the node subnet and no route but the connected one.
	client := testbed.NewNetNS(t, "speaker-client")
	testbed.Link(t, c.lab, "spkcl0", "", client, "eth0", "172.18.0.250/24")
	c.lab.MustRun("ip", "link", "set", "spkcl0", "master", c.prefix+"0")
	if c.dual {
		abs6, _ := filepath.Abs("testdata/l2-ipv6.yaml")
		if out, err := c.kubectl("apply", "-f", abs6); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
		client.MustRun("ip", "-6", "addr", "add", "fd00:172:18::250/64", "dev", "eth0", "nodad")
	} else {
		t.Log("svcnet up has no --ip-family: IPv6 (NDP) is checked in speaker/l2 only")
	}
	if routes := strings.TrimSpace(client.MustRun("ip", "-4", "route", "show")); strings.Count(routes, "\n") != 0 || !strings.HasPrefix(routes, "172.18.0.0/24 dev eth0") {
		t.Fatalf("client routes:\n%s", routes)
	}

	eventually(t, 120*time.Second, "EXTERNAL-IP of web and web-local", func() (string, bool) {
		out, _ := c.kubectl("get", "svc", "web", "web-local", "-o", `jsonpath={range .items[*]}{.status.loadBalancer.ingress[0].ip} {end}`)
		return out, strings.TrimSpace(out) == "172.18.0.200 172.18.0.201"
	})
	// lbipam counts the pool's addresses in its status, as MetalLB's
	// controller does, with the identity svcnet up gives it.
	eventually(t, 60*time.Second, "IPAddressPool node-network's status", func() (string, bool) {
		out, _ := c.kubectl("get", "ipaddresspool", "node-network", "-n", "metallb-system", "-o",
			`jsonpath={.status.assignedIPv4} {.status.availableIPv4} {.status.assignedIPv6} {.status.availableIPv6}`)
		var a4, f4, a6, f6 int
		if n, _ := fmt.Sscan(out, &a4, &f4, &a6, &f6); n != 4 {
			return out, false
		}
		return out, a4 >= 2 && a4+f4 == 11 && a6 == 0 && f6 == 0
	})
	// MetalLB v0.16's ConfigurationStates: the controller and every
	// speaker loaded the whole configuration.
	eventually(t, 60*time.Second, "ConfigurationStates of the controller and the three speakers", func() (string, bool) {
		out, _ := c.kubectl("get", "configurationstates", "-n", "metallb-system", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.result} {end}`)
		want := []string{"controller=Valid"}
		for i := 1; i <= 3; i++ {
			want = append(want, "speaker-"+c.nodeName(i)+"=Valid")
		}
		for _, w := range want {
			if !strings.Contains(" "+out, " "+w+" ") {
				return out, false
			}
		}
		return out, true
	})
	curl := func(ip string) (string, bool) {
		out, err := client.Run("curl", "-sS", "-m", "3", "http://"+ip+"/")
		return out, err == nil && strings.Contains(out, "Hello Kubernetes bootcamp!")
	}
	eventually(t, 120*time.Second, "curl http://172.18.0.200/ from the client", func() (string, bool) { return curl("172.18.0.200") })

	nodeMAC := func(node string) string {
		out, err := c.onNode(node, "cat", "/sys/class/net/eth0/address")
		if err != nil {
			t.Fatalf("node-exec %s: %v\n%s", node, err, out)
		}
		return strings.ToLower(strings.TrimSpace(out))
	}
	macOf := map[string]string{}
	for i := 1; i <= 3; i++ {
		macOf[c.nodeName(i)] = nodeMAC(c.nodeName(i))
	}

	// One node announces, named by the event; only its MAC answers ARP.
	var first string
	eventually(t, 60*time.Second, "a nodeAssigned event on Service web", func() (string, bool) {
		nodes, out := c.announcers("web")
		if len(nodes) > 0 {
			first = nodes[len(nodes)-1]
		}
		return out, len(nodes) > 0 && strings.Contains(out, "metallb-speaker ")
	})
	macs, out := arping(client, "172.18.0.200")
	if len(macs) != 1 || !macs[macOf[first]] {
		t.Fatalf("arping 172.18.0.200: want exactly %s (node %s), got %v:\n%s", macOf[first], first, macs, out)
	}
	t.Logf("web (Cluster) announced by %s (%s)", first, macOf[first])
	c.wantL2Status(t, "web", first)

	// Local policy: the announcing node hosts a ready endpoint.
	eventually(t, 60*time.Second, "curl http://172.18.0.201/ (Local) from the client", func() (string, bool) { return curl("172.18.0.201") })
	pods, err := c.kubectl("get", "pods", "-l", "app=web", "-o", `jsonpath={range .items[*]}{.spec.nodeName} {end}`)
	if err != nil {
		t.Fatal(err)
	}
	var local string
	eventually(t, 60*time.Second, "a nodeAssigned event on Service web-local", func() (string, bool) {
		nodes, out := c.announcers("web-local")
		if len(nodes) > 0 {
			local = nodes[len(nodes)-1]
		}
		return out, len(nodes) > 0
	})
	if !slices.Contains(strings.Fields(pods), local) {
		t.Fatalf("web-local is announced by %s, which hosts none of the pods (on %q)", local, pods)
	}
	if macs, out := arping(client, "172.18.0.201"); len(macs) != 1 || !macs[macOf[local]] {
		t.Fatalf("arping 172.18.0.201: want exactly %s (node %s), got %v:\n%s", macOf[local], local, macs, out)
	}

	// serviceSelectors and preferredNodeSelectors: a second L2Advertisement
	// applying only to Services labelled l2=preferred prefers the node the
	// hash order puts last for 172.18.0.202, and that node announces it.
	preferred := c.preferredCheck(t, client, macOf)
	t.Logf("web-preferred announced by the preferred node %s", preferred)

	// IPv6: the client's kernel resolves the address by a neighbor
	// solicitation, and the answer is the announcing node's MAC.
	neigh6 := func() string {
		out, _ := client.Run("ip", "-6", "neigh", "show", "fd00:172:18::200", "dev", "eth0")
		if m := regexp.MustCompile(`lladdr (\S+)`).FindStringSubmatch(out); m != nil {
			return strings.ToLower(m[1])
		}
		return ""
	}
	curl6 := func() (string, bool) {
		out, err := client.Run("curl", "-sS", "-m", "3", "http://[fd00:172:18::200]/")
		return out, err == nil && strings.Contains(out, "Hello Kubernetes bootcamp!")
	}
	var v6node string
	if c.dual {
		eventually(t, 120*time.Second, "curl http://[fd00:172:18::200]/ from the client", curl6)
		eventually(t, 60*time.Second, "a nodeAssigned event on Service web6", func() (string, bool) {
			nodes, out := c.announcers("web6")
			if len(nodes) > 0 {
				v6node = nodes[len(nodes)-1]
			}
			return out, len(nodes) > 0
		})
		if got := neigh6(); got != macOf[v6node] {
			t.Fatalf("fd00:172:18::200 resolved to %q, want %s (node %s)", got, macOf[v6node], v6node)
		}
		c.wantL2Status(t, "web6", v6node)
		t.Logf("web6 (IPv6) announced by %s (%s)", v6node, macOf[v6node])
	}

	// Failover: the announcing node's speaker dies (SIGKILL: no goodbye).
	// Another node takes over once its Lease expires and tells the client
	// by gratuitous ARP: the client's neighbor entry moves to the new MAC
	// without the client asking, and curl works through the new node.
	pid := c.speakerPID(first)
	if pid == 0 {
		t.Fatalf("no speaker process for node %s", first)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var second string
	eventually(t, 60*time.Second, "the client's neighbor entry for 172.18.0.200 leaves "+first, func() (string, bool) {
		out, _ := client.Run("ip", "neigh", "show", "172.18.0.200", "dev", "eth0")
		for n, m := range macOf {
			if n != first && strings.Contains(out, m) {
				second = n
			}
		}
		if second == "" {
			return out, false
		}
		out, ok := curl("172.18.0.200")
		return out, ok
	})
	t.Logf("failover: %s -> %s; the client's curl works through the new node %.1fs after the SIGKILL (lease duration 6s)",
		first, second, time.Since(killed).Seconds())
	if macs, out := arping(client, "172.18.0.200"); len(macs) != 1 || !macs[macOf[second]] {
		t.Fatalf("after failover, arping 172.18.0.200: want exactly %s (node %s), got %v:\n%s", macOf[second], second, macs, out)
	}
	eventually(t, 30*time.Second, "a nodeAssigned event naming "+second, func() (string, bool) {
		nodes, out := c.announcers("web")
		return out, slices.Contains(nodes, second)
	})
	c.wantL2Status(t, "web", second)
	if c.dual {
		// web6's announcer, whichever it was, is now a node whose speaker
		// lives, and the client reaches it (its neighbor entry moved by an
		// unsolicited NA if the IPv6 address moved too).
		// If web6 did not move with web, its announcer dies now, so that
		// the IPv6 takeover (unsolicited NA) is exercised either way.
		dead := map[string]bool{macOf[first]: true}
		if v6node != first {
			if pid := c.speakerPID(v6node); pid == 0 {
				t.Fatalf("no speaker process for node %s", v6node)
			} else if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			dead[macOf[v6node]] = true
		}
		killed := time.Now()
		eventually(t, 60*time.Second, "web6 reachable through a live speaker's node", func() (string, bool) {
			if got := neigh6(); got == "" || dead[got] {
				return "neighbor " + got, false
			}
			return curl6()
		})
		t.Logf("IPv6 failover from %s: the client's neighbor entry moved and curl works %.1fs after the SIGKILL", v6node, time.Since(killed).Seconds())
	}

	// Deleting the Service withdraws: no answer, no status object.
	if out, err := c.kubectl("delete", "svc", "web"); err != nil {
		t.Fatalf("kubectl delete svc web: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, "no ARP answer for 172.18.0.200 after the Service is deleted", func() (string, bool) {
		macs, out := arping(client, "172.18.0.200")
		return out, len(macs) == 0
	})
	c.wantL2Status(t, "web", "")
}
