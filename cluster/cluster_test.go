package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
)

func TestNodeName(t *testing.T) {
	for i, want := range map[int]string{1: "svcnet-control-plane", 2: "svcnet-worker", 3: "svcnet-worker2", 4: "svcnet-worker3"} {
		if got := NodeName("svcnet", i); got != want {
			t.Errorf("NodeName(%d) = %q, want %q", i, got, want)
		}
	}
}

func TestDownWithoutState(t *testing.T) {
	if err := Down(context.Background(), t.TempDir()); err != nil {
		t.Errorf("Down on an empty data dir: %v", err)
	}
}

// svcnet up --nodes 2 inside a test namespace, in nftables mode with a
// proxy flag passed through (--proxy-arg): the cluster comes up, a DNS pod
// on one node answers a pod on the other across the node network and
// through the cluster DNS Service's ClusterIP and through a NodePort of
// another node, the nodes' rules use the layout the flag chose (direct
// ClusterIP and NodePort choices, dispatch tables), and SIGTERM leaves no namespace, interface or
// process behind. (e2e/seeds runs up in every proxy mode.)
func TestUpDown(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "nsenter", "iptables-restore", "dig")
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster")
	}
	bin := filepath.Join(t.TempDir(), "svcnet")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/svcnet/svcnet/cmd/svcnet")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	lab := testbed.NewNetNS(t, "up")
	var rb [3]byte
	_, _ = rand.Read(rb[:])
	prefix := "svcnt-t" + hex.EncodeToString(rb[:])
	dir := t.TempDir()
	up := exec.Command("ip", "netns", "exec", lab.Name, bin, "up", "--nodes", "2", "--data-dir", dir, "--prefix", prefix,
		"--proxy-mode", "nftables", "--proxy-arg=--nftables-endpoint-choice=shared", "--proxy-arg=--nftables-shards=4")
	stdout, _ := up.StdoutPipe()
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = up.Process.Signal(syscall.SIGTERM)
			_ = up.Wait()
		}
		_ = Down(context.Background(), dir)
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "export KUBECONFIG=") {
				ready <- sc.Text()
			}
		}
	}()
	start := time.Now()
	select {
	case line := <-ready:
		if line != "export KUBECONFIG="+filepath.Join(dir, "kubeconfig") {
			t.Errorf("printed %q", line)
		}
		t.Logf("cluster ready after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(90 * time.Second):
		t.Fatal("svcnet up did not print the KUBECONFIG line within 90s")
	}
	// From the DNS pod on node 2, ask the DNS pod on node 1.
	exe := func(pod string, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"exec", "--data-dir", dir, "-n", "kube-system", pod, "--"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("svcnet exec %s %v: %v\n%s", pod, args, err, out)
		}
		return string(out)
	}
	if got := exe("coredns-2", "hostname"); got != "coredns-2\n" {
		t.Errorf("hostname %q", got)
	}
	// digUntil asks the DNS pods' name of the API Service from coredns-2,
	// retrying for up to 30 s while the proxies program what it goes
	// through, and returns the last answer.
	digUntil := func(args ...string) string {
		var got string
		for i := 0; i < 30; i++ {
			out, err := exec.Command(bin, append(append([]string{"exec", "--data-dir", dir, "-n", "kube-system", "coredns-2", "--",
				"dig", "+short", "+time=1", "+tries=1"}, args...), "kubernetes.default.svc.cluster.local")...).CombinedOutput()
			if got = string(out); err == nil && got == "10.96.0.1\n" {
				break
			}
			time.Sleep(time.Second)
		}
		return got
	}
	// Pod to pod across nodes, to the address the API reports for coredns-1
	// (retried: on a loaded machine a DNS server just Ready has let a first
	// question time out).
	ipOut, err := exec.Command("ip", "netns", "exec", lab.Name, bin, "kubectl", "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"get", "pod", "-n", "kube-system", "coredns-1", "-o", "jsonpath={.status.podIP}").CombinedOutput()
	dnsIP := strings.TrimSpace(string(ipOut))
	if err != nil || !strings.HasPrefix(dnsIP, "10.244.1.") {
		t.Fatalf("coredns-1's address: %q %v", ipOut, err)
	}
	if got := digUntil("@" + dnsIP); got != "10.96.0.1\n" {
		t.Errorf("cross-node DNS answer from %s: %q", dnsIP, got)
	}
	// Through the Service: the node's proxy DNATs the ClusterIP.
	if got := digUntil("@10.96.0.10"); got != "10.96.0.1\n" {
		t.Errorf("DNS through the ClusterIP 10.96.0.10: %q", got)
	}
	// --proxy-arg reached the proxies: the DNS Service, a ClusterIP-only
	// Service, has no chain of its own in the shared layout; its endpoints
	// are keys of a direct choice map (cluster-ip-endpoints-udp-N, N DNS
	// pods), in one of the four dispatch tables (the DNS answers above went
	// through it).
	nodeName := NodeName(prefix, 2)
	var table string
	for i := 0; i < 30; i++ {
		out, err := exec.Command(bin, "node-exec", "--data-dir", dir, nodeName, "--", "nft", "list", "ruleset", "ip").CombinedOutput()
		if err != nil {
			t.Fatalf("node-exec %s nft list: %v\n%s", nodeName, err, out)
		}
		if table = string(out); strings.Contains(table, "map cluster-ip-endpoints-udp-") && strings.Contains(table, "numgen random mod") {
			break
		}
		time.Sleep(time.Second)
	}
	if !strings.Contains(table, "map cluster-ip-endpoints-udp-") || !strings.Contains(table, "numgen random mod") {
		t.Errorf("node %s: no direct choice map in its kube-proxy tables:\n%s", nodeName, table)
	}
	for i := range 4 {
		if want := fmt.Sprintf("table ip kube-proxy-s%02d {", i); !strings.Contains(table, want) {
			t.Errorf("node %s: no dispatch table %q:\n%s", nodeName, want, table)
		}
	}
	// A NodePort Service for the DNS pods (externalTrafficPolicy Cluster)
	// with an externalIP: in the shared layout its NodePort is a direct
	// choice as well (a key of node-port-endpoints-udp-N, no chain); a pod
	// on node 2 asks node 1's NodePort, so the answer is DNATed and
	// masqueraded there. The externalIP, which no other Service claims, is
	// direct too (direct-external-ips, keys in cluster-ip-endpoints-udp-N):
	// the pod asks it and node 2's proxy DNATs it.
	apply := exec.Command("ip", "netns", "exec", lab.Name, bin, "kubectl", "--kubeconfig", filepath.Join(dir, "kubeconfig"), "apply", "-f", "-")
	apply.Stdin = strings.NewReader(`apiVersion: v1
kind: Service
metadata: {name: dns-nodeport, namespace: kube-system}
spec:
  type: NodePort
  selector: {k8s-app: kube-dns}
  externalIPs: [192.0.2.53]
  ports: [{name: dns, protocol: UDP, port: 53, targetPort: 53, nodePort: 30053}]
`)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	if got := digUntil("-p", "30053", "@172.18.0.2"); got != "10.96.0.1\n" {
		t.Errorf("DNS through node 1's NodePort 30053: %q", got)
	}
	if got := digUntil("@192.0.2.53"); got != "10.96.0.1\n" {
		t.Errorf("DNS through the externalIP 192.0.2.53: %q", got)
	}
	if out, err := exec.Command(bin, "node-exec", "--data-dir", dir, nodeName, "--", "nft", "list", "ruleset", "ip").CombinedOutput(); err != nil {
		t.Fatalf("node-exec %s nft list: %v\n%s", nodeName, err, out)
	} else if s := string(out); !strings.Contains(s, "192.0.2.53 . udp . 53") || !strings.Contains(s, "192.0.2.53 . 53 . 0 :") {
		t.Errorf("node %s: the externalIP 192.0.2.53 is not a direct choice:\n%s", nodeName, s)
	}
	node1 := NodeName(prefix, 1)
	out, err := exec.Command(bin, "node-exec", "--data-dir", dir, node1, "--", "nft", "list", "ruleset", "ip").CombinedOutput()
	if err != nil {
		t.Fatalf("node-exec %s nft list: %v\n%s", node1, err, out)
	}
	if s := string(out); !strings.Contains(s, "map node-port-endpoints-udp-") || !strings.Contains(s, "udp . 30053") {
		t.Errorf("node %s: NodePort 30053 is not a direct choice:\n%s", node1, s)
	}
	// The proxies read the Service range from the ServiceCIDR objects (up
	// passes them no --service-cluster-ip-range).
	if !strings.Contains(table, "ip daddr 10.96.0.0/16 drop") {
		t.Errorf("node %s: no drop rule for the ServiceCIDR 10.96.0.0/16:\n%s", nodeName, table)
	}
	// The proxies read their configuration from kube-system/kube-proxy, as
	// a kubeadm cluster's do, with up's mode and minimum sync period (a
	// local cluster's rules follow each change at once, not after
	// kube-proxy's 1 s).
	conf, err := exec.Command("ip", "netns", "exec", lab.Name, bin, "kubectl", "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"get", "cm", "kube-proxy", "-n", "kube-system", "-o", `jsonpath={.data.config\.conf}`).CombinedOutput()
	if err != nil || !strings.Contains(string(conf), "mode: nftables\n") || !strings.Contains(string(conf), "minSyncPeriod: "+upMinSyncPeriod+"\n") {
		t.Errorf("kube-proxy ConfigMap (%v):\n%s", err, conf)
	}
	// Each node's proxy is its agent's static pod: mirror pods
	// kube-system/kube-proxy-NODE, Running, whose log is the proxy's.
	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", lab.Name, bin, "kubectl", "--kubeconfig",
			filepath.Join(dir, "kubeconfig")}, args...)...).CombinedOutput()
		return string(out), err
	}
	for i := 1; i <= 2; i++ {
		pod := "kube-proxy-" + NodeName(prefix, i)
		if out, err := kubectl("get", "pod", "-n", "kube-system", pod, "-o",
			`jsonpath={.status.phase} {.metadata.annotations.kubernetes\.io/config\.source} {.metadata.ownerReferences[0].kind} {.spec.hostNetwork} {.status.podIP}`); err != nil ||
			out != fmt.Sprintf("Running file Node true 172.18.0.%d", i+1) {
			t.Errorf("mirror pod %s (%v): %q", pod, err, out)
		}
		if out, err := kubectl("logs", "-n", "kube-system", pod); err != nil || !strings.Contains(out, `msg="Using nftables Proxier"`) {
			t.Errorf("kubectl logs %s (%v):\n%s", pod, err, out)
		}
	}
	proxies := 0
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if args := strings.Split(string(cl), "\x00"); err != nil || len(args) < 2 || args[1] != "proxy" || !strings.Contains(string(cl), dir) {
			continue
		}
		proxies++
		if !strings.Contains(string(cl), "\x00--config-map\x00"+KubeProxyConfigMap+"\x00") {
			t.Errorf("proxy %s runs without --config-map %s: %q", e.Name(), KubeProxyConfigMap, cl)
		}
	}
	if proxies != 2 {
		t.Errorf("found %d proxies, want 2", proxies)
	}
	// Ctrl-C: everything goes.
	_ = up.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- up.Wait() }()
	select {
	case <-done:
		stopped = true
	case <-time.After(30 * time.Second):
		t.Fatal("svcnet up did not stop within 30s of SIGTERM")
	}
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
	if out, _ := lab.Run("ip", "-o", "link", "show"); strings.Contains(out, prefix[:6]) {
		t.Errorf("interfaces left in the lab namespace:\n%s", out)
	}
	if out, _ := exec.Command("ip", "netns", "pids", lab.Name).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("processes left in the lab namespace: %s", out)
	}
}

// The addressing of --ip-family: defaults per family, the primary family
// first, and bad flags refused with the flag's name.
func TestFamilies(t *testing.T) {
	fams, err := families(Dual, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fams {
		got = append(got, f.bridge.String(), f.nodeIP(2).String(), f.podCIDR(3).String(), f.serviceCIDR.String(), f.dnsIP.String())
	}
	want := "172.18.0.1 172.18.0.3 10.244.3.0/24 10.96.0.0/16 10.96.0.10 " +
		"fd00:172:18::1 fd00:172:18::3 fd00:10:244:3::/64 fd00:10:96::/112 fd00:10:96::a"
	if strings.Join(got, " ") != want {
		t.Errorf("dual:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	fams, err = families(IPv6, "fd00:1::/48", "fd00:2::/108")
	if err != nil || len(fams) != 1 || fams[0].podCIDR(1).String() != "fd00:1:0:1::/64" || fams[0].dnsIP.String() != "fd00:2::a" {
		t.Errorf("ipv6 with ranges: %+v %v", fams, err)
	}
	for _, bad := range []struct{ family, cc, sc, msg string }{
		{"ipv5", "", "", `--ip-family "ipv5": must be ipv4, ipv6 or dual`},
		{Dual, "10.244.0.0/16", "", "--cluster-cidr \"10.244.0.0/16\": need 2 CIDRs"},
		{Dual, "fd00::/56,10.244.0.0/16", "", "CIDR 1 must be IPv4"},
		{IPv4, "10.244.0.0/24", "", "need an IPv4 /16 or larger"},
		{IPv6, "fd00::/64", "", "need an IPv6 /56 or larger"},
		{IPv4, "", "10.96.0.0/29", "too small for the cluster DNS address"},
	} {
		if _, err := families(bad.family, bad.cc, bad.sc); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("families(%q, %q, %q) = %v, want an error with %q", bad.family, bad.cc, bad.sc, err, bad.msg)
		}
	}
}
