package proxytest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/conntrack"
)

// Addresses of the real-kernel topology (all inside the test's namespaces).
var (
	// ExternalClientIP is a client outside the cluster, on the node network.
	ExternalClientIP = netip.MustParseAddr("172.18.0.50")
	// VIPRange is routed from the external client to node 1; externalIPs
	// and LoadBalancer IPs of kernel scenarios come from it.
	VIPRange = netip.MustParsePrefix("192.168.100.0/24")
	// ServiceCIDR is the ClusterIP range.
	ServiceCIDR = netip.MustParsePrefix("10.96.0.0/16")
	// The cluster is dual-stack (IPv4 primary): the IPv6 twins of the node
	// network, the pod CIDRs (node i: fd00:10:244:i::/64), the Service
	// range and the external client.
	ServiceCIDR6      = netip.MustParsePrefix("fd00:10:96::/112")
	ClusterCIDR6      = netip.MustParsePrefix("fd00:10:244::/48")
	ExternalClientIP6 = netip.MustParseAddr("fd00:172:18::50")
)

// ModeFactory builds the mode under test for one node. cfg has Exec set to
// run commands inside the node's namespace; node gives access to the
// namespace itself (e.g. to open sockets in it with node.NS.Do).
type ModeFactory func(node *Node, cfg proxy.ModeConfig) (proxy.Provider, error)

// Cluster is a two-node cluster of network namespaces.
type Cluster struct {
	t       testing.TB
	factory ModeFactory
	Switch  *testbed.NetNS
	// External is a client namespace outside the cluster (ExternalClientIP)
	// whose route to VIPRange, the service range and the pod CIDR goes
	// through node 1.
	External *testbed.NetNS
	Nodes    []*Node

	mu       sync.Mutex
	services map[types.NamespacedName]*v1.Service
	slices   map[types.NamespacedName]*discovery.EndpointSlice
	// slices6 are the IPv6 EndpointSlices of dual-stack Services.
	slices6 map[types.NamespacedName]*discovery.EndpointSlice
}

// Node is one node namespace with its pods and its proxy.
type Node struct {
	Name    string
	NS      *testbed.NetNS
	IP      netip.Addr
	PodCIDR netip.Prefix
	// IP6 and PodCIDR6 are the node's IPv6 address and pod range.
	IP6      netip.Addr
	PodCIDR6 netip.Prefix
	Pods     []*Pod
	Proxier  *proxy.Proxier
	// Provider is the mode instance the Proxier drives.
	Provider proxy.Provider
	health   *proxy.ServiceHealthServer
	cluster  *Cluster
	podSeq   int
}

// Pod is a pod namespace on a node.
type Pod struct {
	Name string
	NS   *testbed.NetNS
	IP   netip.Addr
	IP6  netip.Addr
	Node *Node
	// Hits counts the connections/datagrams the pod's servers received,
	// per client address.
	mu   sync.Mutex
	hits map[string]int
}

// NewCluster builds nodes × podsPerNode server pods (each serving TCP and
// UDP on port 8080 and UDP 5353... see Pod.Serve) plus one client pod per
// node, and starts a proxy of the given mode on every node. Everything is
// removed when the test ends.
func NewCluster(t testing.TB, factory ModeFactory, nodes, podsPerNode int) *Cluster {
	t.Helper()
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "sysctl")
	c := &Cluster{t: t, factory: factory, services: map[types.NamespacedName]*v1.Service{},
		slices: map[types.NamespacedName]*discovery.EndpointSlice{}, slices6: map[types.NamespacedName]*discovery.EndpointSlice{}}
	c.Switch = testbed.NewNetNS(t, "sw")
	c.Switch.MustRun("ip", "link", "add", "br0", "type", "bridge")
	c.Switch.MustRun("ip", "link", "set", "br0", "up")
	for i := 0; i < nodes; i++ {
		n := &Node{Name: fmt.Sprintf("node%d", i+1), IP: netip.AddrFrom4([4]byte{172, 18, 0, byte(i + 2)}),
			PodCIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 0}), 24), cluster: c,
			IP6:      netip.MustParseAddr(fmt.Sprintf("fd00:172:18::%x", i+2)),
			PodCIDR6: netip.MustParsePrefix(fmt.Sprintf("fd00:10:244:%x::/64", i+1))}
		n.NS = testbed.NewNetNS(t, n.Name)
		// IPv6 addresses are usable at once (no duplicate address detection).
		n.NS.MustRun("sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0")
		testbed.Link(t, n.NS, "eth0", n.IP.String()+"/24", c.Switch, "n"+strconv.Itoa(i+1), "")
		n.NS.MustRun("ip", "addr", "add", n.IP6.String()+"/64", "dev", "eth0", "nodad")
		c.Switch.MustRun("ip", "link", "set", "n"+strconv.Itoa(i+1), "master", "br0")
		n.NS.MustRun("sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
		for _, k := range []string{"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"} {
			_, _ = n.NS.Run("sysctl", "-q", "-w", k)
		}
		n.NS.MustRun("ip", "link", "add", "cbr0", "type", "bridge")
		gw := n.PodCIDR.Addr().Next()
		n.NS.MustRun("ip", "addr", "add", netip.PrefixFrom(gw, 24).String(), "dev", "cbr0")
		n.NS.MustRun("ip", "addr", "add", netip.PrefixFrom(n.PodCIDR6.Addr().Next(), 64).String(), "dev", "cbr0", "nodad")
		n.NS.MustRun("ip", "link", "set", "cbr0", "up")
		// The node's own connections to ClusterIPs need a route before NAT.
		n.NS.MustRun("ip", "route", "add", ServiceCIDR.String(), "dev", "eth0")
		n.NS.MustRun("ip", "-6", "route", "add", ServiceCIDR6.String(), "dev", "eth0")
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		for _, m := range c.Nodes {
			if m != n {
				n.NS.MustRun("ip", "route", "add", m.PodCIDR.String(), "via", m.IP.String())
				n.NS.MustRun("ip", "-6", "route", "add", m.PodCIDR6.String(), "via", m.IP6.String())
			}
		}
		for k := 0; k < podsPerNode; k++ {
			n.AddPod(t)
		}
	}
	c.External = testbed.NewNetNS(t, "ext")
	c.External.MustRun("sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0")
	testbed.Link(t, c.External, "eth0", ExternalClientIP.String()+"/24", c.Switch, "ext", "")
	c.External.MustRun("ip", "addr", "add", ExternalClientIP6.String()+"/64", "dev", "eth0", "nodad")
	c.Switch.MustRun("ip", "link", "set", "ext", "master", "br0")
	for _, r := range []string{VIPRange.String(), ServiceCIDR.String(), "10.244.0.0/16"} {
		c.External.MustRun("ip", "route", "add", r, "via", c.Nodes[0].IP.String())
	}
	for _, r := range []string{ServiceCIDR6.String(), ClusterCIDR6.String()} {
		c.External.MustRun("ip", "-6", "route", "add", r, "via", c.Nodes[0].IP6.String())
	}
	for _, n := range c.Nodes {
		n.StartProxy(t)
	}
	return c
}

// AddPod adds a pod namespace to the node, attached to its bridge with
// hairpin on, and starts its servers.
func (n *Node) AddPod(t testing.TB) *Pod {
	t.Helper()
	n.podSeq++
	ip := n.PodCIDR.Addr()
	for i := 0; i < n.podSeq+1; i++ {
		ip = ip.Next()
	}
	ip6 := n.PodCIDR6.Addr()
	for i := 0; i < n.podSeq+1; i++ {
		ip6 = ip6.Next()
	}
	p := &Pod{Name: fmt.Sprintf("%s-pod%d", n.Name, n.podSeq), IP: ip, IP6: ip6, Node: n, hits: map[string]int{}}
	p.NS = testbed.NewNetNS(t, p.Name)
	p.NS.MustRun("sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0")
	port := "p" + strconv.Itoa(n.podSeq)
	testbed.Link(t, p.NS, "eth0", ip.String()+"/24", n.NS, port, "")
	p.NS.MustRun("ip", "addr", "add", ip6.String()+"/64", "dev", "eth0", "nodad")
	n.NS.MustRun("ip", "link", "set", port, "master", "cbr0")
	n.NS.MustRun("ip", "link", "set", port, "type", "bridge_slave", "hairpin", "on")
	p.NS.MustRun("ip", "route", "add", "default", "via", n.PodCIDR.Addr().Next().String())
	p.NS.MustRun("ip", "-6", "route", "add", "default", "via", n.PodCIDR6.Addr().Next().String())
	p.serve(t)
	n.Pods = append(n.Pods, p)
	return p
}

// Pod ports.
const (
	PodTCPPort = 8080
	PodUDPPort = 5353
)

// serve starts a TCP server (writes "podname clientaddr\n", then echoes
// lines) and a UDP server (answers "podname clientaddr") in the pod.
func (p *Pod) serve(t testing.TB) {
	var ln net.Listener
	var pc net.PacketConn
	err := Do(p.NS, func() error {
		var err error
		// Both families: IPv4 clients appear as IPv4 addresses.
		if ln, err = net.Listen("tcp", fmt.Sprintf(":%d", PodTCPPort)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", PodUDPPort))
		return err
	})
	if err != nil {
		t.Fatalf("pod %s servers: %v", p.Name, err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				src := conn.RemoteAddr().(*net.TCPAddr).IP.String()
				p.hit(src)
				fmt.Fprintf(conn, "%s %s\n", p.Name, src)
				sc := bufio.NewScanner(conn)
				for sc.Scan() {
					fmt.Fprintf(conn, "%s\n", sc.Text())
				}
			}()
		}
	}()
	go func() {
		buf := make([]byte, 1500)
		for {
			_, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			src := addr.(*net.UDPAddr).IP.String()
			p.hit(src)
			_, _ = pc.WriteTo([]byte(p.Name+" "+src), addr)
		}
	}()
}

func (p *Pod) hit(src string) {
	p.mu.Lock()
	p.hits[src]++
	p.mu.Unlock()
}

// Hits returns how many connections or datagrams the pod got from src.
func (p *Pod) Hits(src netip.Addr) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[src.String()]
}

// AllHits returns the number of connections and datagrams p answered,
// from any source.
func (p *Pod) AllHits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, h := range p.hits {
		n += h
	}
	return n
}

// StartProxy (re)creates the node's proxy: a new mode instance and a new
// Proxier fed with the cluster's current objects, as after a process
// restart. It does not sync; call Cluster.Sync.
func (n *Node) StartProxy(t testing.TB) {
	t.Helper()
	if n.health != nil {
		n.health.Close()
	}
	cfg := proxy.ModeConfig{
		Exec: proxy.OSExecutor{NetNS: n.NS.Name}, NodeName: n.Name, NodeIPs: []netip.Addr{n.IP, n.IP6}, IPv4: true, IPv6: true,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), ClusterCIDR6}, MasqueradeBit: ptr.To(14),
		SyncPeriod: time.Hour, MinSyncPeriod: 0, Scheduler: "rr",
	}
	prov, err := n.cluster.factory(n, cfg)
	if err != nil {
		t.Fatalf("mode for %s: %v", n.Name, err)
	}
	health := proxy.NewProxyHealth(time.Hour)
	n.health = proxy.NewServiceHealthServer(nil, health, func(port uint16) (net.Listener, error) {
		var ln net.Listener
		err := Do(n.NS, func() error {
			var err error
			ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
			return err
		})
		return ln, err
	})
	t.Cleanup(n.health.Close)
	n.Provider = prov
	n.Proxier = proxy.NewProxier(proxy.Config{Provider: prov, Node: proxy.NodeInfo{Name: n.Name, IPs: []netip.Addr{n.IP, n.IP6}},
		SyncPeriod: time.Hour, Health: health, ServiceHealth: n.health, Conntrack: &conntrack.Cleaner{NetNS: n.NS.Name}})
	n.cluster.mu.Lock()
	for _, s := range n.cluster.services {
		n.Proxier.OnServiceAdd(s)
	}
	for _, s := range n.cluster.slices {
		n.Proxier.OnEndpointSliceAdd(s)
	}
	for _, s := range n.cluster.slices6 {
		n.Proxier.OnEndpointSliceAdd(s)
	}
	n.cluster.mu.Unlock()
	n.Proxier.OnServiceSynced()
	n.Proxier.OnEndpointSlicesSynced()
	t.Cleanup(func() { _ = prov.Cleanup(context.Background()) })
}

// Apply creates or replaces a Service and its EndpointSlice (nil slice:
// no endpoints) on every node's proxy. Call Sync to program them.
func (c *Cluster) Apply(svc *v1.Service, slice *discovery.EndpointSlice) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	c.mu.Lock()
	oldSvc, oldSlice := c.services[key], c.slices[key]
	c.services[key] = svc
	if slice != nil {
		c.slices[key] = slice
	} else {
		delete(c.slices, key)
	}
	c.mu.Unlock()
	for _, n := range c.Nodes {
		n.Proxier.OnServiceUpdate(oldSvc, svc)
		switch {
		case slice != nil:
			n.Proxier.OnEndpointSliceUpdate(oldSlice, slice)
		case oldSlice != nil:
			n.Proxier.OnEndpointSliceDelete(oldSlice)
		}
	}
}

// Delete removes a Service and its EndpointSlices from every node's proxy.
// Call Sync to program it.
func (c *Cluster) Delete(svc *v1.Service) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	c.mu.Lock()
	oldSvc, oldSlice, oldSlice6 := c.services[key], c.slices[key], c.slices6[key]
	delete(c.services, key)
	delete(c.slices, key)
	delete(c.slices6, key)
	c.mu.Unlock()
	for _, n := range c.Nodes {
		if oldSvc != nil {
			n.Proxier.OnServiceDelete(oldSvc)
		}
		for _, s := range []*discovery.EndpointSlice{oldSlice, oldSlice6} {
			if s != nil {
				n.Proxier.OnEndpointSliceDelete(s)
			}
		}
	}
}

// ApplyIPv6Slice creates or replaces the IPv6 EndpointSlice of a
// dual-stack Service (after Apply, which sets the Service and its IPv4
// slice). Call Sync to program it.
func (c *Cluster) ApplyIPv6Slice(svc *v1.Service, slice *discovery.EndpointSlice) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	c.mu.Lock()
	old := c.slices6[key]
	c.slices6[key] = slice
	c.mu.Unlock()
	for _, n := range c.Nodes {
		n.Proxier.OnEndpointSliceUpdate(old, slice)
	}
}

// Sync runs one sync on every node's proxy.
func (c *Cluster) Sync(t testing.TB) {
	t.Helper()
	for _, n := range c.Nodes {
		if err := n.Proxier.SyncNow(context.Background()); err != nil {
			t.Fatalf("sync %s: %v", n.Name, err)
		}
	}
}

// AllPods returns every server pod of every node.
func (c *Cluster) AllPods() []*Pod {
	var out []*Pod
	for _, n := range c.Nodes {
		out = append(out, n.Pods...)
	}
	return out
}

// PodByName finds a pod by name (nil if none).
func (c *Cluster) PodByName(name string) *Pod {
	for _, p := range c.AllPods() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Service builds a ClusterIP Service object with one port named "p".
func Service(name, clusterIP string, port int32, proto v1.Protocol) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			SessionAffinity: v1.ServiceAffinityNone,
			Ports:           []v1.ServicePort{{Name: "p", Port: port, Protocol: proto, TargetPort: intstr.FromInt32(PodTCPPort)}}},
	}
}

// Slice builds the EndpointSlice of a Service with the given pods as ready
// endpoints on port (PodTCPPort or PodUDPPort).
func Slice(svc *v1.Service, port int32, pods ...*Pod) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-abcde",
			Labels: map[string]string{discovery.LabelServiceName: svc.Name}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To(port), Protocol: ptr.To(svc.Spec.Ports[0].Protocol)}},
	}
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{p.IP.String()}, NodeName: ptr.To(p.Node.Name),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}})
	}
	return s
}

// Slice6 is Slice for the IPv6 side of a dual-stack Service: the pods' IPv6
// addresses.
func Slice6(svc *v1.Service, port int32, pods ...*Pod) *discovery.EndpointSlice {
	s := Slice(svc, port)
	s.Name, s.AddressType = svc.Name+"-v6abc", discovery.AddressTypeIPv6
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{p.IP6.String()}, NodeName: ptr.To(p.Node.Name),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}})
	}
	return s
}

// Conn is a client TCP connection made from inside a namespace.
type Conn struct {
	net.Conn
	r *bufio.Reader
	// Pod and Source are what the server reported: its pod name and the
	// client address it saw.
	Pod, Source string
}

// Dial connects from ns to addr over TCP and reads the server's greeting.
func Dial(ns *testbed.NetNS, addr netip.AddrPort, timeout time.Duration) (*Conn, error) {
	var conn net.Conn
	err := Do(ns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr.String(), timeout)
		return err
	})
	if err != nil {
		return nil, err
	}
	c := &Conn{Conn: conn, r: bufio.NewReader(conn)}
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	line, err := c.r.ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("greeting from %s: %w", addr, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	f := strings.Fields(line)
	if len(f) != 2 {
		conn.Close()
		return nil, fmt.Errorf("bad greeting %q", line)
	}
	c.Pod, c.Source = f[0], f[1]
	return c, nil
}

// Echo sends a line and waits for it to come back.
func (c *Conn) Echo(msg string, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return err
	}
	got, err := c.r.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(got) != msg {
		return fmt.Errorf("echo %q, got %q", msg, got)
	}
	return nil
}

// Ask dials, reads the greeting and closes: which pod answered, and which
// source address it saw.
func Ask(ns *testbed.NetNS, addr netip.AddrPort, timeout time.Duration) (pod, src string, err error) {
	c, err := Dial(ns, addr, timeout)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	return c.Pod, c.Source, nil
}
