package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/controller"
)

func init() {
	register(command{
		name:  "controllers",
		short: "run the controllers (endpoints, endpointslices, mirroring, deployments, scheduler, GC, LB IPAM, node lifecycle)",
		run:   runControllers,
	})
}

func runControllers(ctx context.Context, args []string) error {
	fs := newFlagSet("controllers")
	var (
		kubeconfig string
		enabled    string
		opts       controller.Options
		qps        float32
		burst      int
		verbose    bool
	)
	fs.StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (default: $KUBECONFIG, else in-cluster config)")
	fs.StringVar(&enabled, "controllers", "*", "comma-separated controllers to run, '*' for all: "+strings.Join(controller.All, ","))
	fs.IntVar(&opts.Workers, "concurrent-syncs", 5, "workers per controller")
	fs.IntVar(&opts.MaxEndpointsPerSlice, "max-endpoints-per-slice", 100, "most endpoints in one EndpointSlice")
	fs.StringVar(&opts.SchedulerBindMode, "scheduler-bind-mode", "binding", "how the scheduler assigns nodes: binding (pods/binding subresource) or update (spec.nodeName)")
	fs.BoolVar(&opts.SchedulerFallbackUpdate, "scheduler-fallback-update", true, "fall back to an update when pods/binding is not served")
	fs.Float32Var(&qps, "kube-api-qps", 50, "client QPS towards the API server")
	fs.IntVar(&burst, "kube-api-burst", 100, "client burst towards the API server")
	fs.DurationVar(&opts.NodeMonitorGracePeriod, "node-monitor-grace-period", 50*time.Second, "how long a Node's agent may be silent (no status, no Lease renewal) before its conditions become Unknown and its pods not ready")
	fs.DurationVar(&opts.NodeMonitorPeriod, "node-monitor-period", 5*time.Second, "how often the node lifecycle controller checks the Nodes")
	fs.BoolVar(&verbose, "v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if enabled != "*" && enabled != "" {
		for _, n := range strings.Split(enabled, ",") {
			opts.Controllers = append(opts.Controllers, strings.TrimSpace(n))
		}
	}
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	cfg.UserAgent = "svcnet-controllers"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return controller.Run(ctx, client, dyn, opts, log)
}
