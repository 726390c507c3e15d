package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/dns/forward"
	"github.com/svcnet/svcnet/dns/index"
	"github.com/svcnet/svcnet/dns/server"
	"github.com/svcnet/svcnet/dns/zone"
)

func init() {
	register(command{name: "dns", short: "cluster DNS server (the cluster.local zone, forwarding for the rest)", run: runDNS})
}

// dnsArgs is the parsed command line of `svcnet dns`.
type dnsArgs struct {
	kubeconfig    string
	listen        []string
	healthListen  string
	readyListen   string
	metricsListen string
	zone          string
	ttl           uint32
	pods          zone.PodMode
	reverse       bool
	reverseFall   bool
	upstreams     []string
	resolvConf    string
	cacheSize     int
	logLevel      string
}

func parseDNSArgs(args []string) (*dnsArgs, error) {
	fs := newFlagSet("dns")
	a := &dnsArgs{}
	var pods string
	var ttl uint
	fs.StringVar(&a.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
	fs.StringArrayVar(&a.listen, "listen", []string{":53"}, "DNS address to serve on UDP and TCP (repeatable)")
	fs.StringVar(&a.healthListen, "health-listen", ":8080", `address for /health (CoreDNS health plugin); "" disables`)
	fs.StringVar(&a.readyListen, "ready-listen", ":8181", `address for /ready (CoreDNS ready plugin); "" disables`)
	fs.StringVar(&a.metricsListen, "metrics-listen", ":9153", `address for /metrics (Prometheus); "" disables`)
	fs.StringVar(&a.zone, "zone", "cluster.local", "cluster domain")
	fs.UintVar(&ttl, "ttl", 5, "TTL in seconds of cluster records (0-3600)")
	fs.StringVar(&pods, "pods", "insecure", "pod records <a-b-c-d>.<ns>.pod.<zone>: insecure, verified or disabled")
	fs.BoolVar(&a.reverse, "reverse", true, "be authoritative for in-addr.arpa and ip6.arpa: PTR for cluster and endpoint IPs, NXDOMAIN for other addresses")
	fs.BoolVar(&a.reverseFall, "reverse-fallthrough", false, "forward reverse names that do not exist instead of answering NXDOMAIN (CoreDNS's fallthrough in-addr.arpa ip6.arpa)")
	fs.StringArrayVar(&a.upstreams, "upstream", nil, "upstream resolver host[:port] for other names (repeatable; default: nameservers of --resolv-conf)")
	fs.StringVar(&a.resolvConf, "resolv-conf", forward.DefaultResolvConf, "resolv.conf to read upstreams from when --upstream is not given")
	fs.IntVar(&a.cacheSize, "cache-size", forward.DefaultCacheSize, "maximum forwarded answers cached (0 disables)")
	fs.StringVar(&a.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	m, err := zone.ParsePodMode(pods)
	if err != nil {
		return nil, err
	}
	a.pods = m
	if ttl > 3600 {
		return nil, fmt.Errorf("--ttl must be between 0 and 3600, got %d", ttl)
	}
	a.ttl = uint32(ttl)
	if len(a.listen) == 0 {
		return nil, fmt.Errorf("at least one --listen address is required")
	}
	a.zone = strings.ToLower(strings.TrimSuffix(a.zone, ".")) + "."
	if a.zone == "." {
		return nil, fmt.Errorf("--zone must not be the root")
	}
	return a, nil
}

// dnsGCPercent is svcnet dns's GOGC.
const dnsGCPercent = 50

func runDNS(ctx context.Context, args []string) error {
	a, err := parseDNSArgs(args)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "dns")

	ups := a.upstreams
	if len(ups) == 0 {
		if ups, err = forward.FromResolvConf(a.resolvConf); err != nil {
			return fmt.Errorf("no --upstream given: %w", err)
		}
	}
	metrics := server.NewMetrics(server.ServerLabel(a.listen[0]))
	fwd, err := forward.New(ups, forward.DefaultTimeout, a.cacheSize, metrics)
	if err != nil {
		return err
	}
	client, err := typedClient(a.kubeconfig, "svcnet-dns", 50, 100)
	if err != nil {
		return err
	}
	idx := index.New()
	w, err := index.NewWatcher(client, idx, a.pods == zone.PodsVerified, log)
	if err != nil {
		return err
	}
	local := localIPs(a.listen)
	z := zone.New(zone.Config{Zone: a.zone, TTL: a.ttl, Pods: a.pods, Reverse: a.reverse, ReverseFallthrough: a.reverseFall,
		LocalIPs: local}, idx, w.HasSynced, fwd)
	h := &server.Handler{Zone: z, Forward: fwd, Metrics: metrics, Log: log}
	srv := server.New(server.Config{Listen: a.listen, HealthListen: a.healthListen, ReadyListen: a.readyListen,
		MetricsListen: a.metricsListen}, h, w.HasSynced, log)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		w.Run(ctx)
	}()
	// Memory: a lower GC target than Go's default (unless GOGC is set): the
	// live heap is the index, and the garbage is per-query and short-lived.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(dnsGCPercent)
	}
	go func() {
		if w.WaitForSync(ctx, 24*time.Hour) {
			log.Info("index synced; paging out unused parts of the executable", "bytes", pageOutExecutable())
		}
	}()
	log.Info("starting", "zone", a.zone, "upstreams", fwd.Upstreams(), "pods", a.pods, "ttl", a.ttl)
	err = srv.Run(ctx)
	cancel()
	select {
	case <-watchDone:
	case <-time.After(2 * time.Second):
	}
	return err
}

// localIPs are the non-loopback addresses the server answers on: the
// --listen hosts, or every interface address for a wildcard listen (what
// CoreDNS's kubernetes plugin takes as its own addresses to find its
// Service for NS answers).
func localIPs(listen []string) []netip.Addr {
	var out []netip.Addr
	add := func(a netip.Addr) {
		a = a.Unmap()
		if a.IsValid() && !a.IsLoopback() && !a.IsUnspecified() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, l := range listen {
		host, _, err := net.SplitHostPort(l)
		if err != nil {
			continue
		}
		if a, err := netip.ParseAddr(host); err == nil && !a.IsUnspecified() {
			add(a)
			continue
		}
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			continue
		}
		for _, ia := range addrs {
			if p, err := netip.ParsePrefix(ia.String()); err == nil {
				add(p.Addr())
			}
		}
	}
	return out
}
