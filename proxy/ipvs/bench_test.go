package ipvs

import (
	"fmt"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
)

// BenchmarkPartialSync is one endpoint change beside N ClusterIP Services
// of 10 endpoints each, through the Mode (plan and apply) on the in-memory
// kernel: what a partial sync costs the proxy itself. It should not grow
// with N.
//
//	go test -run '^$' -bench PartialSync -benchmem ./proxy/ipvs/
func BenchmarkPartialSync(b *testing.B) {
	for _, n := range []int{1000, 10000, 30000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			k := newTestKernel(&testing.T{}, "")
			s := newState()
			for i := range n {
				sp := clusterIP(fmt.Sprintf("svc%d", i), fmt.Sprintf("10.%d.%d.%d", 96+i>>16, i>>8&255, i&255), 80, v1.ProtocolTCP)
				var eps []*proxy.Endpoint
				for j := range 10 {
					eps = append(eps, ep(fmt.Sprintf("10.244.%d.%d", j, i%250+1), 8080+i/250, false))
				}
				s.service(sp, eps...)
			}
			t := &testing.T{}
			k.syncFull(t, s, true)
			// The service tracker's index of ports, as the Proxier's
			// requests carry it.
			idx := proxy.PortIndex{}
			for name := range s.svcs {
				idx[name.NamespacedName] = append(idx[name.NamespacedName], name)
			}
			first := spn("default", "svc0", "", v1.ProtocolTCP)
			all := s.eps[first]
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					s.eps[first] = all[:9]
				} else {
					s.eps[first] = all
				}
				i++
				req := &proxy.SyncRequest{Services: s.svcs, Endpoints: s.eps, Node: proxy.NodeInfo{Name: "node-1", IPs: []netip.Addr{nodeIP}}}
				req.EndpointsResult.UpdatedServices = sets.New(first.NamespacedName)
				req.ServiceResult.Ports = idx
				if err := k.mode.Sync(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
