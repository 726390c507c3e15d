package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
)

// bigWorld has n ClusterIP Services with 10 endpoints each.
func bigWorld(n int) (proxy.ServicePortMap, proxy.EndpointsMap) {
	svcs, eps := proxy.ServicePortMap{}, proxy.EndpointsMap{}
	for i := 0; i < n; i++ {
		name := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("svc%d", i)},
			Port: "http", Protocol: v1.ProtocolTCP}
		svcs[name] = &proxy.ServicePort{Name: name, Type: v1.ServiceTypeClusterIP, Protocol: v1.ProtocolTCP, Port: 80,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})}, SessionAffinity: v1.ServiceAffinityNone}
		for j := 0; j < 10; j++ {
			k := i*10 + j
			eps[name] = append(eps[name], &proxy.Endpoint{Addr: netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)}),
				Port: 8080, Ready: true, Serving: true, Weight: 1})
		}
	}
	return svcs, eps
}

// BenchmarkSyncRealNFT measures, with the real nft inside a test-made
// network namespace, a full sync and a one-Service partial sync for 1k and
// 10k Services of 10 endpoints (run with -bench SyncRealNFT -benchtime 1x).
func BenchmarkSyncRealNFT(b *testing.B) {
	testbed.RequireCommand(b, "nft")
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			ns := testbed.NewNetNS(b, "nftbench")
			nft := NewExecNFT(knftables.IPv4Family, TableName, proxy.OSExecutor{NetNS: ns.Name})
			svcs, eps := bigWorld(n)
			for i := 0; i < b.N; i++ {
				p := NewProxier(Config{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, nft)
				start := time.Now()
				if err := p.Sync(context.Background(), &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: eps}); err != nil {
					b.Fatal(err)
				}
				full := time.Since(start)
				var one proxy.ServicePortName
				for k := range svcs {
					one = k
					break
				}
				eps[one] = eps[one][1:]
				req := &proxy.SyncRequest{Services: svcs, Endpoints: eps}
				req.EndpointsResult.UpdatedServices = sets.New(one.NamespacedName)
				start = time.Now()
				if err := p.Sync(context.Background(), req); err != nil {
					b.Fatal(err)
				}
				partial := time.Since(start)
				b.ReportMetric(full.Seconds(), "full-sync-s")
				b.ReportMetric(partial.Seconds(), "one-change-sync-s")
				_ = p.Cleanup(context.Background())
			}
		})
	}
}

var benchSizes = []int{1000, 10000, 30000}
