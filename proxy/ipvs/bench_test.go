package ipvs

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/proxy"
)

// BenchmarkPartialSync is one endpoint change beside N ClusterIP Services
// of 10 endpoints each, through the Mode (plan and apply) on the in-memory
// kernel: what a partial sync costs the proxy itself.
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
				k.syncFull(t, s, false)
			}
		})
	}
}
