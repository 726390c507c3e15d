package proxy

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netwire"
)

// LinkAddr is an address configured on one of the node's links.
type LinkAddr struct {
	Link string
	Addr netip.Addr
}

// LocalAddrs lists the addresses of every link of the network namespace
// netNS ("" is the caller's) over rtnetlink: what kube-proxy reads from the
// node's interfaces to decide where NodePorts listen.
func LocalAddrs(netNS string) ([]LinkAddr, error) {
	h, err := netwire.HandleIn(netNS, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("list local addresses: %w", err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	names := make(map[int]string, len(links))
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list local addresses: %w", err)
	}
	out := make([]LinkAddr, 0, len(addrs))
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, LinkAddr{Link: names[a.LinkIndex], Addr: ip.Unmap()})
		}
	}
	return out, nil
}

// ListLocalAddrs returns the node's addresses: c.LocalAddrs when set,
// else LocalAddrs in the namespace c.Exec runs in.
func (c ModeConfig) ListLocalAddrs(ctx context.Context) ([]LinkAddr, error) {
	if c.LocalAddrs != nil {
		return c.LocalAddrs(ctx)
	}
	ns := ""
	if e, ok := c.Exec.(OSExecutor); ok {
		ns = e.NetNS
	}
	return LocalAddrs(ns)
}
