package main

import "testing"

func TestParseAPIServerArgs(t *testing.T) {
	cfg, err := parseAPIServerArgs([]string{"--data-dir", "/tmp/x", "--etcd-servers", "http://127.0.0.1:2379, http://127.0.0.1:22379",
		"--bind-address", "0.0.0.0", "--secure-port", "7443", "--advertise-address", "172.18.0.1",
		"--service-cluster-ip-range", "10.96.0.0/16,fd00:10:96::/112", "--service-node-port-range", "30000-30100"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/tmp/x" || len(cfg.EtcdServers) != 2 || cfg.BindAddress != "0.0.0.0" || cfg.SecurePort != 7443 ||
		cfg.AdvertiseAddress != "172.18.0.1" || cfg.ServiceClusterIPRange.String() != "10.96.0.0/16" ||
		cfg.SecondaryServiceClusterIPRange.String() != "fd00:10:96::/112" || cfg.ServiceNodePortRange != "30000-30100" {
		t.Errorf("parsed %+v", cfg)
	}
	def, err := parseAPIServerArgs(nil)
	if err != nil || def.BindAddress != "127.0.0.1" || def.SecurePort != 6443 || def.ServiceClusterIPRange.String() != "10.96.0.0/16" {
		t.Errorf("defaults %+v %v", def, err)
	}
	if _, err := parseAPIServerArgs([]string{"--service-cluster-ip-range", "nope"}); err == nil {
		t.Error("bad range accepted")
	}
}
