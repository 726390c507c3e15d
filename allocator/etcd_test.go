package allocator

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/allocator/etcdtest"
)

// Two allocators on two etcd clients (as two apiservers) allocate 1,000
// ClusterIPs and 1,000 NodePorts concurrently: no value twice, and the
// stored count equals the number of allocations.
func TestEtcdConcurrentAllocation(t *testing.T) {
	url := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := netip.MustParsePrefix("10.96.0.0/16")
	pr := PortRange{Base: 30000, Size: 2768}
	var ipAllocs []*IPAllocator
	var portAllocs []*PortAllocator
	for i := 0; i < 2; i++ {
		c := etcdtest.Client(t, url)
		a, err := NewIPAllocator(prefix, NewEtcdStore(c, KeyServiceIPs))
		if err != nil {
			t.Fatal(err)
		}
		ipAllocs = append(ipAllocs, a)
		portAllocs = append(portAllocs, NewPortAllocator(pr, NewEtcdStore(c, KeyServiceNodePorts)))
	}
	const n = 1000
	start := time.Now()
	var mu sync.Mutex
	ips := map[netip.Addr]int{}
	ports := map[int]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ip, err := ipAllocs[i%2].AllocateNext(ctx, false)
			if err != nil {
				errs <- err
				return
			}
			p, err := portAllocs[i%2].AllocateNext(ctx, false)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			ips[ip]++
			ports[p]++
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("allocation failed: %v", err)
	}
	t.Logf("%d IP + %d port allocations through 2 clients in %v", n, n, time.Since(start))
	if len(ips) != n || len(ports) != n {
		t.Fatalf("distinct IPs %d, ports %d; want %d each (duplicates handed out)", len(ips), len(ports), n)
	}
	if used, _ := ipAllocs[0].Used(ctx); used != n {
		t.Fatalf("stored IP count %d, want %d", used, n)
	}
	if used, _ := portAllocs[1].Used(ctx); used != n {
		t.Fatalf("stored port count %d, want %d", used, n)
	}
}
