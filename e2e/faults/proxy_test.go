package faults

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/apiserver"
	"github.com/svcnet/svcnet/internal/testbed"
)

// TestProxyRestartUnderLoad kills `svcnet proxy` (SIGKILL) while TCP and UDP
// traffic flows to a ClusterIP, and starts it again: in iptables and
// nftables modes no established connection breaks and new connections
// succeed throughout, including while the restarted proxy's first sync
// runs. The proxy runs as system:kube-proxy, i.e. with system:node-proxier's
// permissions alone.
func TestProxyRestartUnderLoad(t *testing.T) {
	needBinary(t)
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "iptables-restore", "nft")
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) { proxyRestart(t, mode) })
	}
}

const (
	clusterIP = "10.96.0.100"
	nodeIP    = "10.1.0.1"
)

// inNS dials from inside a namespace.
func inNS(ns *testbed.NetNS) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var err error
			c, err = (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// echoServers serves TCP and UDP echo on ip:8080 and ip:8053 inside ns.
func echoServers(t *testing.T, ns *testbed.NetNS, ip string) {
	var ln net.Listener
	var pc net.PacketConn
	if err := ns.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp", ip+":8080"); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", ip+":8053")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], addr)
		}
	}()
}

// ping writes a sequence number and expects it back.
func ping(c net.Conn, seq uint64, timeout time.Duration) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(b[:]); err != nil {
		return err
	}
	var r [8]byte
	if _, err := io.ReadFull(c, r[:]); err != nil {
		return err
	}
	if r != b {
		return fmt.Errorf("echo %x, want %x", r, b)
	}
	return nil
}

type counter struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	firstErr   error
}

func (c *counter) record(err error) {
	if err == nil {
		c.ok.Add(1)
		return
	}
	c.failed.Add(1)
	c.mu.Lock()
	if c.firstErr == nil {
		c.firstErr = err
	}
	c.mu.Unlock()
}

func (c *counter) String() string {
	s := fmt.Sprintf("%d failed of %d", c.failed.Load(), c.ok.Load()+c.failed.Load())
	if c.firstErr != nil {
		s += fmt.Sprintf(" (first: %v)", c.firstErr)
	}
	return s
}

func proxyRestart(t *testing.T, mode string) {
	node := testbed.NewNetNS(t, "flt-node")
	be := testbed.NewNetNS(t, "flt-be")
	testbed.Link(t, node, "eth0", nodeIP+"/24", be, "eth0", "10.1.0.2/24")
	be.MustRun("ip", "addr", "add", "10.1.0.3/24", "dev", "eth0")
	// ClusterIPs need a route for the first routing decision; DNAT in
	// OUTPUT then reroutes to the endpoint.
	node.MustRun("ip", "route", "add", "10.96.0.0/16", "dev", "eth0")
	echoServers(t, be, "10.1.0.2")
	echoServers(t, be, "10.1.0.3")

	dataDir := t.TempDir()
	api := start(t, "ip", "netns", "exec", node.Name, bin, "apiserver", "--data-dir", dataDir, "--secure-port", "6443", "--repair-interval", "1h")
	dial := inNS(node)
	var cfgErr error
	deadline := time.Now().Add(60 * time.Second)
	var client *kubernetes.Clientset
	for client == nil {
		select {
		case <-api.done:
			t.Fatalf("apiserver exited:\n%s", api.output())
		default:
		}
		if cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig")); err == nil {
			cfg.Dial = dial
			c := kubernetes.NewForConfigOrDie(cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, cfgErr = c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			cancel()
			if cfgErr == nil {
				client = c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("apiserver not ready: %v\n%s", cfgErr, api.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx := context.Background()
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Ports: []corev1.ServicePort{
			{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
			{Name: "udp", Port: 53, TargetPort: intstr.FromInt32(8053), Protocol: corev1.ProtocolUDP}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var eps []discoveryv1.Endpoint
	for _, ip := range []string{"10.1.0.2", "10.1.0.3"} {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "echo-1", Labels: map[string]string{discoveryv1.LabelServiceName: "echo", discoveryv1.LabelManagedBy: "faults-test"}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("tcp"), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)},
			{Name: ptr.To("udp"), Port: ptr.To(int32(8053)), Protocol: ptr.To(corev1.ProtocolUDP)}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	kc := filepath.Join(t.TempDir(), "proxy.kubeconfig")
	if err := apiserver.WriteClientKubeconfig(dataDir, kc, "https://127.0.0.1:6443", "system:kube-proxy", nil); err != nil {
		t.Fatal(err)
	}
	proxyArgs := []string{"ip", "netns", "exec", node.Name, bin, "proxy", "--kubeconfig", kc, "--hostname-override", "n1",
		"--proxy-mode", mode, "--service-cluster-ip-range", "10.96.0.0/16", "--healthz-bind-address", "127.0.0.1:10256",
		"--metrics-bind-address", "", "--conntrack-max-per-core", "0", "--conntrack-tcp-timeout-established", "0",
		"--conntrack-tcp-timeout-close-wait", "0"}
	t.Cleanup(func() { _, _ = node.Run(bin, "proxy", "--cleanup") })
	proxy := start(t, proxyArgs[0], proxyArgs[1:]...)
	hc := &http.Client{Transport: &http.Transport{DialContext: dial}, Timeout: time.Second}
	synced := func() bool {
		resp, err := hc.Get("http://127.0.0.1:10256/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	waitFor := func(what string, p *proc, f func() bool) time.Duration {
		t0 := time.Now()
		for !f() {
			select {
			case <-p.done:
				t.Fatalf("%s: proxy exited:\n%s", what, p.output())
			default:
			}
			if time.Since(t0) > 30*time.Second {
				t.Fatalf("%s: not within 30s; proxy log:\n%s", what, p.output())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(t0)
	}
	waitFor("first sync", proxy, synced)
	waitFor("ClusterIP answers", proxy, func() bool {
		c, err := dial(ctx, "tcp", clusterIP+":80")
		if err != nil {
			return false
		}
		defer c.Close()
		return ping(c, 1, time.Second) == nil
	})

	// Load: long-lived TCP and UDP flows, plus new ones all the time.
	const flows = 20
	var estTCP, newTCP, estUDP, newUDP counter
	stop := make(chan struct{})
	var wg sync.WaitGroup
	loop := func(every time.Duration, f func(seq uint64)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint64(0); ; seq++ {
				select {
				case <-stop:
					return
				case <-time.After(every):
				}
				f(seq)
			}
		}()
	}
	for i := 0; i < flows; i++ {
		tc, err := dial(ctx, "tcp", clusterIP+":80")
		if err != nil {
			t.Fatal(err)
		}
		uc, err := dial(ctx, "udp", clusterIP+":53")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tc.Close(); uc.Close() })
		var tcpBroken atomic.Bool
		loop(20*time.Millisecond, func(seq uint64) {
			if tcpBroken.Load() {
				return // counted once: a broken connection stays broken
			}
			err := ping(tc, seq, 2*time.Second)
			if err != nil {
				tcpBroken.Store(true)
			}
			estTCP.record(err)
		})
		loop(20*time.Millisecond, func(seq uint64) { estUDP.record(ping(uc, seq, time.Second)) })
	}
	for i := 0; i < 4; i++ {
		loop(10*time.Millisecond, func(seq uint64) {
			c, err := dial(ctx, "tcp", clusterIP+":80")
			if err == nil {
				err = ping(c, seq, time.Second)
				c.Close()
			}
			newTCP.record(err)
		})
		loop(20*time.Millisecond, func(seq uint64) {
			c, err := dial(ctx, "udp", clusterIP+":53")
			if err == nil {
				err = ping(c, seq, time.Second)
				c.Close()
			}
			newUDP.record(err)
		})
	}
	time.Sleep(2 * time.Second)
	proxy.kill()
	killedAt := time.Now()
	time.Sleep(time.Second) // traffic runs on the rules the dead proxy left
	proxy = start(t, proxyArgs[0], proxyArgs[1:]...)
	restartedAt := time.Now()
	firstSync := waitFor("first sync after restart", proxy, synced)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%s: proxy SIGKILLed, restarted %s later, first sync done %s after the restart", mode,
		restartedAt.Sub(killedAt).Round(time.Millisecond), firstSync.Round(time.Millisecond))
	t.Logf("%s: established TCP connections: %d of %d broken; established TCP pings: %s; new TCP connections: %s; established UDP flows: %s; new UDP flows: %s",
		mode, estTCP.failed.Load(), flows, &estTCP, &newTCP, &estUDP, &newUDP)
	for name, c := range map[string]*counter{"established TCP": &estTCP, "new TCP": &newTCP, "established UDP": &estUDP, "new UDP": &newUDP} {
		if c.failed.Load() > 0 {
			t.Errorf("%s: %s: %s", mode, name, c)
		}
		if c.ok.Load() == 0 {
			t.Errorf("%s: %s: no traffic", mode, name)
		}
	}
}
