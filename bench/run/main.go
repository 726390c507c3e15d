// Command run is svcnet's benchmark harness against the real peers: it
// builds svcnet, kube-proxy v1.37.2 (from k8s.io/kubernetes, which is why
// this is its own Go module) and CoreDNS v1.15.0, finds HAProxy (Debian),
// runs every measurement for svcnet and for the peer on the same input in
// the same run, alternating their order and repeating, and writes
// docs/benchmarks.md with medians and ranges plus PNG plots.
//
// It needs root: everything that sends packets runs inside network
// namespaces it creates (internal/testbed), with no route out, and deletes
// them on exit. See README.md.
//
//	cd bench/run && go run . [-sizes 1000,10000] [-reps 3]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	root, out, bin string
	sizes          []int
	modes          []string
	reps           int
	repsLarge      int // repetitions at 30,000 Services and more (0: reps)
	changes        int
	restart        bool
	connects       int
	maxConnSize    int
	syncTimeout    time.Duration
	iptablesMax    int
	only           map[string]bool
	dnsSizes       []int
	dnsDuration    time.Duration
	usDuration     time.Duration
	npServices     int
	npCycles       int
	npMode         string
	npUpArgs       []string
	apiSizes       []int
	apiReps        int
	apiWriters     int
	apiWatch       int
	args           []string
	impls          []string // proxy implementations to run (profiling runs one)
	perfDir        string   // record svcnet proxy starts with perf into this directory
	svcnetEnv      []string // extra environment of the svcnet proxy (diagnostics)
	heapDir        string   // save the svcnet proxy's heap profile after its first sync here
	endpointSpread int      // Service i has 1 + i%endpointSpread endpoints (0: endpointsPerService each)
	loadBalancers  bool     // the proxy bench's Services are LoadBalancer Services with an address each
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == ipvsChildArg {
		ipvsChild(os.Args[2:])
		return
	}
	cfg := &config{args: os.Args[1:]}
	var sizes, modes, only, dnsSizes, upArgs, apiSizes, impls string
	flag.StringVar(&cfg.root, "root", "../..", "svcnet repository root")
	flag.StringVar(&cfg.out, "out", "", "report file (default ROOT/docs/benchmarks.md; plots beside it in ROOT/docs/benchmarks/)")
	flag.StringVar(&cfg.bin, "bin", "", "where to build the binaries (default ROOT/bin/bench)")
	flag.StringVar(&sizes, "sizes", "1000,10000", "Service counts for the proxy measurements (the issue's full set: 1000,10000,30000,50000)")
	flag.StringVar(&modes, "modes", "nftables,iptables", "proxy modes; iptables-tree runs kube-proxy in iptables mode beside svcnet with --iptables-dispatch=tree, nftables-rules (nftables-shared) kube-proxy in nftables mode beside svcnet with --nftables-endpoint-choice=rules (shared), nftables-shards beside svcnet with --nftables-endpoint-choice=shared --nftables-shards=16; iptables-legacy and iptables-tree-legacy run both on the iptables-legacy programs")
	flag.IntVar(&cfg.reps, "reps", 3, "repetitions of every measurement (svcnet and peer alternate their order)")
	flag.IntVar(&cfg.repsLarge, "reps-large", 0, "repetitions of the proxy measurements at 30,000 Services and more (0: -reps); kube-proxy's start takes minutes there")
	flag.IntVar(&cfg.changes, "changes", 5, "one-change syncs per proxy run")
	flag.BoolVar(&cfg.restart, "restart", true, "after the changes, restart the proxy over its programmed rules and time its first sync")
	flag.IntVar(&cfg.endpointSpread, "endpoint-spread", 0, "give Service i 1 + i%K endpoints (K at most 64) instead of 10 each, and also measure connects to Service K-1 (\"widest\"): in svcnet's shared layout the last of K direct choice maps a new ClusterIP connection looks up")
	flag.BoolVar(&cfg.loadBalancers, "load-balancers", false, "make the proxy bench's Services LoadBalancer Services (externalTrafficPolicy Cluster, no NodePort) with an address of their own in 100.64.0.0/10, in their status as a LoadBalancer controller writes it")
	flag.IntVar(&cfg.connects, "connects", 1000, "TCP connects per latency measurement")
	flag.IntVar(&cfg.maxConnSize, "connect-max-services", 30000, "measure connect latency only up to this many Services")
	flag.IntVar(&cfg.iptablesMax, "iptables-max-services", 0, "run the iptables modes on iptables-nft only up to this many Services (0: every size); its full syncs take minutes at 10k on a loaded machine (the -legacy modes are not limited)")
	flag.DurationVar(&cfg.syncTimeout, "sync-timeout", 10*time.Minute, "give up on a proxy's first sync after this long")
	flag.StringVar(&impls, "impls", strings.Join(proxyImpls, ","), "proxy implementations of the proxy part (a profiling run may keep one; the report then has no ratios)")
	flag.StringVar(&cfg.perfDir, "perf", "", "diagnostics: run each svcnet proxy under `perf record -g` writing DIR/svcnet-MODE-N-NANOS.data (its RSS is then not measured)")
	flag.Func("svcnet-env", "diagnostics: an extra VAR=value in the svcnet proxy's environment (repeatable), e.g. GOGC=off", func(v string) error {
		cfg.svcnetEnv = append(cfg.svcnetEnv, v)
		return nil
	})
	flag.StringVar(&cfg.heapDir, "heap", "", "diagnostics: run the svcnet proxy with --profiling and save its heap profile, taken when RSS is measured, as DIR/svcnet-MODE-N-NANOS.heap")
	flag.StringVar(&only, "only", "proxy,ipvs,userspace,dns,netprog,api", "which benchmarks to run")
	flag.StringVar(&dnsSizes, "dns-sizes", "1000,10000", "Service counts for the DNS comparison")
	flag.DurationVar(&cfg.dnsDuration, "dns-duration", 5*time.Second, "dnsperf run length per server and size")
	flag.DurationVar(&cfg.usDuration, "userspace-duration", 3*time.Second, "length of each userspace measurement")
	flag.IntVar(&cfg.npServices, "netprog-services", 10000, "background Services in the network programming latency run")
	flag.IntVar(&cfg.npCycles, "netprog-cycles", 15, "3→4→3 scaling cycles")
	flag.StringVar(&cfg.npMode, "netprog-mode", "nftables", "proxy mode of svcnet up in the network programming run")
	flag.StringVar(&upArgs, "netprog-up-args", "", "extra svcnet up flags (space-separated) for the network programming run")
	flag.StringVar(&apiSizes, "api-sizes", "10000,50000", "Service counts of the API comparison (svcnet apiserver against kube-apiserver)")
	flag.IntVar(&cfg.apiReps, "api-reps", 1, "repetitions of the API comparison (each fills a fresh etcd to every size)")
	flag.IntVar(&cfg.apiWriters, "api-writers", 8, "concurrent writers filling the API")
	flag.IntVar(&cfg.apiWatch, "api-watch", 200, "sequential creates whose watch events are timed, per size")
	flag.Parse()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "bench/run:", err)
		os.Exit(1)
	}
	if os.Geteuid() != 0 {
		fail(fmt.Errorf("needs root (network namespaces)"))
	}
	var err error
	if cfg.sizes, err = intList(sizes); err != nil {
		fail(err)
	}
	if cfg.dnsSizes, err = intList(dnsSizes); err != nil {
		fail(err)
	}
	if cfg.apiSizes, err = intList(apiSizes); err != nil || len(cfg.apiSizes) == 0 {
		fail(fmt.Errorf("-api-sizes: %v", err))
	}
	if cfg.endpointSpread < 0 || cfg.endpointSpread > maxEndpointSpread {
		fail(fmt.Errorf("-endpoint-spread %d: must be 0 to %d", cfg.endpointSpread, maxEndpointSpread))
	}
	cfg.modes = strings.Split(modes, ",")
	cfg.impls = strings.Split(impls, ",")
	cfg.only = map[string]bool{}
	for _, o := range strings.Split(only, ",") {
		cfg.only[strings.TrimSpace(o)] = true
	}
	cfg.npUpArgs = strings.Fields(upArgs)
	if cfg.root, err = filepath.Abs(cfg.root); err != nil {
		fail(err)
	}
	if cfg.out == "" {
		cfg.out = filepath.Join(cfg.root, "docs", "benchmarks.md")
	}
	if cfg.bin == "" {
		cfg.bin = filepath.Join(cfg.root, "bin", "bench")
	}
	if err := os.MkdirAll(cfg.bin, 0o755); err != nil {
		fail(err)
	}
	// Ctrl-C or SIGTERM: run the cleanups of the steps in progress, which
	// remove exactly the namespaces and processes this run created (never
	// anyone else's), then exit.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		logf("interrupted: removing this run's namespaces and processes")
		abortAll()
		os.Exit(1)
	}()

	start := time.Now()
	load0, _ := os.ReadFile("/proc/loadavg")
	bins, err := buildPeers(cfg.root, cfg.bin, cfg.only["dns"], cfg.only["api"])
	if err != nil {
		fail(err)
	}
	res := newResults()
	res.text["load-start"] = strings.Join(strings.Fields(string(load0))[:3], " ")
	// The report is rewritten after every part, so an interrupted long run
	// still leaves what it measured (with the parts not run yet marked).
	done := map[string]bool{}
	report := func() {
		load1, _ := os.ReadFile("/proc/loadavg")
		res.text["load-end"] = strings.Join(strings.Fields(string(load1))[:3], " ")
		res.text["took"] = time.Since(start).Round(time.Second).String()
		res.text["gomaxprocs"] = strconv.Itoa(runtime.GOMAXPROCS(0))
		if err := writeReport(res, bins, cfg, done); err != nil {
			fail(err)
		}
	}
	parts := []struct {
		name string
		run  func()
	}{
		{"proxy", func() { _ = benchProxies(res, bins, cfg) }},
		{"userspace", func() { _ = benchUserspace(res, cfg.root, cfg) }},
		{"dns", func() { _ = benchDNS(res, cfg.root, bins, cfg) }},
		{"api", func() { _ = benchAPI(res, bins, cfg) }},
		{"ipvs", func() { _ = benchIPVS(res, cfg) }},
		{"netprog", func() {
			if err := benchNetProg(res, bins, cfg); err != nil {
				logf("%v", err)
				res.note(err.Error())
			}
		}},
	}
	for _, p := range parts {
		if !cfg.only[p.name] {
			continue
		}
		p.run()
		if interrupted.Load() {
			select {} // the signal handler cleans up and exits
		}
		done[p.name] = true
		report()
	}
	logf("wrote %s in %s", cfg.out, time.Since(start).Round(time.Second))
}
