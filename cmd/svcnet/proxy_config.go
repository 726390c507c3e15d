package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// kube-proxy's configuration file (KubeProxyConfiguration,
// kubeproxy.config.k8s.io/v1alpha1), as `kube-proxy --config` reads it:
// the file's values, with kube-proxy's defaults for what it leaves out,
// replace those of the kube-proxy flags (only --hostname-override and the
// log level given on the command line win); svcnet's own flags still apply.
// `--config-map NAMESPACE/NAME` (a svcnet extension, what `svcnet up` uses)
// reads the same document from the ConfigMap's config.conf key through the
// API; there the flags given on the command line win over it.

// kubeProxyFlags are the proxy flags a KubeProxyConfiguration sets.
var kubeProxyFlags = []string{"kubeconfig", "proxy-mode", "cluster-cidr", "nodeport-addresses", "masquerade-all",
	"iptables-masquerade-bit", "sync-period", "min-sync-period", "healthz-bind-address", "metrics-bind-address",
	"profiling", "ipvs-scheduler", "ipvs-strict-arp", "conntrack-max-per-core", "conntrack-min",
	"conntrack-tcp-timeout-established", "conntrack-tcp-timeout-close-wait", "conntrack-tcp-be-liberal",
	"conntrack-udp-timeout", "conntrack-udp-timeout-stream", "hostname-override", "log-level"}

// decodeKubeProxyConfig decodes a KubeProxyConfiguration strictly (unknown
// or repeated fields are errors, as kube-proxy's decoder makes them).
func decodeKubeProxyConfig(data []byte) (*kubeproxyconfig.KubeProxyConfiguration, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, fmt.Errorf("failed to decode: %w", err)
	}
	if tm.APIVersion != "kubeproxy.config.k8s.io/v1alpha1" || tm.Kind != "KubeProxyConfiguration" {
		return nil, fmt.Errorf("failed to decode: want apiVersion kubeproxy.config.k8s.io/v1alpha1, kind KubeProxyConfiguration; got apiVersion %q, kind %q", tm.APIVersion, tm.Kind)
	}
	var c kubeproxyconfig.KubeProxyConfiguration
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("failed to decode: %w", err)
	}
	return &c, nil
}

// kubeProxyConfigFlags turns a KubeProxyConfiguration into flag values,
// with kube-proxy's defaults for unset fields, and lists the settings
// svcnet's proxy does not act on.
func kubeProxyConfigFlags(c *kubeproxyconfig.KubeProxyConfiguration) (map[string]string, []string, error) {
	f := map[string]string{}
	var ignored []string
	mode := string(c.Mode)
	switch mode {
	case "":
		mode = "iptables"
	case "iptables", "ipvs", "nftables", "userspace":
	default:
		return nil, nil, fmt.Errorf("unsupported proxy mode %q in the configuration", mode)
	}
	f["proxy-mode"] = mode
	if c.ClientConnection.Kubeconfig != "" {
		f["kubeconfig"] = c.ClientConnection.Kubeconfig
	}
	if c.HostnameOverride != "" {
		f["hostname-override"] = c.HostnameOverride
	}
	f["cluster-cidr"] = c.ClusterCIDR
	f["nodeport-addresses"] = strings.Join(c.NodePortAddresses, ",")
	sync, minSync := c.IPTables.SyncPeriod.Duration, c.IPTables.MinSyncPeriod.Duration
	masqAll, masqBit := c.IPTables.MasqueradeAll, c.IPTables.MasqueradeBit
	switch mode {
	case "ipvs":
		// kube-proxy defaults no IPVS minimum: 0, every change syncs.
		sync, minSync = c.IPVS.SyncPeriod.Duration, c.IPVS.MinSyncPeriod.Duration
	case "nftables":
		sync, minSync = c.NFTables.SyncPeriod.Duration, c.NFTables.MinSyncPeriod.Duration
		masqAll, masqBit = c.NFTables.MasqueradeAll, c.NFTables.MasqueradeBit
	default:
		if minSync == 0 {
			minSync = time.Second
		}
	}
	if mode == "nftables" && minSync == 0 {
		minSync = time.Second
	}
	if sync == 0 {
		sync = 30 * time.Second
	}
	f["sync-period"], f["min-sync-period"] = sync.String(), minSync.String()
	f["masquerade-all"] = strconv.FormatBool(masqAll)
	f["iptables-masquerade-bit"] = "14"
	if masqBit != nil {
		f["iptables-masquerade-bit"] = strconv.Itoa(int(*masqBit))
	}
	healthzHost, metricsHost := "0.0.0.0", "127.0.0.1"
	if ip := net.ParseIP(c.BindAddress); ip != nil && ip.To4() == nil {
		healthzHost, metricsHost = "[::]", "[::1]"
	}
	f["healthz-bind-address"] = withDefaultPort(c.HealthzBindAddress, healthzHost, 10256)
	f["metrics-bind-address"] = withDefaultPort(c.MetricsBindAddress, metricsHost, 10249)
	f["profiling"] = strconv.FormatBool(c.EnableProfiling)
	f["ipvs-scheduler"] = c.IPVS.Scheduler
	if f["ipvs-scheduler"] == "" {
		f["ipvs-scheduler"] = "rr"
	}
	f["ipvs-strict-arp"] = strconv.FormatBool(c.IPVS.StrictARP)
	ct := c.Conntrack
	f["conntrack-max-per-core"], f["conntrack-min"] = "32768", "131072"
	if ct.MaxPerCore != nil {
		f["conntrack-max-per-core"] = strconv.Itoa(int(*ct.MaxPerCore))
	}
	if ct.Min != nil {
		f["conntrack-min"] = strconv.Itoa(int(*ct.Min))
	}
	f["conntrack-tcp-timeout-established"], f["conntrack-tcp-timeout-close-wait"] = (24 * time.Hour).String(), time.Hour.String()
	if ct.TCPEstablishedTimeout != nil {
		f["conntrack-tcp-timeout-established"] = ct.TCPEstablishedTimeout.Duration.String()
	}
	if ct.TCPCloseWaitTimeout != nil {
		f["conntrack-tcp-timeout-close-wait"] = ct.TCPCloseWaitTimeout.Duration.String()
	}
	f["conntrack-tcp-be-liberal"] = strconv.FormatBool(ct.TCPBeLiberal)
	f["conntrack-udp-timeout"], f["conntrack-udp-timeout-stream"] = ct.UDPTimeout.Duration.String(), ct.UDPStreamTimeout.Duration.String()
	if v := c.Logging.Verbosity; v >= 4 {
		f["log-level"] = "debug"
	}
	// What the file may say that svcnet's proxy does not act on.
	note := func(set bool, what string) {
		if set {
			ignored = append(ignored, what)
		}
	}
	note(len(c.FeatureGates) > 0, "featureGates")
	note(c.DetectLocalMode != "" && c.DetectLocalMode != "ClusterCIDR", "detectLocalMode "+string(c.DetectLocalMode)+" (svcnet detects local traffic by clusterCIDR)")
	note(c.PortRange != "", "portRange")
	note(len(c.IPVS.ExcludeCIDRs) > 0, "ipvs.excludeCIDRs")
	note(c.IPVS.TCPTimeout.Duration != 0 || c.IPVS.TCPFinTimeout.Duration != 0 || c.IPVS.UDPTimeout.Duration != 0, "ipvs timeouts")
	note(c.IPTables.LocalhostNodePorts != nil && !*c.IPTables.LocalhostNodePorts, "iptables.localhostNodePorts false")
	note(c.OOMScoreAdj != nil, "oomScoreAdj")
	note(c.BindAddressHardFail, "bindAddressHardFail")
	return f, ignored, nil
}

// withDefaultPort: empty is host:port; an address without a port gets it.
func withDefaultPort(addr, host string, port int) string {
	if addr == "" {
		return net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port))
	}
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(strings.Trim(addr, "[]"), strconv.Itoa(port))
}

// applyKubeProxyConfig sets the flags of a configuration. With
// flagsWin, flags given on the command line keep their values (--config-map);
// otherwise the configuration replaces them (--config, as kube-proxy), but
// for --hostname-override and --log-level.
func applyKubeProxyConfig(fs *pflag.FlagSet, data []byte, flagsWin bool) ([]string, error) {
	c, err := decodeKubeProxyConfig(data)
	if err != nil {
		return nil, err
	}
	values, ignored, err := kubeProxyConfigFlags(c)
	if err != nil {
		return nil, err
	}
	for _, name := range kubeProxyFlags {
		fl := fs.Lookup(name)
		if fl == nil {
			return nil, fmt.Errorf("internal: no flag --%s", name)
		}
		keep := fl.Changed && (flagsWin || name == "hostname-override" || name == "log-level")
		if keep {
			continue
		}
		v, ok := values[name]
		if !ok {
			v = fl.DefValue
			if name == "hostname-override" || name == "log-level" || name == "kubeconfig" {
				if fl.Changed {
					continue
				}
			}
		}
		if err := fl.Value.Set(v); err != nil {
			return nil, fmt.Errorf("configuration: %s: %w", name, err)
		}
	}
	return ignored, nil
}

// configChanged reports, on ch, the first time the configuration read by
// read differs from data (kube-proxy exits when its file changes, and
// its DaemonSet restarts it).
func configChanged(ctx context.Context, data []byte, read func(context.Context) ([]byte, error), every time.Duration, ch chan<- error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, err := read(ctx)
		if err == nil && !bytes.Equal(cur, data) {
			ch <- errConfigChanged
			return
		}
	}
}

var errConfigChanged = fmt.Errorf("content of the proxy server's configuration file was updated")

func readConfigFile(path string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return os.ReadFile(path) }
}

// readConfigMap reads key config.conf of ConfigMap ref (NAMESPACE/NAME).
func readConfigMap(client kubernetes.Interface, ref string) func(context.Context) ([]byte, error) {
	ns, name, _ := strings.Cut(ref, "/")
	return func(ctx context.Context) ([]byte, error) {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		data, ok := cm.Data["config.conf"]
		if !ok {
			return nil, fmt.Errorf("ConfigMap %s has no key config.conf", ref)
		}
		return []byte(data), nil
	}
}

// restartSelf replaces the process with a fresh run of the same command
// line; it returns only on failure.
func restartSelf() error {
	return syscall.Exec("/proc/self/exe", os.Args, os.Environ())
}
