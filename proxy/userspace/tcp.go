package userspace

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/reuseport"
)

// listenTCP opens the n listeners of one TCP Service port, all bound to the
// same kernel-chosen port with SO_REUSEPORT: the kernel spreads new
// connections over their accept queues by a hash of the 4-tuple, and each
// has its own accept loop, so accepting scales with the CPUs instead of
// queueing behind one goroutine. (The cost is n sockets and goroutines per
// Service port, hence the cap in Options.AcceptLoops.)
func listenTCP(host string, n int) ([]*net.TCPListener, error) {
	lc := net.ListenConfig{Control: reuseport.Control}
	var lns []*net.TCPListener
	for i := 0; i < n; i++ {
		ln, err := lc.Listen(context.Background(), "tcp", host)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, err
		}
		lns = append(lns, ln.(*net.TCPListener))
		if i == 0 {
			// The others take the port the kernel chose for the first.
			h, _, _ := net.SplitHostPort(host)
			host = net.JoinHostPort(h, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		}
	}
	return lns, nil
}

// originalDstFD returns the destination the client connected to before
// the REDIRECT (SO_ORIGINAL_DST), or the zero Addr if it cannot be known.
func originalDstFD(fd int) netip.Addr {
	if m, err := unix.GetsockoptIPv6Mreq(fd, unix.SOL_IP, unix.SO_ORIGINAL_DST); err == nil {
		// struct sockaddr_in: family, port, 4-byte address.
		if binary.NativeEndian.Uint16(m.Multiaddr[0:2]) == unix.AF_INET {
			return netip.AddrFrom4([4]byte(m.Multiaddr[4:8]))
		}
	}
	// IP6T_SO_ORIGINAL_DST has the same value, 80, at SOL_IPV6.
	if m, err := unix.GetsockoptIPv6MTUInfo(fd, unix.SOL_IPV6, unix.SO_ORIGINAL_DST); err == nil {
		return netip.AddrFrom16(m.Addr.Addr).Unmap()
	}
	return netip.Addr{}
}

func addrPortOf(a net.Addr) netip.AddrPort {
	switch v := a.(type) {
	case *net.TCPAddr:
		ap := v.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	case *net.UDPAddr:
		ap := v.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}
