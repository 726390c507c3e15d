package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// UDP is served by one socket per CPU on the same address (SO_REUSEPORT: the
// kernel spreads clients over them), each read by one goroutine with its own
// buffers and its own answer cache, so readers share no locks and a cached
// answer costs no goroutine. A question that is not in the cache is
// answered on a goroutine of its own (see udpReader).
//
// The answer cache maps a request's bytes after the ID (flags, question,
// OPT record) to the packed response: the same bytes always get the same
// answer while the zone's generation (which every index change moves) is
// unchanged. Only zone answers that depend on nothing but the index are
// kept (not forwarded ones, not ExternalName chases through the upstream).

// maxUDPRequest is how much of a datagram is read: dns.MinMsgSize, the
// DNS library server's default buffer, which CoreDNS keeps.
const maxUDPRequest = dns.MinMsgSize

// maxCachedAnswers bounds each reader's answer cache; a random entry makes
// room for a new one.
const maxCachedAnswers = 20000

type cachedAnswer struct {
	gen  uint64
	v6   bool // the client family the metrics children are for
	wire []byte
	obs  *observers // nil without metrics
}

// udpReader is one socket's loop state. The loop itself answers from its
// cache; a miss is answered on a goroutine of its own (at most
// maxInFlight at once), because answering may wait on the upstream
// (forwarding, or chasing an ExternalName target outside the zone) for up
// to requestTimeout, and the socket's other clients must not wait with it:
// the kernel hashes each client to one socket, so one stalled loop would
// time out a share of every client's questions, in-zone ones included.
type udpReader struct {
	conn  *net.UDPConn
	h     *Handler
	label string
	buf   []byte
	out   []byte
	// pktinfo: the socket is bound to a wildcard address, so each reply
	// must name the address the question came to as its source (as the
	// DNS library does), or a multi-homed host could answer from another.
	pktinfo bool
	oob     []byte
	// cache belongs to the loop; answers computed off the loop reach it
	// through fills.
	cache map[string]cachedAnswer
	fills chan cacheFill
	// slots bounds the answers in flight off the loop; inFlight counts
	// them for Shutdown.
	slots    chan struct{}
	inFlight sync.WaitGroup
	stopping atomic.Bool
}

// maxInFlight bounds a socket's answers in flight (CoreDNS's forward
// plugin's max_concurrent is 1000 per server, likewise answered REFUSED
// beyond it).
const maxInFlight = 1000

// cacheFill is an answer computed off the loop, for the loop's cache.
type cacheFill struct {
	key   string
	entry cachedAnswer
}

func newUDPReader(conn *net.UDPConn, h *Handler, label string) *udpReader {
	u := &udpReader{conn: conn, h: h, label: label, buf: make([]byte, maxUDPRequest+1),
		out: make([]byte, 0, dns.MaxMsgSize), cache: map[string]cachedAnswer{},
		fills: make(chan cacheFill, 256), slots: make(chan struct{}, maxInFlight)}
	if conn != nil {
		if a, ok := conn.LocalAddr().(*net.UDPAddr); ok && a.IP.IsUnspecified() {
			err6 := ipv6.NewPacketConn(conn).SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true)
			err4 := ipv4.NewPacketConn(conn).SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true)
			u.pktinfo = err4 == nil || err6 == nil
			u.oob = make([]byte, 512)
		}
	}
	return u
}

// replySource returns control data that sends a reply from the address the
// request in oob was sent to.
func replySource(oob []byte) []byte {
	var dst net.IP
	if cm6 := new(ipv6.ControlMessage); cm6.Parse(oob) == nil && cm6.Dst != nil {
		dst = cm6.Dst
	} else if cm4 := new(ipv4.ControlMessage); cm4.Parse(oob) == nil && cm4.Dst != nil {
		dst = cm4.Dst
	}
	if dst == nil {
		return nil
	}
	if dst.To4() == nil {
		return (&ipv6.ControlMessage{Src: dst}).Marshal()
	}
	return (&ipv4.ControlMessage{Src: dst}).Marshal()
}

func (u *udpReader) reply(wire, oob []byte, to netip.AddrPort) {
	if u.pktinfo {
		_, _, _ = u.conn.WriteMsgUDPAddrPort(wire, replySource(oob), to)
		return
	}
	_, _ = u.conn.WriteToUDPAddrPort(wire, to)
}

// serve reads until the socket is closed or stop is called.
func (u *udpReader) serve() {
	for {
		var n, oobn int
		var from netip.AddrPort
		var err error
		if u.pktinfo {
			n, oobn, _, from, err = u.conn.ReadMsgUDPAddrPort(u.buf, u.oob)
		} else {
			n, from, err = u.conn.ReadFromUDPAddrPort(u.buf)
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) || u.stopping.Load() {
				return
			}
			continue
		}
		u.takeFills()
		start := time.Now()
		req := u.buf[:n]
		if wire := u.cached(req, from, start); wire != nil {
			u.reply(wire, u.oob[:oobn], from)
			continue
		}
		if len(req) < 12 {
			continue // not even a header: dropped, as the DNS library does
		}
		select {
		case u.slots <- struct{}{}:
		default:
			if wire := u.refuse(req); wire != nil {
				u.reply(wire, u.oob[:oobn], from)
			}
			continue
		}
		req = bytes.Clone(req)
		var oob []byte
		if u.pktinfo {
			oob = bytes.Clone(u.oob[:oobn])
		}
		u.inFlight.Add(1)
		go func() {
			defer func() {
				<-u.slots
				u.inFlight.Done()
			}()
			wire, fill := u.compute(req, from, start)
			if wire == nil {
				return
			}
			u.reply(wire, oob, from)
			if fill != nil {
				select {
				case u.fills <- *fill:
				default: // the loop is behind: this answer is just not cached
				}
			}
		}()
	}
}

// stop makes serve return at once (the socket stays open for the answers
// in flight).
func (u *udpReader) stop() {
	u.stopping.Store(true)
	_ = u.conn.SetReadDeadline(time.Now())
}

// takeFills moves the answers computed off the loop into its cache.
func (u *udpReader) takeFills() {
	for {
		select {
		case f := <-u.fills:
			u.store(f.key, f.entry)
		default:
			return
		}
	}
}

func (u *udpReader) store(key string, e cachedAnswer) {
	if len(u.cache) >= maxCachedAnswers {
		for k := range u.cache {
			delete(u.cache, k)
			break
		}
	}
	u.cache[key] = e
}

// cached returns the cached answer to req (in the loop's buffer), or nil.
func (u *udpReader) cached(req []byte, from netip.AddrPort, start time.Time) []byte {
	z := u.h.Zone
	if z == nil || len(req) < 12 {
		return nil
	}
	if len(req) > maxUDPRequest {
		req = req[:maxUDPRequest]
	}
	c, ok := u.cache[string(req[2:])]
	if !ok || c.gen != z.Generation() || c.v6 != isV6(from) {
		return nil
	}
	u.out = append(u.out[:0], c.wire...)
	copy(u.out[:2], req[:2])
	if c.obs != nil {
		c.obs.observe(len(req), len(u.out), time.Since(start).Seconds())
	}
	return u.out
}

// refuse answers REFUSED without looking at the question (too many in
// flight), or nil to drop.
func (u *udpReader) refuse(req []byte) []byte {
	r, reject := parseRequest(req[:min(len(req), maxUDPRequest)])
	if r == nil {
		return nil
	}
	m := reject
	if m == nil {
		m = errorReply(r, dns.RcodeRefused)
	}
	wire, err := m.Pack()
	if err != nil {
		return nil
	}
	return wire
}

// handle answers one packet on the caller's goroutine, caching what is
// cacheable; nil means drop it.
func (u *udpReader) handle(req []byte, from netip.AddrPort) []byte {
	start := time.Now()
	if wire := u.cached(req, from, start); wire != nil {
		return wire
	}
	wire, fill := u.compute(req, from, start)
	if fill != nil {
		u.store(fill.key, fill.entry)
	}
	return wire
}

// compute answers one packet that is not in the cache; nil means drop it.
// It touches no state of the loop, so it runs on any goroutine; fill is
// the cache entry for the answer, if it may be cached.
func (u *udpReader) compute(req []byte, from netip.AddrPort, start time.Time) (wire []byte, fill *cacheFill) {
	if len(req) < 12 {
		return nil, nil // not even a header: dropped, as the DNS library does
	}
	if len(req) > maxUDPRequest {
		// As the DNS library's server reads datagrams (CoreDNS does not
		// change its 512-byte buffer): the rest is cut, and what no longer
		// unpacks is FORMERR.
		req = req[:maxUDPRequest]
	}
	var gen uint64
	if z := u.h.Zone; z != nil {
		gen = z.Generation()
	}
	r, reject := parseRequest(req)
	if r == nil {
		return nil, nil
	}
	var resp *dns.Msg
	var plugin string
	if reject != nil {
		resp = reject
		var err error
		if wire, err = resp.Pack(); err != nil {
			return nil, nil
		}
	} else {
		resp, plugin, wire = u.h.answer(r, false)
	}
	var obs *observers
	if u.h.Metrics != nil {
		var qtype uint16
		if len(r.Question) > 0 {
			qtype = r.Question[0].Qtype
		}
		family := "1"
		if isV6(from) {
			family = "2"
		}
		obs = u.h.Metrics.observers(u.label, "udp", family, qtype, resp.Rcode, plugin)
		obs.observe(len(req), len(wire), time.Since(start).Seconds())
	}
	if u.h.Zone != nil && plugin == "kubernetes" && cacheable(resp) {
		fill = &cacheFill{key: string(req[2:]), entry: cachedAnswer{gen: gen, v6: isV6(from), wire: wire, obs: obs}}
	}
	return wire, fill
}

// cacheable: answers from the index alone. ExternalName answers (a CNAME)
// may carry records from the upstream, SERVFAIL means not synced yet.
func cacheable(m *dns.Msg) bool {
	if m.Rcode == dns.RcodeServerFailure {
		return false
	}
	for _, rr := range m.Answer {
		if rr.Header().Rrtype == dns.TypeCNAME {
			return false
		}
	}
	return true
}

// parseRequest unpacks a request as the DNS library's server does: a
// header its default accept function rejects gets FORMERR or NOTIMP
// (returned as reject), ignored ones (responses) are dropped (nil, nil),
// and a body that does not unpack gets FORMERR echoing what did.
func parseRequest(b []byte) (*dns.Msg, *dns.Msg) {
	h := dns.Header{
		Id:      binary.BigEndian.Uint16(b[0:]),
		Bits:    binary.BigEndian.Uint16(b[2:]),
		Qdcount: binary.BigEndian.Uint16(b[4:]),
		Ancount: binary.BigEndian.Uint16(b[6:]),
		Nscount: binary.BigEndian.Uint16(b[8:]),
		Arcount: binary.BigEndian.Uint16(b[10:]),
	}
	action := dns.DefaultMsgAcceptFunc(h)
	if action == dns.MsgIgnore {
		return nil, nil
	}
	r := new(dns.Msg)
	if action == dns.MsgAccept {
		if r.Unpack(b) == nil {
			return r, nil
		}
		action = dns.MsgReject
	} else {
		_ = r.Unpack(b[:12]) // the header only, as the library keeps it
		r.Question = nil
	}
	m := r.Copy()
	opcode := m.Opcode
	m.SetRcodeFormatError(m)
	m.Zero = false
	if action == dns.MsgRejectNotImplemented {
		m.Opcode, m.Rcode = opcode, dns.RcodeNotImplemented
	}
	m.Ns, m.Answer, m.Extra = nil, nil, nil
	return r, m
}

func isV6(a netip.AddrPort) bool { return a.Addr().Is6() && !a.Addr().Is4In6() }
