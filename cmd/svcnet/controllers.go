package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/controller"
	"github.com/svcnet/svcnet/controller/lbipam"
	"github.com/svcnet/svcnet/internal/metallbmetrics"
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
		le         leaderElection
		rootCAFile string
		metrics    string
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
	fs.BoolVar(&le.enabled, "leader-elect", true, "take a Lease before running, so that of several instances only one runs the controllers (kube-controller-manager's flag)")
	fs.DurationVar(&le.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long the others wait after the leader's last renewal before taking over")
	fs.DurationVar(&le.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops")
	fs.DurationVar(&le.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often the lease is tried and renewed")
	fs.StringVar(&le.name, "leader-elect-resource-name", "kube-controller-manager", "the Lease's name: kube-controller-manager's by default, since these controllers stand in for it (and the RBAC policy of kube-apiserver lets that identity renew only that Lease)")
	fs.StringVar(&le.namespace, "leader-elect-resource-namespace", "kube-system", "the Lease's namespace")
	fs.StringVar(&rootCAFile, "root-ca-file", "", "PEM CA bundle the root-ca-cert-publisher puts in every namespace's kube-root-ca.crt ConfigMap (default: the kubeconfig's certificate authority)")
	fs.StringVar(&metrics, "metrics-bind-address", "127.0.0.1:7473", "address of /metrics, plain HTTP, served when lbipam runs: MetalLB's controller metrics (metallb_allocator_*, metallb_k8s_client_*) (empty disables)")
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
	switch {
	case rootCAFile != "":
		if opts.RootCA, err = os.ReadFile(rootCAFile); err != nil {
			return fmt.Errorf("--root-ca-file: %w", err)
		}
	case len(cfg.CAData) > 0:
		opts.RootCA = cfg.CAData
	case cfg.CAFile != "":
		if opts.RootCA, err = os.ReadFile(cfg.CAFile); err != nil {
			return fmt.Errorf("kubeconfig certificate authority: %w", err)
		}
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
	if len(opts.Controllers) == 0 || slices.Contains(opts.Controllers, controller.LBIPAM) {
		// lbipam is MetalLB's controller: its metrics, one registry for
		// the process (the gauges are filled while this instance leads).
		reg := newMetalLBRegistry()
		opts.LBIPAMMetrics = lbipam.NewMetrics(reg)
		opts.LBIPAMClientMetrics = metallbmetrics.NewK8sClient(reg)
		if err := serveMetrics(ctx, metrics, reg, log); err != nil {
			return err
		}
	}
	run := func(ctx context.Context) error { return controller.Run(ctx, client, dyn, opts, log) }
	if !le.enabled {
		return run(ctx)
	}
	return le.run(ctx, client, log, run)
}

// leaderElection runs the controllers only while this process holds a
// Lease, as kube-controller-manager does with --leader-elect.
type leaderElection struct {
	enabled                                   bool
	leaseDuration, renewDeadline, retryPeriod time.Duration
	name, namespace                           string
}

func (le leaderElection) run(ctx context.Context, client kubernetes.Interface, log *slog.Logger, run func(context.Context) error) error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	id := host + "_" + string(uuid.NewUUID())
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.namespace, le.name, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: le.name})})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	// OnStartedLeading runs in a goroutine of its own; Run returns when the
	// Lease is lost or ctx ends, and cancels the controllers' context, so
	// their end is awaited through done.
	var ran atomic.Bool
	done := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.leaseDuration,
		RenewDeadline:   le.renewDeadline,
		RetryPeriod:     le.retryPeriod,
		ReleaseOnCancel: true,
		Name:            le.name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				ran.Store(true)
				log.Info("leading: starting the controllers", "lease", le.namespace+"/"+le.name, "identity", id)
				done <- run(ctx)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				if identity != id {
					log.Info("another instance leads; waiting", "lease", le.namespace+"/"+le.name, "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(ctx)
	if !ran.Load() {
		return nil
	}
	if err := <-done; err != nil {
		return err
	}
	if ctx.Err() == nil {
		return fmt.Errorf("leader election lost: the Lease %s/%s was not renewed in time", le.namespace, le.name)
	}
	return nil
}
