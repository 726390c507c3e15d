package conntrack

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
)

func TestStaleFilters(t *testing.T) {
	name := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "kube-system", Name: "dns"}, Port: "dns", Protocol: v1.ProtocolUDP}
	svcs := proxy.ServicePortMap{name: {Name: name, Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, ExternalIPs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}}
	sr := proxy.ServiceUpdateResult{DeletedUDPClusterIPs: sets.New("10.96.0.99")}
	er := proxy.EndpointsUpdateResult{
		DeletedUDPEndpoints:    []proxy.ServiceEndpoint{{ServicePortName: name, Endpoint: "10.244.1.5:53", Addr: netip.MustParseAddr("10.244.1.5")}},
		NewlyActiveUDPServices: []proxy.ServicePortName{name},
	}
	var got []string
	for _, f := range StaleFilters(svcs, sr, er) {
		got = append(got, strings.Join(f.Args(), " "))
	}
	want := []string{
		"-D --orig-dst 10.96.0.99 -p udp",
		"-D --orig-dst 10.96.0.10 --dst-nat 10.244.1.5 -p udp",
		"-D --orig-dst 192.0.2.1 --dst-nat 10.244.1.5 -p udp",
		"-D --dst-nat 10.244.1.5 -p udp --dport 30053",
		"-D --orig-dst 10.96.0.10 -p udp",
		"-D --orig-dst 192.0.2.1 -p udp",
		"-D -p udp --dport 30053",
		"-D -f ipv6 -p udp --dport 30053",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Nothing changed: nothing is deleted (never a blanket flush).
	if f := StaleFilters(svcs, proxy.ServiceUpdateResult{}, proxy.EndpointsUpdateResult{}); len(f) != 0 {
		t.Errorf("no changes gave %v", f)
	}
}
