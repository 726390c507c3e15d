package iptables

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/svcnet/svcnet/proxy"
)

// Backend is the variant of the iptables programs a Runner runs
// (--iptables-backend). iptables 1.8 ships two that share the command
// syntax but not the kernel state: iptables-legacy writes the xtables
// tables, iptables-nft the nf_tables ones. Rules written through one are
// invisible to the other, so a proxy must use the variant the node's
// kubelet, CNI plugin and firewall use.
type Backend string

const (
	// BackendSystem runs the programs installed as `iptables`,
	// `iptables-restore` and so on (Debian's alternatives choose the
	// variant; iptables-nft on Debian 12). It is what the kube-proxy binary
	// runs on a host.
	BackendSystem Backend = ""
	// BackendNFT runs iptables-nft, iptables-nft-restore, ...
	BackendNFT Backend = "nft"
	// BackendLegacy runs iptables-legacy, iptables-legacy-restore, ...
	BackendLegacy Backend = "legacy"
	// BackendAuto is resolved by DetectBackend when the proxy starts.
	BackendAuto Backend = "auto"
)

// ParseBackend parses --iptables-backend: auto, nft, legacy or system.
func ParseBackend(s string) (Backend, error) {
	switch Backend(s) {
	case BackendAuto, BackendNFT, BackendLegacy:
		return Backend(s), nil
	case "system":
		return BackendSystem, nil
	}
	return "", fmt.Errorf("unknown iptables backend %q: want auto, nft, legacy or system", s)
}

// String is the flag value that selects b.
func (b Backend) String() string {
	if b == BackendSystem {
		return "system"
	}
	return string(b)
}

// command names the program base ("iptables", "iptables-restore",
// "iptables-save") of this variant, for IPv6 when ipv6.
func (b Backend) command(ipv6 bool, base string) string {
	if ipv6 {
		base = strings.Replace(base, "iptables", "ip6tables", 1)
	}
	switch b {
	case BackendNFT, BackendLegacy:
		return strings.Replace(base, "tables", "tables-"+string(b), 1)
	}
	return base
}

// kubeletHintChains are the chains kubelet (1.17 and later) creates in the
// mangle table through the variant it uses, so that containerised network
// components can find that variant.
var kubeletHintChains = []string{"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"}

func hasKubeletHint(save []byte) bool {
	for _, line := range bytes.Split(save, []byte("\n")) {
		if len(line) == 0 || line[0] != ':' {
			continue
		}
		name, _, _ := bytes.Cut(line[1:], []byte(" "))
		for _, c := range kubeletHintChains {
			if string(name) == c {
				return true
			}
		}
	}
	return false
}

// DetectBackend resolves BackendAuto the way the Kubernetes images'
// iptables wrapper picks a variant for kube-proxy: the variant whose mangle
// table holds kubelet's hint chain, IPv4 before IPv6 and nf_tables before
// legacy; when neither has one (no kubelet on this node, or one older than
// 1.17), the system's `iptables`. Errors (a variant not installed) count as
// "no hint". The legacy variant is read whole, without -t mangle: asking
// it for a table that does not exist would create that table.
func DetectBackend(ctx context.Context, ex proxy.Executor) Backend {
	for _, ipv6 := range []bool{false, true} {
		if out, err := ex.Run(ctx, nil, BackendNFT.command(ipv6, "iptables-save"), "-t", "mangle"); err == nil && hasKubeletHint(out) {
			return BackendNFT
		}
	}
	for _, ipv6 := range []bool{false, true} {
		if out, err := ex.Run(ctx, nil, BackendLegacy.command(ipv6, "iptables-save")); err == nil && hasKubeletHint(out) {
			return BackendLegacy
		}
	}
	return BackendSystem
}

// ResolveBackend parses --iptables-backend and, for auto, detects the
// variant with ex.
func ResolveBackend(ctx context.Context, ex proxy.Executor, flag string) (Backend, error) {
	b, err := ParseBackend(flag)
	if err != nil || b != BackendAuto {
		return b, err
	}
	return DetectBackend(ctx, ex), nil
}

// NewRunner is the Runner of a proxy mode's configuration: its executor
// and the variant --iptables-backend names (auto detected now, and logged).
func NewRunner(cfg proxy.ModeConfig) (*Runner, error) {
	ex := cfg.Exec
	if ex == nil {
		ex = proxy.OSExecutor{}
	}
	flag := cfg.IPTablesBackend
	if flag == "" {
		flag = string(BackendAuto)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := ResolveBackend(ctx, ex, flag)
	if err != nil {
		return nil, err
	}
	if cfg.Log != nil {
		cfg.Log.Info("iptables backend", "flag", flag, "backend", b.String())
	}
	return &Runner{Exec: ex, Backend: b}, nil
}
