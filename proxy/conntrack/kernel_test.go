package conntrack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
)

// TestCleanerKernel: real UDP flows in test namespaces, both families. A
// client namespace DNATs "Service" addresses to UDP endpoints in a server
// namespace (an nftables nat rule, as a proxy would). Then endpoint :5353
// is removed and the rule points at :5354. The flows to the removed
// endpoint keep their DNAT in conntrack, so the client's next datagram on
// the same socket still reaches :5353, until the Cleaner deletes exactly
// those entries: then it reaches :5354. A flow to a Service whose endpoint
// stays serving keeps its entry.
func TestCleanerKernel(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "nft")
	client := testbed.NewNetNS(t, "ct-client")
	server := testbed.NewNetNS(t, "ct-server")
	testbed.Link(t, client, "eth0", "10.0.0.1/24", server, "eth0", "10.0.0.2/24")
	client.MustRun("ip", "addr", "add", "fd00:1::1/64", "dev", "eth0", "nodad")
	server.MustRun("ip", "addr", "add", "fd00:1::2/64", "dev", "eth0", "nodad")
	client.MustRun("ip", "route", "add", "10.96.0.0/16", "via", "10.0.0.2")
	client.MustRun("ip", "-6", "route", "add", "fd00:96::/112", "via", "fd00:1::2")

	// Endpoints: each answers with its own address and port.
	for _, addr := range []string{"10.0.0.2:5353", "10.0.0.2:5354", "10.0.0.2:5355", "[fd00:1::2]:5353", "[fd00:1::2]:5354"} {
		err := server.Do(func() error {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return err
			}
			t.Cleanup(func() { pc.Close() })
			go func() {
				buf := make([]byte, 512)
				for {
					_, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					_, _ = pc.WriteTo([]byte(addr), from)
				}
			}()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setRules := func(port int) {
		t.Helper()
		script := fmt.Sprintf(`table inet ctt
delete table inet ctt
table inet ctt {
	chain out {
		type nat hook output priority -100;
		ip daddr 10.96.0.10 udp dport 53 dnat ip to 10.0.0.2:%d
		ip daddr 10.96.0.11 udp dport 53 dnat ip to 10.0.0.2:5355
		ip6 daddr fd00:96::a udp dport 53 dnat ip6 to [fd00:1::2]:%d
	}
}
`, port, port)
		err := client.Do(func() error { return nftScript(script) })
		if err != nil {
			t.Fatal(err)
		}
	}
	setRules(5353)

	// Three client sockets, one per flow; each keeps its source port.
	type flow struct {
		svc  string
		conn *net.UDPConn
	}
	var flows []flow
	for _, svc := range []string{"10.96.0.10:53", "10.96.0.11:53", "[fd00:96::a]:53"} {
		err := client.Do(func() error {
			c, err := net.Dial("udp", svc)
			if err != nil {
				return err
			}
			t.Cleanup(func() { c.Close() })
			flows = append(flows, flow{svc, c.(*net.UDPConn)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ask := func(f flow) string {
		t.Helper()
		for try := 0; try < 5; try++ {
			_ = f.conn.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := f.conn.Write([]byte("q")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 512)
			n, err := f.conn.Read(buf)
			if err == nil {
				return string(buf[:n])
			}
		}
		t.Fatalf("no answer through %s", f.svc)
		return ""
	}
	for i, want := range []string{"10.0.0.2:5353", "10.0.0.2:5355", "[fd00:1::2]:5353"} {
		if got := ask(flows[i]); got != want {
			t.Fatalf("%s answered by %s, want %s", flows[i].svc, got, want)
		}
	}

	// The endpoint :5353 goes away; the rule now DNATs to :5354. The
	// conntrack entries still send the old flows to :5353.
	setRules(5354)
	if got := ask(flows[0]); got != "10.0.0.2:5353" {
		t.Fatalf("before cleaning, the old flow answered by %s; want the stale endpoint 10.0.0.2:5353 (conntrack keeps the DNAT)", got)
	}
	before := udpEntries(t, client.Name)

	name := func(n string) proxy.ServicePortName {
		return proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: n}, Port: "dns", Protocol: v1.ProtocolUDP}
	}
	ep := func(a string, port int) *proxy.Endpoint {
		return &proxy.Endpoint{Addr: netip.MustParseAddr(a), Port: port, Serving: true, Ready: true}
	}
	svcs := proxy.ServicePortMap{
		name("dns"): {Name: name("dns"), Protocol: v1.ProtocolUDP, Port: 53,
			ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::a")}},
		name("other"): {Name: name("other"), Protocol: v1.ProtocolUDP, Port: 53, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.11")}},
	}
	eps := proxy.EndpointsMap{
		name("dns"):   {ep("10.0.0.2", 5354), ep("fd00:1::2", 5354)},
		name("other"): {ep("10.0.0.2", 5355)},
	}
	if err := (&Cleaner{NetNS: client.Name}).CleanStaleEntries(context.Background(), svcs, eps, nil); err != nil {
		t.Fatal(err)
	}
	after := udpEntries(t, client.Name)
	for _, dst := range []string{"10.96.0.10:53", "[fd00:96::a]:53"} {
		if !strings.Contains(before, " dst="+dst+" reply-src=") {
			t.Fatalf("no conntrack entry to %s before cleaning:\n%s", dst, before)
		}
		if strings.Contains(after, " dst="+dst+" reply-src=") {
			t.Errorf("the stale entry to %s survived:\n%s", dst, after)
		}
	}
	if !strings.Contains(after, " dst=10.96.0.11:53 reply-src=10.0.0.2:5355") {
		t.Errorf("the entry to a serving endpoint was deleted:\n%s", after)
	}
	// The same sockets now reach the new endpoint.
	for i, want := range []string{"10.0.0.2:5354", "10.0.0.2:5355", "[fd00:1::2]:5354"} {
		if got := ask(flows[i]); got != want {
			t.Errorf("after cleaning, %s answered by %s, want %s", flows[i].svc, got, want)
		}
	}
}

// nftScript feeds an nft script to `nft -f -` in the current namespace.
func nftScript(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, out)
	}
	return nil
}

// udpEntries lists the namespace's UDP conntrack entries of both families,
// one "src=a:p dst=b:q reply-src=c:r" line each, through netlink.
func udpEntries(t *testing.T, ns string) string {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h, unix.NETLINK_NETFILTER)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	var b strings.Builder
	for _, fam := range []netlink.InetFamily{unix.AF_INET, unix.AF_INET6} {
		flows, err := nl.ConntrackTableList(netlink.ConntrackTable, fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range flows {
			if e, ok := entryOf(f); ok {
				fmt.Fprintf(&b, "src=%s dst=%s reply-src=%s\n", netip.AddrPortFrom(e.OrigSrc, uint16(e.OrigSport)),
					netip.AddrPortFrom(e.OrigDst, uint16(e.OrigDport)), netip.AddrPortFrom(e.ReplySrc, uint16(e.ReplySport)))
			}
		}
	}
	return b.String()
}
