package iptables

import (
	"fmt"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
)

func benchModel(n int) (proxy.ServicePortMap, proxy.EndpointsMap) {
	svcs := proxy.ServicePortMap{}
	epm := proxy.EndpointsMap{}
	for i := 0; i < n; i++ {
		name := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "b", Name: fmt.Sprintf("s%05d", i)}, Protocol: v1.ProtocolTCP}
		svcs[name] = &proxy.ServicePort{Name: name, ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})}, Port: 80, Protocol: v1.ProtocolTCP, SessionAffinity: v1.ServiceAffinityNone}
		for k := 0; k < 10; k++ {
			epm[name] = append(epm[name], &proxy.Endpoint{Addr: netip.AddrFrom4([4]byte{10, 244, byte(k), byte(i)}), Port: 8080, Ready: true, Serving: true})
		}
	}
	return svcs, epm
}

// BenchmarkPlan10k measures planning 10k Services × 10 endpoints, full and
// partial (one changed Service, top-level chains rewritten as kube-proxy
// does) and incremental (svcnet's partial sync).
func BenchmarkPlan10k(b *testing.B) {
	svcs, epm := benchModel(10000)
	b.Run("full", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			BuildPlan(PlanInput{Services: svcs, Endpoints: epm})
		}
	})
	b.Run("partial", func(b *testing.B) {
		ch := sets.New(types.NamespacedName{Namespace: "b", Name: "s05000"})
		for i := 0; i < b.N; i++ {
			BuildPlan(PlanInput{Services: svcs, Endpoints: epm, Partial: true, Changed: ch})
		}
	})
	// incremental: only the changed Service is planned, from the previous
	// plan's records (which a plan takes over, hence a new one each time).
	b.Run("incremental", func(b *testing.B) {
		ch := sets.New(types.NamespacedName{Namespace: "b", Name: "s05000"})
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			prev := BuildPlan(PlanInput{Services: svcs, Endpoints: epm})
			b.StartTimer()
			BuildPlan(PlanInput{Services: svcs, Endpoints: epm, Partial: true, Changed: ch, Prev: prev})
		}
	})
}
