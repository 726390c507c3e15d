// Command guest is the /init of the IPVS real-kernel test VM (see package
// vmtest). It loads the kernel modules listed in /modules.list, builds a
// small cluster of network namespaces, runs svcnet's IPVS mode against the
// real kernel, sends traffic, and prints "SVCNET-VMTEST PASS" or
// "SVCNET-VMTEST FAIL: <reason>" on the console before powering off.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8ssets "k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/iptables"
	"github.com/svcnet/svcnet/proxy/ipvs"
)

func main() {
	start := time.Now()
	err := run()
	if err != nil {
		fmt.Printf("\nSVCNET-VMTEST FAIL: %v\n", err)
	} else {
		fmt.Printf("\nSVCNET-VMTEST PASS (%.1fs in guest)\n", time.Since(start).Seconds())
	}
	os.Stdout.Sync()
	if os.Getpid() == 1 {
		unix.Sync()
		_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	}
}

func sh(args ...string) (string, error) {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func setupSystem() error {
	for _, m := range []struct{ src, dst, typ string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"}, {"tmpfs", "/run", "tmpfs"}, {"tmpfs", "/tmp", "tmpfs"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.typ, 0, ""); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	os.MkdirAll("/run/netns", 0o755)
	os.Setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
	f, err := os.Open("/modules.list")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		path := strings.TrimSpace(sc.Text())
		if path == "" {
			continue
		}
		mf, err := os.Open(path)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(mf.Fd()), "", 0)
		mf.Close()
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("load %s: %w", path, err)
		}
	}
	return nil
}

// inNS runs f with the calling goroutine's thread in network namespace ns;
// sockets made in f stay in ns.
func inNS(ns string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	h, err := netns.GetFromName(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		return err
	}
	defer netns.Set(orig)
	return f()
}

// topology: client (10.0.0.2) -- node (10.0.0.1 | br0 10.244.0.1) -- be1 10.244.0.11, be2 10.244.0.12
func setupNetwork() error {
	for _, ns := range []string{"node", "client", "be1", "be2"} {
		if _, err := sh("ip", "netns", "add", ns); err != nil {
			return err
		}
		if _, err := sh("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return err
		}
	}
	cmds := [][]string{
		{"ip", "-n", "node", "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", "node", "addr", "add", "10.244.0.1/24", "dev", "br0"},
		{"ip", "-n", "node", "link", "set", "br0", "up"},
		{"ip", "-n", "node", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", "client"},
		{"ip", "-n", "node", "addr", "add", "10.0.0.1/24", "dev", "eth0"},
		{"ip", "-n", "node", "link", "set", "eth0", "up"},
		{"ip", "-n", "client", "addr", "add", "10.0.0.2/24", "dev", "eth0"},
		{"ip", "-n", "client", "link", "set", "eth0", "up"},
		{"ip", "-n", "client", "route", "add", "default", "via", "10.0.0.1"},
		{"ip", "netns", "exec", "node", "sysctl", "-w", "net.ipv4.ip_forward=1"},
	}
	for i, be := range []string{"be1", "be2"} {
		v := "v" + be
		cmds = append(cmds,
			[]string{"ip", "-n", "node", "link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", be},
			[]string{"ip", "-n", "node", "link", "set", v, "master", "br0"},
			// Hairpin mode, as svcnet's node agent (and the kubelet, CNI's
			// bridge plugin) sets it: a pod's connection to its own
			// Service comes back out of the port it came in by.
			[]string{"ip", "-n", "node", "link", "set", v, "type", "bridge_slave", "hairpin", "on"},
			[]string{"ip", "-n", "node", "link", "set", v, "up"},
			[]string{"ip", "-n", be, "addr", "add", fmt.Sprintf("10.244.0.%d/24", 11+i), "dev", "eth0"},
			[]string{"ip", "-n", be, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", be, "route", "add", "default", "via", "10.244.0.1"},
		)
	}
	for _, c := range cmds {
		if _, err := sh(c...); err != nil {
			return err
		}
	}
	return nil
}

// serve answers every TCP connection on :8080 with the backend's name.
func serve(be string) error {
	var ln net.Listener
	if err := inNS(be, func() (err error) { ln, err = net.Listen("tcp", ":8080"); return err }); err != nil {
		return err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, be+"\n")
			c.Close()
		}
	}()
	return nil
}

// hits makes n sequential connections from the client to addr and counts
// the answering backends.
func hits(addr string, n int) (map[string]int, error) { return hitsFrom("client", addr, n) }

// hitsFrom is hits from the network namespace ns.
func hitsFrom(ns, addr string, n int) (map[string]int, error) {
	out := map[string]int{}
	err := inNS(ns, func() error {
		for i := 0; i < n; i++ {
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			if err != nil {
				return fmt.Errorf("connect %s: %w", addr, err)
			}
			c.SetDeadline(time.Now().Add(3 * time.Second))
			b, err := io.ReadAll(c)
			c.Close()
			if err != nil {
				return fmt.Errorf("read from %s: %w", addr, err)
			}
			out[strings.TrimSpace(string(b))]++
		}
		return nil
	})
	return out, err
}

func svc(name, ip string, port int) *proxy.ServicePort {
	return &proxy.ServicePort{
		Name:       proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}, Protocol: v1.ProtocolTCP},
		Type:       v1.ServiceTypeClusterIP,
		ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)}, Port: port, Protocol: v1.ProtocolTCP,
	}
}

func endpoints() []*proxy.Endpoint {
	var eps []*proxy.Endpoint
	for _, ip := range []string{"10.244.0.11", "10.244.0.12"} {
		eps = append(eps, &proxy.Endpoint{Addr: netip.MustParseAddr(ip), Port: 8080, Ready: true, Serving: true, NodeName: "node", IsLocal: true, Weight: 1})
	}
	return eps
}

func norm(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "->") && f[1] != "RemoteAddress:Port" {
			out = append(out, strings.Join(f, " "))
		}
	}
	slices.Sort(out)
	return out
}

// weightOf finds the weight of real server rs under the virtual server
// whose dump line starts with vsPrefix.
func weightOf(dump, vsPrefix, rs string) (string, bool) {
	in := false
	for _, l := range strings.Split(dump, "\n") {
		if !strings.HasPrefix(l, "  ->") {
			in = strings.HasPrefix(l, vsPrefix)
			continue
		}
		if f := strings.Fields(l); in && len(f) >= 4 && f[1] == rs {
			return f[3], true
		}
	}
	return "", false
}

// sharedDestination: two Services claim the externalIP 10.96.0.50:80,
// through the proxy core's service change tracker as the Proxier hands
// them to the mode: the older one (endpoint be1) gets it, and once it is
// deleted, a partial sync gives it to the other (endpoint be2).
func sharedDestination(ctx context.Context, m *ipvs.Mode, req *proxy.SyncRequest) error {
	st := proxy.NewServiceChangeTracker()
	service := func(name string, minute int) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC))},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: fmt.Sprintf("10.96.0.%d", 60+minute),
				ClusterIPs: []string{fmt.Sprintf("10.96.0.%d", 60+minute)}, ExternalIPs: []string{"10.96.0.50"},
				Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}}}
	}
	old, young := service("shared-old", 0), service("shared-young", 1)
	st.Update(nil, old)
	st.Update(nil, young)
	// One partial sync per step, as the Proxier makes it: the tracker's
	// result, and the endpoints of the Services it names.
	sync := func(what string) error {
		req.Full = false
		req.ServiceResult = st.Apply(req.Services)
		req.EndpointsResult.UpdatedServices = k8ssets.New[types.NamespacedName]()
		for nn := range req.ServiceResult.UpdatedServices {
			req.EndpointsResult.UpdatedServices.Insert(nn)
		}
		for name := range req.Services {
			switch name.Name {
			case "shared-old":
				req.Endpoints[name] = endpoints()[:1]
			case "shared-young":
				req.Endpoints[name] = endpoints()[1:]
			}
		}
		for name := range req.Endpoints {
			if _, ok := req.Services[name]; !ok && strings.HasPrefix(name.Name, "shared-") {
				delete(req.Endpoints, name)
			}
		}
		if err := m.Sync(ctx, req); err != nil {
			return fmt.Errorf("%s: sync: %w", what, err)
		}
		return nil
	}
	if err := sync("two Services claim 10.96.0.50:80"); err != nil {
		return err
	}
	if h, err := hits("10.96.0.50:80", 6); err != nil || h["be1"] != 6 {
		return fmt.Errorf("10.96.0.50:80 claimed by two Services: %v %v, want the older one's endpoint be1 only", h, err)
	} else {
		fmt.Printf("check: an externalIP two Services claim reaches the older one: %v\n", h)
	}
	st.Update(old, nil)
	if err := sync("the older one deleted"); err != nil {
		return err
	}
	if h, err := hits("10.96.0.50:80", 6); err != nil || h["be2"] != 6 {
		return fmt.Errorf("10.96.0.50:80 after the older claimant's deletion: %v %v, want be2 only", h, err)
	} else {
		fmt.Printf("check: after a partial sync it reaches the other: %v\n", h)
	}
	return nil
}

func run() error {
	if os.Getpid() == 1 {
		if err := setupSystem(); err != nil {
			return err
		}
	}
	if err := setupNetwork(); err != nil {
		return err
	}
	for _, be := range []string{"be1", "be2"} {
		if err := serve(be); err != nil {
			return err
		}
	}
	exe := proxy.OSExecutor{NetNS: "node"}
	m, err := ipvs.New(ipvs.Config{ModeConfig: proxy.ModeConfig{
		Exec: exe, NodeName: "node", IPv4: true, Scheduler: "rr",
		NodeIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
	}, IPT: &iptables.Runner{Exec: exe, Backend: iptables.BackendLegacy}})
	if err != nil {
		return err
	}
	spread := svc("spread", "10.96.0.10", 80)
	spread.Type, spread.NodePort = v1.ServiceTypeNodePort, 30080
	hashed := svc("hashed", "10.96.0.11", 80)
	hashed.Scheduler = "sh"
	sticky := svc("sticky", "10.96.0.12", 80)
	sticky.SessionAffinity, sticky.StickyMaxAgeSeconds = v1.ServiceAffinityClientIP, 60
	// mh with the mh-port flag (as kube-proxy sets it): one client's
	// connections, from different ports, spread over the backends.
	maglev := svc("maglev", "10.96.0.13", 80)
	maglev.Scheduler = "mh"
	// The NodePort gets a virtual server on every address of the node
	// (10.0.0.1 and the pod bridge's 10.244.0.1), as in kube-proxy: 6
	// virtual servers with 2 real servers each.
	req := &proxy.SyncRequest{Full: true, Services: proxy.ServicePortMap{}, Endpoints: proxy.EndpointsMap{},
		Node: proxy.NodeInfo{Name: "node", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}}
	for _, s := range []*proxy.ServicePort{spread, hashed, sticky, maglev} {
		req.Services[s.Name] = s
		req.Endpoints[s.Name] = endpoints()
	}
	ctx := context.Background()
	if err := m.Sync(ctx, req); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	dump, err := m.Dump(ctx)
	if err != nil {
		return err
	}
	fmt.Print(dump)
	real, err := sh("ip", "netns", "exec", "node", "ipvsadm", "-Ln")
	if err != nil {
		return err
	}
	if a, b := norm(dump), norm(real); !slices.Equal(a, b) || len(a) != 18 {
		return fmt.Errorf("dump differs from ipvsadm -Ln:\n%s\nipvsadm:\n%s", dump, real)
	}
	fmt.Println("check: dump matches ipvsadm -Ln")
	ipt, err := sh("ip", "netns", "exec", "node", "iptables-legacy", "-t", "nat", "-S", "KUBE-SERVICES")
	if err != nil {
		return err
	}
	if !strings.Contains(ipt, "--match-set KUBE-CLUSTER-IP dst,dst") {
		return fmt.Errorf("KUBE-SERVICES lacks the KUBE-CLUSTER-IP rule:\n%s", ipt)
	}
	sets, err := sh("ip", "netns", "exec", "node", "ipset", "list", "KUBE-CLUSTER-IP")
	if err != nil {
		return err
	}
	if !strings.Contains(sets, "10.96.0.10,tcp:80") {
		return fmt.Errorf("KUBE-CLUSTER-IP lacks 10.96.0.10,tcp:80:\n%s", sets)
	}
	fmt.Println("check: ipsets and iptables rules present")

	for _, c := range []struct {
		what, addr string
		check      func(map[string]int) bool
	}{
		{"ClusterIP rr spreads evenly", "10.96.0.10:80", func(h map[string]int) bool { return h["be1"] == 10 && h["be2"] == 10 }},
		{"NodePort rr spreads evenly", "10.0.0.1:30080", func(h map[string]int) bool { return h["be1"] == 10 && h["be2"] == 10 }},
		{"sh keeps one client on one backend", "10.96.0.11:80", func(h map[string]int) bool { return len(h) == 1 }},
		{"ClientIP affinity persists", "10.96.0.12:80", func(h map[string]int) bool { return len(h) == 1 }},
		{"mh with mh-port spreads one client's connections", "10.96.0.13:80", func(h map[string]int) bool { return len(h) == 2 }},
	} {
		h, err := hits(c.addr, 20)
		if err != nil {
			return fmt.Errorf("%s: %w", c.what, err)
		}
		if !c.check(h) {
			return fmt.Errorf("%s: got %v", c.what, h)
		}
		fmt.Printf("check: %s: %v\n", c.what, h)
	}
	// A pod reaching itself through its Service: the real server is the
	// client, so the node masquerades it (KUBE-LOOP-BACK) or the reply
	// would never return through IPVS.
	h, err := hitsFrom("be1", "10.96.0.10:80", 20)
	if err != nil {
		for _, c := range [][]string{
			{"ip", "netns", "exec", "node", "ipset", "list", "KUBE-LOOP-BACK"},
			{"ip", "netns", "exec", "node", "iptables-legacy", "-t", "nat", "-L", "-v", "-n"},
			{"ip", "netns", "exec", "node", "iptables-legacy", "-t", "filter", "-L", "-v", "-n"},
			{"ip", "netns", "exec", "node", "ipvsadm", "-Lnc"},
			{"ip", "netns", "exec", "node", "sysctl", "net.ipv4.vs.conntrack", "net.bridge.bridge-nf-call-iptables", "net.ipv4.conf.all.rp_filter", "net.ipv4.conf.br0.rp_filter"},
			{"ip", "netns", "exec", "node", "cat", "/proc/net/nf_conntrack"},
		} {
			out, _ := sh(c...)
			fmt.Printf("diag %v:\n%s\n", c[4:], out)
		}
		return fmt.Errorf("a backend through its own ClusterIP: %w", err)
	}
	if h["be1"] == 0 || h["be2"] == 0 {
		return fmt.Errorf("a backend through its own ClusterIP: got %v, want both backends (itself too)", h)
	}
	fmt.Printf("check: a backend reaches itself and the other through its ClusterIP: %v\n", h)

	// Graceful termination on the real kernel: an endpoint removed while a
	// connection is open stays with weight 0.
	var held net.Conn
	if err := inNS("client", func() (err error) { held, err = net.DialTimeout("tcp", "10.96.0.12:80", 3*time.Second); return err }); err != nil {
		return err
	}
	defer held.Close()
	// A partial sync, as the proxy's core sends for one change: it writes
	// only the changed virtual server (Applier.Apply).
	req.Full = false
	req.Endpoints[spread.Name] = endpoints()[:1]
	req.EndpointsResult.UpdatedServices = k8ssets.New(spread.Name.NamespacedName)
	if err := m.Sync(ctx, req); err != nil {
		return fmt.Errorf("sync after endpoint removal: %w", err)
	}
	// be2 still has connections in TIME_WAIT (InActConn) from the checks
	// above: it must be quiesced (weight 0), not deleted.
	dump, err = m.Dump(ctx)
	if err != nil {
		return err
	}
	if w, ok := weightOf(dump, "TCP  10.96.0.10:80 ", "10.244.0.12:8080"); !ok || w != "0" {
		return fmt.Errorf("removed real server with connections should stay with weight 0:\n%s", dump)
	}
	fmt.Println("check: removed real server with connections is quiesced (weight 0)")
	h, err = hits("10.96.0.10:80", 6)
	if err != nil || h["be1"] != 6 {
		return fmt.Errorf("after removing be2 from spread: %v %v", h, err)
	}
	fmt.Printf("check: removed endpoint gets no new connections: %v\n", h)
	if err := sharedDestination(ctx, m, req); err != nil {
		return err
	}
	if err := m.Cleanup(ctx); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	if out, _ := sh("ip", "netns", "exec", "node", "ipvsadm", "-Ln"); len(norm(out)) != 0 {
		return fmt.Errorf("IPVS table not empty after cleanup:\n%s", out)
	}
	fmt.Println("check: cleanup empties the IPVS table")
	return nil
}
