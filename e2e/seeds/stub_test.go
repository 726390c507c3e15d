package seeds

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/testbed"
)

// startStubUpstream makes the DNS pods' upstream resolver (the first
// nameserver of their /etc/resolv.conf, which `svcnet up` takes from the
// machine) exist inside the sandbox: a host holding that address, attached
// to the lab namespace, answering every A question with addr. It returns
// false when the upstream is a loopback address, which only the DNS pods'
// own namespaces could hold.
func startStubUpstream(t *testing.T, c *cluster, resolvConf string, addr netip.Addr) (netip.Addr, bool) {
	t.Helper()
	var ns netip.Addr
	for _, line := range strings.Split(resolvConf, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil && a.Is4() {
				ns = a
				break
			}
		}
	}
	if !ns.IsValid() || ns.IsLoopback() {
		return ns, false
	}
	stub := testbed.NewNetNS(t, "seeds-dns")
	testbed.Link(t, c.lab, "seeddns", "169.254.53.1/30", stub, "eth0", "169.254.53.2/30")
	stub.MustRun("ip", "addr", "add", ns.String()+"/32", "dev", "eth0")
	stub.MustRun("ip", "route", "add", "default", "via", "169.254.53.1")
	c.lab.MustRun("ip", "route", "replace", ns.String()+"/32", "via", "169.254.53.2")
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
				A: net.IP(addr.AsSlice())})
		}
		_ = w.WriteMsg(m)
	})
	err := stub.Do(func() error {
		pc, err := net.ListenPacket("udp", ns.String()+":53")
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", ns.String()+":53")
		if err != nil {
			pc.Close()
			return err
		}
		udp, tcp := &dns.Server{PacketConn: pc, Handler: h}, &dns.Server{Listener: ln, Handler: h}
		go func() { _ = udp.ActivateAndServe() }()
		go func() { _ = tcp.ActivateAndServe() }()
		t.Cleanup(func() { _ = udp.Shutdown(); _ = tcp.Shutdown() })
		return nil
	})
	if err != nil {
		t.Fatalf("[%s] stub upstream DNS at %s: %v", c.mode, ns, err)
	}
	return ns, true
}
