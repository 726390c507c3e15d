package userspace

import (
	"errors"
	"net/netip"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/proxy/lb"
)

// This file is the TCP data path: a few event loops (one per accept loop,
// shared by every Service port) on their own epoll instances and raw
// non-blocking sockets. A proxied connection costs no goroutine and no
// entry in Go's poller: accept4, socket, connect, the reads and writes,
// close; Go's net package added getsockname/getpeername, the SO_ERROR check
// of the connect, an EAGAIN read and a goroutine park per direction, and
// epoll_ctl removals (docs/proxy-modes.md, "Benchmark (userspace)").
//
// The listeners (SO_REUSEPORT, one per loop) are plain descriptors too,
// detached from Go's poller (listenTCP). A listener is removed from its
// loop (synchronously) before it is closed, so the loop never touches a
// reused descriptor.

// relayBufSize is the loops' copy buffer; a read that fills it marks a bulk
// transfer, which then moves through a pipe with splice(2).
const relayBufSize = 64 << 10

type tcpLoops struct {
	once  sync.Once
	loops []*tcpLoop
	err   error
}

// loop returns the i-th event loop (modulo their number), starting them on
// first use.
func (p *Proxier) loop(i int) (*tcpLoop, error) {
	p.tcp.once.Do(func() {
		for j := 0; j < p.opt.AcceptLoops; j++ {
			l, err := newTCPLoop(p)
			if err != nil {
				p.tcp.err = err
				return
			}
			p.tcp.loops = append(p.tcp.loops, l)
			go l.run()
		}
	})
	if p.tcp.err != nil {
		return nil, p.tcp.err
	}
	return p.tcp.loops[i%len(p.tcp.loops)], nil
}

type tcpLoop struct {
	p      *Proxier
	epfd   int
	wakefd int // eventfd: commands are waiting
	buf    []byte

	mu   sync.Mutex
	cmds []func()
	// stopping: the Proxier is closed; the loop ends once its last
	// relay has, and then closes ended.
	stopping bool
	ended    chan struct{}

	listeners map[int32]*service
	ends      map[int32]*relayEnd
	seq       int32 // registration numbers (relayEnd.seq)
	// dialing are the relays whose backend connect is under way (their
	// deadlines are checked on every turn).
	dialing map[*relay]struct{}
}

func newTCPLoop(p *Proxier) (*tcpLoop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wfd)}); err != nil {
		unix.Close(epfd)
		unix.Close(wfd)
		return nil, err
	}
	return &tcpLoop{p: p, epfd: epfd, wakefd: wfd, buf: make([]byte, relayBufSize), ended: make(chan struct{}),
		listeners: map[int32]*service{}, ends: map[int32]*relayEnd{}, dialing: map[*relay]struct{}{}}, nil
}

// do runs f on the loop and waits for it.
func (l *tcpLoop) do(f func()) {
	select {
	case <-l.ended: // its descriptors are closed
		return
	default:
	}
	done := make(chan struct{})
	l.mu.Lock()
	l.cmds = append(l.cmds, func() { f(); close(done) })
	l.mu.Unlock()
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(l.wakefd, one[:])
	select {
	case <-done:
	case <-l.ended:
	}
}

// addListener makes the loop accept on the listening socket fd for s.
func (l *tcpLoop) addListener(s *service, fd int) error {
	// Set once here, inherited by every accepted socket.
	setSockopts(fd)
	var aerr error
	l.do(func() {
		aerr = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
		if aerr == nil {
			l.listeners[int32(fd)] = s
		}
	})
	return aerr
}

// removeListener stops accepting on fd; it must run before fd is closed.
func (l *tcpLoop) removeListener(fd int) {
	l.do(func() {
		if _, ok := l.listeners[int32(fd)]; ok {
			_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
			delete(l.listeners, int32(fd))
		}
	})
}

func (l *tcpLoop) run() {
	defer close(l.ended)
	events := make([]unix.EpollEvent, 128)
	for {
		timeout := -1
		if len(l.dialing) > 0 {
			timeout = 50
		}
		n, err := unix.EpollWait(l.epfd, events, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.p.log.Error("event loop stopped", "err", err)
			return
		}
		for _, ev := range events[:max(n, 0)] {
			switch {
			case ev.Fd == int32(l.wakefd):
				var b [8]byte
				_, _ = unix.Read(l.wakefd, b[:])
				l.mu.Lock()
				cmds := l.cmds
				l.cmds = nil
				l.mu.Unlock()
				for _, f := range cmds {
					f()
				}
			case l.listeners[ev.Fd] != nil:
				l.accept(int(ev.Fd), l.listeners[ev.Fd])
			default:
				// A descriptor closed earlier in this batch may already
				// belong to a new socket: its events carry the old
				// registration's number.
				if e := l.ends[ev.Fd]; e != nil && e.seq == ev.Pad {
					e.r.event(e, ev.Events)
				}
			}
		}
		if len(l.dialing) > 0 {
			now := time.Now()
			for r := range l.dialing {
				if now.After(r.deadline) {
					r.dialFailed(unix.ETIMEDOUT)
				}
			}
		}
		if l.stopping && len(l.ends) == 0 && len(l.listeners) == 0 {
			unix.Close(l.epfd)
			unix.Close(l.wakefd)
			return
		}
		// Yield once per turn. A loop that never does runs its whole time
		// slice and is then preempted by the runtime's monitor, which also
		// hands its P away while epoll_wait blocks: measured under load,
		// that churn was thousands of nanosleep and futex calls a second
		// (nanosleep 12.8k -> 197, futex 7.4k -> 214 per 2 s with this).
		runtime.Gosched()
	}
}

// stop ends the loops once their relays have ended (Proxier.Close: the
// listeners are gone, established connections finish).
func (t *tcpLoops) stop() {
	for _, l := range t.loops {
		l.do(func() { l.stopping = true })
	}
}

// accept takes up to 32 connections (the listener is level-triggered: more
// wait for the next turn).
func (l *tcpLoop) accept(lfd int, s *service) {
	for i := 0; i < 32; i++ {
		fd, client, err := accept4(lfd)
		if err != nil {
			if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.ECONNABORTED) {
				// EMFILE and friends: the listener stays readable, so
				// back off briefly rather than spin on it.
				s.p.log.Warn("accept failed", "service", s.cfg().Name, "err", err)
				time.Sleep(10 * time.Millisecond)
			}
			return
		}
		r := &relay{l: l, s: s, client: relayEnd{fd: fd}, backend: relayEnd{fd: -1}}
		r.client.r, r.backend.r = r, r
		r.clientAddr = client
		// TCP_NODELAY and SO_KEEPALIVE come from the listener
		// (addListener): an accepted socket inherits them.
		if s.set.Load().sched.Name() == lb.DestinationHashing {
			r.dst = originalDstFD(fd)
		}
		if !r.dst.IsValid() {
			if c := s.cfg(); len(c.Addrs) > 0 {
				r.dst = c.Addrs[0]
			}
		}
		if err := l.register(&r.client); err != nil {
			unix.Close(fd)
			continue
		}
		r.dial()
	}
}

// accept4 accepts one connection on lfd, non-blocking and close-on-exec,
// and returns the client's address. unix.Accept4 would add a getsockopt
// (SO_PROTOCOL, to tell L2TP sockets apart) per connection to decode the
// same address.
func accept4(lfd int) (int, netip.Addr, error) {
	var rsa unix.RawSockaddrAny
	l := uint32(unix.SizeofSockaddrAny)
	fd, _, errno := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(lfd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&l)),
		unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if errno != 0 {
		return -1, netip.Addr{}, errno
	}
	var addr netip.Addr
	switch rsa.Addr.Family {
	case unix.AF_INET:
		addr = netip.AddrFrom4((*unix.RawSockaddrInet4)(unsafe.Pointer(&rsa)).Addr)
	case unix.AF_INET6:
		addr = netip.AddrFrom16((*unix.RawSockaddrInet6)(unsafe.Pointer(&rsa)).Addr).Unmap()
	}
	return int(fd), addr, nil
}

// register adds a relay's socket to the loop's epoll set, edge-triggered
// for input, output and hang-up, under a registration number of its own.
func (l *tcpLoop) register(e *relayEnd) error {
	l.seq++
	if l.seq == 0 { // 0 is the listeners' and the wake-up's
		l.seq++
	}
	e.seq = l.seq
	err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, e.fd,
		&unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(e.fd), Pad: e.seq})
	if err == nil {
		l.ends[int32(e.fd)] = e
	}
	return err
}

// relay is one proxied connection: the client's socket and the backend's.
type relay struct {
	l               *tcpLoop
	s               *service
	client, backend relayEnd
	clientAddr, dst netip.Addr

	be       *lb.Backend
	attempt  int
	tried    map[*lb.Backend]bool
	deadline time.Time
	dialing  bool
	// toBackend and toClient are the two directions.
	toBackend, toClient direction
	done                bool
}

// relayEnd is one socket of a relay (the loop's map finds it by fd).
type relayEnd struct {
	r  *relay
	fd int
	// rd and wr: the last edge said readable / writable and no call has
	// since returned EAGAIN (or drained the socket).
	rd, wr bool
	// rdhup: the peer has shut its side (or the socket failed). A short
	// read then does not mean "wait for the next edge": the EOF is already
	// there, and no edge will come for it, so the socket is read on until
	// it says so, and the FIN passed on right behind the data.
	rdhup bool
	// fin: the hang-up was the peer's FIN alone (EPOLLRDHUP without
	// EPOLLHUP or EPOLLERR). The kernel reports it once the FIN is taken
	// in order, behind all the data before it, so a short read after it
	// has drained the socket up to the EOF.
	fin bool
	seq int32 // its registration in the loop's epoll set
}

// direction is one way of a relay: bytes read from src and not yet
// written to dst wait in pending (or, in a bulk transfer, in a pipe).
type direction struct {
	pending []byte
	pipe    [2]int // splice pipe once the direction is bulk (spliced)
	spliced bool
	pipeCap int
	inPipe  int
	eof     bool // src ended and dst was shut down for writing
}

// dial connects to the next backend, or gives up (RST to the client) when
// none is left or every attempt failed.
func (r *relay) dial() {
	opts := r.s.p.opt
	for r.attempt < len(opts.DialTimeouts) {
		be := r.s.pick(r.clientAddr, r.dst, r.tried)
		if be == nil {
			break
		}
		timeout := opts.DialTimeouts[r.attempt]
		r.attempt++
		be.Acquire()
		fd, err := connectNonblock(be.Addr)
		if err == nil {
			r.backend.fd = fd
			if err = r.l.register(&r.backend); err != nil {
				unix.Close(fd)
				r.backend.fd = -1
			}
		}
		if err != nil {
			be.Release()
			r.markTried(be)
			continue
		}
		r.be, r.dialing, r.deadline = be, true, time.Now().Add(timeout)
		r.l.dialing[r] = struct{}{}
		return
	}
	r.s.p.log.Debug("no endpoint answered", "service", r.s.cfg().Name, "client", r.clientAddr)
	// Reset rather than FIN: the client learns at once that nothing
	// answered, as it would from a REJECT.
	_ = unix.SetsockoptLinger(r.client.fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	r.closeAll()
}

func (r *relay) markTried(be *lb.Backend) {
	if r.tried == nil {
		r.tried = map[*lb.Backend]bool{}
	}
	r.tried[be] = true
}

// dialFailed drops the backend socket under way and tries another.
func (r *relay) dialFailed(err error) {
	r.s.p.log.Debug("endpoint dial failed, trying another", "service", r.s.cfg().Name, "endpoint", r.be.ID, "err", err)
	delete(r.l.dialing, r)
	delete(r.l.ends, int32(r.backend.fd))
	unix.Close(r.backend.fd)
	r.backend.fd, r.dialing = -1, false
	r.be.Release()
	r.markTried(r.be)
	r.be = nil
	r.dial()
}

// setSockopts gives a relay's socket TCP_NODELAY (a proxy must not hold
// back the small writes it passes on; Go's default) and SO_KEEPALIVE with
// the kernel's timers (net.ipv4.tcp_keepalive_*: a vanished peer does not
// pin the other side's socket for ever).
func setSockopts(fd int) {
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
}

func connectNonblock(addr netip.AddrPort) (int, error) {
	family := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	if a := addr.Addr().Unmap(); a.Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: a.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	setSockopts(fd)
	if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// event handles readiness of one of the relay's sockets. The sockets are
// edge-triggered: the loop remembers what each can do (rd, wr) and only
// tries that, so no call returns EAGAIN but those racing with the peer.
func (r *relay) event(e *relayEnd, ev uint32) {
	if r.done {
		return
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		e.rd = true
	}
	if ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		e.rdhup = true
		if ev&(unix.EPOLLHUP|unix.EPOLLERR) == 0 {
			e.fin = true
		}
	}
	if ev&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		e.wr = true
	}
	if r.dialing {
		if e != &r.backend {
			return // client data waits in its socket until the backend answers
		}
		if ev&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			serr, _ := unix.GetsockoptInt(e.fd, unix.SOL_SOCKET, unix.SO_ERROR)
			r.dialFailed(unix.Errno(serr))
			return
		}
		if ev&unix.EPOLLOUT == 0 {
			return
		}
		r.dialing = false
		delete(r.l.dialing, r)
	}
	// Either side's readiness can unblock either direction.
	if !r.pump(&r.toBackend, &r.client, &r.backend) {
		return
	}
	r.pump(&r.toClient, &r.backend, &r.client)
}

// pipeSize is the capacity asked for the splice pipes (as Go's own splice
// uses): a bulk transfer moves up to this much per pair of calls.
const pipeSize = 1 << 20

// pump moves src to dst while both can; false when the relay ended.
func (r *relay) pump(d *direction, src, dst *relayEnd) bool {
	for {
		if d.inPipe > 0 {
			if !dst.wr {
				return true
			}
			n, err := unix.Splice(d.pipe[0], nil, dst.fd, nil, d.inPipe, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) {
					dst.wr = false
					return true
				}
				return r.fail()
			}
			d.inPipe -= int(n)
			continue
		}
		if len(d.pending) > 0 {
			if !dst.wr {
				return true
			}
			n, err := unix.Write(dst.fd, d.pending)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) {
					dst.wr = false
					return true
				}
				return r.fail()
			}
			d.pending = d.pending[n:]
			continue
		}
		if d.eof || !src.rd {
			return true
		}
		if d.spliced {
			n, err := unix.Splice(src.fd, nil, d.pipe[1], nil, d.pipeCap, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case err != nil && errors.Is(err, unix.EAGAIN):
				src.rd = false
				return true
			case err != nil:
				return r.fail()
			case n == 0:
				return r.ended(d, dst.fd)
			}
			d.inPipe = int(n)
			continue
		}
		n, err := unix.Read(src.fd, r.l.buf)
		switch {
		case err != nil && errors.Is(err, unix.EAGAIN):
			src.rd = false
			return true
		case err != nil:
			return r.fail()
		case n == 0:
			return r.ended(d, dst.fd)
		case n < len(r.l.buf) && !src.rdhup:
			// A short read emptied the socket: more data will come with
			// a new edge.
			src.rd = false
		}
		w := 0
		if dst.wr {
			w, err = unix.Write(dst.fd, r.l.buf[:n])
			if err != nil {
				if !errors.Is(err, unix.EAGAIN) {
					return r.fail()
				}
				w = 0
			}
			if w < n {
				dst.wr = false
			}
		}
		if w < n {
			d.pending = append([]byte(nil), r.l.buf[w:n]...)
		} else if n < len(r.l.buf) && src.fin {
			// Everything up to the peer's FIN is passed on: pass the FIN
			// on too, without a read to hear the EOF.
			return r.ended(d, dst.fd)
		}
		if n == len(r.l.buf) {
			// Bulk: the rest goes through a pipe, never into user space.
			var p [2]int
			if unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC) == nil {
				d.pipe, d.spliced, d.pipeCap = p, true, relayBufSize
				if got, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, pipeSize); err == nil && got > 0 {
					d.pipeCap = got
				}
			}
		}
	}
}

// ended passes a clean EOF on as a half-close; the relay ends when both
// directions have.
func (r *relay) ended(d *direction, dst int) bool {
	d.eof = true
	if r.toBackend.eof && r.toClient.eof {
		r.closeAll()
		return false
	}
	_ = unix.Shutdown(dst, unix.SHUT_WR)
	return true
}

// fail tears both connections down.
func (r *relay) fail() bool {
	r.closeAll()
	return false
}

func (r *relay) closeAll() {
	if r.done {
		return
	}
	r.done = true
	delete(r.l.dialing, r)
	for _, e := range []*relayEnd{&r.client, &r.backend} {
		if e.fd >= 0 {
			delete(r.l.ends, int32(e.fd))
			unix.Close(e.fd) // also leaves the epoll set
		}
	}
	for _, d := range []*direction{&r.toBackend, &r.toClient} {
		if d.spliced {
			unix.Close(d.pipe[0])
			unix.Close(d.pipe[1])
		}
	}
	if r.be != nil {
		r.be.Release()
	}
}
