package userspace

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/netwire"
	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/conntrack"
)

// The real-kernel tests run the Proxier in a child process started inside
// the test's "node" namespace (the test binary re-executed into
// TestHelperUserspaceProxy), because every socket a proxy opens — listeners
// and the dials to endpoints from any goroutine — must be in that namespace,
// as they are when `svcnet proxy` runs in a node.
//
// Topology (all namespaces created by the test, no route out):
//
//	client 10.244.1.10 ──veth── 10.244.1.1 node 10.244.2.1 ──veth── 10.244.2.10 backends
//
// The backends namespace serves "a", "b", "c" on TCP 8081-8083 and UDP
// 8081-8083. The Service is ClusterIP 10.96.0.10:80, externalIP
// 192.0.2.100, NodePort 30080.

const helperEnv = "SVCNET_USERSPACE_HELPER"

// TestHelperUserspaceProxy is not a test: it is the proxy process of the
// kernel tests. It reads one JSON []ServiceConfig per stdin line, syncs, and
// answers "ok" or "error: ..." per line; it exits when stdin closes. With
// SVCNET_USERSPACE_HELPER=dual it programs both families (the node
// processes of TestKernelScenarios).
func TestHelperUserspaceProxy(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process for the real-kernel tests")
	}
	opt := Options{IPv4: Iptables{}, UDPIdleTimeout: 2 * time.Second}
	if os.Getenv(helperEnv) == "dual" {
		// TestKernelScenarios: both families' redirects, the default UDP
		// timeout, as `svcnet proxy --proxy-mode=userspace` in a node.
		opt = Options{IPv4: Iptables{}, IPv6: Iptables{IPv6: true}}
	}
	p := New(opt)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var cfgs []ServiceConfig
		err := json.Unmarshal(sc.Bytes(), &cfgs)
		if err == nil {
			err = p.Sync(context.Background(), cfgs)
		}
		if err != nil {
			fmt.Printf("error: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Println("ok")
		}
	}
	p.Close()
	os.Exit(0)
}

type kernelBed struct {
	t                     *testing.T
	node, client, backend *testbed.NetNS
	stdin                 io.WriteCloser
	stdout                *bufio.Reader
	cmd                   *exec.Cmd
}

func newKernelBed(t *testing.T) *kernelBed {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "iptables", "iptables-restore")
	b := &kernelBed{t: t}
	b.node = testbed.NewNetNS(t, "us-node")
	b.client = testbed.NewNetNS(t, "us-client")
	b.backend = testbed.NewNetNS(t, "us-pods")
	testbed.Link(t, b.node, "cl0", "10.244.1.1/24", b.client, "eth0", "10.244.1.10/24")
	testbed.Link(t, b.node, "pod0", "10.244.2.1/24", b.backend, "eth0", "10.244.2.10/24")
	b.client.MustRun("ip", "route", "add", "default", "via", "10.244.1.1")
	b.backend.MustRun("ip", "route", "add", "default", "via", "10.244.2.1")
	// A node forwards pod traffic (and the no-endpoints REJECT sits in
	// FORWARD, as in kube-proxy).
	b.node.MustRun("sysctl", "-qw", "net.ipv4.ip_forward=1")
	// The node itself reaches Service addresses through OUTPUT; connect()
	// needs some route before NAT runs.
	b.node.MustRun("ip", "route", "add", "10.96.0.0/16", "dev", "cl0")
	b.node.MustRun("ip", "route", "add", "192.0.2.0/24", "dev", "cl0")
	for i, name := range []string{"a", "b", "c"} {
		port := 8081 + i
		must(t, inNS(b.backend, func() error {
			ln, err := net.Listen("tcp", fmt.Sprintf("10.244.2.10:%d", port))
			if err != nil {
				return err
			}
			t.Cleanup(func() { ln.Close() })
			go serveNamed(ln, name)
			pc, err := net.ListenPacket("udp", fmt.Sprintf("10.244.2.10:%d", port))
			if err != nil {
				return err
			}
			t.Cleanup(func() { pc.Close() })
			go serveUDPNamed(pc, name)
			return nil
		}))
	}
	b.cmd = exec.Command("ip", "netns", "exec", b.node.Name, os.Args[0], "-test.run=^TestHelperUserspaceProxy$", "-test.v=false")
	b.cmd.Env = append(os.Environ(), helperEnv+"=1")
	b.cmd.Stderr = os.Stderr
	var err error
	if b.stdin, err = b.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	b.stdout = bufio.NewReader(out)
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.stdin.Close()
		done := make(chan struct{})
		go func() { b.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			b.cmd.Process.Kill()
			<-done
		}
		nf := Iptables{Exec: proxy.OSExecutor{NetNS: b.node.Name}}
		if err := nf.Cleanup(context.Background(), Jumps()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if out := b.node.MustRun("iptables-save"); strings.Contains(out, "KUBE-") {
			t.Errorf("rules left after cleanup:\n%s", out)
		}
	})
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func serveNamed(ln net.Listener, name string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			fmt.Fprintf(c, "%s\n", name)
			io.Copy(c, c)
		}()
	}
}

func serveUDPNamed(pc net.PacketConn, name string) {
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		pc.WriteTo([]byte(name+":"+string(buf[:n])), from)
	}
}

func (b *kernelBed) sync(cfgs ...ServiceConfig) {
	b.t.Helper()
	data, err := json.Marshal(cfgs)
	must(b.t, err)
	if _, err := b.stdin.Write(append(data, '\n')); err != nil {
		b.t.Fatal(err)
	}
	line, err := b.stdout.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ok" {
		b.t.Fatalf("proxy sync: %q %v", line, err)
	}
}

// askFrom connects from ns to addr and returns the endpoint's name, or the
// connect error.
func askFrom(ns *testbed.NetNS, addr string) (string, error) {
	var c net.Conn
	if err := inNS(ns, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func backendEPs(ports ...int) []Endpoint {
	var out []Endpoint
	for _, p := range ports {
		out = append(out, Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr("10.244.2.10"), uint16(p)), Weight: 1})
	}
	return out
}

func webService(proto string, ports ...int) ServiceConfig {
	return ServiceConfig{
		Name: "default/web:http", Protocol: proto, Port: 80, NodePort: 30080,
		Addrs:     []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("192.0.2.100")},
		Endpoints: backendEPs(ports...),
	}
}

func TestKernelTCPClusterIPNodePortExternalIP(t *testing.T) {
	b := newKernelBed(t)
	b.sync(webService("tcp", 8081, 8082, 8083))
	for _, tc := range []struct {
		name string
		from *testbed.NetNS
		addr string
	}{
		{"ClusterIP from a pod", b.client, "10.96.0.10:80"},
		{"ClusterIP from the node", b.node, "10.96.0.10:80"},
		{"NodePort from a pod", b.client, "10.244.1.1:30080"},
		{"NodePort on the node's other address", b.client, "10.244.2.1:30080"},
		{"NodePort from the node", b.node, "10.244.1.1:30080"},
		{"externalIP from a pod", b.client, "192.0.2.100:80"},
	} {
		counts := map[string]int{}
		for i := 0; i < 12; i++ {
			name, err := askFrom(tc.from, tc.addr)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			counts[name]++
		}
		if counts["a"] != 4 || counts["b"] != 4 || counts["c"] != 4 {
			t.Errorf("%s: spread %v, want 4 each (rr)", tc.name, counts)
		}
	}
}

func TestKernelRetryRemovalAndReject(t *testing.T) {
	b := newKernelBed(t)
	// 9999 has no listener: connects there are refused and retried.
	b.sync(webService("tcp", 8081, 9999))
	for i := 0; i < 6; i++ {
		if name, err := askFrom(b.client, "10.96.0.10:80"); err != nil || name != "a" {
			t.Fatalf("with a dead endpoint: %q %v", name, err)
		}
	}
	// Graceful removal: an established connection to b survives b's
	// removal; new connections go to c only.
	b.sync(webService("tcp", 8082))
	var conn net.Conn
	must(t, inNS(b.client, func() (err error) { conn, err = net.Dial("tcp", "10.96.0.10:80"); return }))
	defer conn.Close()
	r := bufio.NewReader(conn)
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if l, _ := r.ReadString('\n'); l != "b\n" {
		t.Fatalf("got %q", l)
	}
	b.sync(webService("tcp", 8083))
	for i := 0; i < 3; i++ {
		if name, err := askFrom(b.client, "10.96.0.10:80"); err != nil || name != "c" {
			t.Fatalf("after removal: %q %v", name, err)
		}
	}
	fmt.Fprintf(conn, "still there\n")
	if l, err := r.ReadString('\n'); l != "still there\n" {
		t.Fatalf("established connection broke after endpoint removal: %q %v", l, err)
	}
	// No endpoints: rejected (connection refused), not hung.
	b.sync(webService("tcp"))
	_, err := askFrom(b.client, "10.96.0.10:80")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("service without endpoints: %v, want connection refused\n%s", err, b.node.MustRun("iptables-save", "-c"))
	}
}

func TestKernelUDPAndAffinity(t *testing.T) {
	b := newKernelBed(t)
	udp := webService("udp", 8081, 8082)
	tcp := webService("tcp", 8081, 8082, 8083)
	tcp.AffinityTimeout = 2 * time.Second
	b.sync(udp, tcp)
	for _, from := range []*testbed.NetNS{b.client, b.node} {
		var c net.Conn
		must(t, inNS(from, func() (err error) { c, err = net.Dial("udp", "10.96.0.10:80"); return }))
		first := ""
		for i := 0; i < 4; i++ {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "m%d", i)
			buf := make([]byte, 100)
			n, err := c.Read(buf)
			if err != nil {
				t.Fatalf("udp from %s: %v", from.Name, err)
			}
			got := string(buf[:n])
			if first == "" {
				first = strings.SplitN(got, ":", 2)[0]
			}
			if got != fmt.Sprintf("%s:m%d", first, i) {
				t.Fatalf("udp reply %q (session on %s)", got, first)
			}
		}
		c.Close()
	}
	// ClientIP affinity: every connection from the client lands on one
	// endpoint until 2s pass without a new connection.
	first, err := askFrom(b.client, "10.96.0.10:80")
	must(t, err)
	for i := 0; i < 5; i++ {
		if name, err := askFrom(b.client, "10.96.0.10:80"); err != nil || name != first {
			t.Fatalf("affinity: %s then %q %v", first, name, err)
		}
	}
	time.Sleep(2500 * time.Millisecond)
	if name, err := askFrom(b.client, "10.96.0.10:80"); err != nil || name == first {
		t.Fatalf("affinity did not expire: %s then %q %v", first, name, err)
	}
}

// inNS runs f on a thread inside ns (testbed's Do, which switches back).
func inNS(ns *testbed.NetNS, f func() error) error { return ns.Do(f) }

// TestKernelConntrackCleanerKeepsRedirectedFlows: the stale-flow cleaner
// (which every mode's sync runs) must keep the conntrack entries of UDP
// flows this mode REDIRECTs to its own port; they reply from that port, not
// from an endpoint. Deleted, a reply in flight reaches the client from the
// node's address instead of the Service's and is dropped.
func TestKernelConntrackCleanerKeepsRedirectedFlows(t *testing.T) {
	b := newKernelBed(t)
	b.sync(webService("udp", 8081))
	var c net.Conn
	must(t, inNS(b.client, func() (err error) { c, err = net.Dial("udp", "10.96.0.10:80"); return }))
	defer c.Close()
	ask := func(msg string) {
		t.Helper()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		fmt.Fprint(c, msg)
		buf := make([]byte, 100)
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "a:"+msg {
			t.Fatalf("udp %s: %q %v", msg, buf[:n], err)
		}
	}
	ask("m0")
	m := regexp.MustCompile(`-d 10\.96\.0\.10/32 -p udp .*--dport 80 -j REDIRECT --to-ports (\d+)`).FindStringSubmatch(b.node.MustRun("iptables-save", "-t", "nat"))
	if m == nil {
		t.Fatal("no REDIRECT rule for the UDP Service")
	}
	port, _ := strconv.Atoi(m[1])
	name := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}, Port: "http", Protocol: v1.ProtocolUDP}
	svcs := proxy.ServicePortMap{name: {Name: name, Protocol: v1.ProtocolUDP, Port: 80, NodePort: 30080,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, ExternalIPs: []netip.Addr{netip.MustParseAddr("192.0.2.100")}}}
	eps := proxy.EndpointsMap{name: {{Addr: netip.MustParseAddr("10.244.2.10"), Port: 8081, Serving: true, Ready: true}}}
	flow := func() string {
		t.Helper()
		h, err := netwire.HandleIn(b.node.Name, unix.NETLINK_NETFILTER)
		must(t, err)
		defer h.Close()
		flows, err := h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
		must(t, err)
		for _, f := range flows {
			if f.Forward.Protocol == unix.IPPROTO_UDP && f.Forward.SrcIP.Equal(net.ParseIP("10.244.1.10")) && f.Forward.DstIP.Equal(net.ParseIP("10.96.0.10")) {
				return fmt.Sprintf("reply from %s:%d", f.Reverse.SrcIP, f.Reverse.SrcPort)
			}
		}
		return ""
	}
	if got, want := flow(), fmt.Sprintf(":%d", port); !strings.HasSuffix(got, want) {
		t.Fatalf("the flow's conntrack entry: %q, want a reply from the proxy's port %d", got, port)
	}
	cleaner := &conntrack.Cleaner{NetNS: b.node.Name}
	mode := &Mode{px: &Proxier{services: map[string]*service{"default/web:http/udp": {port: port}}}}
	must(t, cleaner.CleanStaleEntries(context.Background(), svcs, eps, mode.RedirectPort))
	if flow() == "" {
		t.Fatal("the cleaner deleted the live redirected flow")
	}
	ask("m1")
	// Judged by its endpoints alone, as the cleaner did before, the entry
	// is stale: what this test checks is visible to it.
	must(t, cleaner.CleanStaleEntries(context.Background(), svcs, eps, nil))
	if got := flow(); got != "" {
		t.Fatalf("without the redirect port the entry was kept (%s)", got)
	}
}
