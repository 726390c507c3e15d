package proxy

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/svcnet/svcnet/internal/testbed"
)

// TestLocalAddrs reads a throwaway namespace's links over rtnetlink.
func TestLocalAddrs(t *testing.T) {
	testbed.RequireRoot(t)
	ns := testbed.NewNetNS(t, "laddr")
	ns.MustRun("ip", "link", "add", "cni0", "type", "bridge")
	ns.MustRun("ip", "addr", "add", "10.244.1.1/24", "dev", "cni0")
	ns.MustRun("ip", "addr", "add", "fd00:10:244:1::1/64", "dev", "cni0", "nodad")
	got, err := ModeConfig{Exec: OSExecutor{NetNS: ns.Name}}.ListLocalAddrs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []LinkAddr{
		{"lo", netip.MustParseAddr("127.0.0.1")},
		{"cni0", netip.MustParseAddr("10.244.1.1")},
		{"cni0", netip.MustParseAddr("fd00:10:244:1::1")},
	} {
		if !slices.Contains(got, want) {
			t.Errorf("%v lacks %v", got, want)
		}
	}
	// A lister in the config replaces the kernel.
	fixed := []LinkAddr{{"eth0", netip.MustParseAddr("192.0.2.1")}}
	got, _ = ModeConfig{LocalAddrs: func(context.Context) ([]LinkAddr, error) { return fixed, nil }}.ListLocalAddrs(context.Background())
	if !slices.Equal(got, fixed) {
		t.Errorf("configured lister ignored: %v", got)
	}
}
