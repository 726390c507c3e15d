package main

// IPVS mode without the kernel's IPVS: this machine has no ip_vs (and no
// dummy driver for kube-ipvs0), so neither proxy can program IPVS for
// real. What both can do for real is everything around it: the iptables
// rules (iptables-restore) and the ipsets (the ipset program) of IPVS
// mode. This part runs kube-proxy v1.37.2's IPVS Proxier and svcnet's IPVS
// mode in-process, each in a throwaway network namespace of its own, with
// only the IPVS table and kube-ipvs0's addresses in memory (kube-proxy's
// own FakeIPVS, svcnet's ipvs.Fake; an in-memory address list for both),
// on the same Services, and times their first (full) sync and one-Service
// changes.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	kpipvs "k8s.io/kubernetes/pkg/proxy/ipvs"
	utilipset "k8s.io/kubernetes/pkg/proxy/ipvs/ipset"
	utilipvstest "k8s.io/kubernetes/pkg/proxy/ipvs/util/testing"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	svcipvs "github.com/svcnet/svcnet/proxy/ipvs"
)

const ipvsChildArg = "ipvs-child"

// ipvsResult is what one child run reports.
type ipvsResult struct {
	Full    float64   `json:"full"`    // seconds of the first (full) sync
	Changes []float64 `json:"changes"` // seconds of each one-Service sync
	HeapMB  float64   `json:"heapMB"`  // live heap after the first sync
	// HeapOwnMB is the live heap after the changes once the in-memory
	// IPVS table and kube-ipvs0 address list are emptied: what the
	// proxy keeps itself (a kernel holds the rest).
	HeapOwnMB float64 `json:"heapOwnMB"`
	VS        int     `json:"vs"` // virtual servers after the first sync
}

// benchIPVS runs both implementations at every size, alternating their
// order between repetitions, each run in a fresh namespace.
func benchIPVS(res *results, cfg *config) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, n := range cfg.sizes {
		for rep := 0; rep < cfg.reps; rep++ {
			impls := []string{"kube-proxy", "svcnet"}
			if rep%2 == 1 {
				impls[0], impls[1] = impls[1], impls[0]
			}
			for _, impl := range impls {
				err := step(fmt.Sprintf("ipvs %s n=%d", impl, n), func(tb *benchTB) error {
					ns := testbed.NewNetNS(tb, "bench-ipvs")
					cmd := exec.Command("ip", "netns", "exec", ns.Name, self, ipvsChildArg, "-netns", ns.Name,
						"-impl", impl, "-n", fmt.Sprint(n), "-changes", fmt.Sprint(cfg.changes))
					var stderr strings.Builder
					cmd.Stderr = &stderr
					out, err := cmd.Output()
					if err != nil {
						return fmt.Errorf("%w: %s", err, lastLines(stderr.String(), 20))
					}
					var r ipvsResult
					if err := json.Unmarshal(out, &r); err != nil {
						return fmt.Errorf("child output %q: %w", out, err)
					}
					if r.VS != n {
						return fmt.Errorf("%d virtual servers after the first sync, want %d", r.VS, n)
					}
					res.add(r.Full, "ipvs", impl, n, "full")
					res.add(r.HeapMB, "ipvs", impl, n, "heap")
					res.add(r.HeapOwnMB, "ipvs", impl, n, "heapown")
					for _, c := range r.Changes {
						res.add(c, "ipvs", impl, n, "onechange")
					}
					logf("  ipvs %s n=%d: full sync %.2fs, one change %v, heap %.0f MB, without the in-memory IPVS table %.0f MB", impl, n, r.Full, r.Changes, r.HeapMB, r.HeapOwnMB)
					return nil
				})
				if err != nil {
					logf("ipvs %s n=%d: %v", impl, n, err)
					res.note(fmt.Sprintf("ipvs %s n=%d: %v", impl, n, err))
				}
			}
		}
	}
	return nil
}

// ipvsChild is the process inside the namespace: one implementation, n
// Services, then changes one-Service syncs; it prints an ipvsResult.
func ipvsChild(args []string) {
	fs := flag.NewFlagSet(ipvsChildArg, flag.ExitOnError)
	impl := fs.String("impl", "svcnet", "kube-proxy or svcnet")
	n := fs.Int("n", 1000, "Services")
	changes := fs.Int("changes", 5, "one-Service changes")
	netns := fs.String("netns", "", "the throwaway network namespace (ip netns) this child must be running in")
	_ = fs.Parse(args)
	// Both proxies write real iptables rules and ipsets: never into the
	// machine's namespace. benchIPVS starts this child in a namespace of
	// its own and names it; started by hand without one, it would leave
	// kube-proxy's rules behind.
	if err := inNamedNetNS(*netns); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v (bench/run starts it inside a throwaway namespace)\n", ipvsChildArg, err)
		os.Exit(1)
	}
	var r ipvsResult
	var err error
	switch *impl {
	case "kube-proxy":
		r, err = ipvsKubeProxy(*n, *changes)
	case "svcnet":
		r, err = ipvsSvcnet(*n, *changes)
	default:
		err = fmt.Errorf("unknown -impl %q", *impl)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// inNamedNetNS says whether this process runs in the network namespace
// `ip netns` knows as name.
func inNamedNetNS(name string) error {
	if name == "" {
		return errors.New("no -netns given")
	}
	var self, named syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &self); err != nil {
		return err
	}
	if err := syscall.Stat("/run/netns/"+name, &named); err != nil {
		return err
	}
	if self.Ino != named.Ino || self.Dev != named.Dev {
		return fmt.Errorf("not running in network namespace %q", name)
	}
	return nil
}

const (
	ipvsNodeIP    = "10.0.0.1"
	ipvsOtherNode = "other-node"
)

// ipvsObjects returns Service i and its slice: a ClusterIP Service (one
// TCP port) in 10.96.0.0/12 and 10 ready endpoints of its own on another
// node (pods are spread over a cluster; none is on this node, so neither
// proxy adds hairpin entries).
func ipvsObjects(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	name := fmt.Sprintf("svc-%d", i)
	ip := addrPlus(netip.MustParseAddr("10.96.0.0"), i+1)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: name, UID: types.UID(name)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip.String(), ClusterIPs: []string{ip.String()},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	var eps []discoveryv1.Endpoint
	for j := 0; j < endpointsPerService; j++ {
		k := i*endpointsPerService + j
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{addrPlus(netip.MustParseAddr("10.128.0.0"), k+1).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)}, NodeName: ptr(ipvsOtherNode)})
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: name + "-bench", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "svcnet-bench"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
	}
	return svc, slice
}

// addrPlus returns the IPv4 address k after a.
func addrPlus(a netip.Addr, k int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(k)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// informerObjects are the N Services and EndpointSlices as a proxy's
// informers hold them: made before the heap baseline and kept until after
// the heap is measured, so that the heap counts what each proxy keeps
// beyond them (svcnet's trackers refer to the objects themselves, which a
// real proxy's informer store holds either way; kube-proxy keeps copies of
// what it needs).
type informerObjects struct {
	svcs   []*corev1.Service
	slices []*discoveryv1.EndpointSlice
}

func newInformerObjects(n int) *informerObjects {
	o := &informerObjects{}
	for i := range n {
		svc, slice := ipvsObjects(i)
		o.svcs = append(o.svcs, svc)
		o.slices = append(o.slices, slice)
	}
	return o
}

func heapMB(before runtime.MemStats) float64 {
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
}

func baseline() runtime.MemStats {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m
}

// ipvsKubeProxy runs kube-proxy's IPVS Proxier as its NewProxier builds it
// (real iptables and ipset through their programs, as kube-proxy runs
// them), with the IPVS table, the sysctls, kube-ipvs0, conntrack and the
// health-check server replaced. kube-proxy syncs through syncProxyRules,
// which its OnEndpointSlicesSynced calls synchronously.
func ipvsKubeProxy(n, changes int) (ipvsResult, error) {
	var r ipvsResult
	ctx := context.Background()
	cfg := &kubeproxyconfig.KubeProxyConfiguration{
		IPTables:      kubeproxyconfig.KubeProxyIPTablesConfiguration{MasqueradeBit: ptr(int32(14))},
		SyncPeriod:    metav1.Duration{Duration: time.Hour},
		MinSyncPeriod: metav1.Duration{Duration: time.Second},
	}
	fakeIPVS := utilipvstest.NewFake()
	p, err := kpipvs.NewProxier(ctx, cfg, corev1.IPv4Protocol, utiliptables.New(utiliptables.ProtocolIPv4), fakeIPVS, utilipset.New(),
		sysctltest.NewFake(), proxyutil.NewDetectLocalByCIDR("10.244.0.0/16"), benchNode, net.ParseIP(ipvsNodeIP), nil, nil, false)
	if err != nil {
		return r, fmt.Errorf("kube-proxy ipvs NewProxier: %w", err)
	}
	links := newMemLinks()
	setField(p, "netlinkHandle", kpipvs.NetLinkHandle(links))
	setField(p, "conntrack", conntrack.NewFake())
	setField(p, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer())
	objs := newInformerObjects(n)
	base := baseline()
	for i := range n {
		p.OnServiceAdd(objs.svcs[i])
		p.OnEndpointSliceAdd(objs.slices[i])
	}
	p.OnServiceSynced()
	t0 := time.Now()
	p.OnEndpointSlicesSynced()
	r.Full = time.Since(t0).Seconds()
	r.HeapMB = heapMB(base)
	vs, err := fakeIPVS.GetVirtualServers()
	if err != nil {
		return r, err
	}
	r.VS = len(vs)
	for c := 0; c < changes; c++ {
		svc, slice := ipvsObjects(n + c)
		p.OnServiceAdd(svc)
		p.OnEndpointSliceAdd(slice)
		t0 := time.Now()
		p.OnEndpointSlicesSynced() // a sync, as its runner would start
		r.Changes = append(r.Changes, time.Since(t0).Seconds())
	}
	if vs, _ := fakeIPVS.GetVirtualServers(); len(vs) != n+changes {
		return r, fmt.Errorf("kube-proxy: %d virtual servers after the changes, want %d", len(vs), n+changes)
	}
	if err := fakeIPVS.Flush(); err != nil {
		return r, err
	}
	for _, addrs := range links.devs {
		addrs.Clear()
	}
	r.HeapOwnMB = heapMB(base)
	runtime.KeepAlive(objs)
	runtime.KeepAlive(p)
	return r, nil
}

// ipvsSvcnet runs svcnet's IPVS mode (real iptables-restore and ipset
// restore; the IPVS table and kube-ipvs0 in memory), fed through the proxy
// core's change trackers and policy cache as svcnet proxy feeds it.
func ipvsSvcnet(n, changes int) (ipvsResult, error) {
	var r ipvsResult
	ctx := context.Background()
	h := svcipvs.NewFake()
	iface := &memAddrs{addrs: map[netip.Addr]bool{}}
	bit := 14
	m, err := svcipvs.New(svcipvs.Config{
		ModeConfig: proxy.ModeConfig{
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), NodeName: benchNode, IPv4: true,
			NodeIPs:       []netip.Addr{netip.MustParseAddr(ipvsNodeIP)},
			ClusterCIDRs:  []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
			MasqueradeBit: &bit, Exec: proxy.OSExecutor{},
			// The node's address, as kube-proxy's fake netlink handle
			// lists it beside.
			LocalAddrs: func(context.Context) ([]proxy.LinkAddr, error) {
				return []proxy.LinkAddr{{Link: "eth0", Addr: netip.MustParseAddr(ipvsNodeIP)}}, nil
			},
		},
		Handle: h, Iface: iface, SkipSysctls: true,
	})
	if err != nil {
		return r, err
	}
	st := proxy.NewServiceChangeTracker()
	et := proxy.NewEndpointsChangeTracker(benchNode)
	svcs, eps := proxy.ServicePortMap{}, proxy.EndpointsMap{}
	cache := proxy.NewPolicyCache()
	node := proxy.NodeInfo{Name: benchNode, IPs: []netip.Addr{netip.MustParseAddr(ipvsNodeIP)}}
	objs := newInformerObjects(n)
	base := baseline()
	for i := range n {
		st.Update(nil, objs.svcs[i])
		et.EndpointSliceUpdate(objs.slices[i], false)
	}
	sync := func(full bool) (time.Duration, error) {
		t0 := time.Now()
		req := &proxy.SyncRequest{Full: full, Services: svcs, Endpoints: eps, Node: node}
		req.ServiceResult = st.Apply(svcs)
		req.EndpointsResult = et.Apply(eps)
		cache.UpdatePorts(node, req.ChangedPorts(), req.ServiceResult.Deleted)
		req.UsePolicyCache(cache)
		err := m.Sync(ctx, req)
		return time.Since(t0), err
	}
	d, err := sync(true)
	if err != nil {
		return r, fmt.Errorf("svcnet full sync: %w", err)
	}
	r.Full = d.Seconds()
	r.HeapMB = heapMB(base)
	vs, err := h.GetServices()
	if err != nil {
		return r, err
	}
	r.VS = len(vs)
	for c := 0; c < changes; c++ {
		svc, slice := ipvsObjects(n + c)
		st.Update(nil, svc)
		et.EndpointSliceUpdate(slice, false)
		d, err := sync(false)
		if err != nil {
			return r, fmt.Errorf("svcnet sync after a change: %w", err)
		}
		r.Changes = append(r.Changes, d.Seconds())
	}
	vs, _ = h.GetServices()
	if len(vs) != n+changes {
		return r, fmt.Errorf("svcnet: %d virtual servers after the changes, want %d", len(vs), n+changes)
	}
	for _, v := range vs {
		if err := h.DelService(v); err != nil {
			return r, err
		}
	}
	clear(iface.addrs)
	r.HeapOwnMB = heapMB(base)
	runtime.KeepAlive(objs)
	// What svcnet's proxy holds between syncs: the mode, the policy cache,
	// the change trackers and the Service and endpoint maps they apply to
	// (kube-proxy's Proxier holds its own maps, measured above with it).
	runtime.KeepAlive(m)
	runtime.KeepAlive(cache)
	runtime.KeepAlive(st)
	runtime.KeepAlive(et)
	runtime.KeepAlive(svcs)
	runtime.KeepAlive(eps)
	return r, nil
}

// memLinks is kube-ipvs0 in memory for kube-proxy (its NetLinkHandle):
// a set of addresses per device, so binding N addresses costs N map
// inserts, as memAddrs does for svcnet.
type memLinks struct{ devs map[string]sets.Set[string] }

func newMemLinks() *memLinks { return &memLinks{devs: map[string]sets.Set[string]{}} }

func (l *memLinks) EnsureAddressBind(address, dev string) (bool, error) {
	s, ok := l.devs[dev]
	if !ok {
		return false, fmt.Errorf("no device %s", dev)
	}
	if s.Has(address) {
		return true, nil
	}
	s.Insert(address)
	return false, nil
}
func (l *memLinks) UnbindAddress(address, dev string) error {
	l.devs[dev].Delete(address)
	return nil
}
func (l *memLinks) EnsureDummyDevice(dev string) (bool, error) {
	if _, ok := l.devs[dev]; ok {
		return true, nil
	}
	l.devs[dev] = sets.New[string]()
	return false, nil
}
func (l *memLinks) DeleteDummyDevice(dev string) error { delete(l.devs, dev); return nil }
func (l *memLinks) ListBindAddress(dev string) ([]string, error) {
	return sets.List(l.devs[dev]), nil
}
func (l *memLinks) GetAllLocalAddresses() (sets.Set[string], error) {
	out := sets.New[string](ipvsNodeIP, "127.0.0.1")
	for _, s := range l.devs {
		out = out.Union(s)
	}
	return out, nil
}
func (l *memLinks) GetLocalAddresses(dev string) (sets.Set[string], error) {
	return l.devs[dev].Clone(), nil
}
func (l *memLinks) GetAllLocalAddressesExcept(dev string) (sets.Set[string], error) {
	out := sets.New[string](ipvsNodeIP, "127.0.0.1")
	for d, s := range l.devs {
		if d != dev {
			out = out.Union(s)
		}
	}
	return out, nil
}

// memAddrs is kube-ipvs0 in memory for svcnet (its ipvs.Interface).
type memAddrs struct{ addrs map[netip.Addr]bool }

func (m *memAddrs) Ensure(context.Context) error { return nil }
func (m *memAddrs) Addrs(_ context.Context, v6 bool) ([]netip.Addr, error) {
	var out []netip.Addr
	for a := range m.addrs {
		if a.Is6() == v6 {
			out = append(out, a)
		}
	}
	return out, nil
}
func (m *memAddrs) Add(_ context.Context, a netip.Addr) error { m.addrs[a] = true; return nil }
func (m *memAddrs) Del(_ context.Context, a netip.Addr) error { delete(m.addrs, a); return nil }
func (m *memAddrs) Delete(context.Context) error              { clear(m.addrs); return nil }

// setField assigns an unexported field of kube-proxy's Proxier (its
// dependencies are unexported; its own fake constructor is in a _test.go
// file).
func setField(obj any, name string, val any) {
	f := reflect.ValueOf(obj).Elem().FieldByName(name)
	if !f.IsValid() {
		panic(fmt.Sprintf("%T has no field %q (kube-proxy changed; update bench/run)", obj, name))
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(val))
}
