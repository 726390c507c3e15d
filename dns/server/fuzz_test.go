package server

import (
	"sync"
	"testing"

	"github.com/miekg/dns"
)

var (
	fuzzOnce sync.Once
	fuzzH    *Handler
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
	})
	f.Fuzz(func(t *testing.T, data []byte, tcp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(data); err != nil {
			return // the library answers FORMERR before our code runs
		}
		// The plain recover-to-SERVFAIL in Answer would hide a panic from the
		// fuzzer, so count them.
		before := panicsSeen()
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
