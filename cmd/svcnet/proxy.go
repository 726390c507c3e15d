package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/conntrack"
	"github.com/svcnet/svcnet/proxy/iptables" // registers --proxy-mode=iptables
	"github.com/svcnet/svcnet/proxy/nftables"
)

func init() {
	register(command{name: "proxy", short: "service proxy (kube-proxy): Services + EndpointSlices -> kernel rules", run: runProxy})
}

// proxyArgs is the parsed command line of `svcnet proxy`.
type proxyArgs struct {
	kubeconfig         string
	hostnameOverride   string
	mode               string
	clusterCIDRs       []netip.Prefix
	serviceCIDRs       []netip.Prefix
	nodePortAddresses  []netip.Prefix
	nodePortPrimary    bool
	masqueradeAll      bool
	masqueradeBit      int
	iptablesDispatch   string
	iptablesBackend    string
	nftablesChoice     string
	nftablesShards     int
	minSyncPeriod      time.Duration
	syncPeriod         time.Duration
	healthzBindAddress string
	metricsBindAddress string
	cleanup            bool
	dump               bool
	profiling          bool
	ipvsScheduler      string
	netns              string
	logLevel           string
	conntrack          conntrack.Sysctls
	ipvsStrictARP      bool
	// configFile and configMap are --config and --config-map; configData
	// is the configuration read from either (nil without one), ignored the
	// settings it has that svcnet's proxy does not act on.
	configFile, configMap string
	configData            []byte
	ignored               []string
}

func parseProxyArgs(args []string) (*proxyArgs, error) {
	return parseProxyArgsConfig(args, nil)
}

// parseProxyArgsConfig parses the command line; configMapData, when not
// nil, is the configuration --config-map names (read by the caller).
func parseProxyArgsConfig(args []string, configMapData []byte) (*proxyArgs, error) {
	a := &proxyArgs{}
	fs := newFlagSet("proxy")
	var clusterCIDR, nodePortAddrs, serviceCIDR string
	fs.StringVar(&a.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&a.hostnameOverride, "hostname-override", "", "name of this Node (default: the host name)")
	fs.StringVar(&a.mode, "proxy-mode", "iptables", "data plane: iptables, nftables, ipvs or userspace (registered: "+strings.Join(proxy.Modes(), ", ")+")")
	fs.StringVar(&clusterCIDR, "cluster-cidr", "", "comma-separated pod CIDRs; traffic to ClusterIPs from outside them is masqueraded")
	fs.StringVar(&serviceCIDR, "service-cluster-ip-range", "", "comma-separated Service CIDRs: nftables mode drops traffic to unallocated ClusterIPs in them; unset, they come from the ServiceCIDR objects, as kube-proxy reads them")
	fs.StringVar(&nodePortAddrs, "nodeport-addresses", "", "comma-separated CIDRs and keywords (primary, localhost, all) of the local addresses that accept NodePorts (default: all; primary in nftables mode)")
	fs.BoolVar(&a.masqueradeAll, "masquerade-all", false, "SNAT all traffic sent to Service cluster IPs")
	fs.IntVar(&a.masqueradeBit, "iptables-masquerade-bit", 14, "fwmark bit marking packets to masquerade (0-31)")
	fs.StringVar(&a.nftablesChoice, "nftables-endpoint-choice", "map", "svcnet extension, nftables mode: how a Service's chain picks an endpoint, map (kube-proxy's: an anonymous map per chain), rules (one rule per endpoint and no set: programming time linear in the number of Services) or shared (endpoint maps shared by every Service chain, 256 per protocol, each chain a range of keys in one of them: linear programming time and few rules)")
	fs.IntVar(&a.nftablesShards, "nftables-shards", 0, "svcnet extension, nftables mode: spread the Services over this many dispatch tables (kube-proxy-s00, …) beside the kube-proxy table, so that a change costs the kernel's validation of one table's share (1/N) instead of every Service's; 0 (the default) is kube-proxy's single table")
	fs.StringVar(&a.iptablesDispatch, "iptables-dispatch", "linear", "svcnet extension, iptables mode: layout of nat KUBE-SERVICES, linear (kube-proxy's) or tree (sub-chains by destination prefix: connection set-up cost independent of the number of Services)")
	fs.StringVar(&a.iptablesBackend, "iptables-backend", "auto", "svcnet extension, iptables and ipvs modes: the iptables variant to program, auto (as the Kubernetes images' iptables wrapper picks it: the variant holding kubelet's KUBE-IPTABLES-HINT or KUBE-KUBELET-CANARY chain, else the system's `iptables`), nft, legacy or system")
	fs.DurationVar(&a.minSyncPeriod, "min-sync-period", time.Second, "minimum interval between rule syncs")
	fs.DurationVar(&a.syncPeriod, "sync-period", 30*time.Second, "maximum interval between rule syncs (partial; a full sync comes once an hour in iptables and nftables modes, every period in ipvs)")
	fs.StringVar(&a.healthzBindAddress, "healthz-bind-address", "0.0.0.0:10256", "address of /healthz and /livez (empty disables)")
	fs.StringVar(&a.metricsBindAddress, "metrics-bind-address", "127.0.0.1:10249", "address of /metrics (empty disables)")
	fs.BoolVar(&a.profiling, "profiling", false, "serve Go's pprof profiles under /debug/pprof/ on the metrics address (kube-proxy's enableProfiling)")
	fs.BoolVar(&a.cleanup, "cleanup", false, "remove everything every proxy mode installed, then exit")
	fs.BoolVar(&a.dump, "dump", false, "print the mode's programmed state (modes that support it) and exit")
	fs.StringVar(&a.ipvsScheduler, "ipvs-scheduler", "rr", "default load-balancing algorithm (per Service: annotation "+proxy.AnnotationIPVSScheduler+")")
	fs.IntVar(&a.conntrack.MaxPerCore, "conntrack-max-per-core", 32768, "conntrack entries per CPU (0 leaves nf_conntrack_max alone)")
	fs.IntVar(&a.conntrack.Min, "conntrack-min", 131072, "minimum nf_conntrack_max")
	fs.DurationVar(&a.conntrack.TCPTimeoutEstablished, "conntrack-tcp-timeout-established", 24*time.Hour, "idle timeout of established TCP conntrack entries (0 leaves it)")
	fs.DurationVar(&a.conntrack.TCPTimeoutCloseWait, "conntrack-tcp-timeout-close-wait", time.Hour, "timeout of CLOSE_WAIT TCP conntrack entries (0 leaves it)")
	fs.BoolVar(&a.conntrack.TCPBeLiberal, "conntrack-tcp-be-liberal", false, "accept out-of-window TCP packets instead of dropping INVALID ones")
	fs.DurationVar(&a.conntrack.UDPTimeout, "conntrack-udp-timeout", 0, "UDP conntrack timeout (0 leaves it)")
	fs.DurationVar(&a.conntrack.UDPStreamTTL, "conntrack-udp-timeout-stream", 0, "UDP stream conntrack timeout (0 leaves it)")
	fs.BoolVar(&a.ipvsStrictARP, "ipvs-strict-arp", false, "ipvs mode: set the node's arp_ignore=1 and arp_announce=2, so that it answers ARP only for addresses on the asking interface (what MetalLB's L2 mode needs with IPVS)")
	fs.StringVar(&a.configFile, "config", "", "kube-proxy configuration file (KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1): as kube-proxy, its values and defaults replace the kube-proxy flags (not --hostname-override, --log-level), and the proxy exits when the file changes")
	fs.StringVar(&a.configMap, "config-map", "", "svcnet extension: NAMESPACE/NAME of a ConfigMap whose config.conf is a KubeProxyConfiguration (svcnet up: kube-system/kube-proxy); flags given on the command line win over it, and the proxy restarts itself when it changes")
	fs.StringVar(&a.netns, "netns", "", "run data-plane commands inside this named network namespace (svcnet up uses it)")
	fs.StringVar(&a.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var err error
	switch {
	case a.configFile != "" && a.configMap != "":
		return nil, fmt.Errorf("--config and --config-map: give one")
	case a.configFile != "":
		if a.configData, err = os.ReadFile(a.configFile); err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		if a.ignored, err = applyKubeProxyConfig(fs, a.configData, false); err != nil {
			return nil, fmt.Errorf("--config %s: %w", a.configFile, err)
		}
	case a.configMap != "" && configMapData != nil:
		if ns, name, ok := strings.Cut(a.configMap, "/"); !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("--config-map: want NAMESPACE/NAME, got %q", a.configMap)
		}
		a.configData = configMapData
		if a.ignored, err = applyKubeProxyConfig(fs, a.configData, true); err != nil {
			return nil, fmt.Errorf("--config-map %s: %w", a.configMap, err)
		}
	}
	if a.serviceCIDRs, err = parseCIDRList(serviceCIDR); err != nil {
		return nil, fmt.Errorf("--service-cluster-ip-range: %w", err)
	}
	if a.clusterCIDRs, err = parseCIDRList(clusterCIDR); err != nil {
		return nil, fmt.Errorf("--cluster-cidr: %w", err)
	}
	// As kube-proxy 1.36 and 1.37: in nftables mode an unset --nodeport-addresses
	// means "primary" (the node's primary IP of each family), in the other
	// modes every local address.
	if nodePortAddrs == "" && a.mode == "nftables" {
		a.nodePortPrimary = true
	}
	for _, s := range splitList(nodePortAddrs) {
		// kube-proxy 1.37's keywords: primary (the node's primary IP of
		// each family), localhost (127.0.0.0/8 and ::1/128) and all (every
		// local address: the zero CIDRs).
		switch s {
		case "primary":
			a.nodePortPrimary = true
			continue
		case "localhost":
			a.nodePortAddresses = append(a.nodePortAddresses, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
			continue
		case "all":
			a.nodePortAddresses = append(a.nodePortAddresses, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--nodeport-addresses: %w", err)
		}
		a.nodePortAddresses = append(a.nodePortAddresses, p.Masked())
	}
	if a.minSyncPeriod < 0 || a.syncPeriod <= 0 {
		return nil, fmt.Errorf("--min-sync-period must be >= 0 and --sync-period > 0")
	}
	if a.masqueradeBit < 0 || a.masqueradeBit > 31 {
		return nil, fmt.Errorf("--iptables-masquerade-bit must be within 0-31, got %d", a.masqueradeBit)
	}
	if _, err := iptables.ParseDispatch(a.iptablesDispatch); err != nil {
		return nil, fmt.Errorf("--iptables-dispatch: %w", err)
	}
	if _, err := iptables.ParseBackend(a.iptablesBackend); err != nil {
		return nil, fmt.Errorf("--iptables-backend: %w", err)
	}
	if _, err := nftables.ParseEndpointChoice(a.nftablesChoice); err != nil {
		return nil, fmt.Errorf("--nftables-endpoint-choice: %w", err)
	}
	if err := nftables.ValidateShards(a.nftablesShards); err != nil {
		return nil, err
	}
	if a.hostnameOverride == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("host name: %w", err)
		}
		a.hostnameOverride = h
	}
	a.hostnameOverride = strings.ToLower(strings.TrimSpace(a.hostnameOverride))
	return a, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseCIDRList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range splitList(s) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// proxyGCPercent is svcnet proxy's GOGC: the live heap is the cached
// Services and EndpointSlices and the programmed state, which a sync
// changes little; Go's default of 100 lets the heap grow to twice that
// between collections.
const proxyGCPercent = 50

func runProxy(ctx context.Context, args []string) error {
	a, err := parseProxyArgs(args)
	if err != nil {
		return err
	}
	var readConfig func(context.Context) ([]byte, error)
	switch {
	case a.configFile != "":
		readConfig = readConfigFile(a.configFile)
	case a.configMap != "":
		// The ConfigMap's configuration under the command line's flags.
		client, err := typedClient(a.kubeconfig, "svcnet-proxy", 50, 100)
		if err != nil {
			return err
		}
		readConfig = readConfigMap(client, a.configMap)
		data, err := readConfig(ctx)
		if err != nil {
			return fmt.Errorf("--config-map: %w", err)
		}
		if a, err = parseProxyArgsConfig(args, data); err != nil {
			return err
		}
	}
	restoreGC := func() {}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(proxyGCPercent)
		if os.Getenv("GOMEMLIMIT") == "" {
			restoreGC = relaxGCForStart(proxyGCPercent)
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "proxy", "node", a.hostnameOverride)
	for _, what := range a.ignored {
		log.Warn("the kube-proxy configuration sets what svcnet's proxy does not act on; ignored", "setting", what)
	}
	exec := proxy.OSExecutor{NetNS: a.netns}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := proxy.NewMetrics(reg)
	modeCfg := proxy.ModeConfig{
		Log: log, Exec: exec, NodeName: a.hostnameOverride, ClusterCIDRs: a.clusterCIDRs, ServiceCIDRs: a.serviceCIDRs,
		NodePortAddresses: a.nodePortAddresses, MasqueradeAll: a.masqueradeAll, MasqueradeBit: &a.masqueradeBit,
		ConntrackTCPLiberal: a.conntrack.TCPBeLiberal, IPTablesDispatch: a.iptablesDispatch, IPTablesBackend: a.iptablesBackend,
		NFTablesEndpointChoice: a.nftablesChoice, NFTablesShards: a.nftablesShards,
		SyncPeriod: a.syncPeriod, MinSyncPeriod: a.minSyncPeriod, Scheduler: a.ipvsScheduler, Metrics: metrics,
		IPVSStrictARP: a.ipvsStrictARP,
	}

	if a.cleanup {
		var errs []error
		for _, m := range proxy.Modes() {
			prov, err := proxy.NewMode(m, modeCfg)
			if err == nil {
				err = prov.Cleanup(ctx)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("cleanup %s: %w", m, err))
			}
		}
		return errors.Join(errs...)
	}

	client, err := typedClient(a.kubeconfig, "svcnet-proxy", 50, 100)
	if err != nil {
		return err
	}
	// Node facts: addresses decide the families to program.
	node, err := client.CoreV1().Nodes().Get(ctx, a.hostnameOverride, metav1.GetOptions{})
	var nodeInfo proxy.NodeInfo
	nodeInfo.Name = a.hostnameOverride
	if err != nil {
		log.Warn("cannot read own Node; NodePort and Local-policy features will use interface addresses", "err", err)
	} else {
		nodeInfo.IPs = proxy.NodeAddresses(node)
		nodeInfo.Labels = node.Labels
	}
	modeCfg.NodeIPs = nodeInfo.IPs
	for _, ip := range nodeInfo.IPs {
		modeCfg.IPv4 = modeCfg.IPv4 || ip.Is4()
		modeCfg.IPv6 = modeCfg.IPv6 || ip.Is6()
	}
	for _, c := range a.clusterCIDRs {
		modeCfg.IPv4 = modeCfg.IPv4 || c.Addr().Is4()
		modeCfg.IPv6 = modeCfg.IPv6 || c.Addr().Is6()
	}
	if !modeCfg.IPv4 && !modeCfg.IPv6 {
		modeCfg.IPv4 = true
	}
	if a.nodePortPrimary {
		// The first address of each family is the node's primary IP.
		var have4, have6 bool
		for _, ip := range nodeInfo.IPs {
			if (ip.Is4() && have4) || (ip.Is6() && have6) {
				continue
			}
			have4, have6 = have4 || ip.Is4(), have6 || ip.Is6()
			modeCfg.NodePortAddresses = append(modeCfg.NodePortAddresses, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	if !a.dump {
		events, stopEvents := newServiceEvents(client, a.hostnameOverride, log)
		defer stopEvents()
		modeCfg.Events = events
	}
	prov, err := proxy.NewMode(a.mode, modeCfg)
	if err != nil {
		return err
	}
	if a.dump {
		d, ok := prov.(proxy.Dumper)
		if !ok {
			return fmt.Errorf("proxy mode %s cannot dump its state", a.mode)
		}
		out, err := d.Dump(ctx)
		if err != nil {
			return err
		}
		fmt.Print(out)
		return nil
	}
	// Leftovers of the other modes would shadow or fight ours.
	for _, m := range proxy.Modes() {
		if m == a.mode {
			continue
		}
		if other, err := proxy.NewMode(m, modeCfg); err == nil {
			if err := other.Cleanup(ctx); err != nil {
				log.Warn("cleaning up another proxy mode's leftovers", "mode", m, "err", err)
			}
		}
	}

	a.conntrack.Apply(ctx, exec, log)
	health := proxy.NewProxyHealth(2 * a.syncPeriod)
	health.Metrics = metrics
	var families []bool
	if modeCfg.IPv4 {
		families = append(families, false)
	}
	if modeCfg.IPv6 {
		families = append(families, true)
	}
	p := proxy.NewProxier(proxy.Config{
		Log: log, Provider: prov, Node: nodeInfo, MinSyncPeriod: a.minSyncPeriod, SyncPeriod: a.syncPeriod,
		Metrics: metrics, Health: health, ServiceHealth: proxy.NewServiceHealthServer(log, health, nil),
		Conntrack: &conntrack.Cleaner{NetNS: a.netns}, Families: families,
		AfterFirstSync: func() {
			// The informers' initial lists and the first full sync leave
			// the heap at its peak, most of it garbage now; Go would return
			// it to the kernel only slowly. And the svcnet binary carries
			// every subcommand: starting it faulted in code and data of
			// all of them, which proxy never touches again (see
			// pageOutExecutable). The collector was off until now
			// (relaxGCForStart).
			restoreGC()
			debug.FreeOSMemory()
			log.Info("first sync done; returned free heap and paged out unused parts of the executable", "bytes", pageOutExecutable())
		},
	})
	errc := make(chan error, 3)
	if a.healthzBindAddress != "" {
		mux := http.NewServeMux()
		mux.Handle("/healthz", health)
		mux.Handle("/livez", health)
		go func() { errc <- proxy.ServeHTTPOn(ctx, a.healthzBindAddress, mux) }()
	}
	if a.metricsBindAddress != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.Handle("/healthz", health)
		mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, a.mode) })
		if a.profiling {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		go func() { errc <- proxy.ServeHTTPOn(ctx, a.metricsBindAddress, mux) }()
	}
	log.Info("starting service proxy", "mode", a.mode, "ipv4", modeCfg.IPv4, "ipv6", modeCfg.IPv6)
	// kube-proxy's line, which `kubectl logs ... | grep Using` looks for.
	log.Info(fmt.Sprintf("Using %s Proxier", a.mode))
	// Without --service-cluster-ip-range the Service ranges come from the
	// ServiceCIDR objects, as in kube-proxy.
	if len(a.serviceCIDRs) == 0 {
		if ok, err := proxy.WatchServiceCIDRs(ctx, client, p, 30*time.Second); err != nil {
			log.Warn("ServiceCIDRs not listed yet; traffic to unallocated ClusterIPs is not dropped until they are", "err", err)
		} else if !ok {
			log.Info("the API server serves no ServiceCIDRs; traffic to unallocated ClusterIPs is not dropped")
		}
	}
	if err := proxy.StartInformers(ctx, client, p, a.hostnameOverride, 0); err != nil {
		return err
	}
	if readConfig != nil {
		// As kube-proxy: a changed configuration ends this run; kubelet
		// restarts kube-proxy's pod, and a --config-map proxy restarts
		// itself (same process, so whoever supervises it keeps its PID).
		changed := make(chan error, 1)
		go configChanged(ctx, a.configData, readConfig, 2*time.Second, changed)
		go func() {
			err := <-changed
			if a.configMap == "" {
				errc <- err
				return
			}
			log.Info("the kube-proxy configuration changed; restarting", "configmap", a.configMap)
			errc <- restartSelf()
		}()
	}
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	select {
	case <-ctx.Done():
		<-done
		return nil
	case err := <-errc:
		if err != nil {
			return err
		}
		<-done
		return nil
	}
}
