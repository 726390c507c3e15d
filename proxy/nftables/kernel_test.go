package nftables

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

// TestKernelScenarios runs the shared real-kernel behaviour scenarios (two
// node namespaces, pods, real nft inside each node) against nftables mode.
func TestKernelScenarios(t *testing.T) {
	testbed.RequireCommand(t, "nft")
	proxytest.RunKernelScenarios(t, func(_ *proxytest.Node, cfg proxy.ModeConfig) (proxy.Provider, error) {
		return NewModeWithServiceCIDRs(cfg, []netip.Prefix{proxytest.ServiceCIDR}, nil)
	})
}
