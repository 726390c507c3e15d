package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.conf")
	if err := os.WriteFile(p, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProxyConfigFile: --config as kube-proxy reads it: the file's values,
// kube-proxy's defaults for the rest, the kube-proxy flags of the command
// line ignored (but --hostname-override), svcnet's own flags kept.
func TestProxyConfigFile(t *testing.T) {
	// What kubeadm writes into kube-proxy's ConfigMap, with the seeds' edits
	// (mode ipvs, strictARP true).
	p := writeConfig(t, `bindAddress: 0.0.0.0
clientConnection:
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
clusterCIDR: 10.244.0.0/16
conntrack:
  maxPerCore: null
  tcpEstablishedTimeout: 12h0m0s
ipvs:
  scheduler: wrr
  strictARP: true
mode: ipvs
nodePortAddresses: [172.18.0.0/24]
`)
	a, err := parseProxyArgs([]string{"--config", p, "--proxy-mode", "nftables", "--min-sync-period", "5s", "--hostname-override", "Node-2", "--iptables-backend", "legacy"})
	if err != nil {
		t.Fatal(err)
	}
	if a.mode != "ipvs" || !a.ipvsStrictARP || a.ipvsScheduler != "wrr" || a.kubeconfig != "/var/lib/kube-proxy/kubeconfig.conf" {
		t.Errorf("from the file: mode %q strictARP %v scheduler %q kubeconfig %q", a.mode, a.ipvsStrictARP, a.ipvsScheduler, a.kubeconfig)
	}
	// kube-proxy's IPVS defaults: 30 s, no minimum.
	if a.minSyncPeriod != 0 || a.syncPeriod != 30*time.Second {
		t.Errorf("ipvs sync periods %v / %v, want 0s / 30s", a.minSyncPeriod, a.syncPeriod)
	}
	if len(a.clusterCIDRs) != 1 || a.clusterCIDRs[0].String() != "10.244.0.0/16" || len(a.nodePortAddresses) != 1 || a.nodePortPrimary {
		t.Errorf("cidrs %v nodeports %v primary %v", a.clusterCIDRs, a.nodePortAddresses, a.nodePortPrimary)
	}
	if a.conntrack.MaxPerCore != 32768 || a.conntrack.TCPTimeoutEstablished != 12*time.Hour || a.conntrack.TCPTimeoutCloseWait != time.Hour {
		t.Errorf("conntrack %+v", a.conntrack)
	}
	if a.hostnameOverride != "node-2" || a.iptablesBackend != "legacy" {
		t.Errorf("command line: hostname %q backend %q", a.hostnameOverride, a.iptablesBackend)
	}

	// An empty configuration is kube-proxy's defaults, whatever the flags.
	a, err = parseProxyArgs([]string{"--config", writeConfig(t, ""), "--proxy-mode", "ipvs", "--masquerade-all", "--healthz-bind-address", ":1"})
	if err != nil {
		t.Fatal(err)
	}
	if a.mode != "iptables" || a.minSyncPeriod != time.Second || a.syncPeriod != 30*time.Second || a.masqueradeAll || a.masqueradeBit != 14 ||
		a.healthzBindAddress != "0.0.0.0:10256" || a.metricsBindAddress != "127.0.0.1:10249" || a.ipvsScheduler != "rr" || a.ipvsStrictARP {
		t.Errorf("defaults: %+v", a)
	}
	a, err = parseProxyArgs([]string{"--config", writeConfig(t, "mode: nftables\nnftables: {masqueradeAll: true, masqueradeBit: 3}\nhealthzBindAddress: 127.0.0.1\nbindAddress: \"::\"\n")})
	if err != nil {
		t.Fatal(err)
	}
	if a.mode != "nftables" || !a.masqueradeAll || a.masqueradeBit != 3 || a.minSyncPeriod != time.Second || !a.nodePortPrimary ||
		a.healthzBindAddress != "127.0.0.1:10256" || a.metricsBindAddress != "[::1]:10249" {
		t.Errorf("nftables: %+v", a)
	}

	for _, bad := range []string{"mode: kernelspace\n", "bogusField: 1\n", "mode: [x]\n", "conntrack: {min: -1x}\n"} {
		if _, err := parseProxyArgs([]string{"--config", writeConfig(t, bad)}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	wrongKind := filepath.Join(t.TempDir(), "c")
	_ = os.WriteFile(wrongKind, []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o644)
	if _, err := parseProxyArgs([]string{"--config", wrongKind}); err == nil || !strings.Contains(err.Error(), "KubeProxyConfiguration") {
		t.Errorf("a ConfigMap as configuration: %v", err)
	}
	if _, err := parseProxyArgs([]string{"--config", "/nonexistent"}); err == nil {
		t.Error("a missing file: no error")
	}
}

// TestProxyConfigMapFlagsWin: with --config-map (svcnet up), flags given on
// the command line win over the ConfigMap's configuration.
func TestProxyConfigMapFlagsWin(t *testing.T) {
	data := []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\nclusterCIDR: 10.244.0.0/16\nnftables: {minSyncPeriod: 100ms}\n")
	a, err := parseProxyArgsConfig([]string{"--config-map", "kube-system/kube-proxy", "--kubeconfig", "/k", "--nodeport-addresses", "all"}, data)
	if err != nil {
		t.Fatal(err)
	}
	if a.mode != "nftables" || a.minSyncPeriod != 100*time.Millisecond || a.kubeconfig != "/k" || len(a.nodePortAddresses) != 2 || a.nodePortPrimary {
		t.Errorf("%+v", a)
	}
	a, err = parseProxyArgsConfig([]string{"--config-map", "kube-system/kube-proxy", "--proxy-mode", "iptables"}, data)
	if err != nil || a.mode != "iptables" {
		t.Errorf("--proxy-mode over the ConfigMap: %v %+v", err, a)
	}
	if _, err := parseProxyArgsConfig([]string{"--config-map", "kube-proxy"}, data); err == nil {
		t.Error("--config-map without a namespace: no error")
	}
	if _, err := parseProxyArgs([]string{"--config-map", "a/b", "--config", "c"}); err == nil {
		t.Error("--config and --config-map: no error")
	}
}

// TestProxyConfigChanged: a changed file is reported (kube-proxy then
// exits), an unchanged one is not.
func TestProxyConfigChanged(t *testing.T) {
	p := writeConfig(t, "mode: iptables\n")
	data, _ := os.ReadFile(p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan error, 1)
	go configChanged(ctx, data, readConfigFile(p), 10*time.Millisecond, ch)
	select {
	case err := <-ch:
		t.Fatalf("unchanged file reported: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := os.WriteFile(p, append(data, []byte("ipvs: {strictARP: true}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ch:
		if !errors.Is(err, errConfigChanged) {
			t.Errorf("reported %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("changed file not reported")
	}
}
