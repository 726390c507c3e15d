package proxy

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Executor runs the data-plane programs (iptables-restore, conntrack, nft).
// The real one can prefix every command with `ip netns exec NAME`, which is
// how tests and `svcnet up` run one proxy per node namespace.
type Executor interface {
	// Run runs name with args, feeding stdin if non-nil, and returns stdout.
	// A non-zero exit is an error that includes stderr.
	Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)
}

// OSExecutor runs programs on this host, inside network namespace NetNS
// when it is set.
type OSExecutor struct {
	NetNS string
}

// Run implements Executor.
func (e OSExecutor) Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	argv := append([]string{name}, args...)
	if e.NetNS != "" {
		argv = append([]string{"ip", "netns", "exec", e.NetNS}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
