package allocator

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBitmapStaticBandExhaustionRelease(t *testing.T) {
	b := NewBitmap(64, 16)
	for i := 0; i < 48; i++ {
		got, ok := b.AllocateNext()
		if !ok {
			t.Fatalf("allocation %d failed", i)
		}
		if got < 16 {
			t.Fatalf("allocation %d = %d, in the static band while the dynamic band had room", i, got)
		}
	}
	for i := 0; i < 16; i++ {
		got, ok := b.AllocateNext()
		if !ok || got >= 16 {
			t.Fatalf("fallback allocation %d = %d, %v; want static band", i, got, ok)
		}
	}
	if _, ok := b.AllocateNext(); ok || b.Free() != 0 || b.Used() != 64 {
		t.Fatalf("full bitmap: free %d used %d", b.Free(), b.Used())
	}
	if b.Allocate(3) {
		t.Fatal("Allocate of a taken offset succeeded")
	}
	b.Release(3)
	b.Release(3) // no-op
	if b.Used() != 63 {
		t.Fatalf("used %d after release, want 63", b.Used())
	}
	if got, ok := b.AllocateNext(); !ok || got != 3 {
		t.Fatalf("after release AllocateNext = %d, %v; want 3", got, ok)
	}
}

func TestBitmapSnapshotRestore(t *testing.T) {
	b := NewBitmap(100, 16)
	for _, i := range []int{0, 7, 63, 64, 99} {
		b.Allocate(i)
	}
	c := NewBitmap(100, 16)
	c.Restore(b.Snapshot())
	if c.Used() != 5 {
		t.Fatalf("restored used %d, want 5", c.Used())
	}
	var got []int
	c.ForEach(func(i int) { got = append(got, i) })
	want := []int{0, 7, 63, 64, 99}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("restored %v, want %v", got, want)
		}
	}
	small := NewBitmap(50, 0)
	small.Restore(b.Snapshot())
	if small.Used() != 2 { // 0 and 7 fit
		t.Fatalf("restore into smaller bitmap used %d, want 2", small.Used())
	}
}

func TestIPRange(t *testing.T) {
	cases := []struct {
		cidr        string
		size, band  int
		first, last string
	}{
		{"10.96.0.0/16", 65534, 256, "10.96.0.1", "10.96.255.254"},
		{"10.0.0.0/24", 254, 16, "10.0.0.1", "10.0.0.254"},
		{"10.0.0.0/28", 14, 0, "10.0.0.1", "10.0.0.14"},
		{"10.0.0.0/20", 4094, 256, "10.0.0.1", "10.0.15.254"},
		{"10.0.0.0/22", 1022, 64, "10.0.0.1", "10.0.3.254"},
		{"fd00:10:96::/112", 65535, 256, "fd00:10:96::1", "fd00:10:96::ffff"},
		{"fd00::/64", 65535, 256, "fd00::1", "fd00::ffff"},
	}
	for _, tc := range cases {
		r, err := NewIPRange(netip.MustParsePrefix(tc.cidr))
		if err != nil {
			t.Fatal(err)
		}
		if r.Size() != tc.size || r.StaticBand() != tc.band {
			t.Errorf("%s: size %d band %d, want %d %d", tc.cidr, r.Size(), r.StaticBand(), tc.size, tc.band)
		}
		if r.Addr(0).String() != tc.first || r.Addr(r.Size()-1).String() != tc.last {
			t.Errorf("%s: first %s last %s, want %s %s", tc.cidr, r.Addr(0), r.Addr(r.Size()-1), tc.first, tc.last)
		}
		if off, ok := r.Offset(netip.MustParseAddr(tc.last)); !ok || off != r.Size()-1 {
			t.Errorf("%s: Offset(last) = %d, %v", tc.cidr, off, ok)
		}
		if _, ok := r.Offset(r.Prefix().Addr()); ok {
			t.Errorf("%s: network address is allocatable", tc.cidr)
		}
	}
	if _, err := NewIPRange(netip.MustParsePrefix("10.0.0.0/31")); err == nil {
		t.Error("/31 accepted")
	}
}

func TestPortRange(t *testing.T) {
	r, err := ParsePortRange("30000-32767")
	if err != nil {
		t.Fatal(err)
	}
	if r.Size != 2768 || r.StaticBand() != 86 || r.String() != "30000-32767" {
		t.Fatalf("range %+v band %d", r, r.StaticBand())
	}
	for _, bad := range []string{"", "x-1", "32767-30000", "0-10", "1-70000"} {
		if _, err := ParsePortRange(bad); err == nil {
			t.Errorf("ParsePortRange(%q) accepted", bad)
		}
	}
	if b := (PortRange{Base: 1, Size: 16}).StaticBand(); b != 0 {
		t.Errorf("16-port range band %d, want 0", b)
	}
	if b := (PortRange{Base: 1, Size: 100}).StaticBand(); b != 16 {
		t.Errorf("100-port range band %d, want 16", b)
	}
	if b := (PortRange{Base: 1, Size: 60000}).StaticBand(); b != 128 {
		t.Errorf("60000-port range band %d, want 128", b)
	}
}

func TestIPAllocatorErrorsAndDryRun(t *testing.T) {
	ctx := context.Background()
	a, err := NewIPAllocator(netip.MustParsePrefix("10.96.0.0/16"), NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("10.96.0.5")
	if err := a.Allocate(ctx, ip, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(ctx, ip, false); !errors.Is(err, ErrIPAllocated) || err.Error() != "provided IP is already allocated" {
		t.Fatalf("second allocate: %v", err)
	}
	// kube-apiserver 1.36 (ServiceCIDR allocator): the network and broadcast
	// addresses belong to no range, like an address outside it.
	for _, s := range []string{"10.96.0.0", "10.96.255.255", "10.97.0.1", "fd00::1"} {
		if err := a.Allocate(ctx, netip.MustParseAddr(s), false); !errors.Is(err, ErrMismatchedNetwork) ||
			err.Error() != "the provided network does not match the current range" {
			t.Fatalf("allocate %s: %v", s, err)
		}
	}
	// dry run: checks, stores nothing
	if err := a.Allocate(ctx, netip.MustParseAddr("10.96.0.6"), true); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(ctx, ip, true); !errors.Is(err, ErrIPAllocated) {
		t.Fatalf("dry-run of a taken IP: %v", err)
	}
	if _, err := a.AllocateNext(ctx, true); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.Used(ctx); n != 1 {
		t.Fatalf("dry runs stored allocations: used %d", n)
	}
	next, err := a.AllocateNext(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if off, _ := a.Range().Offset(next); off < 256 {
		t.Fatalf("AllocateNext gave %s from the static band", next)
	}
	if err := a.Release(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if has, _ := a.Has(ctx, ip); has {
		t.Fatal("released IP still allocated")
	}
}

func TestIPAllocatorFull(t *testing.T) {
	ctx := context.Background()
	a, _ := NewIPAllocator(netip.MustParsePrefix("10.0.0.0/29"), NewMemoryStore())
	seen := map[netip.Addr]bool{}
	for i := 0; i < 6; i++ {
		ip, err := a.AllocateNext(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if seen[ip] {
			t.Fatalf("duplicate %s", ip)
		}
		seen[ip] = true
	}
	if _, err := a.AllocateNext(ctx, false); !errors.Is(err, ErrFull) || err.Error() != "range is full" {
		t.Fatalf("full range: %v", err)
	}
}

func TestPortAllocatorErrors(t *testing.T) {
	ctx := context.Background()
	a := NewPortAllocator(PortRange{Base: 30000, Size: 2768}, NewMemoryStore())
	if err := a.Allocate(ctx, 30000, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(ctx, 30000, false); err == nil || err.Error() != "provided port is already allocated" {
		t.Fatalf("second allocate: %v", err)
	}
	if err := a.Allocate(ctx, 29999, false); err == nil ||
		err.Error() != "provided port is not in the valid range. The range of valid ports is 30000-32767" {
		t.Fatalf("out of range: %v", err)
	}
	p, err := a.AllocateNext(ctx, false)
	if err != nil || p < 30000+86 || p > 32767 {
		t.Fatalf("AllocateNext = %d, %v (want dynamic band)", p, err)
	}
}

func TestSnapshotSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	st := NewMemoryStore()
	a, _ := NewIPAllocator(netip.MustParsePrefix("10.96.0.0/16"), st)
	ip, _ := a.AllocateNext(ctx, false)
	b, _ := NewIPAllocator(netip.MustParsePrefix("10.96.0.0/16"), st) // "restarted" apiserver
	if err := b.Allocate(ctx, ip, false); !errors.Is(err, ErrIPAllocated) {
		t.Fatalf("after restart %s not allocated: %v", ip, err)
	}
	// A different configured range ignores the old snapshot.
	c, _ := NewIPAllocator(netip.MustParsePrefix("10.96.0.0/24"), st)
	if n, _ := c.Used(ctx); n != 0 {
		t.Fatalf("new range inherited %d allocations", n)
	}
}

func svc(name, ip string, nodePorts ...int32) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	s.Spec.Type = corev1.ServiceTypeClusterIP
	if ip != "" {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip}
	}
	for _, np := range nodePorts {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 80, NodePort: np})
	}
	return s
}

func TestRepair(t *testing.T) {
	ctx := context.Background()
	ips, _ := NewIPAllocator(netip.MustParsePrefix("10.96.0.0/16"), NewMemoryStore())
	ports := NewPortAllocator(PortRange{Base: 30000, Size: 2768}, NewMemoryStore())
	// A leak: allocated, but no Service uses it.
	leak := netip.MustParseAddr("10.96.3.3")
	_ = ips.Allocate(ctx, leak, false)
	_ = ports.Allocate(ctx, 31000, false)

	services := []corev1.Service{
		svc("a", "10.96.0.20", 30001),
		svc("b", "10.96.0.20"),        // duplicate IP
		svc("c", "10.97.0.1"),         // out of range
		svc("d", "None"),              // headless
		svc("e", "10.96.0.21", 30001), // duplicate port
		svc("f", "10.96.0.22", 29000), // port out of range
	}
	var conflicts []Conflict
	r := &Repairer{IPs: []*IPAllocator{ips}, Ports: ports, Report: func(c Conflict) { conflicts = append(conflicts, c) }}
	list := func(context.Context) ([]corev1.Service, error) { return services, nil }
	for run := 1; run <= DefaultLeakThreshold; run++ {
		conflicts = nil
		if err := r.RunOnce(ctx, list); err != nil {
			t.Fatal(err)
		}
		has, _ := ips.Has(ctx, leak)
		phas, _ := ports.Has(ctx, 31000)
		if wantKept := run < DefaultLeakThreshold; has != wantKept || phas != wantKept {
			t.Fatalf("run %d: leaked IP kept=%v port kept=%v, want %v", run, has, phas, wantKept)
		}
	}
	got, _ := ips.Allocated(ctx)
	if len(got) != 3 || got[0].String() != "10.96.0.20" || got[2].String() != "10.96.0.22" {
		t.Fatalf("repaired IPs %v", got)
	}
	gotPorts, _ := ports.Allocated(ctx)
	if len(gotPorts) != 1 || gotPorts[0] != 30001 {
		t.Fatalf("repaired ports %v", gotPorts)
	}
	reasons := map[string]string{}
	for _, c := range conflicts {
		reasons[c.Service.Name] = c.Reason + ": " + c.Message
	}
	want := map[string]string{
		"b": "ClusterIPAlreadyAllocated: Cluster IP [IPv4]:10.96.0.20 was assigned to multiple services; please recreate service",
		"c": "ClusterIPOutOfRange: Cluster IP [IPv4]:10.97.0.1 is not within the configured Service CIDR 10.96.0.0/16; please recreate service",
		"e": "PortAlreadyAllocated: Port 30001 was assigned to multiple services; please recreate service",
		"f": "PortOutOfRange: Port 29000 is not within the port range 30000-32767; please recreate service",
	}
	for k, v := range want {
		if reasons[k] != v {
			t.Errorf("conflict for %s = %q, want %q", k, reasons[k], v)
		}
	}
	if len(reasons) != len(want) {
		t.Errorf("conflicts %v", reasons)
	}
}

// racyStore lets a test write to the store between Repair's read and its CAS.
type racyStore struct {
	*MemoryStore
	onCAS func()
}

func (r *racyStore) CAS(ctx context.Context, rev int64, snapshot []byte) (bool, error) {
	if f := r.onCAS; f != nil {
		r.onCAS = nil
		f()
	}
	return r.MemoryStore.CAS(ctx, rev, snapshot)
}

func TestRepairDualStackAndConcurrentAllocation(t *testing.T) {
	ctx := context.Background()
	st := &racyStore{MemoryStore: NewMemoryStore()}
	v4, _ := NewIPAllocator(netip.MustParsePrefix("10.96.0.0/16"), st)
	v6, _ := NewIPAllocator(netip.MustParsePrefix("fd00:10:96::/112"), NewMemoryStore())
	other, _ := NewIPAllocator(netip.MustParsePrefix("10.96.0.0/16"), st) // a second apiserver
	s := svc("dual", "10.96.0.30")
	s.Spec.ClusterIPs = []string{"10.96.0.30", "fd00:10:96::30"}
	var inflight netip.Addr
	st.onCAS = func() { // another apiserver allocates while repair runs
		inflight, _ = other.AllocateNext(ctx, false)
	}
	r := &Repairer{IPs: []*IPAllocator{v4, v6}}
	if err := r.RunOnce(ctx, func(context.Context) ([]corev1.Service, error) { return []corev1.Service{s}, nil }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		a  *IPAllocator
		ip string
	}{{v4, "10.96.0.30"}, {v6, "fd00:10:96::30"}, {v4, inflight.String()}} {
		if has, _ := want.a.Has(ctx, netip.MustParseAddr(want.ip)); !has {
			t.Errorf("%s not allocated after repair", want.ip)
		}
	}
}

// TestIPAllocatorRangeEdgesIPv6 pins the IPv6 edges as kube-apiserver 1.36
// answers them: the network address is in no range, the last address of the
// prefix is allocatable (IPv6 has no broadcast address).
func TestIPAllocatorRangeEdgesIPv6(t *testing.T) {
	ctx := context.Background()
	a, err := NewIPAllocator(netip.MustParsePrefix("fd00:10:96::/112"), NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(ctx, netip.MustParseAddr("fd00:10:96::"), false); !errors.Is(err, ErrMismatchedNetwork) {
		t.Fatalf("network address: got %v, want ErrMismatchedNetwork", err)
	}
	if err := a.Allocate(ctx, netip.MustParseAddr("fd00:10:96::ffff"), false); err != nil {
		t.Fatalf("last address: %v", err)
	}
	// A range larger than the bitmap: addresses past it are refused with
	// the not-in-range error (a documented svcnet limit).
	big, err := NewIPAllocator(netip.MustParsePrefix("fd00:10:96::/64"), NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	want := "the provided IP (fd00:10:96::1:0) is not in the valid range. The range of valid IPs is fd00:10:96::/64"
	if err := big.Allocate(ctx, netip.MustParseAddr("fd00:10:96::1:0"), false); err == nil || err.Error() != want {
		t.Fatalf("past the bitmap: got %v, want %q", err, want)
	}
}
