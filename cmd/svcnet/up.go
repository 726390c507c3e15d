package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svcnet/svcnet/cluster"
)

func init() {
	register(command{
		name:  "up",
		short: "run a local multi-node cluster in network namespaces (foreground; Ctrl-C tears it down)",
		run:   runUp,
	})
	register(command{
		name:  "up-guard",
		short: "internal: removes the cluster of a `svcnet up` that died (started by up)",
		run:   runUpGuard,
	})
	register(command{
		name:  "down",
		short: "remove what a crashed `svcnet up` left (namespaces, bridge, processes); keeps stored objects",
		run:   runDown,
	})
}

func runUp(ctx context.Context, args []string) error {
	fs := newFlagSet("up")
	var cfg cluster.Config
	fs.IntVar(&cfg.Nodes, "nodes", 3, "number of nodes (the first is the control-plane node)")
	fs.StringVar(&cfg.ProxyMode, "proxy-mode", "iptables", "proxy mode of every node: iptables, nftables, ipvs or userspace")
	fs.StringVar(&cfg.DataDir, "data-dir", "/var/lib/svcnet/cluster", "directory for etcd, PKI, kubeconfig, node state and logs")
	fs.StringVar(&cfg.IPFamily, "ip-family", "ipv4", "IP families of the cluster: ipv4, ipv6 or dual (dual-stack, IPv4 primary)")
	fs.StringVar(&cfg.ServiceClusterIPRange, "service-cluster-ip-range", "", "CIDR of Service ClusterIPs, one per family, comma-separated (default 10.96.0.0/16, fd00:10:96::/112; cluster DNS at the tenth address)")
	fs.StringVar(&cfg.ServiceNodePortRange, "service-node-port-range", "30000-32767", "range of Service NodePorts")
	fs.StringVar(&cfg.ClusterCIDR, "cluster-cidr", "", "pod addresses, one CIDR per family, comma-separated (default 10.244.0.0/16, where node i gets 10.244.i.0/24, and fd00:10:244::/56, where it gets fd00:10:244:i::/64)")
	fs.StringVar(&cfg.NodePortAddresses, "nodeport-addresses", "", "passed to every node's proxy: comma-separated CIDRs and keywords (primary, localhost, all) of the node addresses that accept NodePorts (default: the proxy mode's default)")
	fs.StringVar(&cfg.Prefix, "prefix", "svcnet", "prefix of namespace, bridge and node names")
	fs.BoolVar(&cfg.Ingress, "ingress", true, "run the Ingress controller (svcnet ingress) on the control-plane node's port 80, with the default IngressClass svcnet")
	fs.DurationVar(&cfg.NodeMonitorGracePeriod, "node-monitor-grace-period", 50*time.Second, "passed to the controllers: how long a node agent may be silent before its Node turns NotReady (Unknown)")
	fs.StringArrayVar(&cfg.ProxyArgs, "proxy-arg", nil, "passed to every node's proxy, repeatable: one --FLAG=VALUE of `svcnet proxy` (for example --proxy-arg=--nftables-endpoint-choice=shared); checked before anything starts")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := checkProxyArgs(cfg.ProxyMode, cfg.ProxyArgs); err != nil {
		return err
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := cluster.EnterHostMountNamespace(); err != nil {
		return err
	}
	cfg.DataDir = abs
	if cfg.Exe, err = os.Executable(); err != nil {
		return err
	}
	cfg.Logger = slog.Default()
	c, err := cluster.Up(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	slog.Info("stopping the cluster")
	c.Stop()
	return nil
}

// upProxyFlags are the proxy flags that up sets itself from its own flags
// (or that would stop the proxy from running as a node's proxy).
var upProxyFlags = map[string]string{
	"kubeconfig":         "up writes each component's kubeconfig",
	"hostname-override":  "up names the nodes",
	"proxy-mode":         "use up's --proxy-mode",
	"cluster-cidr":       "use up's --cluster-cidr",
	"nodeport-addresses": "use up's --nodeport-addresses",
	"netns":              "up runs each proxy in its node's namespace",
	"cleanup":            "the proxy would exit at once",
	"dump":               "the proxy would exit at once",
}

// checkProxyArgs checks up's --proxy-arg values the way the proxy will
// read them, so that a typo fails `svcnet up` at once rather than every
// node's proxy after the cluster has started.
func checkProxyArgs(mode string, extra []string) error {
	for _, a := range extra {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || name == "" {
			return fmt.Errorf("--proxy-arg=%s: want one --FLAG=VALUE of svcnet proxy", a)
		}
		if why, ok := upProxyFlags[name]; ok {
			return fmt.Errorf("--proxy-arg=%s: --%s is set by up (%s)", a, name, why)
		}
	}
	if _, err := parseProxyArgs(append([]string{"--proxy-mode", mode}, extra...)); err != nil {
		return fmt.Errorf("--proxy-arg: %w", err)
	}
	return nil
}

func runDown(ctx context.Context, args []string) error {
	fs := newFlagSet("down")
	dataDir := fs.String("data-dir", "/var/lib/svcnet/cluster", "data dir of the `svcnet up` to clean up")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := cluster.EnterHostMountNamespace(); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	return cluster.Down(ctx, abs)
}

func runUpGuard(ctx context.Context, args []string) error {
	fs := newFlagSet("up-guard")
	dataDir := fs.String("data-dir", "", "data dir of the `svcnet up` to guard (absolute)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return cluster.Guard(ctx, *dataDir, slog.Default())
}
