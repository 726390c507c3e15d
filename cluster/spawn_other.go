//go:build !linux

package cluster

import "os/exec"

// startLocked starts cmd. Only Linux has a parent-death signal; elsewhere
// the guard alone removes the cluster of an up that died.
func startLocked(cmd *exec.Cmd) error { return cmd.Start() }
