package main

import (
	"strings"
	"testing"
)

// The comparison must see real differences and ignore only what the README
// says it ignores.
func TestDiffIPTables(t *testing.T) {
	base := `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:PREROUTING - [0:0]
-A KUBE-SERVICES -m comment --comment "a" -j KUBE-SVC-A
-A KUBE-SERVICES -m comment --comment "b" -j KUBE-SVC-B
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -d 192.168.0.2 -j KUBE-NODEPORTS
-A KUBE-SVC-A -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-1
-A KUBE-SVC-A -j KUBE-SEP-2
-A KUBE-MARK-MASQ -j MARK --or-mark 0x004000
COMMIT
`
	same := strings.NewReplacer(
		`-A KUBE-SERVICES -m comment --comment "a" -j KUBE-SVC-A
-A KUBE-SERVICES -m comment --comment "b" -j KUBE-SVC-B`,
		`-A KUBE-SERVICES -m comment --comment b -j KUBE-SVC-B
-A KUBE-SERVICES -m comment --comment a -j KUBE-SVC-A`,
		"0x004000", "0x4000",
		":PREROUTING - [0:0]\n", "").Replace(base)
	if d := diffIPTables(base, same); len(d) != 0 {
		t.Errorf("map-ordered dispatch rules, mark spelling, quoting or an empty built-in chain counted as differences: %v", d)
	}
	for name, changed := range map[string]string{
		"endpoint order":       strings.Replace(strings.Replace(base, "KUBE-SEP-1", "KUBE-SEP-X", 1), "KUBE-SEP-2", "KUBE-SEP-1", 1),
		"missing rule":         strings.Replace(base, "-A KUBE-SVC-A -j KUBE-SEP-2\n", "", 1),
		"different mark":       strings.Replace(base, "0x004000", "0x8000", 1),
		"nodeports jump early": strings.Replace(base, `-A KUBE-SERVICES -m comment --comment "a" -j KUBE-SVC-A`, `-A KUBE-SERVICES -d 192.168.0.3 -j KUBE-NODEPORTS`+"\n"+`-A KUBE-SERVICES -m comment --comment "a" -j KUBE-SVC-A`, 1),
		"extra chain":          strings.Replace(base, "COMMIT", ":KUBE-FW-A - [0:0]\nCOMMIT", 1),
		"same rules reordered": strings.Replace(strings.Replace(base, "-A KUBE-SVC-A -j KUBE-SEP-2\n", "", 1), "-A KUBE-SVC-A -m statistic", "-A KUBE-SVC-A -j KUBE-SEP-2\n-A KUBE-SVC-A -m statistic", 1),
	} {
		if d := diffIPTables(base, changed); len(d) == 0 {
			t.Errorf("%s: no difference reported", name)
		}
	}
}

func TestDiffNFT(t *testing.T) {
	base := "add table ip kube-proxy\nadd rule ip kube-proxy c a\nadd rule ip kube-proxy c b\nadd element ip kube-proxy s { 1 }\nadd element ip kube-proxy s { 2 }\n"
	if d := diffNFT(base, "add table ip kube-proxy\nadd rule ip kube-proxy c a\nadd rule ip kube-proxy c b\nadd element ip kube-proxy s { 2 }\nadd element ip kube-proxy s { 1 }\n"); len(d) != 0 {
		t.Errorf("element order counted: %v", d)
	}
	if d := diffNFT(base, "add table ip kube-proxy\nadd rule ip kube-proxy c b\nadd rule ip kube-proxy c a\nadd element ip kube-proxy s { 1 }\nadd element ip kube-proxy s { 2 }\n"); len(d) == 0 {
		t.Error("rule order not seen")
	}
	if d := diffNFT(base, strings.Replace(base, "{ 2 }", "{ 3 }", 1)); len(d) == 0 {
		t.Error("element change not seen")
	}
}

// IPVS outputs: sections compared as multisets, a missing real server, a
// flag or a bound address is a difference.
func TestDiffIPVS(t *testing.T) {
	base := ipvsSections(
		[]string{"TCP 172.30.1.1:80 mh flags=0x10", "TCP 172.30.1.1:80 -> 10.0.1.1:8080 weight=1"},
		[]string{"KUBE-CLUSTER-IP hash:ip,port", "KUBE-CLUSTER-IP 172.30.1.1,tcp:80"},
		[]string{"172.30.1.1"}, "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j ACCEPT\nCOMMIT\n")
	reordered := ipvsSections(
		[]string{"TCP 172.30.1.1:80 -> 10.0.1.1:8080 weight=1", "TCP 172.30.1.1:80 mh flags=0x10"},
		[]string{"KUBE-CLUSTER-IP 172.30.1.1,tcp:80", "KUBE-CLUSTER-IP hash:ip,port"},
		[]string{"172.30.1.1"}, "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j ACCEPT\nCOMMIT\n")
	if d := diffIPVS(base, reordered); len(d) != 0 {
		t.Errorf("same state, other order: %q", d)
	}
	for _, c := range []struct{ what, old, new string }{
		{"flag", "flags=0x10", "flags=0x0"},
		{"real server", "TCP 172.30.1.1:80 -> 10.0.1.1:8080 weight=1\n", ""},
		{"bound address", "*bind\n172.30.1.1\n", "*bind\n"},
		{"set entry", "KUBE-CLUSTER-IP 172.30.1.1,tcp:80\n", ""},
		{"rule", "-A KUBE-SERVICES -j ACCEPT", "-A KUBE-SERVICES -j RETURN"},
	} {
		if d := diffIPVS(base, strings.Replace(base, c.old, c.new, 1)); len(d) == 0 {
			t.Errorf("%s changed: no difference found", c.what)
		}
	}
}

// The traced comparison of --nftables-shards: a scenario's tables trace as
// kube-proxy's; without one dispatch element of svcnet's, they do not.
func TestDiffTraces(t *testing.T) {
	if err := initMakers(); err != nil {
		t.Fatal(err)
	}
	sc := Generate(1, 4)
	kp, err := kubeProxyNFTables(sc, sc.Families[0])
	if err != nil {
		t.Fatal(err)
	}
	sv, err := svcnetNFTablesShards(sc, sc.Families[0])
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTraces(kp, sv); len(d) != 0 {
		t.Fatalf("scenario 4 differs: %v", d)
	}
	var cut []string
	dropped := false
	for _, l := range strings.Split(sv, "\n") {
		// A service-ips element, or one of the sets of the direct choices
		// (direct-external-ips, direct-node-ports).
		if !dropped && strings.Contains(l, "-s0") && (strings.Contains(l, " service-ips { ") || strings.Contains(l, " direct-")) &&
			strings.HasPrefix(l, "add element") {
			dropped = true
			continue
		}
		cut = append(cut, l)
	}
	if !dropped {
		t.Fatal("no dispatch element in svcnet's tables")
	}
	if d := diffTraces(kp, strings.Join(cut, "\n")); len(d) == 0 {
		t.Error("a missing dispatch element not seen")
	}
}
