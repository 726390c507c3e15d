package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The node network through netlink (github.com/vishvananda/netlink), with
// the library's typed errors wrapped; only the named namespaces are made
// with `ip netns add`, which also makes /run/netns a shared mount point so
// that every mount namespace sees the names.

// ipNet is p as the netlink library's address type.
func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

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
		if err := netlink.AddrAdd(br, nlAddr(a)); err != nil && !errors.Is(err, unix.EEXIST) {
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

// nlAddr is p as a netlink address. IPv6 addresses skip duplicate address
// detection (IFA_F_NODAD): svcnet up assigns them, and a tentative address
// would refuse traffic for the first second or so.
func nlAddr(p netip.Prefix) *netlink.Addr {
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}

// addNode attaches the node namespace nsName to the bridge by a veth
// (hostIf here, eth0 there), gives eth0 addrs (one per family), a default
// route of each family via gws and a route to every other node's pod CIDR
// through that node.
func addNode(nsName, hostIf, bridge string, addrs []netip.Prefix, gws []netip.Addr, routes map[netip.Prefix]netip.Addr) error {
	ns, err := netns.GetFromName(nsName)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", nsName, err)
	}
	defer ns.Close()
	br, err := netlink.LinkByName(bridge)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostIf, MasterIndex: br.Attrs().Index},
		PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s: %w", hostIf, err)
	}
	host, err := netlink.LinkByName(hostIf)
	if err != nil {
		return fmt.Errorf("veth %s: %w", hostIf, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("bring %s up: %w", hostIf, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", nsName, err)
	}
	defer h.Close()
	for _, name := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", name, nsName, err)
		}
		if name == "eth0" {
			for _, a := range addrs {
				if err := h.AddrAdd(l, nlAddr(a)); err != nil {
					return fmt.Errorf("address %s on eth0 in %s: %w", a, nsName, err)
				}
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("bring %s up in %s: %w", name, nsName, err)
		}
	}
	for _, gw := range gws {
		if err := h.RouteAdd(&netlink.Route{Gw: gw.AsSlice()}); err != nil {
			return fmt.Errorf("default route via %s in %s: %w", gw, nsName, err)
		}
	}
	for dst, via := range routes {
		if err := h.RouteAdd(&netlink.Route{Dst: ipNet(dst), Gw: via.AsSlice()}); err != nil {
			return fmt.Errorf("route %s via %s in %s: %w", dst, via, nsName, err)
		}
	}
	return nil
}
