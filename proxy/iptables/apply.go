package iptables

import (
	"context"
	"fmt"
	"strings"

	"github.com/svcnet/svcnet/proxy"
)

// Interface is the kernel side of the iptables mode. Every method takes the
// family (ipv6) and is safe to call when nothing is installed.
type Interface interface {
	// Restore applies an iptables-restore payload with --noflush, so that
	// tables and chains the payload does not mention are left alone.
	Restore(ctx context.Context, ipv6 bool, data []byte) error
	// SaveChains lists the chain names of a table.
	SaveChains(ctx context.Context, ipv6 bool, table string) ([]string, error)
	// SaveTable returns a table in iptables-save form.
	SaveTable(ctx context.Context, ipv6 bool, table string) ([]byte, error)
	// EnsureChain creates a chain if missing.
	EnsureChain(ctx context.Context, ipv6 bool, table, chain string) error
	// ChainExists reports whether a chain exists.
	ChainExists(ctx context.Context, ipv6 bool, table, chain string) (bool, error)
	// EnsureRule inserts a rule at the top of chain unless it exists.
	EnsureRule(ctx context.Context, ipv6 bool, table, chain string, args ...string) error
	// DeleteRule deletes one copy of a rule; a missing rule is not an error.
	DeleteRule(ctx context.Context, ipv6 bool, table, chain string, args ...string) error
}

// Runner is the real Interface: it runs iptables, ip6tables and their
// -restore/-save programs through an Executor.
type Runner struct {
	Exec proxy.Executor
	// Backend selects the programs: BackendSystem (the zero value) runs
	// `iptables`, whichever variant the host installed under that name;
	// BackendNFT and BackendLegacy run iptables-nft and iptables-legacy.
	Backend Backend
}

var _ Interface = (*Runner)(nil)

func (r *Runner) cmd(ipv6 bool, base string) string {
	return r.Backend.command(ipv6, base)
}

// Restore implements Interface.
func (r *Runner) Restore(ctx context.Context, ipv6 bool, data []byte) error {
	if _, err := r.Exec.Run(ctx, data, r.cmd(ipv6, "iptables-restore"), "-w", "5", "--noflush", "--counters"); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

// SaveChains implements Interface.
func (r *Runner) SaveChains(ctx context.Context, ipv6 bool, table string) ([]string, error) {
	out, err := r.Exec.Run(ctx, nil, r.cmd(ipv6, "iptables-save"), "-t", table)
	if err != nil {
		return nil, fmt.Errorf("save %s: %w", table, err)
	}
	return ChainsFromSave(out), nil
}

// SaveTable implements Interface.
func (r *Runner) SaveTable(ctx context.Context, ipv6 bool, table string) ([]byte, error) {
	out, err := r.Exec.Run(ctx, nil, r.cmd(ipv6, "iptables-save"), "-t", table)
	if err != nil {
		return nil, fmt.Errorf("save %s: %w", table, err)
	}
	return out, nil
}

// ChainsFromSave returns the chain names declared in iptables-save output.
func ChainsFromSave(out []byte) []string {
	var chains []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, ":") {
			if f := strings.Fields(line[1:]); len(f) > 0 {
				chains = append(chains, f[0])
			}
		}
	}
	return chains
}

// EnsureChain implements Interface.
func (r *Runner) EnsureChain(ctx context.Context, ipv6 bool, table, chain string) error {
	ok, err := r.ChainExists(ctx, ipv6, table, chain)
	if err != nil || ok {
		return err
	}
	if _, err := r.Exec.Run(ctx, nil, r.cmd(ipv6, "iptables"), "-w", "5", "-t", table, "-N", chain); err != nil {
		if ok, _ := r.ChainExists(ctx, ipv6, table, chain); ok {
			return nil
		}
		return fmt.Errorf("create chain %s/%s: %w", table, chain, err)
	}
	return nil
}

// ChainExists implements Interface.
func (r *Runner) ChainExists(ctx context.Context, ipv6 bool, table, chain string) (bool, error) {
	_, err := r.Exec.Run(ctx, nil, r.cmd(ipv6, "iptables"), "-w", "5", "-t", table, "-S", chain, "1")
	return err == nil, nil
}

// EnsureRule implements Interface.
func (r *Runner) EnsureRule(ctx context.Context, ipv6 bool, table, chain string, args ...string) error {
	check := append([]string{"-w", "5", "-t", table, "-C", chain}, args...)
	if _, err := r.Exec.Run(ctx, nil, r.cmd(ipv6, "iptables"), check...); err == nil {
		return nil
	}
	ins := append([]string{"-w", "5", "-t", table, "-I", chain}, args...)
	if _, err := r.Exec.Run(ctx, nil, r.cmd(ipv6, "iptables"), ins...); err != nil {
		return fmt.Errorf("insert rule in %s/%s: %w", table, chain, err)
	}
	return nil
}

// DeleteRule implements Interface.
func (r *Runner) DeleteRule(ctx context.Context, ipv6 bool, table, chain string, args ...string) error {
	check := append([]string{"-w", "5", "-t", table, "-C", chain}, args...)
	if _, err := r.Exec.Run(ctx, nil, r.cmd(ipv6, "iptables"), check...); err != nil {
		return nil
	}
	del := append([]string{"-w", "5", "-t", table, "-D", chain}, args...)
	if _, err := r.Exec.Run(ctx, nil, r.cmd(ipv6, "iptables"), del...); err != nil {
		return fmt.Errorf("delete rule in %s/%s: %w", table, chain, err)
	}
	return nil
}
