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

// addBridge creates the node bridge with addr and brings it and lo up.
func addBridge(name string, addr netip.Prefix) error {
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		return fmt.Errorf("create bridge %s: %w", name, err)
	}
	br, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", name, err)
	}
	if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: ipNet(addr)}); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("address %s on %s: %w", addr, name, err)
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
// (hostIf here, eth0 there), gives eth0 addr, a default route via gw and a
// route to every other node's pod CIDR through that node.
func addNode(nsName, hostIf, bridge string, addr netip.Prefix, gw netip.Addr, routes map[netip.Prefix]netip.Addr) error {
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
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(addr)}); err != nil {
				return fmt.Errorf("address %s on eth0 in %s: %w", addr, nsName, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("bring %s up in %s: %w", name, nsName, err)
		}
	}
	if err := h.RouteAdd(&netlink.Route{Gw: gw.AsSlice()}); err != nil {
		return fmt.Errorf("default route via %s in %s: %w", gw, nsName, err)
	}
	for dst, via := range routes {
		if err := h.RouteAdd(&netlink.Route{Dst: ipNet(dst), Gw: via.AsSlice()}); err != nil {
			return fmt.Errorf("route %s via %s in %s: %w", dst, via, nsName, err)
		}
	}
	return nil
}
