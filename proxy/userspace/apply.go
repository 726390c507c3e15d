package userspace

import (
	"context"
	"fmt"
	"sync"

	"github.com/svcnet/svcnet/proxy"
)

// Netfilter is the kernel side of the userspace mode: it installs the
// redirect rules of one IP family. The real one runs iptables-restore; the
// fake records what would run.
type Netfilter interface {
	// EnsureJumps inserts each jump rule unless it is present already.
	EnsureJumps(ctx context.Context, jumps []Jump) error
	// Restore applies iptables-restore --noflush input; the chains it
	// declares are flushed and refilled atomically.
	Restore(ctx context.Context, rules string) error
	// Cleanup deletes the jumps and every chain this mode owns. Missing
	// rules and chains are not an error.
	Cleanup(ctx context.Context, jumps []Jump) error
}

// Iptables runs the iptables (or ip6tables) binaries through Exec (the
// proxy core's executor, which may run them in another network namespace;
// nil runs them here).
type Iptables struct {
	IPv6 bool
	Exec proxy.Executor
}

var _ Netfilter = Iptables{}

func (t Iptables) bin(restore bool) string {
	b := "iptables"
	if t.IPv6 {
		b = "ip6tables"
	}
	if restore {
		b += "-restore"
	}
	return b
}

func (t Iptables) run(ctx context.Context, stdin string, args ...string) error {
	restore := len(args) > 0 && args[0] == "--noflush"
	ex := t.Exec
	if ex == nil {
		ex = proxy.OSExecutor{}
	}
	var in []byte
	if stdin != "" {
		in = []byte(stdin)
	}
	_, err := ex.Run(ctx, in, t.bin(restore), args...)
	return err
}

// EnsureJumps implements Netfilter. The target chains are created first
// (iptables refuses a jump to a missing chain).
func (t Iptables) EnsureJumps(ctx context.Context, jumps []Jump) error {
	if err := t.run(ctx, BuildRules(nil, t.IPv6), "--noflush"); err != nil {
		return err
	}
	for _, j := range jumps {
		check := append([]string{"-w", "-t", j.Table, "-C", j.Chain}, j.Args...)
		if t.run(ctx, "", check...) == nil {
			continue
		}
		ins := append([]string{"-w", "-t", j.Table, "-I", j.Chain, "1"}, j.Args...)
		if j.Target() == ChainNodePortContainer || j.Target() == ChainNodePortHost {
			ins = append([]string{"-w", "-t", j.Table, "-A", j.Chain}, j.Args...)
		}
		if err := t.run(ctx, "", ins...); err != nil {
			return fmt.Errorf("insert jump to %s: %w", j.Target(), err)
		}
	}
	return nil
}

// Restore implements Netfilter.
func (t Iptables) Restore(ctx context.Context, rules string) error {
	return t.run(ctx, rules, "--noflush", "--wait")
}

// Cleanup implements Netfilter.
func (t Iptables) Cleanup(ctx context.Context, jumps []Jump) error {
	for _, j := range jumps {
		del := append([]string{"-w", "-t", j.Table, "-D", j.Chain}, j.Args...)
		for t.run(ctx, "", del...) == nil {
		}
	}
	var firstErr error
	for _, c := range []struct{ table, chain string }{
		{"nat", ChainPortalsContainer}, {"nat", ChainPortalsHost}, {"nat", ChainNodePortContainer},
		{"nat", ChainNodePortHost}, {"filter", ChainReject},
	} {
		if t.run(ctx, "", "-w", "-t", c.table, "-nL", c.chain) != nil {
			continue // absent
		}
		if err := t.run(ctx, "", "-w", "-t", c.table, "-F", c.chain); err != nil && firstErr == nil {
			firstErr = err
		}
		if err := t.run(ctx, "", "-w", "-t", c.table, "-X", c.chain); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// Target returns the chain the jump goes to.
func (j Jump) Target() string {
	for i, a := range j.Args {
		if a == "-j" && i+1 < len(j.Args) {
			return j.Args[i+1]
		}
	}
	return ""
}

// FakeNetfilter records what the proxy would install.
type FakeNetfilter struct {
	mu       sync.Mutex
	Jumps    []Jump
	Rules    string // the last Restore input
	Restores int
	// Err, if set, is returned by the next Restore (then cleared).
	Err error
}

var _ Netfilter = (*FakeNetfilter)(nil)

// EnsureJumps implements Netfilter.
func (f *FakeNetfilter) EnsureJumps(_ context.Context, jumps []Jump) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Jumps = append([]Jump(nil), jumps...)
	return nil
}

// Restore implements Netfilter.
func (f *FakeNetfilter) Restore(_ context.Context, rules string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Err; err != nil {
		f.Err = nil
		return err
	}
	f.Rules = rules
	f.Restores++
	return nil
}

// Cleanup implements Netfilter.
func (f *FakeNetfilter) Cleanup(context.Context, []Jump) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Jumps, f.Rules = nil, ""
	return nil
}

// LastRules returns the last restored rules.
func (f *FakeNetfilter) LastRules() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Rules
}
