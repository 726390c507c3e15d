package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/netpol"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/nftables"
)

func init() {
	register(command{name: "netpol", short: "NetworkPolicy enforcement on this node (nftables table inet svcnet-netpol)", run: runNetpol})
}

func runNetpol(ctx context.Context, args []string) error {
	fs := newFlagSet("netpol")
	var kubeconfig, hostname, netns, metricsAddr, logLevel string
	var minSync, syncPeriod time.Duration
	var cleanup bool
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&hostname, "hostname-override", "", "name of this Node: its pods are the ones this agent isolates (default: the host name)")
	fs.StringVar(&netns, "netns", "", "program the table inside this named network namespace")
	fs.DurationVar(&minSync, "min-sync-period", time.Second, "minimum interval between rule syncs")
	fs.DurationVar(&syncPeriod, "sync-period", 30*time.Second, "maximum interval between syncs")
	fs.StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:10262", "address of /metrics and /healthz (empty disables)")
	fs.BoolVar(&cleanup, "cleanup", false, "delete the table (stop enforcing) and exit")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("host name: %w", err)
		}
		hostname = h
	}
	hostname = strings.ToLower(strings.TrimSpace(hostname))
	nft := nftables.NewExecNFT(knftables.InetFamily, netpol.TableName, proxy.OSExecutor{NetNS: netns})
	if cleanup {
		return netpol.Cleanup(ctx, nft)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "netpol", "node", hostname)
	client, err := typedClient(kubeconfig, "svcnet-netpol", 50, 100)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	agent := netpol.New(netpol.Config{Client: client, NodeName: hostname, NFT: nft, Logger: log, Metrics: netpol.NewMetrics(reg),
		MinSyncPeriod: minSync, SyncPeriod: syncPeriod})
	errc := make(chan error, 1)
	if metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if ok, _ := agent.Synced(); !ok {
				http.Error(w, "not synced yet", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "ok")
		})
		go func() { errc <- proxy.ServeHTTPOn(ctx, metricsAddr, mux) }()
	}
	log.Info("starting NetworkPolicy agent", "table", "inet "+netpol.TableName)
	go func() { errc <- agent.Run(ctx) }()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}
