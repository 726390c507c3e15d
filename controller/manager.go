// Package controller runs svcnet's controllers — Endpoints, EndpointSlices,
// EndpointSlice mirroring, Deployments, ReplicaSets, DaemonSets, the scheduler, garbage
// collection, namespace finalization, LoadBalancer IPAM, the node lifecycle health check, the default service accounts and
// the root CA ConfigMaps — against any Kubernetes API server,
// sharing one informer factory and one event broadcaster, as
// kube-controller-manager does. Each controller lives in its own
// subpackage; Run wires and starts the enabled ones.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/controller/daemonset"
	"github.com/svcnet/svcnet/controller/deployment"
	"github.com/svcnet/svcnet/controller/endpoints"
	"github.com/svcnet/svcnet/controller/endpointslice"
	"github.com/svcnet/svcnet/controller/gc"
	"github.com/svcnet/svcnet/controller/lbipam"
	"github.com/svcnet/svcnet/controller/mirroring"
	"github.com/svcnet/svcnet/controller/namespace"
	"github.com/svcnet/svcnet/controller/nodelifecycle"
	"github.com/svcnet/svcnet/controller/replicaset"
	"github.com/svcnet/svcnet/controller/scheduler"
	"github.com/svcnet/svcnet/controller/serviceaccount"
	"github.com/svcnet/svcnet/controller/servicecidrs"
	"github.com/svcnet/svcnet/internal/metallbmetrics"
	"github.com/svcnet/svcnet/internal/metallbstate"
)

// Names of the controllers, for Options.Controllers.
const (
	Endpoints     = "endpoints"
	EndpointSlice = "endpointslice"
	Mirroring     = "endpointslicemirroring"
	Deployment    = "deployment"
	ReplicaSet    = "replicaset"
	DaemonSet     = "daemonset"
	Scheduler     = "scheduler"
	GC            = "garbagecollector"
	LBIPAM        = "lbipam"
	ServiceCIDRs  = "servicecidrs"
	Namespace     = "namespace"
	NodeLifecycle = "nodelifecycle"
	// ServiceAccount and RootCAPublisher are kube-controller-manager's
	// serviceaccount-controller and root-ca-cert-publisher.
	ServiceAccount  = "serviceaccount"
	RootCAPublisher = "root-ca-cert-publisher"
)

// All lists every controller name.
var All = []string{Endpoints, EndpointSlice, Mirroring, Deployment, ReplicaSet, DaemonSet, Scheduler, GC, LBIPAM, ServiceCIDRs, Namespace, NodeLifecycle, ServiceAccount, RootCAPublisher}

// Options configure Run.
type Options struct {
	// Controllers to run; empty means All.
	Controllers []string
	// Workers per controller (default 5; the scheduler always uses 1).
	Workers int
	// MaxEndpointsPerSlice for the EndpointSlice controller (default 100).
	MaxEndpointsPerSlice int
	// SchedulerBindMode is "binding" (pods/binding, default) or "update".
	SchedulerBindMode string
	// SchedulerFallbackUpdate falls back to an update when pods/binding is
	// not served.
	SchedulerFallbackUpdate bool
	// ResyncPeriod of the shared informers (0: none).
	ResyncPeriod time.Duration
	// NodeMonitorGracePeriod and NodeMonitorPeriod of the node lifecycle
	// controller (0: kube-controller-manager's 50s and 5s).
	NodeMonitorGracePeriod, NodeMonitorPeriod time.Duration
	// RootCA is the PEM CA bundle the root CA publisher puts in every
	// namespace (kube-controller-manager's --root-ca-file); without it that
	// controller does not run.
	RootCA []byte
	// LBIPAMMetrics and LBIPAMClientMetrics, when set, receive the lbipam
	// controller's MetalLB allocator and metallb_k8s_client_* metrics.
	LBIPAMMetrics       *lbipam.Metrics
	LBIPAMClientMetrics *metallbmetrics.K8sClient
	// MetalLBNamespace is where lbipam keeps MetalLB's ConfigurationState
	// "controller" (default metallb-system; nothing is written while it
	// does not exist).
	MetalLBNamespace string
}

// Run starts the enabled controllers and blocks until ctx is cancelled or
// one of them fails to start. dyn may be nil when none of the garbage
// collector, LB IPAM and the namespace controller is enabled.
func Run(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, opts Options, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	enabled := opts.Controllers
	if len(enabled) == 0 {
		enabled = All
	}
	for _, n := range enabled {
		if !slices.Contains(All, n) {
			return fmt.Errorf("unknown controller %q (known: %v)", n, All)
		}
	}
	on := func(n string) bool { return slices.Contains(enabled, n) }
	if (on(GC) || on(LBIPAM) || on(Namespace)) && dyn == nil {
		return errors.New("garbage collector, lbipam and namespace controller need a dynamic client")
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = 5
	}

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := func(component string) record.EventRecorder {
		return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
	}

	factory := informers.NewSharedInformerFactory(client, opts.ResyncPeriod)
	var dynFactory dynamicinformer.DynamicSharedInformerFactory
	if dyn != nil {
		dynFactory = dynamicinformer.NewDynamicSharedInformerFactory(dyn, opts.ResyncPeriod)
	}
	var runs []func(context.Context) error
	if on(ServiceCIDRs) {
		c := servicecidrs.New(client, factory, log)
		runs = append(runs, func(ctx context.Context) error { return c.Run(ctx, workers) })
	}
	if on(Endpoints) {
		c := endpoints.New(client, factory, recorder("endpoint-controller"), log)
		runs = append(runs, func(ctx context.Context) error { return c.Run(ctx, workers) })
	}
	if on(EndpointSlice) {
		c := endpointslice.New(client, factory, recorder("endpoint-slice-controller"), opts.MaxEndpointsPerSlice, log)
		runs = append(runs, func(ctx context.Context) error { return c.Run(ctx, workers) })
	}
	if on(Mirroring) {
		c := mirroring.New(client, factory, recorder("endpoint-slice-mirroring-controller"), log)
		runs = append(runs, func(ctx context.Context) error { return c.Run(ctx, workers) })
	}
	if on(ReplicaSet) {
		c := replicaset.New(client, factory, recorder("replicaset-controller"), log)
		runs = append(runs, func(ctx context.Context) error { return c.Run(ctx, workers) })
	}
	if on(DaemonSet) {
		c := daemonset.New(client, factory, recorder("daemonset-controller"), log)
		runs = append(runs, func(ctx context.Context) error { return c.Run(ctx, workers) })
	}
	if on(Deployment) {
		c := deployment.New(client, factory, recorder("deployment-controller"), log)
		runs = append(runs, func(ctx context.Context) error { return c.Run(ctx, workers) })
	}
	if on(Scheduler) {
		s := scheduler.New(client, factory, recorder(scheduler.SchedulerName),
			scheduler.Options{BindMode: opts.SchedulerBindMode, FallbackUpdate: opts.SchedulerFallbackUpdate}, log)
		runs = append(runs, s.Run)
	}
	if on(GC) {
		res, err := gc.Discover(client.Discovery())
		if err != nil {
			log.Warn("garbage collector: discovery incomplete, collecting the resources found", "resources", len(res), "err", err)
		}
		g := gc.New(dyn, dynFactory, res, log)
		runs = append(runs, func(ctx context.Context) error { return g.Run(ctx, workers) })
	}
	if on(Namespace) {
		c := namespace.New(client, dyn, factory, log)
		runs = append(runs, func(ctx context.Context) error { return c.Run(ctx, workers) })
	}
	if on(NodeLifecycle) {
		c := nodelifecycle.New(client, factory, opts.NodeMonitorGracePeriod, opts.NodeMonitorPeriod, log)
		runs = append(runs, c.Run)
	}
	if on(ServiceAccount) {
		c := serviceaccount.New(client, factory, log)
		runs = append(runs, func(ctx context.Context) error { return c.Run(ctx, workers) })
	}
	if on(RootCAPublisher) {
		if len(opts.RootCA) == 0 {
			log.Warn("root-ca-cert-publisher: no root CA (--root-ca-file, or a CA in the kubeconfig); not running it")
		} else {
			p, err := serviceaccount.NewPublisher(client, factory, opts.RootCA, log)
			if err != nil {
				return err
			}
			runs = append(runs, func(ctx context.Context) error { return p.Run(ctx, workers) })
		}
	}
	if on(LBIPAM) {
		l := lbipam.New(client, dyn, factory, dynFactory, recorder(lbipam.ControllerName), log)
		l.SetMetrics(opts.LBIPAMMetrics, opts.LBIPAMClientMetrics)
		mns := opts.MetalLBNamespace
		if mns == "" {
			mns = "metallb-system"
		}
		l.SetConfigState(metallbstate.ForController(dyn, mns, log))
		runs = append(runs, l.Run)
	}
	factory.Start(ctx.Done())
	if dynFactory != nil {
		dynFactory.Start(ctx.Done())
	}
	defer factory.Shutdown()
	if dynFactory != nil {
		defer dynFactory.Shutdown()
	}
	log.Info("controllers starting", "controllers", enabled)

	var wg sync.WaitGroup
	errc := make(chan error, len(runs))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, r := range runs {
		wg.Go(func() {
			if err := r(cctx); err != nil && cctx.Err() == nil {
				errc <- err
				cancel()
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}
