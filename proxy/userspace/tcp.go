package userspace

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/reuseport"
	"github.com/svcnet/svcnet/proxy/lb"
)

// listenTCP opens the n listeners of one TCP Service port, all bound to the
// same kernel-chosen port with SO_REUSEPORT: the kernel spreads new
// connections over their accept queues by a hash of the 4-tuple, and each
// has its own accept loop, so accepting scales with the CPUs instead of
// queueing behind one goroutine. (The cost is n sockets and goroutines per
// Service port, hence the cap in Options.AcceptLoops.)
func listenTCP(host string, n int) ([]*net.TCPListener, error) {
	lc := net.ListenConfig{KeepAliveConfig: keepAlive, Control: reuseport.Control}
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

func (s *service) serveTCP(ln *net.TCPListener) {
	defer s.wg.Done()
	for {
		c, err := ln.AcceptTCP()
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
	var tried map[*lb.Backend]bool // allocated on the first failure
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
		if tried == nil {
			tried = map[*lb.Backend]bool{}
		}
		tried[be] = true
		lastErr = err
		s.p.log.Debug("endpoint dial failed, trying another", "service", s.cfg().Name, "endpoint", be.ID, "err", err)
	}
	return nil, nil, lastErr
}

// keepAlive is the keep-alive set-up of both sockets of a proxied
// connection: SO_KEEPALIVE with the kernel's timers
// (net.ipv4.tcp_keepalive_time/intvl/probes: probes after 2 h idle by
// default), so that a vanished peer does not pin the other side's socket
// for ever. Go's own default adds three setsockopt calls per socket for
// 15 s timers; a proxy pays that twice per connection.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: -1, Interval: -1, Count: -1}

// dialers holds one net.Dialer per connect timeout, so a new connection
// costs no dialer.
var dialers sync.Map // time.Duration -> *net.Dialer

// dialEndpoint connects to addr. It dials the address as a string rather
// than through DialTCP(netip.AddrPort): DialTCP turns the zero local
// address into 0.0.0.0:0 and binds it, and a bind per connection costs a
// system call and takes the local port through bind's exclusive port
// search instead of connect's 4-tuple one. An IP literal never reaches DNS.
func dialEndpoint(addr netip.AddrPort, timeout time.Duration) (*net.TCPConn, error) {
	d, ok := dialers.Load(timeout)
	if !ok {
		d, _ = dialers.LoadOrStore(timeout, &net.Dialer{Timeout: timeout, KeepAliveConfig: keepAlive})
	}
	c, err := d.(*net.Dialer).DialContext(context.Background(), "tcp", addr.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// copyBufSize is the size of the pooled buffers of copyConn. It is also the
// switch to splice(2): a read that fills the buffer means a bulk transfer.
const copyBufSize = 16 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyConn copies src to dst until src's EOF (nil) or an error. Small
// exchanges, the common case of request/response protocols, are moved
// with read(2) and write(2) through a pooled buffer: for a few hundred
// bytes that is cheaper than splice, which needs a pipe and two splice
// calls per chunk. Once a read fills the buffer the rest goes through
// (*net.TCPConn).ReadFrom, which uses splice(2) for a *net.TCPConn source,
// so bulk payload never enters user space.
func copyConn(dst, src *net.TCPConn) error {
	bp := copyBufs.Get().(*[]byte)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				copyBufs.Put(bp)
				return werr
			}
		}
		if err != nil {
			copyBufs.Put(bp)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if n == len(buf) {
			copyBufs.Put(bp)
			_, err := dst.ReadFrom(src)
			return err
		}
	}
}

// splice copies both directions until both are done (copyConn: small
// exchanges by read/write, bulk by splice(2)). A clean EOF is passed on as
// a half-close, except by the direction that ends last: both receive
// queues are then drained to EOF, so closing both sockets sends the same
// FINs as shutdown(2) would, one system call cheaper. An error in either
// direction tears both connections down.
func splice(a, b *net.TCPConn) {
	var ended atomic.Int32
	finish := func(dst *net.TCPConn, err error) {
		if err == nil && ended.Add(1) == 1 {
			_ = dst.CloseWrite()
			return
		}
		a.Close()
		b.Close()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		finish(b, copyConn(b, a))
	}()
	finish(a, copyConn(a, b))
	<-done
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
