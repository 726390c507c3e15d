package userspace

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/svcnet/svcnet/proxy/lb"
)

// udpSock is one UDP socket of a listener. It learns the local address each
// datagram arrived at (IP_PKTINFO) and answers from that same address: after
// a REDIRECT the client's conntrack entry expects the reply from exactly the
// address the packet was redirected to, which for traffic from the node
// itself (redirected to 127.0.0.1) is not the address the kernel would pick.
type udpSock struct {
	conn *net.UDPConn
	p4   *ipv4.PacketConn
	p6   *ipv6.PacketConn
}

func (u *udpSock) read(b []byte) (int, netip.AddrPort, netip.Addr, error) {
	if u.p4 != nil {
		n, cm, src, err := u.p4.ReadFrom(b)
		if err != nil {
			return 0, netip.AddrPort{}, netip.Addr{}, err
		}
		var local netip.Addr
		if cm != nil {
			local, _ = netip.AddrFromSlice(cm.Dst.To4())
		}
		return n, addrPortOf(src), local, nil
	}
	n, cm, src, err := u.p6.ReadFrom(b)
	if err != nil {
		return 0, netip.AddrPort{}, netip.Addr{}, err
	}
	var local netip.Addr
	if cm != nil {
		local, _ = netip.AddrFromSlice(cm.Dst)
		local = local.Unmap()
	}
	return n, addrPortOf(src), local, nil
}

func (u *udpSock) write(b []byte, to netip.AddrPort, from netip.Addr) error {
	dst := net.UDPAddrFromAddrPort(to)
	if u.p4 != nil {
		var cm *ipv4.ControlMessage
		if from.IsValid() {
			cm = &ipv4.ControlMessage{Src: from.AsSlice()}
		}
		_, err := u.p4.WriteTo(b, cm, dst)
		return err
	}
	var cm *ipv6.ControlMessage
	if from.IsValid() {
		cm = &ipv6.ControlMessage{Src: from.AsSlice()}
	}
	_, err := u.p6.WriteTo(b, cm, dst)
	return err
}

// udpListener is the UDP side of a Service port: an IPv4 socket and, where
// the host has IPv6, an IPv6-only socket on the same port number, so one
// port serves both families' redirect rules.
type udpListener struct {
	port  int
	socks []*udpSock
}

func (l *udpListener) close() {
	for _, s := range l.socks {
		s.conn.Close()
	}
}

func listenUDP(host string) (*udpListener, error) {
	if host != "" {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return nil, fmt.Errorf("listen host %q: %w", host, err)
		}
		s, err := openUDP(a, 0)
		if err != nil {
			return nil, err
		}
		return &udpListener{port: s.conn.LocalAddr().(*net.UDPAddr).Port, socks: []*udpSock{s}}, nil
	}
	var lastErr error
	for attempt := 0; attempt < 8; attempt++ {
		s4, err := openUDP(netip.IPv4Unspecified(), 0)
		if err != nil {
			return nil, err
		}
		port := s4.conn.LocalAddr().(*net.UDPAddr).Port
		s6, err := openUDP(netip.IPv6Unspecified(), port)
		if err == nil {
			return &udpListener{port: port, socks: []*udpSock{s4, s6}}, nil
		}
		s4.conn.Close()
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			// No IPv6 on this host: serve IPv4 only.
			s4, err = openUDP(netip.IPv4Unspecified(), 0)
			if err != nil {
				return nil, err
			}
			return &udpListener{port: s4.conn.LocalAddr().(*net.UDPAddr).Port, socks: []*udpSock{s4}}, nil
		}
	}
	return nil, fmt.Errorf("no UDP port free in both families: %w", lastErr)
}

var errAddrInUse = errors.New("address in use")

func openUDP(a netip.Addr, port int) (*udpSock, error) {
	network := "udp4"
	if a.Is6() {
		network = "udp6" // Go sets IPV6_V6ONLY for udp6
	}
	c, err := net.ListenPacket(network, net.JoinHostPort(a.String(), strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%w: %v", errAddrInUse, err)
		}
		return nil, err
	}
	uc := c.(*net.UDPConn)
	s := &udpSock{conn: uc}
	if a.Is6() {
		s.p6 = ipv6.NewPacketConn(uc)
		if err := s.p6.SetControlMessage(ipv6.FlagDst, true); err != nil {
			uc.Close()
			return nil, fmt.Errorf("IPV6_RECVPKTINFO: %w", err)
		}
	} else {
		s.p4 = ipv4.NewPacketConn(uc)
		if err := s.p4.SetControlMessage(ipv4.FlagDst, true); err != nil {
			uc.Close()
			return nil, fmt.Errorf("IP_PKTINFO: %w", err)
		}
	}
	return s, nil
}

// udpSession is one client's flow to one endpoint: a connected socket to
// the endpoint and a goroutine relaying its replies.
type udpSession struct {
	backend *lb.Backend
	conn    *net.UDPConn
	lastNs  atomic.Int64 // last datagram either way
	// askedNs and answeredNs are the last client datagram and the last
	// reply: a session whose client spoke after the last reply awaits one.
	askedNs, answeredNs atomic.Int64
	once                sync.Once
}

// udpReplyWait is how long a session whose client's last datagram has no
// reply yet is kept, however short the idle timeout: the reply of a busy
// server (a DNS answer on a loaded node) still reaches the client. It is
// the resolvers' default timeout, after which they ask again.
const udpReplyWait = 5 * time.Second

func (u *udpSession) asked() {
	now := time.Now().UnixNano()
	u.lastNs.Store(now)
	u.askedNs.Store(now)
}

func (u *udpSession) answered() {
	now := time.Now().UnixNano()
	u.lastNs.Store(now)
	u.answeredNs.Store(now)
}

func (u *udpSession) idle() time.Duration { return time.Since(time.Unix(0, u.lastNs.Load())) }

// awaiting is how long the client's unanswered datagram has waited, and
// whether there is one.
func (u *udpSession) awaiting() (time.Duration, bool) {
	asked := u.askedNs.Load()
	if asked <= u.answeredNs.Load() {
		return 0, false
	}
	return time.Since(time.Unix(0, asked)), true
}

func (u *udpSession) close() { u.once.Do(func() { u.conn.Close() }) }

func (s *service) serveUDP(sock *udpSock) {
	defer s.wg.Done()
	buf := make([]byte, 65535)
	for {
		n, client, local, err := sock.read(buf)
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		sess := s.udpSession(sock, client, local)
		if sess == nil {
			continue // no endpoints: the datagram is dropped
		}
		sess.asked()
		if _, err := sess.conn.Write(buf[:n]); err != nil {
			s.p.log.Debug("udp forward failed", "service", s.cfg().Name, "endpoint", sess.backend.ID, "err", err)
		}
	}
}

func (s *service) udpSession(sock *udpSock, client netip.AddrPort, local netip.Addr) *udpSession {
	s.mu.Lock()
	sess := s.sessions[client]
	s.mu.Unlock()
	if sess != nil {
		return sess
	}
	var dst netip.Addr
	if c := s.cfg(); len(c.Addrs) > 0 {
		dst = c.Addrs[0]
	}
	tried := map[*lb.Backend]bool{}
	for range s.p.opt.DialTimeouts {
		be := s.pick(client.Addr(), dst, tried)
		if be == nil {
			return nil
		}
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(be.Addr))
		if err != nil {
			tried[be] = true
			continue
		}
		be.Acquire()
		sess = &udpSession{backend: be, conn: c}
		sess.lastNs.Store(time.Now().UnixNano())
		s.mu.Lock()
		if s.closing.Load() || s.set.Load().ids[be.ID] != be {
			// Closed or re-synced meanwhile; let the next datagram retry.
			s.mu.Unlock()
			c.Close()
			be.Release()
			return nil
		}
		if old := s.sessions[client]; old != nil {
			s.mu.Unlock()
			c.Close()
			be.Release()
			return old
		}
		s.sessions[client] = sess
		s.mu.Unlock()
		go s.relayUDP(sock, client, local, sess)
		return sess
	}
	return nil
}

// relayUDP sends the endpoint's replies back to the client from the address
// the client sent to, until the session has been idle for UDPIdleTimeout
// (and no datagram of the client has waited less than udpReplyWait for its
// reply), the endpoint refuses (ICMP port unreachable), or the session is
// closed. kube-proxy's userspace mode closed it UDPIdleTimeout (250ms by
// default) after the last datagram either way, so a reply later than that
// was lost: a DNS answer delayed by a busy node cost the client its
// resolver's 5 s timeout.
func (s *service) relayUDP(sock *udpSock, client netip.AddrPort, local netip.Addr, u *udpSession) {
	defer func() {
		s.mu.Lock()
		if s.sessions[client] == u {
			delete(s.sessions, client)
		}
		s.mu.Unlock()
		u.close()
		u.backend.Release()
	}()
	timeout := s.p.opt.UDPIdleTimeout
	buf := make([]byte, 65535)
	for {
		_ = u.conn.SetReadDeadline(time.Now().Add(timeout))
		n, err := u.conn.Read(buf)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return
			}
			if u.idle() < timeout {
				continue // the client spoke meanwhile
			}
			if waited, ok := u.awaiting(); ok && waited < udpReplyWait {
				continue // a datagram still awaits its reply
			}
			return
		}
		u.answered()
		if err := sock.write(buf[:n], client, local); err != nil {
			s.p.log.Debug("udp reply failed", "service", s.cfg().Name, "client", client, "err", err)
		}
	}
}
