package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/metallbmetrics"
	"github.com/svcnet/svcnet/internal/metallbstate"
	"github.com/svcnet/svcnet/speaker"
	"github.com/svcnet/svcnet/speaker/bgp"
	"github.com/svcnet/svcnet/speaker/l2"
)

func init() {
	register(command{name: "speaker", short: "MetalLB's speaker on this node: announces LoadBalancer IPs (layer 2: ARP/NDP; BGP: gobgp sessions with the BGPPeers)", run: runSpeaker})
}

func runSpeaker(ctx context.Context, args []string) error {
	fs := newFlagSet("speaker")
	var kubeconfig, nodeName, leaseNS, statusNS, logLevel, metricsAddr string
	var leaseDuration, reannounce time.Duration
	var ignoreExcludeLB bool
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&nodeName, "node-name", "", "name of this Node (default: the host name)")
	fs.StringVar(&leaseNS, "lease-namespace", "kube-system", "namespace of the speakers' Leases (svcnet-speaker-<node>), by which speakers see each other alive")
	fs.StringVar(&statusNS, "namespace", "metallb-system", "namespace of the ServiceL2Status and ServiceBGPStatus objects (MetalLB's speaker namespace)")
	fs.DurationVar(&leaseDuration, "lease-duration", 6*time.Second, "a speaker whose Lease was not renewed for this long is taken for dead and its addresses move")
	fs.DurationVar(&reannounce, "reannounce-interval", 30*time.Second, "how often announced addresses are announced again (gratuitous ARP / unsolicited NA); 0 disables")
	fs.StringVar(&metricsAddr, "metrics-bind-address", ":7472", "address of /metrics, MetalLB's speaker metrics over plain HTTP (empty disables)")
	fs.BoolVar(&ignoreExcludeLB, "ignore-exclude-lb", false, "announce from nodes labelled node.kubernetes.io/exclude-from-external-load-balancers too (MetalLB's flag)")
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
	if leaseDuration < time.Second {
		return fmt.Errorf("--lease-duration must be at least 1s")
	}
	if reannounce < 0 {
		return fmt.Errorf("--reannounce-interval must not be negative")
	}
	if nodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("host name: %w", err)
		}
		nodeName = h
	}
	nodeName = strings.ToLower(strings.TrimSpace(nodeName))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "speaker", "node", nodeName)

	cfg, err := clientConfig(kubeconfig, "svcnet-speaker")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}

	// MetalLB's speaker metrics, one registry for the process.
	reg := newMetalLBRegistry()
	clientMetrics := metallbmetrics.NewK8sClient(reg)
	// MetalLB v0.16's ConfigurationState "speaker-<node>": whether this
	// speaker could use the whole configuration.
	configState := metallbstate.ForSpeaker(dyn, statusNS, nodeName, log)
	resp := l2.New(l2.Options{Logger: log.With("protocol", "layer2"), ReannounceInterval: reannounce, Metrics: l2.NewMetrics(reg)})
	// BGP mode (speaker/bgp): gobgp sessions with the BGPPeers selecting
	// this node, opened from this process's network namespace.
	bgpMode := bgp.New(bgp.Config{Client: client, Dynamic: dyn, NodeName: nodeName, Logger: log, StatusNamespace: statusNS,
		Metrics: bgp.NewMetrics(reg), ClientMetrics: clientMetrics, ConfigState: configState})
	sp := speaker.New(speaker.Config{Client: client, Dynamic: dyn, NodeName: nodeName, LeaseNamespace: leaseNS,
		LeaseDuration: leaseDuration, Logger: log, IgnoreExcludeLB: ignoreExcludeLB,
		Metrics: speaker.NewMetrics(reg), ClientMetrics: clientMetrics, ConfigState: configState,
		Protocols: []speaker.Protocol{&speaker.Layer2{Responder: resp,
			Status: &speaker.L2Status{Dynamic: dyn, Namespace: statusNS, NodeName: nodeName}}, bgpMode}})
	mctx, mcancel := context.WithCancel(context.Background())
	defer mcancel()
	go configState.Run(mctx)
	if err := serveMetrics(mctx, metricsAddr, reg, log); err != nil {
		return err
	}
	// The responder outlives the speaker's withdrawals on shutdown (the
	// speaker withdraws, then the responder closes its sockets).
	rctx, rcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var rerr error
	go func() { defer wg.Done(); rerr = resp.Run(rctx) }()
	serr := sp.Run(ctx)
	rcancel()
	wg.Wait()
	if errors.Is(serr, context.Canceled) {
		serr = nil
	}
	return errors.Join(serr, rerr)
}
