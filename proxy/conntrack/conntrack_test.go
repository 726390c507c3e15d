package conntrack

import (
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
	out := `udp      17 29 src=10.244.0.2 dst=10.96.0.10 sport=1000 dport=53 src=10.244.1.5 dst=10.244.0.2 sport=53 dport=1000 mark=0 use=1
udp      17 29 src=10.244.0.2 dst=10.96.0.10 sport=1001 dport=53 src=10.244.1.6 dst=10.244.0.2 sport=53 dport=1001 mark=0 use=1
udp      17 29 src=10.244.0.2 dst=10.96.0.10 sport=1002 dport=53 src=10.96.0.10 dst=10.244.0.2 sport=53 dport=1002 [UNREPLIED] mark=0 use=1
udp      17 29 src=10.244.0.2 dst=192.0.2.1 sport=1003 dport=53 src=10.244.9.9 dst=10.244.0.2 sport=53 dport=1003 mark=0 use=1
udp      17 29 src=172.18.0.9 dst=172.18.0.2 sport=1004 dport=30053 src=10.244.1.5 dst=172.18.0.9 sport=53 dport=1004 mark=0 use=1
udp      17 29 src=172.18.0.9 dst=172.18.0.2 sport=1005 dport=30053 src=10.244.1.7 dst=172.18.0.9 sport=53 dport=1005 mark=0 use=1
udp      17 29 src=10.244.0.2 dst=10.96.0.99 sport=1006 dport=99 src=10.244.3.3 dst=10.244.0.2 sport=99 dport=1006 mark=0 use=1
udp      17 29 src=172.18.0.9 dst=172.18.0.2 sport=1007 dport=30099 src=172.18.0.2 dst=172.18.0.9 sport=30099 dport=1007 mark=0 use=1
udp      17 29 src=10.244.0.2 dst=8.8.8.8 sport=1008 dport=53 src=8.8.8.8 dst=10.244.0.2 sport=53 dport=1008 mark=0 use=1
tcp      6 431999 ESTABLISHED src=10.244.0.2 dst=10.96.0.10 sport=1009 dport=53 src=10.244.1.6 dst=10.244.0.2 sport=53 dport=1009 [ASSURED] mark=0 use=1
`
	entries := ParseEntries(out)
	if len(entries) != 9 {
		t.Fatalf("parsed %d UDP entries: %+v", len(entries), entries)
	}
	var got []string
	for _, e := range StaleEntries(entries, svcs, eps) {
		got = append(got, strings.Join(e.DeleteArgs(), " "))
	}
	want := []string{
		// not serving (terminating) endpoint, unreplied (no endpoint), wrong endpoint
		"-D -p udp -s 10.244.0.2 -d 10.96.0.10 --sport 1001 --dport 53",
		"-D -p udp -s 10.244.0.2 -d 10.96.0.10 --sport 1002 --dport 53",
		"-D -p udp -s 10.244.0.2 -d 192.0.2.1 --sport 1003 --dport 53",
		// NodePort to a non-endpoint
		"-D -p udp -s 172.18.0.9 -d 172.18.0.2 --sport 1005 --dport 30053",
		// a Service without endpoints loses its ClusterIP flows (not its NodePort's)
		"-D -p udp -s 10.244.0.2 -d 10.96.0.99 --sport 1006 --dport 99",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	v6 := Entry{OrigSrc: netip.MustParseAddr("fd00::1"), OrigDst: netip.MustParseAddr("fd00:96::a"), OrigSport: 1, OrigDport: 53}
	if a := strings.Join(v6.DeleteArgs(), " "); a != "-D -f ipv6 -p udp -s fd00::1 -d fd00:96::a --sport 1 --dport 53" {
		t.Errorf("ipv6 args %s", a)
	}
}
