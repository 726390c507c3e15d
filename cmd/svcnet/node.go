package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/node/agent"
	"github.com/svcnet/svcnet/node/hostport"
	"github.com/svcnet/svcnet/node/sandbox"
)

func init() {
	register(command{
		name:  "node",
		short: "run the node agent: register the Node and run its pods in namespaces",
		run:   runNode,
	})
	register(command{
		name:  "container-shim",
		short: "internal: the parent and log writer of one container (started by the node agent)",
		run:   sandbox.ShimMain,
	})
	register(command{
		name:  "sandbox-init",
		short: "internal: a pod's infra process (started by the node agent)",
		run: func(_ context.Context, args []string) error {
			return sandbox.InitMain(args)
		},
	})
}

// nodeFlags is the parsed configuration of `svcnet node`.
type nodeFlags struct {
	kubeconfig, nodeName, nodeIP, podCIDR, clusterDNS, clusterDomain string
	dataDir, bridge, resolvConf, nsPrefix, labels, listen, taints    string
	manifests                                                        string
}

func runNode(ctx context.Context, args []string) error {
	var f nodeFlags
	host, _ := os.Hostname()
	fs := newFlagSet("node")
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	fs.StringVar(&f.nodeName, "node-name", host, "name of the Node object")
	fs.StringVar(&f.nodeIP, "node-ip", "", "the node's InternalIP, or two of different families for a dual-stack node, primary first (hostPorts are mapped on an IPv4 primary)")
	fs.StringVar(&f.podCIDR, "pod-cidr", "", "the node's pod range, e.g. 10.244.1.0/24, or two of different families (dual-stack: pods get an address of each); the bridge takes the first address of each")
	fs.StringVar(&f.clusterDNS, "cluster-dns", "10.96.0.10", "comma-separated cluster DNS addresses for ClusterFirst pods")
	fs.StringVar(&f.clusterDomain, "cluster-domain", "cluster.local", "cluster domain")
	fs.StringVar(&f.dataDir, "data-dir", "/var/lib/svcnet/node", "directory for pod state, files and logs")
	fs.StringVar(&f.bridge, "bridge", "cni0", "bridge the pods attach to (created if missing)")
	fs.StringVar(&f.resolvConf, "resolv-conf", "/etc/resolv.conf", "the node's resolver configuration, for dnsPolicy Default")
	fs.StringVar(&f.nsPrefix, "netns-prefix", "", "prefix of pod network namespace names (default svcnet-<node-name>-)")
	fs.StringVar(&f.labels, "node-labels", "", "extra Node labels, k=v,k2=v2")
	fs.StringVar(&f.taints, "register-with-taints", "", "taints of a newly registered Node, key=value:Effect or key:Effect, comma-separated")
	fs.StringVar(&f.manifests, "pod-manifest-path", "", "directory of static pod manifests (as the kubelet's): each file's Pod runs on this node without the API server, shown in it as a mirror pod NAME-NODE")
	fs.StringVar(&f.listen, "listen", ":10250", "address of the node's HTTP endpoints (container logs, exec)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.podCIDR == "" {
		return fmt.Errorf("--pod-cidr is required")
	}
	podCIDRs, err := parseDualStack(f.podCIDR, netip.ParsePrefix)
	if err != nil {
		return fmt.Errorf("--pod-cidr: %w", err)
	}
	nodeIPs, err := parseDualStack(f.nodeIP, netip.ParseAddr)
	if err != nil {
		return fmt.Errorf("--node-ip: %w", err)
	}
	podCIDR := podCIDRs[0]
	var nodeIP, nodeIP2 netip.Addr
	if len(nodeIPs) > 0 {
		nodeIP = nodeIPs[0]
	}
	if len(nodeIPs) > 1 {
		nodeIP2 = nodeIPs[1]
	}
	labels := map[string]string{}
	for _, kv := range strings.Split(f.labels, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		labels[k] = v
	}
	var taints []v1.Taint
	for _, t := range strings.Split(f.taints, ",") {
		if t == "" {
			continue
		}
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return fmt.Errorf("--register-with-taints: %q has no effect", t)
		}
		k, v, _ := strings.Cut(kv, "=")
		taints = append(taints, v1.Taint{Key: k, Value: v, Effect: v1.TaintEffect(effect)})
	}
	if f.nsPrefix == "" {
		f.nsPrefix = "svcnet-" + f.nodeName + "-"
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	log := slog.Default()
	ipam, err := sandbox.NewIPAM(podCIDR, filepath.Join(f.dataDir, "ipam.json"))
	if err != nil {
		return err
	}
	gws := []netip.Prefix{netip.PrefixFrom(ipam.Gateway(), podCIDR.Bits())}
	var ipam2 *sandbox.IPAM
	var podCIDR2 netip.Prefix
	if len(podCIDRs) > 1 {
		podCIDR2 = podCIDRs[1]
		if ipam2, err = sandbox.NewIPAM(podCIDR2, filepath.Join(f.dataDir, "ipam-secondary.json")); err != nil {
			return err
		}
		gws = append(gws, netip.PrefixFrom(ipam2.Gateway(), podCIDR2.Bits()))
	}
	if err := sandbox.EnsureBridge(ctx, f.bridge, gws...); err != nil {
		return err
	}
	var hp *hostport.Manager
	if nodeIP.Is4() && podCIDR.Addr().Is4() {
		hp = hostport.NewManager(nodeIP, podCIDR, hostport.IPTablesRestore)
		if err := hp.Init(ctx); err != nil {
			log.Warn("hostPort mapping unavailable", "err", err)
			hp = nil
		}
	}
	var dns []string
	for _, s := range strings.Split(f.clusterDNS, ",") {
		if s = strings.TrimSpace(s); s != "" {
			dns = append(dns, s)
		}
	}
	// Containers run under shims and outlive a crash of the agent; the
	// agent adopts what an earlier one left and removes the rest.
	sbCfg := sandbox.Config{DataDir: f.dataDir, Bridge: f.bridge, NSPrefix: f.nsPrefix, Exe: exe, InitArgs: []string{"sandbox-init"}, IPAM: ipam,
		SecondaryIPAM: ipam2, Shim: []string{exe, "container-shim"}}
	rt := &agent.NamespaceRuntime{Config: sbCfg}
	a, err := agent.New(agent.Config{
		NodeName: f.nodeName, NodeIP: nodeIP, PodCIDR: podCIDR, SecondaryNodeIP: nodeIP2, SecondaryPodCIDR: podCIDR2, ClusterDNS: dns, ClusterDomain: f.clusterDomain,
		HostResolvConf: f.resolvConf, DataDir: f.dataDir, Labels: labels, Taints: taints, Builtin: []string{exe, "builtin"}, Logger: log,
		StaticPodPath: f.manifests,
	}, client, rt, hp)
	if err != nil {
		return err
	}
	if f.listen != "" {
		srv := &http.Server{Addr: f.listen, Handler: agent.NewServer(f.dataDir, log), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				log.Error("node HTTP endpoints", "err", err)
			}
		}()
		defer srv.Close()
	}
	return a.Run(ctx)
}

// parseDualStack parses a comma-separated list of one value, or two of
// different IP families (primary first), as the kubelet's --node-ip does.
// An empty list is no value.
func parseDualStack[T any](list string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, s := range splitList(list) {
		v, err := parse(s)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	is4 := func(v T) bool {
		switch v := any(v).(type) {
		case netip.Addr:
			return v.Is4()
		case netip.Prefix:
			return v.Addr().Is4()
		}
		return false
	}
	if len(out) > 2 || (len(out) == 2 && is4(out[0]) == is4(out[1])) {
		return nil, fmt.Errorf("%q: want one value, or two of different IP families", list)
	}
	return out, nil
}
