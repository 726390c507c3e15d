package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/testbed"
)

const (
	endpointsPerService = 10
	// maxEndpointSpread bounds -endpoint-spread (the addresses of the pods
	// namespace are 10.1.0.2 up to 10.1.0.65).
	maxEndpointSpread = 64
	benchNode         = "node1"
	benchNodeIP       = "10.1.0.1"
	benchNS           = "default"
)

// The two proxies under test, started with the same flags where the flags
// exist in both (svcnet proxy takes kube-proxy's names).
var proxyImpls = []string{"kube-proxy", "svcnet"}

// proxyBed is one size's test bed: a node namespace running svcnet
// apiserver (the API both proxies watch) and a pods namespace holding the
// endpoint addresses 10.1.0.2-11, linked by a veth pair; neither has a route
// anywhere else.
type proxyBed struct {
	node, pods *testbed.NetNS
	kubeconfig string
	cs         *kubernetes.Clientset
	dir        string
	clusterIPs []string // of svc-00000 .. svc-N-1, in creation order
	n          int
	perfDir    string
	env        []string
	heapDir    string
	// spread, when positive, gives Service i 1 + i%spread endpoints
	// (-endpoint-spread) instead of endpointsPerService.
	spread int
	// lb makes the Services LoadBalancer Services (-load-balancers), the
	// k-th created with address lbAddr(k).
	lb    bool
	lbSeq atomic.Int64
	// legacyBin holds iptables, iptables-restore, ... (and ip6tables')
	// as links to the iptables-legacy programs: kube-proxy's PATH in the
	// -legacy modes.
	legacyBin string
}

// legacyShim makes the directory of legacyBin in dir.
func legacyShim(dir string) (string, error) {
	bin := filepath.Join(dir, "iptables-legacy-bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	for _, v := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			target, err := exec.LookPath(v + "-legacy" + suffix)
			if err != nil {
				return "", err
			}
			if err := os.Symlink(target, filepath.Join(bin, v+suffix)); err != nil {
				return "", err
			}
		}
	}
	return bin, nil
}

// lbAddr is the k-th LoadBalancer address: 100.64.0.1 and on (outside the
// Service CIDR and the bench's networks; never routed anywhere).
func lbAddr(k int) string {
	k++
	return fmt.Sprintf("100.%d.%d.%d", 64+k>>16, k>>8&255, k&255)
}

// endpointCount is the number of endpoints of the i-th Service (the
// one-change Services have i < 0: endpointsPerService).
func (b *proxyBed) endpointCount(i int) int {
	if b.spread <= 0 || i < 0 {
		return endpointsPerService
	}
	return 1 + i%b.spread
}

func newProxyBed(tb *benchTB, bins *peers, n, spread int) (*proxyBed, error) {
	b := &proxyBed{dir: tb.TempDir(), spread: spread}
	var err error
	if b.legacyBin, err = legacyShim(b.dir); err != nil {
		return nil, err
	}
	b.node = testbed.NewNetNS(tb, "bench-node")
	b.pods = testbed.NewNetNS(tb, "bench-pods")
	testbed.Link(tb, b.node, "eth0", benchNodeIP+"/24", b.pods, "eth0", "10.1.0.2/24")
	for i := 1; i < max(endpointsPerService, spread); i++ {
		b.pods.MustRun("ip", "addr", "add", fmt.Sprintf("10.1.0.%d/24", 2+i), "dev", "eth0")
	}
	b.pods.MustRun("ip", "route", "add", "default", "via", benchNodeIP)
	b.node.MustRun("ip", "route", "add", "10.96.0.0/16", "dev", "eth0")
	// Every endpoint: accept and close (a connect is the measurement).
	var ln net.Listener
	if err := b.pods.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", ":8080")
		return err
	}); err != nil {
		return nil, err
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	data := filepath.Join(b.dir, "apiserver")
	api, err := startIn(b.node.Name, "apiserver", filepath.Join(b.dir, "apiserver.log"), bins.svcnet, "apiserver",
		"--data-dir", data, "--authorization-mode", "AlwaysAllow", "--service-cluster-ip-range", "10.96.0.0/16")
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { api.stop(20 * time.Second) })
	b.kubeconfig = filepath.Join(data, "kubeconfig")
	if err := waitFor(90*time.Second, 200*time.Millisecond, "apiserver kubeconfig", func() error {
		if api.exited() {
			return fmt.Errorf("apiserver exited: %s", api.tail(20))
		}
		_, err := os.Stat(b.kubeconfig)
		return err
	}); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Dial = nsDialer(b.node.Name)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	if b.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := waitFor(90*time.Second, 200*time.Millisecond, "apiserver /readyz", func() error {
		_, err := b.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: benchNode, Labels: map[string]string{"kubernetes.io/hostname": benchNode}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}},
	}
	created, err := b.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Node: %w", err)
	}
	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: benchNodeIP}, {Type: corev1.NodeHostName, Address: benchNode}}
	if _, err := b.cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("Node status: %w", err)
	}
	return b, nil
}

func ptr[T any](v T) *T { return &v }

// retry runs f until it succeeds, treating AlreadyExists as success (an
// earlier attempt that timed out may have been committed). The embedded
// etcd of a loaded shared machine times out now and then; a benchmark
// should wait that out, not abort.
func retry(f func() error) error {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if err = f(); err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		time.Sleep(time.Duration(attempt+1) * 500 * time.Millisecond)
	}
	return err
}

// createService creates a ClusterIP Service and its EndpointSlice with the
// i-th Service's endpoints (endpointCount); it returns the ClusterIP.
func (b *proxyBed) createService(ctx context.Context, name string, i int) (string, error) {
	var ip string
	if err := retry(func() error {
		spec := corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}
		if b.lb {
			spec.Type, spec.AllocateLoadBalancerNodePorts = corev1.ServiceTypeLoadBalancer, ptr(false)
		}
		svc, err := b.cs.CoreV1().Services(benchNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec},
			metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			svc, err = b.cs.CoreV1().Services(benchNS).Get(ctx, name, metav1.GetOptions{})
		}
		if err == nil {
			ip = svc.Spec.ClusterIP
		}
		if err == nil && b.lb && len(svc.Status.LoadBalancer.Ingress) == 0 {
			// As a LoadBalancer controller would: the address in the
			// status.
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbAddr(int(b.lbSeq.Add(1)) - 1)}}
			_, err = b.cs.CoreV1().Services(benchNS).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		}
		return err
	}); err != nil {
		return "", err
	}
	var eps []discoveryv1.Endpoint
	for j := 0; j < b.endpointCount(i); j++ {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.0.%d", 2+j)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}, NodeName: ptr(benchNode)})
	}
	err := retry(func() error {
		_, err := b.cs.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-bench", Labels: map[string]string{
				discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "svcnet-bench"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   eps,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
		}, metav1.CreateOptions{})
		return err
	})
	return ip, err
}

func (b *proxyBed) deleteService(ctx context.Context, name string) {
	_ = b.cs.DiscoveryV1().EndpointSlices(benchNS).Delete(ctx, name+"-bench", metav1.DeleteOptions{})
	_ = b.cs.CoreV1().Services(benchNS).Delete(ctx, name, metav1.DeleteOptions{})
}

// populate creates n Services (and slices) with 8 concurrent writers and
// returns the rate in objects (Service + slice) per second.
func (b *proxyBed) populate(n int) (float64, error) {
	ctx := context.Background()
	b.clusterIPs = make([]string, n)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	var next atomic.Int64
	t0 := time.Now()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				ip, err := b.createService(ctx, fmt.Sprintf("svc-%05d", i), i)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				b.clusterIPs[i] = ip
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return 0, e.(error)
	}
	return float64(2*n) / time.Since(t0).Seconds(), nil
}

// proxyArgs is the command line of impl in mode, against the bed's API.
//
// Mode "iptables-tree" runs both in iptables mode, svcnet with its opt-in
// --iptables-dispatch=tree (kube-proxy has only the linear KUBE-SERVICES
// walk): the connect-latency comparison of the two layouts. Mode
// "nftables-rules" runs both in nftables mode, svcnet with its opt-in
// --nftables-endpoint-choice=rules (one rule per endpoint instead of an
// anonymous map per Service); "nftables-shared" likewise with
// --nftables-endpoint-choice=shared (shared endpoint maps), and
// "nftables-shards" with that and --nftables-shards=16 (16 dispatch
// tables).
//
// A mode ending in "-legacy" (iptables-legacy, iptables-tree-legacy) runs
// both proxies on the iptables-legacy variant of the iptables programs,
// kube-proxy as its image's iptables wrapper would make it (`iptables` and
// the rest found first on its PATH as the legacy programs), svcnet with
// --iptables-backend legacy; the other iptables modes run the system's
// `iptables`, iptables-nft on Debian 12.
func (b *proxyBed) proxyArgs(bins *peers, impl, mode string) []string {
	legacy := strings.HasSuffix(mode, "-legacy")
	mode = strings.TrimSuffix(mode, "-legacy")
	proxyMode, extra := mode, []string(nil)
	switch mode {
	case "iptables-tree":
		proxyMode = "iptables"
		if impl != "kube-proxy" {
			extra = []string{"--iptables-dispatch", "tree"}
		}
	case "nftables-rules", "nftables-shared":
		proxyMode = "nftables"
		if impl != "kube-proxy" {
			extra = []string{"--nftables-endpoint-choice", strings.TrimPrefix(mode, "nftables-")}
		}
	case "nftables-shards":
		proxyMode = "nftables"
		if impl != "kube-proxy" {
			extra = []string{"--nftables-endpoint-choice", "shared", "--nftables-shards", "16"}
		}
	}
	common := []string{"--kubeconfig", b.kubeconfig, "--hostname-override", benchNode, "--proxy-mode", proxyMode,
		"--cluster-cidr", "10.244.0.0/16", "--conntrack-max-per-core", "0", "--nodeport-addresses", "primary",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256"}
	if impl == "kube-proxy" {
		args := append(append([]string{bins.kubeProxy}, common...), "--v", "1")
		if legacy {
			args = append([]string{"env", "PATH=" + b.legacyBin + ":" + os.Getenv("PATH")}, args...)
		}
		return args
	}
	args := append(append([]string{bins.svcnetProxy, "proxy"}, common...), extra...)
	if legacy {
		args = append(args, "--iptables-backend", "legacy")
	}
	if b.heapDir != "" {
		args = append(args, "--profiling")
	}
	if len(b.env) > 0 {
		args = append(append([]string{"env"}, b.env...), args...)
	}
	if b.perfDir != "" {
		out := filepath.Join(b.perfDir, fmt.Sprintf("svcnet-%s-%d-%d.data", mode, b.n, time.Now().UnixNano()))
		args = append([]string{"perf", "record", "-g", "-o", out, "--"}, args...)
	}
	return args
}

// flush removes whatever the previous proxy left in the node namespace
// (both proxies' tables, iptables-nft's too), so every run starts clean.
func (b *proxyBed) flush() {
	_, _ = b.node.Run("nft", "flush", "ruleset")
	for _, v := range []string{"iptables-legacy", "ip6tables-legacy"} {
		for _, t := range []string{"nat", "filter", "mangle"} {
			_, _ = b.node.Run(v, "-t", t, "-F")
			_, _ = b.node.Run(v, "-t", t, "-X")
		}
	}
	_, _ = b.node.Run("conntrack", "-F")
}

// checkVariant fails unless the proxy's rules are in the iptables variant
// its mode names, and only there.
func (b *proxyBed) checkVariant(legacy bool) error {
	legacyOut, _ := b.node.Run("iptables-legacy-save", "-t", "nat")
	nftOut, _ := b.node.Run("iptables-nft-save", "-t", "nat")
	inLegacy, inNFT := strings.Contains(legacyOut, ":KUBE-SERVICES"), strings.Contains(nftOut, ":KUBE-SERVICES")
	if inLegacy != legacy || inNFT == legacy {
		return fmt.Errorf("rules in iptables-legacy %v, in iptables-nft %v; want them in legacy %v", inLegacy, inNFT, legacy)
	}
	return nil
}

type healthz struct {
	LastUpdated string `json:"lastUpdated"`
}

func (b *proxyBed) synced(c *http.Client) error {
	resp, err := c.Get("http://127.0.0.1:10256/healthz")
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	var h healthz
	if err := json.Unmarshal(body, &h); err != nil {
		return err
	}
	if h.LastUpdated == "" || strings.HasPrefix(h.LastUpdated, "0001-01-01") {
		return fmt.Errorf("not synced yet")
	}
	return nil
}

type proxyOpts struct {
	restart  bool // also measure a restart over the programmed rules
	changes  int
	connects int
	maxConn  int // connect latency only up to this many Services
	timeout  time.Duration
}

// runProxy measures one proxy once: start → everything programmed, RSS, connect
// latency to the first and last Service, then one-change syncs.
func (b *proxyBed) runProxy(res *results, bins *peers, impl, mode string, n int, o proxyOpts) error {
	ctx := context.Background()
	b.flush()
	hc := nsHTTPClient(b.node.Name)
	logPath := filepath.Join(b.dir, fmt.Sprintf("%s-%s-%d.log", impl, mode, time.Now().UnixNano()))
	t0 := time.Now()
	p, err := startIn(b.node.Name, impl, logPath, b.proxyArgs(bins, impl, mode)...)
	if err != nil {
		return err
	}
	defer func() {
		p.stop(30 * time.Second)
		b.flush()
	}()
	// Programmed: the proxy's own end-of-sync timestamp (of the IPv4 rules,
	// where the Services are) is set. /healthz alone is not enough: kube-proxy
	// answers 200 before its first sync.
	var m metrics
	if err := waitFor(o.timeout, 20*time.Millisecond, impl+" first sync", func() error {
		if p.exited() {
			return fmt.Errorf("exited: %s", p.tail(30))
		}
		if m, err = scrape(hc, "http://127.0.0.1:10249/metrics"); err != nil {
			return err
		}
		if m.v("kubeproxy_sync_proxy_rules_last_timestamp_seconds") <= 0 {
			return fmt.Errorf("no sync yet")
		}
		return b.synced(hc)
	}); err != nil {
		return err
	}
	full := m.v("kubeproxy_sync_proxy_rules_last_timestamp_seconds") - float64(t0.UnixNano())/1e9
	if strings.HasPrefix(mode, "iptables") {
		if err := b.checkVariant(strings.HasSuffix(mode, "-legacy")); err != nil {
			return fmt.Errorf("%s %s: %w", impl, mode, err)
		}
	}
	res.add(full, "proxy", mode, n, "full", impl)
	// Let a sync still running settle before reading memory. (kube-proxy
	// observes the sync's duration after setting its timestamp, so the
	// duration is read now.)
	time.Sleep(time.Second)
	if m, err = scrape(hc, "http://127.0.0.1:10249/metrics"); err != nil {
		return err
	}
	if c := m.v("kubeproxy_sync_proxy_rules_duration_seconds_count"); c == 1 {
		res.add(m.v("kubeproxy_sync_proxy_rules_duration_seconds_sum"), "proxy", mode, n, "firstsync", impl)
	}
	if b.perfDir == "" || impl != "svcnet" { // under perf, the PID is perf's
		res.add(rssMB(p.cmd.Process.Pid), "proxy", mode, n, "rss", impl)
		anon, file := rssParts(p.cmd.Process.Pid)
		res.add(anon, "proxy", mode, n, "rss-anon", impl)
		res.add(file, "proxy", mode, n, "rss-file", impl)
	}
	if b.heapDir != "" && impl == "svcnet" {
		if resp, err := hc.Get("http://127.0.0.1:10249/debug/pprof/heap"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = os.WriteFile(filepath.Join(b.heapDir, fmt.Sprintf("svcnet-%s-%d-%d.heap", mode, n, time.Now().UnixNano())), body, 0o644)
		}
	}
	logf("  %s %s n=%d: programmed after %.2fs, RSS %.0f MB, anon %.0f MB (Go heap: %.0f MB in use, %.0f MB live objects, %.0f MB released)", impl, mode, n, full, rssMB(p.cmd.Process.Pid), func() float64 { a, _ := rssParts(p.cmd.Process.Pid); return a }(),
		m.v("go_memstats_heap_inuse_bytes")/(1<<20), m.v("go_memstats_heap_alloc_bytes")/(1<<20), m.v("go_memstats_heap_released_bytes")/(1<<20))

	if n <= o.maxConn && o.connects > 0 {
		targets := []struct {
			name string
			ip   string
		}{{"first", b.clusterIPs[0]}, {"last", b.clusterIPs[n-1]}}
		if b.spread > 1 && b.spread <= n {
			// The first Service with the most endpoints: in svcnet's
			// shared layout its direct choice map is the last one the
			// cluster-ip-endpoints chain looks up (the maps' rules are
			// written in the order of the first Service, by name, using
			// each), so a new connection to it misses every other map
			// first.
			targets = append(targets, struct {
				name string
				ip   string
			}{"widest", b.clusterIPs[b.spread-1]})
		}
		for _, t := range targets {
			ds, err := b.connects(t.ip, o.connects)
			if err != nil {
				rules, _ := b.node.Run("sh", "-c", "nft list ruleset | grep -n -m5 -F '"+t.ip+" '")
				return fmt.Errorf("connect to %s Service %s: %w\nrules: %s\nlog: %s", t.name, t.ip, err, rules, p.tail(15))
			}
			res.add(float64(percentile(ds, 0.5).Microseconds()), "proxy", mode, n, "connect-"+t.name+"-p50", impl)
			res.add(float64(percentile(ds, 0.99).Microseconds()), "proxy", mode, n, "connect-"+t.name+"-p99", impl)
		}
	}

	// One change at a time: a new Service with its slice. Measured from
	// the create call to the end of the last sync it caused (the proxy's
	// own last-sync timestamp), and the mean duration of those syncs. A
	// proxy may sync twice for it: kube-proxy runs a sync on the
	// Service's event and, --min-sync-period later, another for the
	// slice's; each is a one-Service partial sync.
	for i := 0; i < o.changes; i++ {
		before, err := settle(hc, o.timeout) // the previous change's delete included
		if err != nil {
			return err
		}
		name := fmt.Sprintf("chg-%d", i)
		tc := time.Now()
		b.deleteService(ctx, name) // a failed earlier run's leftover
		if _, err := b.createService(ctx, name, -1); err != nil {
			return err
		}
		if err := waitFor(o.timeout, 5*time.Millisecond, impl+" sync after a change", func() error {
			m, err := scrape(hc, "http://127.0.0.1:10249/metrics")
			if err != nil {
				return err
			}
			if m.v("kubeproxy_sync_proxy_rules_last_timestamp_seconds") <= float64(tc.UnixNano())/1e9 {
				return fmt.Errorf("no sync yet (last sync %.3f, change at %.3f, %v syncs)\nlog: %s", m.v("kubeproxy_sync_proxy_rules_last_timestamp_seconds"),
					float64(tc.UnixNano())/1e9, m.v("kubeproxy_sync_proxy_rules_duration_seconds_count"), p.tail(10))
			}
			return nil
		}); err != nil {
			return err
		}
		after, err := settle(hc, o.timeout)
		if err != nil {
			return err
		}
		b.deleteService(ctx, name)
		dc := after.v("kubeproxy_sync_proxy_rules_duration_seconds_count") - before.v("kubeproxy_sync_proxy_rules_duration_seconds_count")
		if dc < 1 || dc > 2 {
			// A periodic sync ran in between: this sample is ambiguous, skip it.
			logf("  %s %s n=%d: change %d caused %v syncs; sample dropped", impl, mode, n, i, dc)
			continue
		}
		res.add(after.v("kubeproxy_sync_proxy_rules_last_timestamp_seconds")-float64(tc.UnixNano())/1e9, "proxy", mode, n, "create-to-rules", impl)
		res.add((after.v("kubeproxy_sync_proxy_rules_duration_seconds_sum")-before.v("kubeproxy_sync_proxy_rules_duration_seconds_sum"))/dc, "proxy", mode, n, "onechange", impl)
		res.add(dc, "proxy", mode, n, "onechange-syncs", impl)
	}

	// A restart on a programmed node: the proxy stops, its rules stay, and
	// a new process of the same proxy starts and programs everything again
	// over them (a node's proxy after an upgrade, a crash or a changed
	// configuration; the same full sync as the one kube-proxy runs every
	// hour).
	if !o.restart {
		return nil
	}
	p.stop(30 * time.Second)
	t0 = time.Now()
	p, err = startIn(b.node.Name, impl, logPath+".restart", b.proxyArgs(bins, impl, mode)...)
	if err != nil {
		return err
	}
	if err := waitFor(o.timeout, 20*time.Millisecond, impl+" sync after a restart", func() error {
		if p.exited() {
			return fmt.Errorf("exited: %s", p.tail(30))
		}
		if m, err = scrape(hc, "http://127.0.0.1:10249/metrics"); err != nil {
			return err
		}
		if m.v("kubeproxy_sync_proxy_rules_last_timestamp_seconds") <= 0 {
			return fmt.Errorf("no sync yet")
		}
		return b.synced(hc)
	}); err != nil {
		return err
	}
	restart := m.v("kubeproxy_sync_proxy_rules_last_timestamp_seconds") - float64(t0.UnixNano())/1e9
	res.add(restart, "proxy", mode, n, "restart", impl)
	logf("  %s %s n=%d: programmed after a restart over its rules in %.2fs", impl, mode, n, restart)
	return nil
}

// settle waits until the proxy has run no sync for longer than
// --min-sync-period (1 s in both proxies) and returns its metrics then.
func settle(hc *http.Client, timeout time.Duration) (metrics, error) {
	const quiet = 1500 * time.Millisecond
	var m metrics
	count, since := -1.0, time.Now()
	err := waitFor(timeout, 100*time.Millisecond, "no sync for "+quiet.String(), func() error {
		var err error
		if m, err = scrape(hc, "http://127.0.0.1:10249/metrics"); err != nil {
			return err
		}
		if c := m.v("kubeproxy_sync_proxy_rules_duration_seconds_count"); c != count {
			count, since = c, time.Now()
		}
		if time.Since(since) < quiet {
			return fmt.Errorf("last sync %v ago", time.Since(since).Round(time.Millisecond))
		}
		return nil
	})
	return m, err
}

// connects opens k TCP connections from the node to ip:80 and returns the
// connect times.
func (b *proxyBed) connects(ip string, k int) ([]time.Duration, error) {
	var ds []time.Duration
	err := b.node.Do(func() error {
		for i := 0; i < k; i++ {
			t := time.Now()
			c, err := net.DialTimeout("tcp4", net.JoinHostPort(ip, "80"), 5*time.Second)
			if err != nil {
				return err
			}
			ds = append(ds, time.Since(t))
			c.Close()
		}
		return nil
	})
	return ds, err
}

// benchProxies runs every size and mode, alternating the two proxies'
// order between repetitions.
func benchProxies(res *results, bins *peers, cfg *config) error {
	for _, n := range cfg.sizes {
		err := step(fmt.Sprintf("proxy n=%d", n), func(tb *benchTB) error {
			b, err := newProxyBed(tb, bins, n, cfg.endpointSpread)
			if err != nil {
				return err
			}
			b.lb = cfg.loadBalancers
			b.n, b.perfDir, b.env, b.heapDir = n, cfg.perfDir, cfg.svcnetEnv, cfg.heapDir
			rate, err := b.populate(n)
			if err != nil {
				return fmt.Errorf("populate: %w", err)
			}
			res.add(rate, "api", "svcnet", n, "create", "svcnet")
			logf("proxy n=%d: %d Services + slices created (%.0f objects/s)", n, n, rate)
			b.listTimes(res, n)
			for _, mode := range cfg.modes {
				if strings.HasPrefix(mode, "iptables") && !strings.HasSuffix(mode, "-legacy") && cfg.iptablesMax > 0 && n > cfg.iptablesMax {
					res.note(fmt.Sprintf("iptables mode not run at %d Services (-iptables-max-services %d)", n, cfg.iptablesMax))
					continue
				}
				reps := cfg.reps
				if n >= 30000 && cfg.repsLarge > 0 {
					reps = cfg.repsLarge
				}
				for rep := 0; rep < reps; rep++ {
					order := cfg.impls
					if rep%2 == 1 {
						order = slices.Clone(order)
						slices.Reverse(order)
					}
					for _, impl := range order {
						if err := b.runProxy(res, bins, impl, mode, n, proxyOpts{changes: cfg.changes, connects: cfg.connects,
							maxConn: cfg.maxConnSize, timeout: cfg.syncTimeout, restart: cfg.restart}); err != nil {
							logf("  %s %s n=%d rep %d: %v", impl, mode, n, rep, err)
							res.note(fmt.Sprintf("%s %s mode, %d Services, repetition %d: %v", impl, mode, n, rep+1, firstLine(err.Error())))
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			logf("%v", err)
			res.note(err.Error())
		}
	}
	return nil
}

// listTimes measures full LISTs of the n Services (protobuf and JSON), as
// a client-go informer's first list does.
func (b *proxyBed) listTimes(res *results, n int) {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		return
	}
	cfg.Dial = nsDialer(b.node.Name)
	cfg.QPS, cfg.Burst = -1, 0
	for _, ct := range []string{"application/vnd.kubernetes.protobuf", "application/json"} {
		c := *cfg
		c.AcceptContentTypes, c.ContentType = ct, ct
		cs, err := kubernetes.NewForConfig(&c)
		if err != nil {
			return
		}
		short := map[string]string{"application/json": "json", "application/vnd.kubernetes.protobuf": "protobuf"}[ct]
		for i := 0; i < 3; i++ {
			t := time.Now()
			l, err := cs.CoreV1().Services(benchNS).List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) < n {
				continue
			}
			res.add(time.Since(t).Seconds()*1000, "api", "svcnet", n, "list-"+short, "svcnet")
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
