package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// NodeCommand returns the command line (program and argv, argv[0] included)
// that runs argv on node `node` of the cluster `svcnet up` runs with
// dataDir: in the mount namespace of the up process (where the node
// namespaces are named) and in the node's network namespace, through
// `nsenter -t <up pid> -m -- ip netns exec <node netns> ...` (ip netns exec
// also mounts the node's /sys, so `ip link` and friends see the node's
// interfaces). Errors name the known nodes.
func NodeCommand(dataDir, node string, argv []string) (string, []string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "cluster.json"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("no cluster under %s (is `svcnet up --data-dir %s` running?)", dataDir, dataDir)
	}
	if err != nil {
		return "", nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return "", nil, fmt.Errorf("parse %s/cluster.json: %w", dataDir, err)
	}
	ns, ok := st.Nodes[node]
	if !ok {
		names := make([]string, 0, len(st.Nodes))
		for n := range st.Nodes {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", nil, fmt.Errorf("node %q not found; the nodes are: %s", node, strings.Join(names, ", "))
	}
	pidb, err := os.ReadFile(filepath.Join(dataDir, "up.pid"))
	if err != nil {
		return "", nil, fmt.Errorf("no svcnet up process for %s: %w", dataDir, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidb)))
	if err != nil || !processAlive(pid) {
		return "", nil, fmt.Errorf("the svcnet up process of %s (pid %s) is not running", dataDir, strings.TrimSpace(string(pidb)))
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return "", nil, err
	}
	if len(argv) == 0 {
		return "", nil, errors.New("no command")
	}
	return nsenter, append([]string{"nsenter", "-t", strconv.Itoa(pid), "-m", "--", "ip", "netns", "exec", ns}, argv...), nil
}
