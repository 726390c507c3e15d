package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netwire"
)

// LinkInterface manages kube-ipvs0 over rtnetlink in one network
// namespace: binding N Service addresses is N netlink requests on one
// socket, not N `ip` processes (the cost of a first sync at 10k Services).
type LinkInterface struct {
	h    *netlink.Handle
	name string
	link netlink.Link // found or created by Ensure
}

// NewLinkInterface opens an rtnetlink handle in the named network
// namespace ("" is the proxy's own) for the device name.
func NewLinkInterface(netNS, name string) (*LinkInterface, error) {
	h, err := netwire.HandleIn(netNS, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("kube-ipvs0: %w", err)
	}
	return &LinkInterface{h: h, name: name}, nil
}

// Close releases the netlink socket.
func (l *LinkInterface) Close() { l.h.Close() }

// Ensure implements Interface. The kernel may lack the dummy driver: then a
// bridge without ports is used, whose addresses are local all the same.
func (l *LinkInterface) Ensure(context.Context) error {
	link, err := l.h.LinkByName(l.name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return fmt.Errorf("find %s: %w", l.name, err)
		}
		attrs := netlink.LinkAttrs{Name: l.name}
		derr := l.h.LinkAdd(&netlink.Dummy{LinkAttrs: attrs})
		if derr != nil {
			if berr := l.h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); berr != nil {
				return fmt.Errorf("create %s: %w", l.name, errors.Join(derr, berr))
			}
		}
		if link, err = l.h.LinkByName(l.name); err != nil {
			return fmt.Errorf("find %s after creating it: %w", l.name, err)
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := l.h.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", l.name, err)
		}
	}
	l.link = link
	return nil
}

// Addrs implements Interface (link-local addresses left out).
func (l *LinkInterface) Addrs(_ context.Context, ipv6 bool) ([]netip.Addr, error) {
	if l.link == nil {
		return nil, fmt.Errorf("%s: not ensured", l.name)
	}
	fam := netlink.FAMILY_V4
	if ipv6 {
		fam = netlink.FAMILY_V6
	}
	list, err := l.h.AddrList(l.link, fam)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", l.name, err)
	}
	out := make([]netip.Addr, 0, len(list))
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && !ip.Unmap().IsLinkLocalUnicast() {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// Add implements Interface. IPv6 addresses skip duplicate address
// detection (netwire.Addr): on the bridge stand-in they would otherwise be
// tentative, refusing traffic, for a second or so.
func (l *LinkInterface) Add(_ context.Context, a netip.Addr) error {
	if l.link == nil {
		return fmt.Errorf("%s: not ensured", l.name)
	}
	return l.h.AddrReplace(l.link, netwire.Addr(netip.PrefixFrom(a, a.BitLen())))
}

// Del implements Interface; an address already gone is not an error.
func (l *LinkInterface) Del(_ context.Context, a netip.Addr) error {
	if l.link == nil {
		return fmt.Errorf("%s: not ensured", l.name)
	}
	if err := l.h.AddrDel(l.link, netwire.Addr(netip.PrefixFrom(a, a.BitLen()))); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return err
	}
	return nil
}

// Delete implements Interface; a missing device is not an error.
func (l *LinkInterface) Delete(context.Context) error {
	l.link = nil
	link, err := l.h.LinkByName(l.name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return err
	}
	return l.h.LinkDel(link)
}
