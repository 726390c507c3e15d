package server

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

var (
	fuzzOnce sync.Once
	fuzzH    *Handler
	fuzzUDP  *udpReader
)

// FuzzServeDNS feeds arbitrary packets through the request path: what the
// DNS library can parse must get a well-formed answer with the request's ID
// that fits the client's size limit; nothing may panic. The seed corpus in
// testdata/fuzz/FuzzServeDNS covers every record kind; `go test` runs it as
// a normal test, and `go test -fuzz FuzzServeDNS -fuzztime 60s
// ./dns/server/` explores further.
func FuzzServeDNS(f *testing.F) {
	fuzzOnce.Do(func() {
		ts := startServer(f)
		fuzzH = ts.srv.h
		fuzzUDP = newUDPReader(nil, fuzzH, "fuzz")
	})
	f.Fuzz(func(t *testing.T, data []byte, tcp bool) {
		// The UDP path takes raw bytes (header checks, unpacking, the
		// answer cache): twice, so that the second may come from the cache.
		before := panicsSeen()
		for range 2 {
			wire := fuzzUDP.handle(data, netip.MustParseAddrPort("127.0.0.1:5353"))
			if wire == nil {
				continue
			}
			m := new(dns.Msg)
			if err := m.Unpack(wire); err != nil {
				t.Fatalf("UDP answer does not unpack: %v", err)
			}
			if len(data) >= 2 && m.Id != uint16(data[0])<<8|uint16(data[1]) {
				t.Fatalf("UDP answer ID %d, request's %x", m.Id, data[:2])
			}
		}
		if panicsSeen() != before {
			t.Fatalf("panic while answering %x", data)
		}
		req := new(dns.Msg)
		if err := req.Unpack(data); err != nil {
			return // the library answers FORMERR before our code runs
		}
		// The plain recover-to-SERVFAIL in Answer would hide a panic from the
		// fuzzer, so count them.
		resp, _ := fuzzH.Answer(req, tcp)
		if panicsSeen() != before {
			t.Fatalf("panic while answering %v", req)
		}
		if resp.Id != req.Id || !resp.Response {
			t.Fatalf("bad header: id %d want %d, qr %v", resp.Id, req.Id, resp.Response)
		}
		b, err := resp.Pack()
		if err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, resp)
		}
		limit := dns.MinMsgSize
		if o := req.IsEdns0(); o != nil {
			limit = max(limit, int(o.UDPSize()))
		}
		if tcp {
			limit = dns.MaxMsgSize
		}
		if len(b) > limit {
			t.Fatalf("answer of %d bytes exceeds the client's %d", len(b), limit)
		}
	})
}
