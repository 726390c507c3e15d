package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseProxyArgs(t *testing.T) {
	a, err := parseProxyArgs([]string{"--hostname-override", "Node-1", "--cluster-cidr", "10.244.0.0/16,fd00::/48",
		"--nodeport-addresses", "172.18.0.0/24,primary"})
	if err != nil {
		t.Fatal(err)
	}
	if a.mode != "iptables" || a.minSyncPeriod != time.Second || a.syncPeriod != 30*time.Second ||
		a.healthzBindAddress != "0.0.0.0:10256" || a.metricsBindAddress != "127.0.0.1:10249" || a.ipvsScheduler != "rr" ||
		a.iptablesDispatch != "linear" || a.nftablesChoice != "map" || a.profiling {
		t.Errorf("defaults: %+v", a)
	}
	if a.hostnameOverride != "node-1" || len(a.clusterCIDRs) != 2 || len(a.nodePortAddresses) != 1 || !a.nodePortPrimary {
		t.Errorf("parsed: %+v", a)
	}
	if a, err := parseProxyArgs([]string{"--profiling"}); err != nil || !a.profiling {
		t.Errorf("--profiling: %v %+v", err, a)
	}
	for _, bad := range [][]string{{"--cluster-cidr", "10.0.0.0/33"}, {"--nodeport-addresses", "nope"}, {"--sync-period", "0s"}, {"extra"}, {"--iptables-dispatch", "bush"}, {"--nftables-endpoint-choice", "set"}, {"--nftables-shards", "-1"}, {"--nftables-shards", "65"}} {
		if _, err := parseProxyArgs(bad); err == nil {
			t.Errorf("%v: no error", bad)
		} else if strings.Contains(err.Error(), "panic") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// kube-proxy 1.37's --nodeport-addresses keywords localhost and all.
func TestNodePortAddressKeywords(t *testing.T) {
	a, err := parseProxyArgs([]string{"--nodeport-addresses", "localhost,all"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.0/8", "::1/128", "0.0.0.0/0", "::/0"}
	if len(a.nodePortAddresses) != len(want) || a.nodePortPrimary {
		t.Fatalf("got %v primary=%v, want %v", a.nodePortAddresses, a.nodePortPrimary, want)
	}
	for i, w := range want {
		if a.nodePortAddresses[i].String() != w {
			t.Errorf("%d: got %v, want %s", i, a.nodePortAddresses[i], w)
		}
	}
}

// kube-proxy 1.36 and 1.37 default --nodeport-addresses to "primary" in
// nftables mode only.
func TestNodePortAddressesDefaultPerMode(t *testing.T) {
	for mode, wantPrimary := range map[string]bool{"iptables": false, "nftables": true, "ipvs": false, "userspace": false} {
		a, err := parseProxyArgs([]string{"--proxy-mode", mode})
		if err != nil {
			t.Fatal(err)
		}
		if a.nodePortPrimary != wantPrimary || len(a.nodePortAddresses) != 0 {
			t.Errorf("%s: primary=%v addresses=%v, want primary=%v", mode, a.nodePortPrimary, a.nodePortAddresses, wantPrimary)
		}
	}
	a, err := parseProxyArgs([]string{"--proxy-mode", "nftables", "--nodeport-addresses", "10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	if a.nodePortPrimary || len(a.nodePortAddresses) != 1 {
		t.Errorf("explicit CIDR in nftables mode: %+v", a)
	}
}
