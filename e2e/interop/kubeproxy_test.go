package interop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/testbed"
)

// kubeProxyVersion is stamped into the kube-proxy binary so that its
// --version and User-Agent say which release it was built from.
const kubeProxyVersion = "v1.37.2"

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// buildBinaries builds the real kube-proxy from k8s.io/kubernetes (the
// version go.mod pins) and svcnet from this repository, once per run.
func buildBinaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "svcnet-interop-")
		if buildErr != nil {
			return
		}
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		// kube-proxy is built in this module (its go.mod pins Kubernetes);
		// svcnet in the repository root, with the main module's own go.mod,
		// exactly as a user builds it.
		for i, args := range [][]string{
			{"build", "-o", filepath.Join(buildDir, "kube-proxy"),
				"-ldflags", "-X k8s.io/component-base/version.gitVersion=" + kubeProxyVersion,
				"k8s.io/kubernetes/cmd/kube-proxy"},
			{"build", "-o", filepath.Join(buildDir, "svcnet"), "./cmd/svcnet"},
		} {
			start := time.Now()
			cmd := exec.Command(gobin, args...)
			if i == 1 {
				cmd.Dir = filepath.Join("..", "..")
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
			fmt.Fprintf(os.Stderr, "interop: go %s took %s\n", args[len(args)-1], time.Since(start).Round(time.Second))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// nsDialer returns a DialContext whose sockets are opened inside ns, so that
// a client in the test process reaches servers listening on the namespace's
// own loopback and interfaces.
func nsDialer(ns *testbed.NetNS) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// TestRealKubeProxy runs the real kube-proxy, in iptables and then nftables
// mode, against svcnet's API server, and checks that it syncs without list
// errors, programs the Service, and that a TCP connection to the ClusterIP
// reaches both backends through the kernel.
func TestRealKubeProxy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("interop: TestRealKubeProxy needs root (network namespaces, iptables/nftables in them)")
	}
	testbed.RequireCommand(t, "ip", "iptables-save", "nft")
	dir := buildBinaries(t)
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) { runKubeProxy(t, dir, mode) })
	}
}

func runKubeProxy(t *testing.T, bin, mode string) {
	const (
		nodeName = "node1"
		nodeIP   = "10.1.0.1"
	)
	backends := []string{"10.1.0.2", "10.1.0.3"}

	node := testbed.NewNetNS(t, "ipnode")
	pods := testbed.NewNetNS(t, "ippods")
	testbed.Link(t, node, "eth0", nodeIP+"/24", pods, "eth0", backends[0]+"/24")
	pods.MustRun("ip", "addr", "add", backends[1]+"/24", "dev", "eth0")
	// The Service range is reachable only over the link to the pods'
	// namespace; neither namespace has any way out.
	node.MustRun("ip", "route", "add", "10.96.0.0/16", "dev", "eth0")
	// NodePort traffic from the pods' namespace is forwarded by the node
	// (kubelet or the CNI sets this on a real node; namespace-scoped here).
	node.MustRun("sysctl", "-qw", "net.ipv4.ip_forward=1")

	// Two backends, each answering with its own address.
	for _, ip := range backends {
		var ln net.Listener
		if err := pods.Do(func() error {
			var err error
			ln, err = net.Listen("tcp", net.JoinHostPort(ip, "8080"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func(ip string) {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, ip+"\n")
				c.Close()
			}
		}(ip)
	}

	// svcnet's API server, inside the node namespace on its own loopback.
	data := t.TempDir()
	// Default authorization (RBAC,Node): kube-proxy gets only what real
	// clusters give it, system:node-proxier bound to user system:kube-proxy.
	api := node.Start(bin+"/svcnet", "apiserver", "--data-dir", data,
		"--service-cluster-ip-range", "10.96.0.0/16")
	_ = api
	kubeconfig := filepath.Join(data, "kubeconfig")
	waitFor(t, 60*time.Second, "admin kubeconfig "+kubeconfig, func() error {
		_, err := os.Stat(kubeconfig)
		return err
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = nsDialer(node)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, 60*time.Second, "API server /readyz", func() error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})

	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/hostname": nodeName}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: nodeIP},
			{Type: corev1.NodeHostName, Address: nodeName},
		}},
	}
	created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Node: %v", err)
	}
	if len(created.Status.Addresses) == 0 {
		created.Status = n.Status
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update Node status: %v", err)
		}
	}

	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service: %v", err)
	}
	clusterIP := svc.Spec.ClusterIP
	nodePort := svc.Spec.Ports[0].NodePort
	t.Logf("Service default/web has ClusterIP %s, NodePort %d", clusterIP, nodePort)
	// "sticky": ClientIP session affinity over the same two backends.
	sticky, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "sticky"},
		Spec: corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP, Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service sticky: %v", err)
	}
	// "empty": no endpoints at all, so kube-proxy rejects its traffic.
	empty, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "empty"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service empty: %v", err)
	}
	ready := true
	var eps []discoveryv1.Endpoint
	for _, ip := range backends {
		eps = append(eps, discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   ptr(nodeName),
		})
	}
	for _, name := range []string{"web", "sticky"} {
		if _, err := cs.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-manual", Labels: map[string]string{
				discoveryv1.LabelServiceName: name,
				discoveryv1.LabelManagedBy:   "interop-test",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   eps,
			Ports: []discoveryv1.EndpointPort{{
				Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080)),
			}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create EndpointSlice for %s: %v", name, err)
		}
	}

	// The real kube-proxy.
	kpLog := filepath.Join(t.TempDir(), "kube-proxy.log")
	logf, err := os.Create(kpLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	args := []string{bin + "/kube-proxy",
		"--kubeconfig", componentKubeconfig(t, bin+"/svcnet", data, "system:kube-proxy"),
		"--hostname-override", nodeName,
		"--proxy-mode", mode,
		"--cluster-cidr", "10.244.0.0/16",
		"--conntrack-max-per-core", "0",
		"--nodeport-addresses", "primary",
		"--metrics-bind-address", "127.0.0.1:10249",
		"--healthz-bind-address", "127.0.0.1:10256",
		"--v", "2",
	}
	kp := exec.Command("ip", append([]string{"netns", "exec", node.Name}, args...)...)
	kp.Stdout, kp.Stderr = logf, logf
	if err := kp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kp.Process.Kill(); _ = kp.Wait() })
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(kpLog)
			t.Logf("kube-proxy log:\n%s", tail(string(b), 80))
		}
	})

	// (1) kube-proxy reports healthy.
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: nsDialer(node)}}
	waitFor(t, 90*time.Second, "kube-proxy /healthz 200", func() error {
		resp, err := hc.Get("http://127.0.0.1:10256/healthz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	})

	// (2) the Service is programmed in the mode's ruleset.
	waitFor(t, 30*time.Second, "Service rules in "+mode, func() error {
		var out string
		var err error
		var want []string
		if mode == "iptables" {
			out, err = node.Run("iptables-save", "-t", "nat")
			// KUBE-SVC-<hash> chain, commented with the Service port.
			want = []string{"-A KUBE-SVC-", "default/web:http", clusterIP + "/32"}
		} else {
			out, err = node.Run("nft", "list", "table", "ip", "kube-proxy")
			// service-<hash>-<ns>/<name>/<proto>/<port> chain, and the
			// ClusterIP in the cluster-ips set.
			want = []string{"chain service-", "-default/web/tcp/http", clusterIP}
		}
		if err != nil {
			return err
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				return fmt.Errorf("no %q for default/web:http (%s) yet:\n%s", w, clusterIP, tail(out, 40))
			}
		}
		return nil
	})

	// (3) real connections to the ClusterIP, from the node, reach both
	// backends; so do connections to the NodePort on the node's address from
	// the other namespace (forwarded and masqueraded by the node).
	spread(t, node, net.JoinHostPort(clusterIP, "80"), backends)
	spread(t, pods, net.JoinHostPort(nodeIP, fmt.Sprint(nodePort)), backends)

	// (4) ClientIP affinity: 20 connections from one client all reach the
	// same backend (without affinity, 2^-19 odds).
	stickyAddr := net.JoinHostPort(sticky.Spec.ClusterIP, "80")
	first := ""
	for i := 0; i < 20; i++ {
		got, err := fetch(node, stickyAddr)
		if err != nil {
			t.Fatalf("connect %s (sticky): %v", stickyAddr, err)
		}
		if first == "" {
			first = got
		} else if got != first {
			t.Fatalf("sticky %s: connection %d reached %s, the first reached %s", stickyAddr, i, got, first)
		}
	}
	t.Logf("sticky %s: 20 connections all reached %s", stickyAddr, first)

	// (5) a Service without endpoints is rejected at once (connection
	// refused), not black-holed.
	emptyAddr := net.JoinHostPort(empty.Spec.ClusterIP, "80")
	if _, err := fetch(node, emptyAddr); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connect %s (no endpoints): got %v, want connection refused", emptyAddr, err)
	}

	// kube-proxy's Starting event, sent through events.k8s.io/v1, is
	// stored and readable through both Event APIs.
	evs, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=Starting,reportingController=kube-proxy"})
	if err != nil || len(evs.Items) == 0 {
		t.Errorf("kube-proxy's Starting event (events.k8s.io/v1): %v %v", evs, err)
	} else if core, err := cs.CoreV1().Events("default").Get(ctx, evs.Items[0].Name, metav1.GetOptions{}); err != nil || core.InvolvedObject.Kind != "Node" {
		t.Errorf("kube-proxy's Starting event as core/v1: %v %v", core, err)
	}

	// kube-proxy's informers must have listed everything they watch.
	b, _ := os.ReadFile(kpLog)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "Failed to watch") || strings.Contains(line, "failed to list") {
			t.Errorf("kube-proxy: %s", line)
		}
		// kube-proxy writes its Starting event through events.k8s.io/v1.
		if strings.Contains(line, "Server rejected event") {
			t.Errorf("kube-proxy: %s", line[:min(len(line), 300)])
		} else if strings.HasPrefix(line, "E") || strings.HasPrefix(line, "W") {
			// Other warnings and errors are shown, for the reader to judge.
			t.Logf("kube-proxy: %s", line[:min(len(line), 300)])
		}
	}
}

// fetch connects to addr from inside ns and returns what the backend says.
func fetch(ns *testbed.NetNS, addr string) (string, error) {
	var got string
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(c)
		got = strings.TrimSpace(string(b))
		return err
	})
	return got, err
}

// spread connects to addr from inside ns until every backend has answered
// (each answers with its own address), failing if one never does.
func spread(t *testing.T, ns *testbed.NetNS, addr string, backends []string) {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < 40 && len(seen) < len(backends); i++ {
		var got string
		err := ns.Do(func() error {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			b, err := io.ReadAll(c)
			got = strings.TrimSpace(string(b))
			return err
		})
		if err != nil {
			t.Fatalf("connect %s from %s: %v", addr, ns.Name, err)
		}
		seen[got]++
	}
	for _, ip := range backends {
		if seen[ip] == 0 {
			t.Errorf("backend %s never answered on %s (answers: %v)", ip, addr, seen)
		}
	}
	t.Logf("answers on %s from %s: %v", addr, ns.Name, seen)
}

func waitFor(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s: %v", d, what, err)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func ptr[T any](v T) *T { return &v }
