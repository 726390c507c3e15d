package main

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/miekg/dns"
)

// protocolQuestions are asked of both servers in every pods mode: the
// server-level classes (query class, opcode, EDNS version and options,
// header bits, query types nothing has) and malformed packets, which
// CoreDNS handles before or around the kubernetes plugin.
func protocolQuestions() []question {
	const svc = "myapp.default.svc.cluster.local."
	withClass := func(c uint16) func(*dns.Msg) { return func(m *dns.Msg) { m.Question[0].Qclass = c } }
	withOpcode := func(o int) func(*dns.Msg) { return func(m *dns.Msg) { m.Opcode = o } }
	ednsVersion := func(v uint8) func(*dns.Msg) {
		return func(m *dns.Msg) {
			o := m.IsEdns0()
			if o == nil {
				o = new(dns.OPT)
				o.Hdr.Name, o.Hdr.Rrtype = ".", dns.TypeOPT
				o.SetUDPSize(1232)
				m.Extra = append(m.Extra, o)
			}
			o.SetVersion(v)
		}
	}
	withOption := func(opts ...dns.EDNS0) func(*dns.Msg) {
		return func(m *dns.Msg) { m.IsEdns0().Option = append(m.IsEdns0().Option, opts...) }
	}
	qs := []question{
		// Classes other than IN are REFUSED by CoreDNS's server (no chaos
		// plugin in kubeadm's Corefile) before any plugin sees them.
		{name: svc, qtype: dns.TypeA, mod: withClass(dns.ClassCHAOS), label: "class CH"},
		{name: "version.bind.", qtype: dns.TypeTXT, mod: withClass(dns.ClassCHAOS), label: "class CH"},
		{name: "version.server.", qtype: dns.TypeTXT, mod: withClass(dns.ClassCHAOS), label: "class CH"},
		{name: svc, qtype: dns.TypeA, mod: withClass(dns.ClassANY), label: "class ANY"},
		{name: svc, qtype: dns.TypeA, mod: withClass(dns.ClassNONE), label: "class NONE"},
		{name: svc, qtype: dns.TypeA, mod: withClass(dns.ClassHESIOD), label: "class HS"},
		{name: svc, qtype: dns.TypeA, mod: withClass(dns.ClassCHAOS), edns: 1232, do: true, label: "class CH"},
		{name: "1.1.1.1.in-addr.arpa.", qtype: dns.TypePTR, mod: withClass(dns.ClassCHAOS), label: "class CH"},
		{name: "www.example.com.", qtype: dns.TypeA, mod: withClass(dns.ClassCHAOS), label: "class CH"},
		// Opcodes: NOTIFY passes the DNS library and CoreDNS's server and
		// is answered like a query; the rest are NOTIMP.
		{name: "cluster.local.", qtype: dns.TypeSOA, mod: withOpcode(dns.OpcodeNotify), label: "NOTIFY"},
		{name: svc, qtype: dns.TypeA, mod: withOpcode(dns.OpcodeNotify), label: "NOTIFY"},
		{name: "nosuch.default.svc.cluster.local.", qtype: dns.TypeA, mod: withOpcode(dns.OpcodeNotify), edns: 1232, label: "NOTIFY"},
		{name: svc, qtype: dns.TypeA, mod: withOpcode(dns.OpcodeIQuery), label: "IQUERY"},
		{name: svc, qtype: dns.TypeA, mod: withOpcode(dns.OpcodeStatus), label: "STATUS"},
		{name: svc, qtype: dns.TypeA, mod: withOpcode(3), label: "opcode 3"},
		{name: "cluster.local.", qtype: dns.TypeSOA, mod: withOpcode(dns.OpcodeUpdate), label: "UPDATE"},
		{name: svc, qtype: dns.TypeA, mod: withOpcode(15), edns: 1232, label: "opcode 15"},
		// EDNS: versions other than 0 are BADVERS; options are not echoed;
		// buffer sizes under 512 count as 512.
		{name: svc, qtype: dns.TypeA, mod: ednsVersion(1), label: "EDNS version 1"},
		{name: svc, qtype: dns.TypeA, edns: 4096, do: true, mod: ednsVersion(1), label: "EDNS version 1"},
		{name: "nosuch.default.svc.cluster.local.", qtype: dns.TypeA, mod: ednsVersion(255), label: "EDNS version 255"},
		{name: "www.example.com.", qtype: dns.TypeA, mod: ednsVersion(1), label: "EDNS version 1"},
		{name: svc, qtype: dns.TypeA, mod: func(m *dns.Msg) { withClass(dns.ClassCHAOS)(m); ednsVersion(1)(m) }, label: "class CH, EDNS version 1"},
		{name: "www.example.com.", qtype: dns.TypeA, mod: withOpcode(dns.OpcodeNotify), label: "NOTIFY"},
		{name: "nosuch.example.", qtype: dns.TypeA, mod: withOpcode(dns.OpcodeNotify), label: "NOTIFY"},
		{name: svc, qtype: dns.TypeA, mod: withOpcode(dns.OpcodeNotify), tcp: true, label: "NOTIFY"},
		{name: svc, qtype: dns.TypeA, mod: withOpcode(dns.OpcodeNotify), noRD: true, label: "NOTIFY"},
		{name: "1.1.1.1.in-addr.arpa.", qtype: dns.TypePTR, mod: func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify; m.CheckingDisabled = true }, label: "NOTIFY, CD"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}), label: "cookie"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_NSID{Code: dns.EDNS0NSID}), label: "NSID"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_PADDING{Padding: make([]byte, 20)}), label: "padding"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_LOCAL{Code: 65001, Data: []byte{1, 2, 3}}), label: "unknown option"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE}), tcp: true, label: "keepalive"},
		{name: "nosuch.default.svc.cluster.local.", qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(10, 1, 2, 0)}), label: "client subnet"},
		// Large requests: CoreDNS reads UDP datagrams into 512 bytes.
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_PADDING{Padding: make([]byte, 450)}), label: "padded to 512 bytes"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_PADDING{Padding: make([]byte, 451)}), label: "padded to 513 bytes"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_PADDING{Padding: make([]byte, 1000)}), label: "padded to 1 KB"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_PADDING{Padding: make([]byte, 5000)}), label: "padded to 5 KB"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_PADDING{Padding: make([]byte, 1000)}), tcp: true, label: "padded to 1 KB"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_PADDING{Padding: make([]byte, 5000)}), tcp: true, label: "padded to 5 KB"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: withOption(&dns.EDNS0_PADDING{Padding: make([]byte, 60000)}), tcp: true, label: "padded to 60 KB"},
		{name: svc, qtype: dns.TypeA, edns: 1, label: "buffer 1"},
		{name: svc, qtype: dns.TypeA, edns: 511, label: "buffer 511"},
		{name: svc, qtype: dns.TypeA, edns: 65535, label: "buffer 65535"},
		{name: svc, qtype: dns.TypeA, edns: 1232, mod: func(m *dns.Msg) { m.IsEdns0().Hdr.Ttl |= 0x7fff }, label: "EDNS flags beyond DO"},
		{name: "big.gen-0.svc.cluster.local.", qtype: dns.TypeA, edns: 511, label: "buffer 511"},
		{name: "_http._tcp.big.gen-0.svc.cluster.local.", qtype: dns.TypeSRV, edns: 4096, do: true},
		{name: "_http._tcp.big.gen-0.svc.cluster.local.", qtype: dns.TypeSRV, edns: 65535},
		{name: "big.gen-0.svc.cluster.local.", qtype: dns.TypeAAAA},
		// Header bits: CD is echoed, AD and Z are not.
		{name: svc, qtype: dns.TypeA, mod: func(m *dns.Msg) { m.CheckingDisabled = true }, label: "CD"},
		{name: svc, qtype: dns.TypeA, mod: func(m *dns.Msg) { m.AuthenticatedData = true }, label: "AD"},
		{name: svc, qtype: dns.TypeA, mod: func(m *dns.Msg) { m.Zero = true }, label: "Z"},
		{name: svc, qtype: dns.TypeA, mod: func(m *dns.Msg) { m.Truncated, m.Authoritative, m.RecursionAvailable = true, true, true }, label: "TC AA RA in the query"},
		{name: "nosuch.default.svc.cluster.local.", qtype: dns.TypeA, mod: func(m *dns.Msg) { m.CheckingDisabled = true }, noRD: true, label: "CD"},
	}
	// Query types nothing in the zone has, on names of every kind.
	for _, n := range []string{svc, "web.default.svc.cluster.local.", "web-0.web.default.svc.cluster.local.",
		"svc-external-name.default.svc.cluster.local.", "alias.default.svc.cluster.local.", "nosuch.default.svc.cluster.local.",
		"default.svc.cluster.local.", "cluster.local.", "10-244-7-7.default.pod.cluster.local.", "215.3.96.10.in-addr.arpa.",
		"1.1.1.1.in-addr.arpa.", "in-addr.arpa.", "ns.dns.cluster.local.", "dns-version.cluster.local."} {
		for _, t := range []uint16{dns.TypeCAA, dns.TypeDS, dns.TypeDNSKEY, dns.TypeRRSIG, dns.TypeNSEC, dns.TypeHTTPS, dns.TypeSVCB,
			dns.TypeTLSA, dns.TypeNAPTR, dns.TypeNULL, dns.TypeNone, 65280, 65535, dns.TypeOPT, dns.TypeMAILB, dns.TypeANY} {
			qs = append(qs, question{name: n, qtype: t})
		}
	}
	// Malformed and unusual packets, sent as bytes.
	for _, r := range rawPackets() {
		qs = append(qs, question{name: r.what, raw: r.b, label: "raw"})
	}
	return qs
}

type rawPacket struct {
	what string
	b    []byte
}

// rawPackets builds the malformed requests: wrong counts, truncated
// headers and names, bad labels, trailing bytes, responses, garbage.
func rawPackets() []rawPacket {
	query := func(name string, qtype uint16, edit func(*dns.Msg)) []byte {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.Id = 0x1234
		if edit != nil {
			edit(m)
		}
		b, err := m.Pack()
		if err != nil {
			panic(err)
		}
		return b
	}
	const svc = "myapp.default.svc.cluster.local."
	good := query(svc, dns.TypeA, nil)
	setCount := func(b []byte, off int, n uint16) []byte {
		c := append([]byte(nil), b...)
		binary.BigEndian.PutUint16(c[off:], n)
		return c
	}
	hdr := func(bits, qd, an, ns, ar uint16) []byte {
		b := make([]byte, 12)
		binary.BigEndian.PutUint16(b[0:], 0x4321)
		binary.BigEndian.PutUint16(b[2:], bits)
		binary.BigEndian.PutUint16(b[4:], qd)
		binary.BigEndian.PutUint16(b[6:], an)
		binary.BigEndian.PutUint16(b[8:], ns)
		binary.BigEndian.PutUint16(b[10:], ar)
		return b
	}
	two := query(svc, dns.TypeA, func(m *dns.Msg) {
		m.Question = append(m.Question, dns.Question{Name: "web.default.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	})
	withAnswer := query(svc, dns.TypeA, func(m *dns.Msg) {
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: svc, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(1, 2, 3, 4)}}
	})
	twoOPT := query(svc, dns.TypeA, func(m *dns.Msg) {
		m.SetEdns0(1232, false)
		o := new(dns.OPT)
		o.Hdr.Name, o.Hdr.Rrtype = ".", dns.TypeOPT
		o.SetUDPSize(4096)
		m.Extra = append(m.Extra, o)
	})
	garbage := make([]byte, 40)
	for i := range garbage {
		garbage[i] = byte(i*37 + 11)
	}
	longLabel := append(hdr(0x0100, 1, 0, 0, 0), 64)
	longLabel = append(longLabel, make([]byte, 64)...)
	longLabel = append(longLabel, 0, 0, 1, 0, 1)
	loop := append(hdr(0x0100, 1, 0, 0, 0), 0xc0, 12, 0, 1, 0, 1) // a pointer to itself
	return []rawPacket{
		{"a well-formed query", good},
		{"no question (QDCOUNT 0)", hdr(0x0100, 0, 0, 0, 0)},
		{"QDCOUNT 0 with a question after the header", setCount(good, 4, 0)},
		{"two questions", two},
		{"QDCOUNT 2 with one question", setCount(good, 4, 2)},
		{"QDCOUNT 1 and no question", hdr(0x0100, 1, 0, 0, 0)},
		{"ANCOUNT 1 with an answer", withAnswer},
		{"ANCOUNT 2 without answers", setCount(good, 6, 2)},
		{"NSCOUNT 2 without records", setCount(good, 8, 2)},
		{"ARCOUNT 3 without records", setCount(good, 10, 3)},
		{"ARCOUNT 1 without the record", setCount(good, 10, 1)},
		{"two OPT records", twoOPT},
		{"a response (QR set)", append(append([]byte(nil), good[:2]...), append([]byte{good[2] | 0x80}, good[3:]...)...)},
		{"11 bytes", good[:11]},
		{"header only of a query", good[:12]},
		{"name cut short", good[:20]},
		{"type and class missing", good[:len(good)-4]},
		{"class missing", good[:len(good)-2]},
		{"trailing bytes", append(append([]byte(nil), good...), 1, 2, 3, 4)},
		{"a 64-byte label", longLabel},
		{"a compression loop", loop},
		{"garbage", garbage},
		{"NOTIFY without a question", hdr(0x2000, 0, 0, 0, 0)},
		{"UPDATE with ANCOUNT 3", setCount(query("cluster.local.", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }), 6, 3)},
	}
}

// askRaw sends b over UDP and renders the answer, or "dropped" when none
// comes within two seconds.
func askRaw(b []byte, port int) string {
	c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return "error: " + err.Error()
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		return "error: " + err.Error()
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "dropped"
	}
	if err != nil {
		return "error: " + err.Error()
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf[:n]); err != nil {
		return "unparseable answer " + hex.EncodeToString(buf[:n])
	}
	return fmt.Sprintf("id=%#04x opcode=%s qdcount=%d ", m.Id, dns.OpcodeToString[m.Opcode], len(m.Question)) + canonical(m)
}
