// Package dnstest holds helpers for DNS tests written as zone text: records
// are given in master-file syntax ("myapp.default.svc.cluster.local. 5 IN A
// 10.96.3.215") and compared as text, section by section, ignoring order.
package dnstest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// RR parses one record in zone-file syntax; it panics on a typo, which in a
// test table is a bug in the table.
func RR(s string) dns.RR {
	r, err := dns.NewRR(s)
	if err != nil || r == nil {
		panic(fmt.Sprintf("dnstest: bad record %q: %v", s, err))
	}
	return r
}

// A, AAAA, SRV, PTR, CNAME, TXT, SOA and NS are RR under names that say what
// the test expects.
func A(s string) dns.RR     { return RR(s) }
func AAAA(s string) dns.RR  { return RR(s) }
func SRV(s string) dns.RR   { return RR(s) }
func PTR(s string) dns.RR   { return RR(s) }
func CNAME(s string) dns.RR { return RR(s) }
func TXT(s string) dns.RR   { return RR(s) }
func SOA(s string) dns.RR   { return RR(s) }
func NS(s string) dns.RR    { return RR(s) }

// Case is one question and the response expected for it.
type Case struct {
	Name   string // test name
	Qname  string
	Qtype  uint16
	Rcode  int
	Answer []dns.RR
	Ns     []dns.RR
	Extra  []dns.RR
	// SOASerialAny ignores the SOA serial, which is a timestamp.
}

// Msg builds the query of c with RD set, as stub resolvers send it.
func (c Case) Msg() *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(c.Qname, c.Qtype)
	return m
}

// Check compares resp against c and returns a readable difference, or "".
// SOA serials are ignored (they are timestamps); record order is ignored;
// names are compared exactly, so case echo is checked too.
func (c Case) Check(resp *dns.Msg) string {
	if resp == nil {
		return "no response"
	}
	var b strings.Builder
	if resp.Rcode != c.Rcode {
		fmt.Fprintf(&b, "rcode %s, want %s\n", dns.RcodeToString[resp.Rcode], dns.RcodeToString[c.Rcode])
	}
	section := func(name string, got, want []dns.RR) {
		g, w := texts(got), texts(want)
		if strings.Join(g, "\n") != strings.Join(w, "\n") {
			fmt.Fprintf(&b, "%s:\n  got:\n    %s\n  want:\n    %s\n", name, strings.Join(g, "\n    "), strings.Join(w, "\n    "))
		}
	}
	section("answer", resp.Answer, c.Answer)
	section("authority", resp.Ns, c.Ns)
	var extra []dns.RR
	for _, rr := range resp.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	section("additional", extra, c.Extra)
	return b.String()
}

func texts(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		if soa, ok := rr.(*dns.SOA); ok {
			c := *soa
			c.Serial = 0
			rr = &c
		}
		out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	sort.Strings(out)
	return out
}
