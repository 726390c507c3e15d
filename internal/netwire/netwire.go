// Package netwire attaches a named network namespace to a bridge of the
// current namespace by a veth pair, through netlink
// (github.com/vishvananda/netlink): the one wiring behind a node namespace
// of `svcnet up` (cluster) and a pod namespace of the node agent
// (node/sandbox). The namespace itself is made with `ip netns add` by the
// caller, which also makes /run/netns a shared mount point, so that every
// mount namespace sees the name.
package netwire

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// IPNet is p as the netlink library's address type.
func IPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Addr is p as a netlink address. IPv6 addresses skip duplicate address
// detection (IFA_F_NODAD): svcnet assigns every address it adds (svcnet up
// the nodes', the node's IPAM the pods'), and a tentative address would
// refuse traffic for the first second or so.
func Addr(p netip.Prefix) *netlink.Addr {
	a := &netlink.Addr{IPNet: IPNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}

// Attach is one namespace's link to the bridge.
type Attach struct {
	// NetNS is the named namespace (under /run/netns) to wire.
	NetNS string
	// HostIf names the veth end that stays here, on Bridge; the other end
	// is eth0 in NetNS.
	HostIf, Bridge string
	// Addrs go on eth0 (one per family).
	Addrs []netip.Prefix
	// Gateways get a default route each (one per family), through eth0.
	Gateways []netip.Addr
	// Routes are more routes inside: destination to gateway.
	Routes map[netip.Prefix]netip.Addr
}

// Wire creates the veth pair of a, brings both ends and the namespace's lo
// up and adds the addresses and routes inside. Errors name the step and
// the namespace; what was made before an error stays (deleting the
// namespace removes it).
func Wire(a Attach) error {
	ns, err := netns.GetFromName(a.NetNS)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", a.NetNS, err)
	}
	defer ns.Close()
	br, err := netlink.LinkByName(a.Bridge)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", a.Bridge, err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a.HostIf, MasterIndex: br.Attrs().Index},
		PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s: %w", a.HostIf, err)
	}
	host, err := netlink.LinkByName(a.HostIf)
	if err != nil {
		return fmt.Errorf("veth %s: %w", a.HostIf, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("bring %s up: %w", a.HostIf, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", a.NetNS, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo in %s: %w", a.NetNS, err)
	}
	eth0, err := h.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("eth0 in %s: %w", a.NetNS, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bring lo up in %s: %w", a.NetNS, err)
	}
	for _, p := range a.Addrs {
		if err := h.AddrAdd(eth0, Addr(p)); err != nil {
			return fmt.Errorf("address %s on eth0 in %s: %w", p, a.NetNS, err)
		}
	}
	if err := h.LinkSetUp(eth0); err != nil {
		return fmt.Errorf("bring eth0 up in %s: %w", a.NetNS, err)
	}
	for _, gw := range a.Gateways {
		if err := h.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
			return fmt.Errorf("default route via %s in %s: %w", gw, a.NetNS, err)
		}
	}
	for dst, via := range a.Routes {
		if err := h.RouteAdd(&netlink.Route{Dst: IPNet(dst), Gw: via.AsSlice()}); err != nil {
			return fmt.Errorf("route %s via %s in %s: %w", dst, via, a.NetNS, err)
		}
	}
	return nil
}

// HandleIn opens a netlink handle for the given netlink families (none:
// every family the library supports) in the named network namespace, ""
// being the caller's own. The caller closes it.
func HandleIn(netNS string, families ...int) (*netlink.Handle, error) {
	if netNS == "" {
		h, err := netlink.NewHandle(families...)
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		return h, nil
	}
	ns, err := netns.GetFromName(netNS)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", netNS, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, families...)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", netNS, err)
	}
	return h, nil
}
