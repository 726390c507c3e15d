package cluster

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netwire"
)

// The node network through netlink (github.com/vishvananda/netlink), with
// the library's typed errors wrapped; the node namespaces are wired as the
// node agent wires its pods' (internal/netwire).

// addBridge creates the node bridge with addrs (one per family) and brings
// it and lo up.
func addBridge(name string, addrs ...netip.Prefix) error {
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		return fmt.Errorf("create bridge %s: %w", name, err)
	}
	br, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", name, err)
	}
	for _, a := range addrs {
		if err := netlink.AddrAdd(br, netwire.Addr(a)); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("address %s on %s: %w", a, name, err)
		}
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// addNode attaches the node namespace nsName to the bridge by a veth
// (hostIf here, eth0 there), gives eth0 addrs (one per family), a default
// route of each family via gws and a route to every other node's pod CIDR
// through that node.
func addNode(nsName, hostIf, bridge string, addrs []netip.Prefix, gws []netip.Addr, routes map[netip.Prefix]netip.Addr) error {
	return netwire.Wire(netwire.Attach{NetNS: nsName, HostIf: hostIf, Bridge: bridge, Addrs: addrs, Gateways: gws, Routes: routes})
}
