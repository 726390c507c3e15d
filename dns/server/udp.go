package server

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// UDP is served by one socket per CPU on the same address (SO_REUSEPORT: the
// kernel spreads clients over them), each read by one goroutine with its own
// buffers and its own answer cache, so readers share no locks and a packet
// costs no goroutine.
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

// udpReader is one socket's loop state; nothing in it is shared.
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
	cache   map[string]cachedAnswer
	// obs holds the metric children per kind of answer, so that cached
	// entries share them.
	obs map[obsKey]*observers
}

type obsKey struct {
	qtype  uint16
	rcode  int
	v6     bool
	plugin string
}

func newUDPReader(conn *net.UDPConn, h *Handler, label string) *udpReader {
	u := &udpReader{conn: conn, h: h, label: label, buf: make([]byte, maxUDPRequest+1),
		out: make([]byte, 0, dns.MaxMsgSize), cache: map[string]cachedAnswer{}, obs: map[obsKey]*observers{}}
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

// serve reads until the socket is closed.
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
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		wire := u.handle(u.buf[:n], from)
		switch {
		case wire == nil:
		case u.pktinfo:
			_, _, _ = u.conn.WriteMsgUDPAddrPort(wire, replySource(u.oob[:oobn]), from)
		default:
			_, _ = u.conn.WriteToUDPAddrPort(wire, from)
		}
	}
}

// handle answers one packet; nil means drop it.
func (u *udpReader) handle(req []byte, from netip.AddrPort) []byte {
	start := time.Now()
	if len(req) < 12 {
		return nil // not even a header: dropped, as the DNS library does
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
		if c, ok := u.cache[string(req[2:])]; ok && c.gen == gen && c.v6 == isV6(from) {
			u.out = append(u.out[:0], c.wire...)
			copy(u.out[:2], req[:2])
			if c.obs != nil {
				c.obs.observe(len(req), len(u.out), time.Since(start).Seconds())
			}
			return u.out
		}
	}
	r, reject := parseRequest(req)
	if r == nil {
		return nil
	}
	var resp *dns.Msg
	var plugin string
	var wire []byte
	if reject != nil {
		resp = reject
		var err error
		if wire, err = resp.Pack(); err != nil {
			return nil
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
		k := obsKey{qtype: qtype, rcode: resp.Rcode, v6: isV6(from), plugin: plugin}
		if obs = u.obs[k]; obs == nil {
			family := "1"
			if k.v6 {
				family = "2"
			}
			obs = u.h.Metrics.observers(u.label, "udp", family, qtype, resp.Rcode, plugin)
			u.obs[k] = obs
		}
		obs.observe(len(req), len(wire), time.Since(start).Seconds())
	}
	if plugin == "kubernetes" && cacheable(resp) {
		if len(u.cache) >= maxCachedAnswers {
			for k := range u.cache {
				delete(u.cache, k)
				break
			}
		}
		u.cache[string(req[2:])] = cachedAnswer{gen: gen, v6: isV6(from), wire: append([]byte(nil), wire...), obs: obs}
	}
	return wire
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
