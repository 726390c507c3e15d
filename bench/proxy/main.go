// Command proxy benchmarks the iptables proxy mode: full-sync and
// one-change sync times for N Services × 10 endpoints (plan time and
// iptables-restore time, measured separately), and TCP connection set-up
// latency to the first and to the last Service in KUBE-SERVICES.
//
// One change is measured three ways: a Service losing an endpoint planned
// as kube-proxy plans a partial sync (its chains, plus KUBE-SERVICES and the
// other top-level chains rewritten whole: "rewrite top"), the same kind of
// change as svcnet plans it (the top-level chains edited rule by rule), and
// one Service added (svcnet's way). -dispatch tree measures the tree layout
// of KUBE-SERVICES (--iptables-dispatch=tree).
//
// Everything runs inside network namespaces this program creates (a "node"
// with the rules and a "pod" holding the endpoint addresses, linked by a
// veth pair, no route anywhere else) and deletes on exit. It needs root.
//
//	go run ./bench/proxy -services 1000,10000,30000 [-dispatch tree] [-endpoints 10]
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/iptables"

	"github.com/vishvananda/netns"
)

var endpointsPerService = 10

func main() {
	sizes := flag.String("services", "1000,10000,30000", "comma-separated Service counts")
	connects := flag.Int("connects", 300, "connections per latency measurement")
	legacy := flag.Bool("legacy", false, "use iptables-legacy instead of the nf_tables variant")
	timeout := flag.Duration("restore-timeout", 10*time.Minute, "give up on one iptables-restore after this long")
	dispatch := flag.String("dispatch", "linear", "layout of KUBE-SERVICES: linear (kube-proxy's) or tree")
	flag.IntVar(&endpointsPerService, "endpoints", 10, "endpoints per Service (1-10)")
	flag.Parse()
	d, err := iptables.ParseDispatch(*dispatch)
	if err != nil || endpointsPerService < 1 || endpointsPerService > 10 {
		fmt.Fprintln(os.Stderr, "bench/proxy: bad -dispatch or -endpoints")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench/proxy: needs root (network namespaces)")
		os.Exit(2)
	}
	b := newBed()
	defer b.close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	go func() { <-sig; b.close(); os.Exit(1) }()

	variant := "nf_tables"
	if *legacy {
		variant = "legacy"
	}
	fmt.Printf("iptables mode benchmark (iptables %s variant, %s dispatch), %d endpoints per Service, GOMAXPROCS=%d\n",
		variant, d, endpointsPerService, runtime.GOMAXPROCS(0))
	fmt.Printf("%-9s %-24s %10s %12s %12s %10s %14s %14s\n", "services", "sync", "plan", "restore", "total", "payloadMB", "connect first", "connect last")
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bad size %q\n", f)
			os.Exit(2)
		}
		if err := b.run(n, *connects, *legacy, *timeout, d); err != nil {
			fmt.Fprintf(os.Stderr, "%d services: %v\n", n, err)
		}
	}
}

type bed struct {
	node, pod string
}

func randName(hint string) string {
	var x [4]byte
	_, _ = rand.Read(x[:])
	return "svcnt-bench-" + hint + "-" + hex.EncodeToString(x[:])
}

func must(args ...string) string {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		panic(fmt.Sprintf("%s: %v: %s", strings.Join(args, " "), err, out))
	}
	return string(out)
}

// newBed makes the node and pod namespaces: node 10.244.0.1/24 on a veth to
// the pod, which holds the 10 endpoint addresses 10.244.0.2-11 and serves
// TCP on :8080 (one Go listener on the wildcard address).
func newBed() *bed {
	b := &bed{node: randName("node"), pod: randName("pod")}
	must("ip", "netns", "add", b.node)
	must("ip", "netns", "add", b.pod)
	inNode := func(a ...string) { must(append([]string{"ip", "netns", "exec", b.node}, a...)...) }
	inPod := func(a ...string) { must(append([]string{"ip", "netns", "exec", b.pod}, a...)...) }
	inNode("ip", "link", "set", "lo", "up")
	inPod("ip", "link", "set", "lo", "up")
	inNode("ip", "link", "add", "eth0", "type", "veth", "peer", "name", "peer0")
	inNode("ip", "link", "set", "peer0", "netns", b.pod)
	inPod("ip", "link", "set", "peer0", "name", "eth0")
	inNode("ip", "addr", "add", "10.244.0.1/24", "dev", "eth0")
	inNode("ip", "link", "set", "eth0", "up")
	for i := 2; i < 2+endpointsPerService; i++ {
		inPod("ip", "addr", "add", fmt.Sprintf("10.244.0.%d/24", i), "dev", "eth0")
	}
	inPod("ip", "link", "set", "eth0", "up")
	inPod("ip", "route", "add", "default", "via", "10.244.0.1")
	inNode("ip", "route", "add", "10.96.0.0/12", "dev", "eth0")
	var ln net.Listener
	if err := doIn(b.pod, func() error {
		var err error
		ln, err = net.Listen("tcp4", ":8080")
		return err
	}); err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return b
}

func (b *bed) close() {
	for _, ns := range []string{b.node, b.pod} {
		_ = exec.Command("ip", "netns", "delete", ns).Run()
	}
}

// doIn runs f on a thread inside the named namespace and switches back.
func doIn(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		h, err := netns.GetFromName(name)
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			errc <- err
			return // thread stays locked and dies
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func clusterIP(i int) netip.Addr {
	// 10.96.0.0/12 holds a million addresses; skip .0.
	i++
	return netip.AddrFrom4([4]byte{10, byte(96 + i>>16), byte(i >> 8), byte(i)})
}

func model(n int) (proxy.ServicePortMap, proxy.EndpointsMap) {
	svcs := proxy.ServicePortMap{}
	eps := proxy.EndpointsMap{}
	for i := 0; i < n; i++ {
		name := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("svc-%06d", i)}, Port: "http", Protocol: v1.ProtocolTCP}
		svcs[name] = &proxy.ServicePort{Name: name, Type: v1.ServiceTypeClusterIP, ClusterIPs: []netip.Addr{clusterIP(i)}, Port: 80,
			Protocol: v1.ProtocolTCP, SessionAffinity: v1.ServiceAffinityNone}
		for k := 0; k < endpointsPerService; k++ {
			eps[name] = append(eps[name], &proxy.Endpoint{Addr: netip.AddrFrom4([4]byte{10, 244, 0, byte(2 + k)}), Port: 8080,
				Ready: true, Serving: true, NodeName: "node", IsLocal: true, Weight: 1})
		}
	}
	return svcs, eps
}

func (b *bed) run(n, connects int, legacy bool, timeout time.Duration, dispatch iptables.Dispatch) error {
	ctx := context.Background()
	ex := proxy.OSExecutor{NetNS: b.node}
	run := &iptables.Runner{Exec: ex}
	if legacy {
		run.Backend = iptables.BackendLegacy
	}
	// Start from a clean table for every size.
	_ = iptables.Cleanup(ctx, run)
	p := iptables.New(proxy.ModeConfig{Exec: ex, IPv4: true, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		SyncPeriod: time.Hour}, run)
	svcs, eps := model(n)

	// Full sync: the jump rules first (as a real first sync does), then
	// plan and restore measured separately.
	if err := p.Sync(ctx, &proxy.SyncRequest{Full: true, Services: proxy.ServicePortMap{}, Endpoints: proxy.EndpointsMap{}}); err != nil {
		return err
	}
	existing, err := run.SaveChains(ctx, false, "nat")
	if err != nil {
		return err
	}
	in := iptables.PlanInput{Services: svcs, Endpoints: eps, LocalCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		MasqueradeMark: "0x4000", LocalhostNodePorts: true, ExistingNATChains: existing, Dispatch: dispatch}
	t0 := time.Now()
	plan := iptables.BuildPlan(in)
	planT := time.Since(t0)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	t1 := time.Now()
	err = run.Restore(rctx, false, plan.Data)
	cancel()
	restoreT := time.Since(t1)
	if err != nil {
		return fmt.Errorf("full restore after %v: %w", restoreT, err)
	}
	first, last := b.latency(svcs, connects)
	fmt.Printf("%-9d %-24s %10s %12s %12s %10.1f %14s %14s\n", n, "full", round(planT), round(restoreT), round(planT+restoreT),
		float64(len(plan.Data))/1e6, first, last)

	// One change: a Service in the middle loses one endpoint, planned as
	// kube-proxy plans it (top-level chains rewritten whole).
	names := proxy.SortedServicePorts(svcs)
	apply := func(label string, in iptables.PlanInput) (*iptables.Plan, error) {
		t0 := time.Now()
		plan := iptables.BuildPlan(in)
		planT := time.Since(t0)
		rctx, cancel := context.WithTimeout(ctx, timeout)
		t1 := time.Now()
		err := run.Restore(rctx, false, plan.Data)
		cancel()
		restoreT := time.Since(t1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		fmt.Printf("%-9d %-24s %10s %12s %12s %10.3f\n", n, label, round(planT), round(restoreT), round(planT+restoreT), float64(len(plan.Data))/1e6)
		return plan, nil
	}
	changed := names[len(names)/2]
	eps[changed] = eps[changed][1:]
	existing, _ = run.SaveChains(ctx, false, "nat")
	in.ExistingNATChains = existing
	in.Partial = true
	in.Changed = sets.New(changed.NamespacedName)
	if plan, err = apply("one change (rewrite top)", in); err != nil {
		return err
	}
	// The same kind of change, svcnet's way.
	changed = names[len(names)/3]
	eps[changed] = eps[changed][1:]
	in.Prev, in.Changed, in.ExistingNATChains = plan, sets.New(changed.NamespacedName), nil
	if plan, err = apply("one change", in); err != nil {
		return err
	}
	// One Service added.
	added := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: "svc-added"}, Port: "http", Protocol: v1.ProtocolTCP}
	addSvcs, addEps := model(1)
	for k, v := range addSvcs {
		v.Name = added
		v.ClusterIPs = []netip.Addr{clusterIP(n + 1)}
		svcs[added], eps[added] = v, addEps[k]
	}
	in.Prev, in.Changed = plan, sets.New(added.NamespacedName)
	if _, err = apply("one Service added", in); err != nil {
		return err
	}
	delete(svcs, added)
	delete(eps, added)
	return iptables.Cleanup(ctx, run)
}

func round(d time.Duration) string {
	switch {
	case d > 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d > time.Second:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(100 * time.Microsecond).String()
	}
}

// latency measures the median TCP connect time from the node to the first
// and to the last Service's ClusterIP.
func (b *bed) latency(svcs proxy.ServicePortMap, connects int) (string, string) {
	names := proxy.SortedServicePorts(svcs)
	measure := func(ip netip.Addr) string {
		var ds []time.Duration
		err := doIn(b.node, func() error {
			for i := 0; i < connects; i++ {
				t := time.Now()
				c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(ip, 80).String(), 5*time.Second)
				if err != nil {
					return err
				}
				ds = append(ds, time.Since(t))
				c.Close()
			}
			return nil
		})
		if err != nil {
			return "error: " + err.Error()
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2].Round(time.Microsecond).String()
	}
	return measure(svcs[names[0]].ClusterIP()), measure(svcs[names[len(names)-1]].ClusterIP())
}
