// Command svcnet is the single binary of the svcnet project: the API server,
// the controllers, cluster DNS, the service proxy, the node agent, and `up`,
// which wires them into a local multi-node cluster.
//
// Each subcommand lives in its own file and registers itself in init with
// register, so that adding one never touches this file.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/spf13/pflag"
)

// command is one svcnet subcommand.
type command struct {
	name  string
	short string
	// run parses args (everything after the subcommand name) and runs until
	// ctx is cancelled or the work is done.
	run func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("svcnet: duplicate subcommand " + c.name)
	}
	commands[c.name] = c
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: svcnet <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-12s %s\n", n, commands[n].short)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'svcnet <command> --help' for a command's flags.\n")
}

func main() {
	// Linked as kubectl (scripts/install.sh does so on a machine without
	// one), the binary is kubectl.
	if filepath.Base(os.Args[0]) == "kubectl" {
		os.Args = append([]string{"svcnet", "kubectl"}, os.Args[1:]...)
	}
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "svcnet: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.run(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "svcnet %s: %v\n", c.name, err)
		os.Exit(1)
	}
}

// newFlagSet returns a flag set for a subcommand that reports errors instead
// of exiting, so that run functions stay testable.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("svcnet "+name, pflag.ContinueOnError)
	fs.SortFlags = false
	return fs
}
