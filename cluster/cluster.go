// Package cluster assembles a local multi-node cluster from network
// namespaces: the wiring behind `svcnet up` and `svcnet down`.
//
// In the network namespace it runs in (run it in a dedicated one: `ip netns
// add lab; ip netns exec lab svcnet up`), Up creates the node network, a
// bridge (svcnet0, 172.18.0.1/24), and starts the apiserver on it (and on
// 127.0.0.1). Each node i (1..N) is a network namespace <prefix>-node-i
// attached to the bridge by a veth, with address 172.18.0.(i+1), pod CIDR
// 10.244.i.0/24 and routes to every other node's pod CIDR through that node
// (host-gw). Inside each node namespace run `svcnet node`, `svcnet proxy`,
// `svcnet netpol` and `svcnet speaker` (which answers ARP/NDP on the node
// network for the LoadBalancer IPs the node is elected for).
// The first node is the control-plane node (labelled
// node-role.kubernetes.io/control-plane and tainted NoSchedule, as kubeadm
// does). When the binary has a `controllers` command, it runs too. Cluster
// DNS runs as pods of kube-system behind the kube-dns Service at 10.96.0.10.
// With --ip-family dual every address, pod CIDR and Service CIDR above has
// an IPv6 twin (families.go), IPv4 primary; with ipv6 only the twins exist.
// Up declares the cluster ready (prints the export KUBECONFIG line) once
// every node is Ready, every node's proxy has synced and cluster DNS
// answers through the Service from every node.
//
// Everything Up creates is recorded in <data-dir>/cluster.json, so Down can
// remove what a crashed run left behind: processes, namespaces (nodes' and
// pods'), the bridge and its routes. Stored objects (etcd under the data dir)
// are kept, so a second Up continues with them. An up that dies without
// tearing down (SIGKILL) takes its components with it (parent-death
// signal), and its guard process runs Down for it (guard.go).
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/netwire"
)

// Config describes the cluster.
type Config struct {
	Nodes     int
	ProxyMode string
	DataDir   string
	// Prefix names namespaces and interfaces ("svcnet").
	Prefix string
	// IPFamily is ipv4 (the default), ipv6 or dual (IPv4 primary).
	IPFamily string
	// ServiceClusterIPRange and ClusterCIDR hold one CIDR per family,
	// comma-separated in the family order; empty means the defaults
	// (10.96.0.0/16 and fd00:10:96::/112; 10.244.0.0/16, where node i gets
	// 10.244.i.0/24, and fd00:10:244::/56, where it gets fd00:10:244:i::/64).
	ServiceClusterIPRange string
	ServiceNodePortRange  string
	ClusterCIDR           string
	// NodePortAddresses is passed to every node's proxy as
	// --nodeport-addresses (empty: the proxy's default for its mode).
	NodePortAddresses string
	// ProxyArgs are more flags for every node's proxy (svcnet up
	// --proxy-arg), after those Up sets.
	ProxyArgs []string
	// Ingress runs the Ingress controller (ingress.go).
	Ingress bool
	// NodeMonitorGracePeriod is passed to the controllers (0: their default).
	NodeMonitorGracePeriod time.Duration
	// Exe is the svcnet binary to run components with.
	Exe    string
	Logger *slog.Logger
	// Out receives the user-facing lines (the export KUBECONFIG line).
	Out io.Writer
}

const apiPort = 6443

// upMinSyncPeriod is the --min-sync-period of the cluster's proxies (see Up).
const upMinSyncPeriod = "100ms"

// State is what Up records for Down.
type State struct {
	Bridge string   `json:"bridge"`
	NetNS  []string `json:"netns"`
	// Links are the node veths' ends in this namespace.
	Links []string `json:"links"`
	// NetNSPrefix also matches the pod namespaces node agents create.
	NetNSPrefix string `json:"netnsPrefix"`
	PIDs        []int  `json:"pids"`
	Exe         string `json:"exe"`
	// Nodes maps node names to their network namespaces (svcnet node-exec).
	Nodes map[string]string `json:"nodes,omitempty"`
}

// Cluster is a running cluster.
type Cluster struct {
	cfg   Config
	fams  []familyNet
	state State
	procs []*exec.Cmd
	// lock is the data dir lock (up.lock), shared with guard.
	lock  *os.File
	guard *guard
	// Kubeconfig is the admin kubeconfig reaching the apiserver on the bridge.
	Kubeconfig string
}

// NodeName of node i (1-based): the control plane and then the workers,
// as kind names them.
func NodeName(prefix string, i int) string {
	switch i {
	case 1:
		return prefix + "-control-plane"
	case 2:
		return prefix + "-worker"
	}
	return prefix + "-worker" + strconv.Itoa(i-1)
}

func run(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (c *Cluster) saveState() error {
	b, _ := json.MarshalIndent(c.state, "", "  ")
	return os.WriteFile(filepath.Join(c.cfg.DataDir, "cluster.json"), b, 0o644)
}

// start runs a component in the background with its output in logs/name.log.
func (c *Cluster) start(name string, args ...string) error {
	logDir := filepath.Join(c.cfg.DataDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := startLocked(cmd); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); f.Close() }()
	c.procs = append(c.procs, cmd)
	c.state.PIDs = append(c.state.PIDs, cmd.Process.Pid)
	return c.saveState()
}

func (c *Cluster) hasCommand(name string) bool {
	out, _ := exec.Command(c.cfg.Exe, "--help").CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

// Up builds and starts the cluster and returns once every node is Ready,
// having printed the export KUBECONFIG line. On error, what was built is
// torn down.
func Up(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.Nodes < 1 || cfg.Nodes > 200 {
		return nil, fmt.Errorf("--nodes must be between 1 and 200")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "svcnet"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	fams, err := families(cfg.IPFamily, cfg.ClusterCIDR, cfg.ServiceClusterIPRange)
	if err != nil {
		return nil, err
	}
	cfg.ClusterCIDR = joinFamilies(fams, func(f familyNet) string { return f.clusterCIDR.String() })
	cfg.ServiceClusterIPRange = joinFamilies(fams, func(f familyNet) string { return f.serviceCIDR.String() })
	// The primary family's addresses name the apiserver and cluster DNS.
	primary := fams[0]
	apiURL := fmt.Sprintf("https://%s", net.JoinHostPort(primary.bridge.String(), strconv.Itoa(apiPort)))
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	lock, err := lockDataDir(cfg.DataDir, 60*time.Second, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if err := Down(ctx, cfg.DataDir); err != nil {
		cfg.Logger.Warn("cleaning up an earlier run", "err", err)
	}
	c := &Cluster{cfg: cfg, fams: fams, lock: lock, state: State{Bridge: cfg.Prefix + "0", NetNSPrefix: cfg.Prefix + "-", Exe: cfg.Exe, Nodes: map[string]string{}}}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	// Started before anything it would have to remove (guard.go).
	if c.guard, err = startGuard(cfg.Exe, cfg.DataDir, lock); err != nil {
		return nil, err
	}
	log := cfg.Logger
	t0 := time.Now()
	// Tools reach the node namespaces from this process's mount namespace
	// (nsenter -t $(cat up.pid) -m ip netns exec <node> ...).
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "up.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, err
	}

	// The node network.
	br := c.state.Bridge
	if err := c.saveState(); err != nil {
		return nil, err
	}
	var brAddrs []netip.Prefix
	for _, f := range fams {
		brAddrs = append(brAddrs, netip.PrefixFrom(f.bridge, f.nodeNet.Bits()))
		sysctl := "/proc/sys/net/ipv4/ip_forward"
		if f.v6 {
			sysctl = "/proc/sys/net/ipv6/conf/all/forwarding"
		}
		if err := os.WriteFile(sysctl, []byte("1\n"), 0o644); err != nil {
			return nil, fmt.Errorf("enable forwarding: %w", err)
		}
	}
	if err := addBridge(br, brAddrs...); err != nil {
		return nil, err
	}

	// The control plane.
	apiDir := filepath.Join(cfg.DataDir, "apiserver")
	bind := "0.0.0.0"
	if primary.v6 {
		bind = "::"
	}
	if err := c.start("apiserver", cfg.Exe, "apiserver", "--data-dir", apiDir, "--bind-address", bind,
		"--advertise-address", primary.bridge.String(), "--secure-port", strconv.Itoa(apiPort),
		"--service-cluster-ip-range", cfg.ServiceClusterIPRange, "--service-node-port-range", cfg.ServiceNodePortRange,
		// As kind and kubeadm clusters: a local cluster runs privileged pods.
		"--allow-privileged"); err != nil {
		return nil, err
	}
	adminKC := filepath.Join(apiDir, "kubeconfig")
	client, err := waitAPI(ctx, adminKC)
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.LoadFromFile(adminKC)
	if err != nil {
		return nil, err
	}
	for _, cl := range kc.Clusters {
		cl.Server = apiURL
	}
	c.Kubeconfig = filepath.Join(cfg.DataDir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, c.Kubeconfig); err != nil {
		return nil, err
	}
	// One identity per component, with the bindings a real cluster gives
	// them (apiserver/authz): the admin kubeconfig above is for the user only.
	kcs, err := writeComponentKubeconfigs(cfg, apiDir, apiURL)
	if err != nil {
		return nil, err
	}
	log.Info("apiserver ready", "after", time.Since(t0).Round(time.Millisecond))
	// MetalLB's namespace, where the speakers keep their ServiceL2Status
	// objects (MetalLB's manifests create it too; applying them is fine).
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "metallb-system"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace metallb-system: %w", err)
	}

	// The proxies' configuration, as kubeadm's kube-proxy ConfigMap.
	if err := ensureKubeProxyConfig(ctx, client, cfg); err != nil {
		return nil, err
	}

	// The nodes.
	// Node i's addresses and pod CIDRs, one per family, primary first.
	nodeIPs := func(i int) string {
		return joinFamilies(fams, func(f familyNet) string { return f.nodeIP(i).String() })
	}
	podCIDRs := func(i int) string {
		return joinFamilies(fams, func(f familyNet) string { return f.podCIDR(i).String() })
	}
	for i := 1; i <= cfg.Nodes; i++ {
		ns := fmt.Sprintf("%s-node-%d", cfg.Prefix, i)
		hostIf := fmt.Sprintf("%.6s-n%d", cfg.Prefix, i)
		c.state.NetNS = append(c.state.NetNS, ns)
		c.state.Links = append(c.state.Links, hostIf)
		c.state.Nodes[NodeName(cfg.Prefix, i)] = ns
		if err := c.saveState(); err != nil {
			return nil, err
		}
		if err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return nil, err
		}
		routes := map[netip.Prefix]netip.Addr{}
		var addrs []netip.Prefix
		var gws []netip.Addr
		for _, f := range fams {
			addrs = append(addrs, netip.PrefixFrom(f.nodeIP(i), f.nodeNet.Bits()))
			gws = append(gws, f.bridge)
			for j := 1; j <= cfg.Nodes; j++ {
				if j != i {
					routes[f.podCIDR(j)] = f.nodeIP(j)
				}
			}
		}
		if err := addNode(ns, hostIf, br, addrs, gws, routes); err != nil {
			return nil, err
		}
		for _, f := range fams {
			if err := netlink.RouteReplace(&netlink.Route{Dst: netwire.IPNet(f.podCIDR(i)), Gw: f.nodeIP(i).AsSlice()}); err != nil {
				return nil, fmt.Errorf("route %s via %s: %w", f.podCIDR(i), f.nodeIP(i), err)
			}
		}
		name := NodeName(cfg.Prefix, i)
		// nsenter --net keeps the components in the current mount namespace
		// (ip netns exec would make a private one), so the pod namespaces
		// the node agents create are visible to svcnet exec and down.
		nsPath := "--net=/var/run/netns/" + ns
		args := []string{"nsenter", nsPath, "--", cfg.Exe, "node", "--kubeconfig", kcs["node-"+name], "--node-name", name,
			"--node-ip", nodeIPs(i), "--pod-cidr", podCIDRs(i), "--data-dir", filepath.Join(cfg.DataDir, "nodes", name),
			"--netns-prefix", fmt.Sprintf("%s-n%d-", cfg.Prefix, i), "--listen", net.JoinHostPort(primary.nodeIP(i).String(), "10250"),
			"--cluster-dns", primary.dnsIP.String()}
		if i == 1 && cfg.Nodes > 1 {
			args = append(args, "--node-labels", "node-role.kubernetes.io/control-plane=",
				"--register-with-taints", "node-role.kubernetes.io/control-plane:NoSchedule")
		}
		// The node's proxy is a static pod of its agent (kube-system/
		// kube-proxy-NODE), as kube-proxy was on kube-up clusters: its log
		// is the pod's (`kubectl logs -n kube-system kube-proxy-NODE`) and
		// the agent restarts it when it exits.
		manifests := filepath.Join(cfg.DataDir, "nodes", name, "manifests")
		if err := writeKubeProxyManifest(manifests, cfg, kcs["proxy"], name); err != nil {
			return nil, err
		}
		args = append(args, "--pod-manifest-path", manifests)
		if err := c.start("node-"+strconv.Itoa(i), args...); err != nil {
			return nil, err
		}
		// NetworkPolicy enforcement for this node's pods, in its own table.
		if err := c.start("netpol-"+strconv.Itoa(i), "nsenter", nsPath, "--", cfg.Exe, "netpol", "--kubeconfig", kcs["netpol"],
			"--hostname-override", name); err != nil {
			return nil, err
		}
		// MetalLB's speaker: answers ARP/NDP for the LoadBalancer IPs this
		// node is elected for, so that the node network (the bridge side,
		// the "outside") reaches them.
		if err := c.start("speaker-"+strconv.Itoa(i), "nsenter", nsPath, "--", cfg.Exe, "speaker", "--kubeconfig", kcs["speaker"],
			"--node-name", name); err != nil {
			return nil, err
		}
	}
	if c.hasCommand("controllers") {
		// One controllers process per cluster, by construction: no Lease
		// to wait for when a restarted up finds its predecessor's.
		args := []string{cfg.Exe, "controllers", "--kubeconfig", kcs["controllers"], "--leader-elect=false"}
		if cfg.NodeMonitorGracePeriod > 0 {
			args = append(args, "--node-monitor-grace-period", cfg.NodeMonitorGracePeriod.String())
		}
		if err := c.start("controllers", args...); err != nil {
			return nil, err
		}
	} else {
		log.Warn("this svcnet has no controllers command: Deployments and Endpoints will not be reconciled")
	}
	if err := waitNodes(ctx, client, cfg); err != nil {
		return nil, err
	}
	log.Info("nodes ready", "after", time.Since(t0).Round(time.Millisecond))
	if err := ensureDNS(ctx, client, cfg, fams); err != nil {
		return nil, err
	}
	// The Ingress controller is created before DNS is waited for: the two
	// start side by side.
	if err := ensureIngress(ctx, client, cfg, fams); err != nil {
		return nil, err
	}
	if err := waitPodsReady(ctx, client, "kube-system", "k8s-app=kube-dns", "DNS pods"); err != nil {
		return nil, err
	}
	log.Info("DNS pods ready", "after", time.Since(t0).Round(time.Millisecond))
	if cfg.Ingress {
		if err := waitPodsReady(ctx, client, ingressNamespace, IngressSelector(), "Ingress controller"); err != nil {
			return nil, err
		}
		log.Info("Ingress controller ready", "after", time.Since(t0).Round(time.Millisecond))
	}
	if err := waitUsable(ctx, cfg, fams); err != nil {
		return nil, err
	}
	log.Info("cluster ready", "after", time.Since(t0).Round(time.Millisecond))
	fmt.Fprintf(cfg.Out, "export KUBECONFIG=%s\n", c.Kubeconfig)
	return c, nil
}

func waitAPI(ctx context.Context, kubeconfig string) (kubernetes.Interface, error) {
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if _, err := os.Stat(kubeconfig); err == nil {
			rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err == nil {
				cl, err := kubernetes.NewForConfig(rc)
				if err == nil {
					if _, err = cl.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
						return cl, nil
					}
				}
				last = err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("apiserver not ready after 60s: %v", last)
}

func waitNodes(ctx context.Context, client kubernetes.Interface, cfg Config) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ready := 0
		for i := 1; i <= cfg.Nodes; i++ {
			n, err := client.CoreV1().Nodes().Get(ctx, NodeName(cfg.Prefix, i), metav1.GetOptions{})
			if err != nil {
				continue
			}
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == cfg.Nodes {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("nodes not Ready after 60s (see %s)", filepath.Join(cfg.DataDir, "logs"))
}

// ensureDNS creates the kube-dns Service at 10.96.0.10 (a dual-stack
// cluster's also at fd00:10:96::a, an IPv6 cluster's only there) and the DNS pods
// (two, bound to the first nodes; the pods run `svcnet dns` in their own
// namespaces, as CoreDNS pods would). Existing objects are kept.
func ensureDNS(ctx context.Context, client kubernetes.Interface, cfg Config, fams []familyNet) error {
	labels := map[string]string{"k8s-app": "kube-dns"}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system", Labels: map[string]string{
			"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}},
		Spec: v1.ServiceSpec{ClusterIP: fams[0].dnsIP.String(), Selector: labels, Ports: []v1.ServicePort{
			{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			{Name: "metrics", Port: 9153, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
		}},
	}
	if len(fams) > 1 {
		policy := v1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy = &policy
		for _, f := range fams {
			svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, f.dnsIP.String())
			svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, map[bool]v1.IPFamily{false: v1.IPv4Protocol, true: v1.IPv6Protocol}[f.v6])
		}
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create kube-system: %w", err)
		}
	}
	// Look first: a second Up on a data dir keeps the Service, and creating
	// it again fails on its taken ClusterIP before the name is checked.
	if _, err := client.CoreV1().Services("kube-system").Get(ctx, svc.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := client.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create kube-dns Service: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("get kube-dns Service: %w", err)
	}
	// The DNS pods run as kube-system/coredns, as kubeadm's CoreDNS does
	// (the service account its RBAC binding names).
	if _, err := client.CoreV1().ServiceAccounts("kube-system").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "coredns"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service account coredns: %w", err)
	}
	kubeconfig := componentKubeconfig(cfg.DataDir, "dns")
	replicas := min(2, cfg.Nodes)
	for r := 1; r <= replicas; r++ {
		zero := int64(5)
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("coredns-%d", r), Namespace: "kube-system", Labels: labels},
			Spec: v1.PodSpec{
				NodeName:                      NodeName(cfg.Prefix, r),
				DNSPolicy:                     v1.DNSDefault,
				ServiceAccountName:            "coredns",
				PriorityClassName:             "",
				TerminationGracePeriodSeconds: &zero,
				Tolerations:                   []v1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Effect: v1.TaintEffectNoSchedule}},
				Containers: []v1.Container{{
					Name:  "coredns",
					Image: "registry.k8s.io/coredns/coredns:v1.12.1",
					Command: []string{cfg.Exe, "dns", "--kubeconfig", kubeconfig,
						// One HTTP listener for both endpoints: the DNS server pairs
						// listeners and handlers in map order when they differ.
						"--health-listen", ":8181", "--ready-listen", ":8181"},
					Ports: []v1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: v1.ProtocolUDP},
						{Name: "dns-tcp", ContainerPort: 53, Protocol: v1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9153, Protocol: v1.ProtocolTCP}},
					ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}}, PeriodSeconds: 2},
					LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8181)}},
						InitialDelaySeconds: 60, PeriodSeconds: 10, FailureThreshold: 5},
				}},
			},
		}
		if _, err := client.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create DNS pod: %w", err)
		}
	}
	return nil
}

// waitPodsReady waits for the pods of selector in ns to exist and be Ready.
func waitPodsReady(ctx context.Context, client kubernetes.Interface, ns, selector, what string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil && len(pods.Items) > 0 {
			ready := 0
			for _, p := range pods.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
						ready++
					}
				}
			}
			if ready == len(pods.Items) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not Ready after 60s", what)
}

// Stop stops every component (node agents first, so they stop their pods),
// removes the namespaces, the bridge and the routes, and then dismisses the
// guard and releases the data dir.
func (c *Cluster) Stop() {
	for _, p := range c.procs {
		if p.Process != nil {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range c.procs {
		for p.Process != nil && processAlive(p.Process.Pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := Down(context.Background(), c.cfg.DataDir); err != nil {
		c.cfg.Logger.Warn("teardown", "err", err)
	}
	if c.guard != nil {
		c.guard.release()
		c.guard = nil
	}
	if c.lock != nil {
		_ = c.lock.Close()
		c.lock = nil
	}
}

// killClusterProcesses kills, by a scan of /proc, every process running the
// cluster's svcnet binary with the data dir (absolute) in its arguments (node
// agents, proxies, pod infra processes, DNS pods), then every process that
// shares a network namespace with one of them (the pods' containers). It
// works from any mount namespace, unlike `ip netns pids`.
func killClusterProcesses(exe, dataDir string) {
	dataDir = filepath.Clean(dataDir)
	if exe == "" || !filepath.IsAbs(dataDir) {
		return
	}
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	nets := map[string]bool{}
	var all []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		all = append(all, pid)
		if p, err := os.Readlink("/proc/" + e.Name() + "/exe"); err != nil || strings.TrimSuffix(p, " (deleted)") != exe {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		f := bytes.Split(cmd, []byte{0})
		if len(f) < 2 {
			continue
		}
		mine := false
		for _, a := range f[2:] {
			if a := string(a); a == dataDir || strings.HasPrefix(a, dataDir+"/") || strings.Contains(a, ":"+dataDir+"/") {
				mine = true
			}
		}
		if !mine {
			continue
		}
		switch string(f[1]) {
		case "node", "proxy", "netpol", "speaker", "sandbox-init", "container-shim", "dns", "builtin", "apiserver", "controllers":
		default:
			continue
		}
		if n, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && string(f[1]) == "sandbox-init" {
			nets[n] = true
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range all {
		if n, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net"); err == nil && nets[n] {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie (state Z) has exited.
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// EnterHostMountNamespace re-executes the current command in PID 1's mount
// namespace when it runs in another one (as under `ip netns exec`, which
// gives each command a private mount namespace). Named network namespaces
// created from a private mount namespace are invisible to every other
// command, so `svcnet up` and `svcnet down` must agree on one. The network
// namespace is not changed. It returns only if no re-exec was needed or
// possible.
func EnterHostMountNamespace() error {
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	host, err2 := os.Readlink("/proc/1/ns/mnt")
	if err1 != nil || err2 != nil || self == host || os.Getenv("SVCNET_HOST_MNTNS") == "1" {
		return nil
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return fmt.Errorf("nsenter is needed to leave the private mount namespace: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := append([]string{"nsenter", "--mount=/proc/1/ns/mnt", "--", exe}, os.Args[1:]...)
	return syscall.Exec(nsenter, args, append(os.Environ(), "SVCNET_HOST_MNTNS=1"))
}

// Down removes what an Up with this data dir left: its processes (only
// those still running the recorded svcnet binary), every network namespace
// with the recorded prefix (with any process inside), and the bridge (its
// routes go with it). Stored objects are kept. A data dir without state is
// not an error.
func Down(ctx context.Context, dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, "cluster.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("parse %s/cluster.json: %w", dataDir, err)
	}
	for _, pid := range st.PIDs {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && st.Exe != "" && bytes.Contains(cmdline, []byte(st.Exe)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	killClusterProcesses(st.Exe, dataDir)
	var errs []error
	if st.NetNSPrefix != "" {
		out, _ := exec.CommandContext(ctx, "ip", "netns", "list").Output()
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || !strings.HasPrefix(f[0], st.NetNSPrefix) {
				continue
			}
			pids, _ := exec.CommandContext(ctx, "ip", "netns", "pids", f[0]).Output()
			for _, p := range strings.Fields(string(pids)) {
				if n, err := strconv.Atoi(p); err == nil {
					_ = syscall.Kill(n, syscall.SIGKILL)
				}
			}
			if err := run(ctx, "ip", "netns", "delete", f[0]); err != nil {
				// From another mount namespace the bind mount is not visible
				// and cannot be unmounted; unlinking the file detaches it
				// everywhere, and the namespace goes with its last process.
				if rerr := os.Remove("/var/run/netns/" + f[0]); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, l := range st.Links {
		// Deleting the node namespace removes its veth pair too, but only
		// once the kernel has released the namespace; don't wait for that.
		if link, err := netlink.LinkByName(l); err == nil {
			_ = netlink.LinkDel(link)
		}
	}
	if st.Bridge != "" {
		if link, err := netlink.LinkByName(st.Bridge); err == nil {
			if err := netlink.LinkDel(link); err != nil {
				errs = append(errs, fmt.Errorf("delete bridge %s: %w", st.Bridge, err))
			}
		}
	}
	if len(errs) == 0 {
		_ = os.Remove(filepath.Join(dataDir, "cluster.json"))
	}
	return errors.Join(errs...)
}
