package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"github.com/svcnet/svcnet/cluster"
)

func init() {
	register(command{
		name:  "node-exec",
		short: "run a command on a node of `svcnet up` (its network namespace): svcnet node-exec NODE [-- CMD ARGS...]; a shell without CMD",
		run:   runNodeExec,
	})
}

// runNodeExec replaces itself with the command on the node, so that the
// terminal, signals and the exit code are the command's own.
func runNodeExec(ctx context.Context, args []string) error {
	fl := newFlagSet("node-exec")
	dataDir := fl.String("data-dir", "/var/lib/svcnet/cluster", "data dir of the running `svcnet up`")
	if err := fl.Parse(args); err != nil {
		return err
	}
	rest := fl.Args()
	if len(rest) < 1 {
		return errors.New("usage: svcnet node-exec [--data-dir DIR] NODE [-- CMD [ARGS...]]")
	}
	node, argv := rest[0], rest[1:]
	if len(argv) == 0 {
		sh := os.Getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		argv = []string{sh}
	}
	abs, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	path, full, err := cluster.NodeCommand(abs, node, argv)
	if err != nil {
		return err
	}
	return syscall.Exec(path, full, append(os.Environ(), "SVCNET_NODE="+node))
}
