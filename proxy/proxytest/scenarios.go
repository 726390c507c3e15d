package proxytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/lb"
)

// chiSquareCritical holds the 0.999 quantile of chi-square for 1..7 degrees
// of freedom: a fair balancer fails the spread check once in a thousand runs.
var chiSquareCritical = []float64{0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32}

// ChiSquare returns the chi-square statistic of counts against a uniform
// distribution.
func ChiSquare(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	exp := float64(total) / float64(len(counts))
	var x float64
	for _, c := range counts {
		d := float64(c) - exp
		x += d * d / exp
	}
	return x
}

func ap(ip string, port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(port))
}

const dialTimeout = 2 * time.Second

// KernelOption adapts RunKernelScenarios to what a mode can do.
type KernelOption func(*kernelOpts)

type kernelOpts struct {
	skip     map[string]string
	fromNode bool
}

// SourceFromNode says the mode connects to endpoints from the node itself
// (userspace: it is the far end of the client's connection and opens its
// own), so endpoints never see the client's address. The scenarios then
// leave out their checks of the source address and count an endpoint's
// traffic from any source; everything else is checked as for every mode.
func SourceFromNode() KernelOption { return func(o *kernelOpts) { o.fromNode = true } }

// Skip leaves out the scenario called name (a subtest name of
// RunKernelScenarios) because the mode cannot have that behaviour by
// design; why is logged where the scenario would run.
func Skip(name, why string) KernelOption {
	return func(o *kernelOpts) {
		if o.skip == nil {
			o.skip = map[string]string{}
		}
		o.skip[name] = why
	}
}

// RunKernelScenarios builds a two-node cluster running the mode made by
// factory on each node and checks, with real packets, the behaviours every
// mode must have. Each behaviour is a subtest.
func RunKernelScenarios(t *testing.T, factory ModeFactory, opts ...KernelOption) {
	var o kernelOpts
	for _, f := range opts {
		f(&o)
	}
	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			if why, ok := o.skip[name]; ok {
				t.Skip(why)
			}
			f(t)
		})
	}
	c := NewCluster(t, factory, 2, 3)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	client := n1.Pods[2] // a pod on node 1 that is never an endpoint
	servers := []*Pod{n1.Pods[0], n1.Pods[1], n2.Pods[0], n2.Pods[1]}

	run("ClusterIPSpread", func(t *testing.T) {
		svc := Service("spread", "10.96.0.10", 80, v1.ProtocolTCP)
		c.Apply(svc, Slice(svc, PodTCPPort, servers...))
		c.Sync(t)
		sample := func() (map[string]int, bool) {
			counts := map[string]int{}
			const n = 160
			for i := 0; i < n; i++ {
				pod, src, err := Ask(client.NS, ap("10.96.0.10", 80), dialTimeout)
				if err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				if src != client.IP.String() && !o.fromNode {
					t.Fatalf("pod-to-ClusterIP traffic was source-NATed: server saw %s", src)
				}
				counts[pod]++
			}
			var cs []int
			for _, p := range servers {
				cs = append(cs, counts[p.Name])
			}
			return counts, ChiSquare(cs) <= chiSquareCritical[len(cs)-1] && len(counts) == len(servers)
		}
		// A fair spread exceeds the 0.999 quantile once in a thousand
		// samples (a CI run saw it); a second sample must confirm a bias.
		counts, even := sample()
		if !even {
			t.Logf("uneven first sample %v; sampling again", counts)
			if counts, even = sample(); !even {
				t.Errorf("uneven spread twice: %v", counts)
			}
		}
		t.Logf("spread over %d endpoints: %v", len(servers), counts)
	})

	// The IPv6 side of a dual-stack Service (the behaviour table's "ds"
	// row traces only the IPv4 side): real packets to the IPv6 ClusterIP
	// from a pod reach every IPv6 endpoint unNATed, the IPv6 NodePort of
	// every node answers a client outside the cluster, and the IPv4
	// ClusterIP keeps working.
	run("DualStackIPv6", func(t *testing.T) {
		svc := Service("ds", "10.96.0.60", 80, v1.ProtocolTCP)
		svc.Spec.ClusterIPs = []string{"10.96.0.60", "fd00:10:96::60"}
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
		svc.Spec.Type = v1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = 30660
		c.Apply(svc, Slice(svc, PodTCPPort, servers...))
		c.ApplyIPv6Slice(svc, Slice6(svc, PodTCPPort, servers...))
		c.Sync(t)
		seen := map[string]bool{}
		for i := 0; i < 40 && len(seen) < len(servers); i++ {
			pod, src, err := Ask(client.NS, ap("fd00:10:96::60", 80), dialTimeout)
			if err != nil {
				t.Fatalf("IPv6 ClusterIP, connection %d: %v", i, err)
			}
			if src != client.IP6.String() && !o.fromNode {
				t.Fatalf("pod-to-IPv6-ClusterIP traffic was source-NATed: server saw %s, want %s", src, client.IP6)
			}
			seen[pod] = true
		}
		if len(seen) != len(servers) {
			t.Errorf("IPv6 ClusterIP reached %v, want all %d endpoints", seen, len(servers))
		}
		if _, _, err := Ask(client.NS, ap("10.96.0.60", 80), dialTimeout); err != nil {
			t.Errorf("IPv4 ClusterIP of the dual-stack Service: %v", err)
		}
		for _, n := range c.Nodes {
			pod, _, err := Ask(c.External, netip.AddrPortFrom(n.IP6, 30660), dialTimeout)
			if err != nil || !strings.HasPrefix(pod, "node") {
				t.Errorf("IPv6 NodePort on %s (%s): pod %q, %v", n.Name, n.IP6, pod, err)
			}
		}
	})

	run("NodePortOnEveryNode", func(t *testing.T) {
		svc := Service("np", "10.96.0.11", 80, v1.ProtocolTCP)
		svc.Spec.Type = v1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = 30080
		c.Apply(svc, Slice(svc, PodTCPPort, n1.Pods[0], n2.Pods[0]))
		c.Sync(t)
		for _, n := range c.Nodes {
			seen := map[string]bool{}
			for i := 0; i < 20; i++ {
				pod, src, err := Ask(c.External, netip.AddrPortFrom(n.IP, 30080), dialTimeout)
				if err != nil {
					t.Fatalf("NodePort on %s: %v", n.Name, err)
				}
				if src == ExternalClientIP.String() {
					t.Errorf("NodePort with Cluster policy kept the client address (want masquerade)")
				}
				seen[pod] = true
			}
			if len(seen) != 2 {
				t.Errorf("NodePort on %s reached %v, want both endpoints", n.Name, seen)
			}
		}
	})

	run("ExternalIPAndLoadBalancerIP", func(t *testing.T) {
		svc := Service("ext", "10.96.0.12", 80, v1.ProtocolTCP)
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Spec.Ports[0].NodePort = 30081
		svc.Spec.ExternalIPs = []string{"192.168.100.20"}
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.168.100.10"}}
		c.Apply(svc, Slice(svc, PodTCPPort, n2.Pods[1]))
		c.Sync(t)
		for _, ip := range []string{"192.168.100.20", "192.168.100.10"} {
			if pod, _, err := Ask(c.External, ap(ip, 80), dialTimeout); err != nil || pod != n2.Pods[1].Name {
				t.Errorf("%s:80: pod %q err %v", ip, pod, err)
			}
		}
	})

	// Services claiming one destination: every mode sends new connections
	// to the winner the core picks (a ClusterIP, then a LoadBalancer IP,
	// then an externalIP; the oldest; the first name), and a change of
	// winner reaches the kernel in a partial sync.
	run("SharedDestination", func(t *testing.T) {
		at := func(svc *v1.Service, minute int) *v1.Service {
			svc.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC))
			return svc
		}
		b := at(Service("shared-b", "10.96.0.71", 80, v1.ProtocolTCP), 0)
		b.Spec.ExternalIPs = []string{"192.168.100.40"}
		a := at(Service("shared-a", "10.96.0.72", 80, v1.ProtocolTCP), 1)
		a.Spec.ExternalIPs = []string{"192.168.100.40"}
		x := at(Service("shared-x", "10.96.0.73", 80, v1.ProtocolTCP), 0)
		x.Spec.ExternalIPs = []string{"192.168.100.41", "10.96.0.75"}
		lb := at(Service("shared-lb", "10.96.0.74", 80, v1.ProtocolTCP), 2)
		lb.Spec.Type = v1.ServiceTypeLoadBalancer
		lb.Spec.Ports[0].NodePort = 30741
		lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.168.100.41"}}
		cip := at(Service("shared-cip", "10.96.0.75", 80, v1.ProtocolTCP), 3)
		c.Apply(b, Slice(b, PodTCPPort, n1.Pods[0]))
		c.Apply(a, Slice(a, PodTCPPort, n2.Pods[0]))
		c.Apply(x, Slice(x, PodTCPPort, n1.Pods[1]))
		c.Apply(lb, Slice(lb, PodTCPPort, n2.Pods[1]))
		c.Apply(cip, Slice(cip, PodTCPPort, n2.Pods[0]))
		c.Sync(t)
		expect := func(what string, from *testbed.NetNS, dst string, want *Pod) {
			t.Helper()
			for i := 0; i < 6; i++ {
				if pod, _, err := Ask(from, ap(dst, 80), dialTimeout); err != nil || pod != want.Name {
					t.Errorf("%s: %s:80 reached %q (err %v), want %s", what, dst, pod, err, want.Name)
					return
				}
			}
		}
		expect("the older of two externalIPs", c.External, "192.168.100.40", n1.Pods[0])
		expect("a LoadBalancer IP over an older externalIP", c.External, "192.168.100.41", n2.Pods[1])
		expect("a ClusterIP over an older externalIP", client.NS, "10.96.0.75", n2.Pods[0])
		c.Delete(b)
		lb2 := lb.DeepCopy()
		lb2.Status.LoadBalancer.Ingress = nil
		c.Apply(lb2, Slice(lb2, PodTCPPort, n2.Pods[1]))
		c.Sync(t)
		expect("the winner deleted", c.External, "192.168.100.40", n2.Pods[0])
		expect("the load balancer's address released", c.External, "192.168.100.41", n1.Pods[1])
		c.Delete(a)
		c.Delete(x)
		c.Delete(lb2)
		c.Delete(cip)
		c.Sync(t)
	})

	run("ExternalTrafficPolicyLocal", func(t *testing.T) {
		svc := Service("local", "10.96.0.13", 80, v1.ProtocolTCP)
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Spec.Ports[0].NodePort = 30082
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		svc.Spec.HealthCheckNodePort = 32000
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.168.100.11"}}
		c.Apply(svc, Slice(svc, PodTCPPort, n1.Pods[0], n1.Pods[1]))
		c.Sync(t)
		for _, dst := range []netip.AddrPort{netip.AddrPortFrom(n1.IP, 30082), ap("192.168.100.11", 80)} {
			for i := 0; i < 10; i++ {
				pod, src, err := Ask(c.External, dst, dialTimeout)
				if err != nil {
					t.Fatalf("%s: %v", dst, err)
				}
				if src != ExternalClientIP.String() && !o.fromNode {
					t.Errorf("%s: server saw source %s, want the client's %s", dst, src, ExternalClientIP)
				}
				if !strings.HasPrefix(pod, n1.Name+"-") {
					t.Errorf("%s: reached %s, not a local endpoint", dst, pod)
				}
			}
		}
		// Node 2 has no local endpoint: its NodePort must not answer.
		if pod, _, err := Ask(c.External, netip.AddrPortFrom(n2.IP, 30082), time.Second); err == nil {
			t.Errorf("node2 NodePort answered from %s, want no answer (no local endpoints)", pod)
		}
		checkHealth(t, c.External, n1.IP, 32000, 200, 2)
		checkHealth(t, c.External, n2.IP, 32000, 503, 0)
	})

	run("LoadBalancerSourceRanges", func(t *testing.T) {
		svc := Service("fw", "10.96.0.20", 80, v1.ProtocolTCP)
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Spec.Ports[0].NodePort = 30083
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.168.100.12"}}
		svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
		c.Apply(svc, Slice(svc, PodTCPPort, n2.Pods[0]))
		c.Sync(t)
		if pod, _, err := Ask(c.External, ap("192.168.100.12", 80), time.Second); err == nil {
			t.Errorf("client outside loadBalancerSourceRanges reached %s", pod)
		}
		allowed := svc.DeepCopy()
		allowed.Spec.LoadBalancerSourceRanges = []string{ExternalClientIP.String() + "/32"}
		c.Apply(allowed, Slice(allowed, PodTCPPort, n2.Pods[0]))
		c.Sync(t)
		if _, _, err := Ask(c.External, ap("192.168.100.12", 80), dialTimeout); err != nil {
			t.Errorf("client inside loadBalancerSourceRanges: %v", err)
		}
	})

	run("SessionAffinity", func(t *testing.T) {
		svc := Service("sticky", "10.96.0.14", 80, v1.ProtocolTCP)
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(1))}}
		c.Apply(svc, Slice(svc, PodTCPPort, servers...))
		c.Sync(t)
		// Each round after the first starts once the affinity expired, so
		// its pick is a fresh random one among the 4 servers; six rounds
		// all on one server happened once in a CI run ((1/4)^5, 0.1 %), so
		// rounds go on until two servers have been picked, up to 12
		// ((1/4)^11 that a working expiry is not seen).
		first := map[string]bool{}
		for round := 0; round < 12 && len(first) < 2; round++ {
			if round > 0 {
				time.Sleep(1200 * time.Millisecond) // let the 1s affinity expire
			}
			pinned := ""
			for i := 0; i < 8; i++ {
				pod, _, err := Ask(client.NS, ap("10.96.0.14", 80), dialTimeout)
				if err != nil {
					t.Fatal(err)
				}
				if pinned == "" {
					pinned = pod
				} else if pod != pinned {
					t.Fatalf("round %d: affinity broken: %s then %s", round, pinned, pod)
				}
			}
			first[pinned] = true
		}
		if len(first) < 2 {
			t.Errorf("affinity never expired: every round pinned to %v", first)
		}
	})

	run("NoEndpointsRejects", func(t *testing.T) {
		svc := Service("empty", "10.96.0.15", 80, v1.ProtocolTCP)
		c.Apply(svc, nil)
		c.Sync(t)
		start := time.Now()
		_, _, err := Ask(client.NS, ap("10.96.0.15", 80), dialTimeout)
		if err == nil {
			t.Fatal("connection to a Service without endpoints succeeded")
		}
		if !strings.Contains(err.Error(), "refused") && !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("want a rejection (refused/unreachable), got %v", err)
		}
		if time.Since(start) > time.Second {
			t.Errorf("rejection took %v (dropped instead of rejected?)", time.Since(start))
		}
	})

	run("EndpointRemoval", func(t *testing.T) {
		svc := Service("rm", "10.96.0.16", 80, v1.ProtocolTCP)
		a, b := n1.Pods[0], n2.Pods[0]
		c.Apply(svc, Slice(svc, PodTCPPort, a, b))
		c.Sync(t)
		conn, err := Dial(client.NS, ap("10.96.0.16", 80), dialTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		gone, stay := a, b
		if conn.Pod == b.Name {
			gone, stay = b, a
		}
		c.Apply(svc, Slice(svc, PodTCPPort, stay))
		c.Sync(t)
		for i := 0; i < 20; i++ {
			pod, _, err := Ask(client.NS, ap("10.96.0.16", 80), dialTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if pod != stay.Name {
				t.Fatalf("new connection reached removed endpoint %s", pod)
			}
		}
		if err := conn.Echo("still here", dialTimeout); err != nil {
			t.Errorf("established connection to removed endpoint %s broke: %v", gone.Name, err)
		}
	})

	run("UDPFollowsEndpointChange", func(t *testing.T) {
		svc := Service("udp", "10.96.0.17", 53, v1.ProtocolUDP)
		a, b := n1.Pods[1], n2.Pods[1]
		c.Apply(svc, Slice(svc, PodUDPPort, a))
		c.Sync(t)
		var pc net.PacketConn
		if err := Do(client.NS, func() error {
			var err error
			pc, err = net.ListenPacket("udp4", ":0")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		dst := net.UDPAddrFromAddrPort(ap("10.96.0.17", 53))
		stop := make(chan struct{})
		defer close(stop)
		go func() { // a one-way sender from one fixed source port
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
					_, _ = pc.WriteTo([]byte("ping"), dst)
				}
			}
		}()
		hits := func(p *Pod) int {
			if o.fromNode {
				return p.AllHits()
			}
			return p.Hits(client.IP)
		}
		waitFor(t, 3*time.Second, "datagrams reaching the first endpoint", func() bool { return hits(a) > 0 })
		c.Apply(svc, Slice(svc, PodUDPPort, b))
		c.Sync(t)
		before := hits(b)
		waitFor(t, 3*time.Second, "the one-way UDP sender to reach the new endpoint", func() bool { return hits(b) > before })
	})

	run("HairpinToSelf", func(t *testing.T) {
		self := n1.Pods[1]
		svc := Service("hairpin", "10.96.0.19", 80, v1.ProtocolTCP)
		c.Apply(svc, Slice(svc, PodTCPPort, self))
		c.Sync(t)
		pod, src, err := Ask(self.NS, ap("10.96.0.19", 80), dialTimeout)
		if err != nil {
			t.Fatalf("pod reaching itself through its Service: %v", err)
		}
		if pod != self.Name || src == self.IP.String() {
			t.Errorf("hairpin reached %s with source %s; want itself, masqueraded", pod, src)
		}
	})

	run("PreferSameNodeKeepsTrafficOnTheNode", func(t *testing.T) {
		svc := Service("samenode", "10.96.0.30", 80, v1.ProtocolTCP)
		svc.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferSameNode)
		slice := Slice(svc, PodTCPPort, servers...)
		// As the EndpointSlice controller publishes PreferSameNode.
		for i := range slice.Endpoints {
			slice.Endpoints[i].Hints = &discovery.EndpointHints{ForNodes: []discovery.ForNode{{Name: *slice.Endpoints[i].NodeName}}}
		}
		c.Apply(svc, slice)
		c.Sync(t)
		for _, n := range c.Nodes {
			from := n.Pods[2]
			seen := map[string]int{}
			for i := 0; i < 40; i++ {
				pod, _, err := Ask(from.NS, ap("10.96.0.30", 80), dialTimeout)
				if err != nil {
					t.Fatalf("from %s: %v", from.Name, err)
				}
				seen[pod]++
			}
			for pod := range seen {
				if p := c.PodByName(pod); p == nil || p.Node != n {
					t.Errorf("PreferSameNode: a pod on %s reached %s on another node (%v)", n.Name, pod, seen)
				}
			}
			if len(seen) != 2 {
				t.Errorf("PreferSameNode: a pod on %s reached %v, want both pods of its node", n.Name, seen)
			}
			t.Logf("from %s: %v", n.Name, seen)
		}
	})

	run("WeightZeroIsQuiesced", func(t *testing.T) {
		svc := Service("quiesced", "10.96.0.31", 80, v1.ProtocolTCP)
		slice := Slice(svc, PodTCPPort, servers...)
		slice.Annotations = map[string]string{lb.EndpointWeightsAnnotation: servers[0].IP.String() + "=0"}
		c.Apply(svc, Slice(svc, PodTCPPort, servers...))
		c.Sync(t)
		conn, err := Dial(client.NS, ap("10.96.0.31", 80), dialTimeout)
		for i := 0; err == nil && conn.Pod != servers[0].Name && i < 50; i++ {
			conn.Close()
			conn, err = Dial(client.NS, ap("10.96.0.31", 80), dialTimeout)
		}
		if err != nil || conn.Pod != servers[0].Name {
			t.Fatalf("no connection to %s before quiescing it: %v", servers[0].Name, err)
		}
		defer conn.Close()
		c.Apply(svc, slice)
		c.Sync(t)
		for i := 0; i < 40; i++ {
			pod, _, err := Ask(client.NS, ap("10.96.0.31", 80), dialTimeout)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			if pod == servers[0].Name {
				t.Fatalf("new connection %d reached the quiesced pod %s", i, pod)
			}
		}
		if err := conn.Echo("still here", dialTimeout); err != nil {
			t.Errorf("established connection to the quiesced pod broke: %v", err)
		}
	})

	run("WeightsUnderWRR", func(t *testing.T) {
		svc := Service("weighted", "10.96.0.32", 80, v1.ProtocolTCP)
		svc.Annotations = map[string]string{proxy.AnnotationIPVSScheduler: "wrr"}
		slice := Slice(svc, PodTCPPort, servers...)
		slice.Annotations = map[string]string{lb.EndpointWeightsAnnotation: servers[0].IP.String() + "=7"}
		c.Apply(svc, slice)
		c.Sync(t)
		counts := map[string]int{}
		const n = 400
		for i := 0; i < n; i++ {
			pod, _, err := Ask(client.NS, ap("10.96.0.32", 80), dialTimeout)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			counts[pod]++
		}
		share := float64(counts[servers[0].Name]) / n
		t.Logf("weights 7:1:1:1 under wrr, %d connections: %v (heavy pod %.1f%%)", n, counts, 100*share)
		// 70% expected; with 400 draws the standard deviation is 2.3%.
		if share < 0.60 || share > 0.80 || len(counts) != len(servers) {
			t.Errorf("heavy pod got %.1f%% of %d connections (%v), want about 70%%", 100*share, n, counts)
		}
	})

	run("ProxyRestartKeepsConnections", func(t *testing.T) {
		svc := Service("restart", "10.96.0.18", 80, v1.ProtocolTCP)
		c.Apply(svc, Slice(svc, PodTCPPort, servers...))
		c.Sync(t)
		conn, err := Dial(client.NS, ap("10.96.0.18", 80), dialTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, n := range c.Nodes {
			n.StartProxy(t)
		}
		c.Sync(t)
		if err := conn.Echo("after restart", dialTimeout); err != nil {
			t.Errorf("established connection broke across a proxy restart: %v", err)
		}
		if _, _, err := Ask(client.NS, ap("10.96.0.18", 80), dialTimeout); err != nil {
			t.Errorf("new connection after restart: %v", err)
		}
	})
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkHealth asks a node's health-check node port from ns.
func checkHealth(t *testing.T, ns *testbed.NetNS, node netip.Addr, port int, wantCode, wantEndpoints int) {
	t.Helper()
	var conn net.Conn
	if err := Do(ns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp4", netip.AddrPortFrom(node, uint16(port)).String(), dialTimeout)
		return err
	}); err != nil {
		t.Errorf("health check %s:%d: %v", node, port, err)
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(dialTimeout))
	fmt.Fprintf(conn, "GET / HTTP/1.0\r\nHost: x\r\n\r\n")
	raw, _ := io.ReadAll(conn)
	resp := string(raw)
	head, body, _ := strings.Cut(resp, "\r\n\r\n")
	if !strings.Contains(strings.SplitN(head, "\r\n", 2)[0], fmt.Sprint(wantCode)) {
		t.Errorf("health check on %s: status line %q, want %d", node, strings.SplitN(head, "\r\n", 2)[0], wantCode)
	}
	var doc struct {
		Service        struct{ Namespace, Name string }
		LocalEndpoints int
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Errorf("health check body %q: %v", body, err)
		return
	}
	if doc.LocalEndpoints != wantEndpoints || doc.Service.Name == "" {
		t.Errorf("health check on %s: %+v, want localEndpoints %d", node, doc, wantEndpoints)
	}
}
