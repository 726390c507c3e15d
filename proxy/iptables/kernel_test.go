package iptables

import (
	"testing"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

// TestKernelScenarios runs the shared real-packet scenarios with the
// iptables mode on every node of a namespace cluster.
func TestKernelScenarios(t *testing.T) {
	t.Parallel()
	testbed.RequireCommand(t, "iptables-restore")
	proxytest.RunKernelScenarios(t, func(_ *proxytest.Node, cfg proxy.ModeConfig) (proxy.Provider, error) {
		return New(cfg, &Runner{Exec: cfg.Exec}), nil
	})
}

// TestKernelScenariosTree runs the same scenarios with
// --iptables-dispatch=tree.
func TestKernelScenariosTree(t *testing.T) {
	t.Parallel()
	testbed.RequireCommand(t, "iptables-restore")
	proxytest.RunKernelScenarios(t, func(_ *proxytest.Node, cfg proxy.ModeConfig) (proxy.Provider, error) {
		cfg.IPTablesDispatch = string(DispatchTree)
		return New(cfg, &Runner{Exec: cfg.Exec}), nil
	})
}
