package userspace

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/proxy/lb"
)

func (s *service) serveTCP() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptTCP()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: back off briefly rather than spin.
			s.p.log.Warn("accept failed", "service", s.cfg().Name, "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go s.handleTCP(c)
	}
}

func (s *service) handleTCP(in *net.TCPConn) {
	client := addrPortOf(in.RemoteAddr()).Addr()
	var dst netip.Addr
	if s.set.Load().sched.Name() == lb.DestinationHashing {
		dst = originalDst(in)
	}
	if !dst.IsValid() {
		if c := s.cfg(); len(c.Addrs) > 0 {
			dst = c.Addrs[0]
		}
	}
	out, be, err := s.dialTCP(client, dst)
	if err != nil {
		// Reset rather than FIN: the client learns at once that nothing
		// answered, as it would from a REJECT.
		_ = in.SetLinger(0)
		in.Close()
		s.p.log.Debug("no endpoint answered", "service", s.cfg().Name, "client", client, "err", err)
		return
	}
	defer be.Release()
	splice(in, out)
}

// dialTCP connects to an endpoint, trying another one (never the same
// twice) after each failure, once per entry of DialTimeouts. The chosen
// backend's connection count has been acquired when it returns.
func (s *service) dialTCP(client, dst netip.Addr) (*net.TCPConn, *lb.Backend, error) {
	tried := map[*lb.Backend]bool{}
	var lastErr error = errors.New("service has no endpoints")
	for _, timeout := range s.p.opt.DialTimeouts {
		be := s.pick(client, dst, tried)
		if be == nil {
			break
		}
		be.Acquire()
		c, err := dialEndpoint(be.Addr, timeout)
		if err == nil {
			return c, be, nil
		}
		be.Release()
		tried[be] = true
		lastErr = err
		s.p.log.Debug("endpoint dial failed, trying another", "service", s.cfg().Name, "endpoint", be.ID, "err", err)
	}
	return nil, nil, lastErr
}

// dialers holds one net.Dialer per connect timeout, so a new connection
// costs no dialer, and DialTCP takes the endpoint's netip.AddrPort as it is
// (no formatting and parsing of an address string per connection). Go's
// dialer enables TCP keep-alive, as before.
var dialers sync.Map // time.Duration -> *net.Dialer

func dialEndpoint(addr netip.AddrPort, timeout time.Duration) (*net.TCPConn, error) {
	d, ok := dialers.Load(timeout)
	if !ok {
		d, _ = dialers.LoadOrStore(timeout, &net.Dialer{Timeout: timeout})
	}
	return d.(*net.Dialer).DialTCP(context.Background(), "tcp", netip.AddrPort{}, addr)
}

// splice copies both directions until both are done. (*net.TCPConn).ReadFrom
// with a *net.TCPConn source uses splice(2) on Linux, so payload bytes never
// enter user space. A clean EOF is passed on as a half-close; an error in
// either direction tears both connections down.
func splice(a, b *net.TCPConn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := b.ReadFrom(a); err != nil {
			a.Close()
			b.Close()
			return
		}
		_ = b.CloseWrite()
	}()
	if _, err := a.ReadFrom(b); err != nil {
		a.Close()
		b.Close()
	} else {
		_ = a.CloseWrite()
	}
	<-done
	a.Close()
	b.Close()
}

// originalDst returns the destination the client connected to before the
// REDIRECT (SO_ORIGINAL_DST), or the zero Addr if it cannot be known.
func originalDst(c *net.TCPConn) netip.Addr {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.Addr{}
	}
	var out netip.Addr
	_ = raw.Control(func(fd uintptr) {
		if m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST); err == nil {
			// struct sockaddr_in: family, port, 4-byte address.
			if binary.NativeEndian.Uint16(m.Multiaddr[0:2]) == unix.AF_INET {
				out = netip.AddrFrom4([4]byte(m.Multiaddr[4:8]))
				return
			}
		}
		// IP6T_SO_ORIGINAL_DST has the same value, 80, at SOL_IPV6.
		if m, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.SOL_IPV6, unix.SO_ORIGINAL_DST); err == nil {
			out = netip.AddrFrom16(m.Addr.Addr).Unmap()
		}
	})
	return out
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
