// Package reuseport opens several sockets on one address with SO_REUSEPORT,
// so that the kernel spreads new connections (TCP) or datagrams (UDP) over
// them and each can be served by its own goroutine without shared locks.
// The DNS server's UDP readers and the userspace proxy's accept loops use
// it.
package reuseport

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Control sets SO_REUSEPORT on a socket before it is bound; use it as a
// net.ListenConfig's Control.
func Control(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// ListenUDP opens n UDP sockets on addr; when addr has port 0 the others
// join the port the kernel chose for the first. On error none stay open.
func ListenUDP(addr string, n int) ([]*net.UDPConn, error) {
	lc := net.ListenConfig{Control: Control}
	var out []*net.UDPConn
	for i := 0; i < n; i++ {
		pc, err := lc.ListenPacket(context.Background(), "udp", addr)
		if err != nil {
			for _, c := range out {
				c.Close()
			}
			return nil, err
		}
		out = append(out, pc.(*net.UDPConn))
		addr = pc.LocalAddr().String()
	}
	return out, nil
}
