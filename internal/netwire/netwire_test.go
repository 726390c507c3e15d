package netwire

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/testbed"
)

// A namespace wired to a bridge of another has its addresses (IPv6 not
// tentative), default routes and extra routes, and reaches the bridge over
// both families; wiring it twice fails naming the veth.
func TestWire(t *testing.T) {
	testbed.RequireCommand(t, "ping")
	host := testbed.NewNetNS(t, "netwire-host")
	pod := testbed.NewNetNS(t, "netwire-pod")
	host.MustRun("ip", "link", "add", "br0", "type", "bridge")
	host.MustRun("ip", "addr", "add", "10.1.0.1/24", "dev", "br0")
	host.MustRun("ip", "addr", "add", "fd00:1::1/64", "dev", "br0", "nodad")
	host.MustRun("ip", "link", "set", "br0", "up")
	a := Attach{NetNS: pod.Name, HostIf: "vpod", Bridge: "br0",
		Addrs:    []netip.Prefix{netip.MustParsePrefix("10.1.0.2/24"), netip.MustParsePrefix("fd00:1::2/64")},
		Gateways: []netip.Addr{netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("fd00:1::1")},
		Routes:   map[netip.Prefix]netip.Addr{netip.MustParsePrefix("10.9.0.0/24"): netip.MustParseAddr("10.1.0.3")}}
	if err := host.Do(func() error { return Wire(a) }); err != nil {
		t.Fatal(err)
	}
	addrs := pod.MustRun("ip", "-o", "addr", "show", "dev", "eth0")
	for _, want := range []string{"inet 10.1.0.2/24", "inet6 fd00:1::2/64"} {
		if !strings.Contains(addrs, want) {
			t.Errorf("eth0 lacks %s:\n%s", want, addrs)
		}
	}
	for _, l := range strings.Split(addrs, "\n") {
		if strings.Contains(l, "fd00:1::2/64") && (strings.Contains(l, "tentative") || !strings.Contains(l, "nodad")) {
			t.Errorf("duplicate address detection not skipped: %s", l)
		}
	}
	routes := pod.MustRun("ip", "route") + pod.MustRun("ip", "-6", "route")
	for _, want := range []string{"default via 10.1.0.1 dev eth0", "10.9.0.0/24 via 10.1.0.3 dev eth0", "default via fd00:1::1 dev eth0"} {
		if !strings.Contains(routes, want) {
			t.Errorf("no route %q:\n%s", want, routes)
		}
	}
	if lo := pod.MustRun("ip", "-o", "link", "show", "lo"); !strings.Contains(lo, "LOOPBACK,UP") {
		t.Errorf("lo not up: %s", lo)
	}
	if l := host.MustRun("ip", "-o", "link", "show", "vpod"); !strings.Contains(l, "master br0") || !strings.Contains(l, ",UP") {
		t.Errorf("vpod not up on br0: %s", l)
	}
	pod.MustRun("ping", "-c", "1", "-W", "5", "10.1.0.1")
	pod.MustRun("ping", "-6", "-c", "1", "-W", "5", "fd00:1::1")
	err := host.Do(func() error { return Wire(a) })
	if err == nil || !strings.Contains(err.Error(), "create veth vpod") {
		t.Errorf("wiring twice: %v", err)
	}
}
