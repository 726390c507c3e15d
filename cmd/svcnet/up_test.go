package main

import (
	"strings"
	"testing"
)

func TestCheckProxyArgs(t *testing.T) {
	for _, c := range []struct {
		mode  string
		args  []string
		error string // a part of the error; empty: accepted
	}{
		{"nftables", nil, ""},
		{"nftables", []string{"--nftables-endpoint-choice=shared", "--min-sync-period=0s"}, ""},
		{"iptables", []string{"--iptables-dispatch=tree", "--masquerade-all"}, ""},
		{"nftables", []string{"--nftables-endpoint-choice=bogus"}, "--nftables-endpoint-choice"},
		{"nftables", []string{"--nftables-endpoint-choice=shared", "--nftables-shards=16"}, ""},
		{"nftables", []string{"--nftables-shards=65"}, "--nftables-shards"},
		{"iptables", []string{"--no-such-flag=1"}, "no-such-flag"},
		{"iptables", []string{"--sync-period=soon"}, "sync-period"},
		{"iptables", []string{"nftables-endpoint-choice=shared"}, "want one --FLAG=VALUE"},
		{"iptables", []string{"--"}, "want one --FLAG=VALUE"},
		{"iptables", []string{"--proxy-mode=nftables"}, "use up's --proxy-mode"},
		{"iptables", []string{"--kubeconfig=/x"}, "set by up"},
		{"iptables", []string{"--cleanup"}, "exit at once"},
		{"iptables", []string{"--cluster-cidr=10.0.0.0/8"}, "use up's --cluster-cidr"},
	} {
		err := checkProxyArgs(c.mode, c.args)
		switch {
		case c.error == "" && err != nil:
			t.Errorf("%s %q: %v", c.mode, c.args, err)
		case c.error != "" && (err == nil || !strings.Contains(err.Error(), c.error)):
			t.Errorf("%s %q: error %v, want one with %q", c.mode, c.args, err, c.error)
		}
	}
}
