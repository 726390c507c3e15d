package conntrack

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/proxy"
)

func TestStaleEntries(t *testing.T) {
	name := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "kube-system", Name: "dns"}, Port: "dns", Protocol: v1.ProtocolUDP}
	empty := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "none"}, Port: "u", Protocol: v1.ProtocolUDP}
	svcs := proxy.ServicePortMap{
		name: {Name: name, Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053,
			ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, ExternalIPs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
		empty: {Name: empty, Protocol: v1.ProtocolUDP, Port: 99, NodePort: 30099, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.99")}},
	}
	eps := proxy.EndpointsMap{name: {
		{Addr: netip.MustParseAddr("10.244.1.5"), Port: 53, Serving: true},
		{Addr: netip.MustParseAddr("10.244.1.6"), Port: 53, Serving: false, Terminating: true},
	}}
	e := func(src, dst string, sport, dport int, rsrc string, rsport int) Entry {
		return Entry{OrigSrc: netip.MustParseAddr(src), OrigDst: netip.MustParseAddr(dst), OrigSport: sport, OrigDport: dport,
			ReplySrc: netip.MustParseAddr(rsrc), ReplySport: rsport}
	}
	entries := []Entry{
		e("10.244.0.2", "10.96.0.10", 1000, 53, "10.244.1.5", 53),
		e("10.244.0.2", "10.96.0.10", 1001, 53, "10.244.1.6", 53),
		e("10.244.0.2", "10.96.0.10", 1002, 53, "10.96.0.10", 53), // unreplied: no DNAT
		e("10.244.0.2", "192.0.2.1", 1003, 53, "10.244.9.9", 53),
		e("172.18.0.9", "172.18.0.2", 1004, 30053, "10.244.1.5", 53),
		e("172.18.0.9", "172.18.0.2", 1005, 30053, "10.244.1.7", 53),
		e("10.244.0.2", "10.96.0.99", 1006, 99, "10.244.3.3", 99),
		e("172.18.0.9", "172.18.0.2", 1007, 30099, "172.18.0.2", 30099),
		e("10.244.0.2", "8.8.8.8", 1008, 53, "8.8.8.8", 53),
	}
	var got []string
	for _, e := range StaleEntries(entries, svcs, eps, nil) {
		got = append(got, fmt.Sprintf("%s:%d>%s:%d", e.OrigSrc, e.OrigSport, e.OrigDst, e.OrigDport))
	}
	want := []string{
		// not serving (terminating) endpoint, unreplied (no endpoint), wrong endpoint
		"10.244.0.2:1001>10.96.0.10:53",
		"10.244.0.2:1002>10.96.0.10:53",
		"10.244.0.2:1003>192.0.2.1:53",
		// NodePort to a non-endpoint
		"172.18.0.9:1005>172.18.0.2:30053",
		// a Service without endpoints loses its ClusterIP flows (not its NodePort's)
		"10.244.0.2:1006>10.96.0.99:99",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Userspace mode: flows are REDIRECTed to the proxy's port for the
	// Service port (41000 for dns), so their entries reply from a node
	// address and that port. They are live; one to another port (a
	// listener the proxy closed) is not.
	redirect := func(n proxy.ServicePortName) int {
		if n == name {
			return 41000
		}
		return 0
	}
	entries = []Entry{
		e("10.244.0.2", "10.96.0.10", 2000, 53, "172.18.0.4", 41000),
		e("10.244.0.2", "10.96.0.10", 2001, 53, "127.0.0.1", 41000),
		e("172.18.0.9", "172.18.0.2", 2002, 30053, "172.18.0.2", 41000),
		e("10.244.0.2", "10.96.0.10", 2003, 53, "172.18.0.4", 39999),
		e("10.244.0.2", "10.96.0.99", 2004, 99, "172.18.0.4", 41000),
	}
	got = nil
	for _, e := range StaleEntries(entries, svcs, eps, redirect) {
		got = append(got, fmt.Sprintf("%s:%d>%s:%d", e.OrigSrc, e.OrigSport, e.OrigDst, e.OrigDport))
	}
	want = []string{"10.244.0.2:2003>10.96.0.10:53", "10.244.0.2:2004>10.96.0.99:99"}
	if !slices.Equal(got, want) {
		t.Errorf("userspace: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
