package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"

	"github.com/svcnet/svcnet/node/agent"
	"github.com/svcnet/svcnet/node/sandbox"
)

func init() {
	register(command{
		name:  "exec",
		short: "run a command in a pod on this machine: svcnet exec POD -- CMD [ARGS...]",
		run:   runExec,
	})
}

// runExec is the direct path into a pod: it finds the pod's sandbox under
// the data dir (any node's, for `svcnet up`), and runs the command with
// nsenter in the pod's network, UTS and mount namespaces, with the
// container's environment.
func runExec(ctx context.Context, args []string) error {
	fl := newFlagSet("exec")
	dataDir := fl.String("data-dir", "/var/lib/svcnet", "data dir of the node agent or of `svcnet up` (searched for the pod)")
	ns := fl.StringP("namespace", "n", "default", "pod namespace")
	container := fl.StringP("container", "c", "", "container whose environment to use (default: the first)")
	wd := fl.String("workdir", "/", "working directory")
	if err := fl.Parse(args); err != nil {
		return err
	}
	rest := fl.Args()
	if len(rest) < 2 {
		return errors.New("usage: svcnet exec [-n NAMESPACE] [-c CONTAINER] POD -- CMD [ARGS...]")
	}
	pod, cmdArgs := rest[0], rest[1:]
	var found []string
	want := *ns + "_" + pod
	_ = filepath.WalkDir(*dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == want && filepath.Base(filepath.Dir(p)) == "pods" {
			if _, err := os.Stat(filepath.Join(p, "sandbox.json")); err == nil {
				found = append(found, p)
			}
			return filepath.SkipDir
		}
		return nil
	})
	if len(found) == 0 {
		return fmt.Errorf("pod %s/%s is not running under %s", *ns, pod, *dataDir)
	}
	sb, err := sandbox.Load(found[0])
	if err != nil {
		return err
	}
	c := *container
	if c == "" {
		entries, _ := os.ReadDir(filepath.Join(sb.Dir, "env"))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		if len(names) > 0 {
			c = names[0]
		}
	}
	cmd := sb.Command(cmdArgs, agent.ContainerEnv(sb.Dir, c), *wd)
	cmd.SysProcAttr = nil // stay in the terminal's process group
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.ExitCode())
	}
	return err
}
