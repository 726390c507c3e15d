package iptables

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

func TestBackendCommands(t *testing.T) {
	for _, c := range []struct {
		b          Backend
		ipv6       bool
		base, want string
	}{
		{BackendSystem, false, "iptables-restore", "iptables-restore"},
		{BackendSystem, true, "iptables-save", "ip6tables-save"},
		{BackendNFT, false, "iptables", "iptables-nft"},
		{BackendNFT, true, "iptables-restore", "ip6tables-nft-restore"},
		{BackendLegacy, false, "iptables-save", "iptables-legacy-save"},
		{BackendLegacy, true, "iptables", "ip6tables-legacy"},
	} {
		if got := c.b.command(c.ipv6, c.base); got != c.want {
			t.Errorf("%s ipv6=%v %s: %s, want %s", c.b, c.ipv6, c.base, got, c.want)
		}
	}
	for flag, want := range map[string]Backend{"auto": BackendAuto, "nft": BackendNFT, "legacy": BackendLegacy, "system": BackendSystem} {
		if got, err := ParseBackend(flag); err != nil || got != want {
			t.Errorf("ParseBackend(%q) = %q, %v", flag, got, err)
		}
		if want != BackendAuto && want.String() != flag {
			t.Errorf("%q.String() = %q", want, want.String())
		}
	}
	for _, bad := range []string{"", "iptables", "NFT"} {
		if _, err := ParseBackend(bad); err == nil {
			t.Errorf("ParseBackend(%q) accepted", bad)
		}
	}
}

// saves answers each iptables*-save program with its text; a missing
// program fails as an uninstalled variant does.
type saves map[string]string

func (s saves) Run(_ context.Context, _ []byte, name string, args ...string) ([]byte, error) {
	if strings.HasPrefix(name, "ip6tables-legacy") || strings.HasPrefix(name, "iptables-legacy") {
		if len(args) != 0 {
			return nil, errors.New("the legacy variant must be read whole: -t would create the table")
		}
	}
	out, ok := s[name]
	if !ok {
		return nil, errors.New(name + ": not found")
	}
	return []byte(out), nil
}

func TestDetectBackend(t *testing.T) {
	const hint = "*mangle\n:PREROUTING ACCEPT [0:0]\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n"
	const canary = "*mangle\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n"
	const other = "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -m comment --comment \"KUBE-IPTABLES-HINT\" -j RETURN\nCOMMIT\n"
	for _, c := range []struct {
		name string
		s    saves
		want Backend
	}{
		{"nothing installed", saves{}, BackendSystem},
		{"no kubelet", saves{"iptables-nft-save": other, "iptables-legacy-save": other}, BackendSystem},
		{"kubelet on nft", saves{"iptables-nft-save": hint, "iptables-legacy-save": ""}, BackendNFT},
		{"kubelet on nft, IPv6 only", saves{"ip6tables-nft-save": canary}, BackendNFT},
		{"kubelet on legacy", saves{"iptables-nft-save": "", "iptables-legacy-save": canary}, BackendLegacy},
		{"kubelet on legacy, IPv6 only", saves{"ip6tables-legacy-save": hint}, BackendLegacy},
		{"both: nft first", saves{"iptables-nft-save": hint, "iptables-legacy-save": hint}, BackendNFT},
	} {
		if got := DetectBackend(context.Background(), c.s); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestDetectBackendKernel runs the detection against the real programs in
// a throwaway network namespace: kubelet's hint chain made through one
// variant, then the other.
func TestDetectBackendKernel(t *testing.T) {
	t.Parallel()
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "iptables-nft", "iptables-legacy", "iptables-nft-save", "iptables-legacy-save")
	ctx := context.Background()
	for _, c := range []struct {
		make string
		want Backend
	}{{"", BackendSystem}, {"iptables-nft", BackendNFT}, {"iptables-legacy", BackendLegacy}} {
		ns := testbed.NewNetNS(t, "ipt-detect")
		if c.make != "" {
			ns.MustRun(c.make, "-t", "mangle", "-N", "KUBE-IPTABLES-HINT")
		}
		ex := proxy.OSExecutor{NetNS: ns.Name}
		if got := DetectBackend(ctx, ex); got != c.want {
			t.Errorf("hint made by %q: detected %s, want %s", c.make, got, c.want)
		}
		run, err := NewRunner(proxy.ModeConfig{Exec: ex})
		if err != nil || run.Backend != c.want {
			t.Errorf("hint made by %q: NewRunner's backend %v (%v), want %s", c.make, run, err, c.want)
		}
	}
}

// TestKernelScenariosLegacy runs the shared real-packet scenarios through
// iptables-legacy, chosen as a node with kubelet on that variant chooses
// it: by --iptables-backend=auto and kubelet's hint chain.
func TestKernelScenariosLegacy(t *testing.T) {
	t.Parallel()
	testbed.RequireCommand(t, "iptables-legacy-restore", "ip6tables-legacy-restore")
	started := map[string]bool{}
	checked := 0
	proxytest.RunKernelScenarios(t, func(n *proxytest.Node, cfg proxy.ModeConfig) (proxy.Provider, error) {
		if started[n.Name] {
			// A restart (the last scenario): the running proxy's chains
			// are in the legacy variant only.
			for _, v := range []string{"iptables", "ip6tables"} {
				legacy, _ := n.NS.Run(v+"-legacy-save", "-t", "nat")
				nft, _ := n.NS.Run(v + "-nft-save")
				if !strings.Contains(legacy, ":KUBE-SERVICES") || strings.Contains(nft, "KUBE-") {
					return nil, fmt.Errorf("node %s, %s: want the proxy's chains in the legacy variant only; legacy:\n%s\nnft:\n%s", n.Name, v, legacy, nft)
				}
			}
			checked++
		}
		started[n.Name] = true
		// As kubelet does.
		_, _ = n.NS.Run("iptables-legacy", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT")
		run, err := NewRunner(cfg)
		if err != nil {
			return nil, err
		}
		if run.Backend != BackendLegacy {
			return nil, fmt.Errorf("node %s: backend %s, want legacy", n.Name, run.Backend)
		}
		return New(cfg, run), nil
	})
	if checked == 0 && !t.Failed() {
		t.Error("no proxy was restarted: the variant holding the rules was not checked")
	}
}
