package userspace

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/reuseport"
)

// listenTCP opens the n listeners of one TCP Service port, all bound to the
// same kernel-chosen port with SO_REUSEPORT: the kernel spreads new
// connections over their accept queues by a hash of the 4-tuple, and each
// has its own event loop, so accepting scales with the CPUs. (The cost is n
// sockets per Service port, hence the cap in Options.AcceptLoops.)
//
// It returns the listening sockets as plain non-blocking descriptors and
// their port. They are opened through net.ListenConfig (Go's choice of
// address family, dual-stack wildcard, SO_REUSEADDR) and then detached
// from Go's poller: the event loops accept on them, and a listener still
// registered there would wake one of Go's threads for every new connection
// for nothing (nobody calls Accept).
func listenTCP(host string, n int) ([]int, int, error) {
	lc := net.ListenConfig{Control: reuseport.Control}
	var fds []int
	port := 0
	fail := func(err error) ([]int, int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, 0, err
	}
	for i := 0; i < n; i++ {
		ln, err := lc.Listen(context.Background(), "tcp", host)
		if err != nil {
			return fail(err)
		}
		fd, err := detach(ln.(*net.TCPListener))
		if err != nil {
			return fail(err)
		}
		fds = append(fds, fd)
		if i == 0 {
			// The others take the port the kernel chose for the first.
			port = ln.Addr().(*net.TCPAddr).Port
			h, _, _ := net.SplitHostPort(host)
			host = net.JoinHostPort(h, strconv.Itoa(port))
		}
	}
	return fds, port, nil
}

// detach returns a descriptor of ln's socket that Go's poller does not
// hold, and closes ln (which removes its own descriptor from the poller;
// the socket stays open, listening, through the new one). The descriptor
// shares ln's file status, so it is non-blocking.
func detach(ln *net.TCPListener) (int, error) {
	raw, err := ln.SyscallConn()
	if err != nil {
		ln.Close()
		return -1, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		derr = err
	}
	ln.Close()
	if derr != nil {
		return -1, fmt.Errorf("duplicate listener descriptor: %w", derr)
	}
	return fd, nil
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
