// Package ingress is svcnet's Ingress controller (`svcnet ingress`): an L7
// HTTP reverse proxy for networking.k8s.io/v1 Ingresses, in the manner of
// ingress-nginx.
//
// Client-go informers watch IngressClasses, Ingresses, Services and
// EndpointSlices. On every relevant change the controller builds an immutable
// routing Table (Build: hosts, paths, backends resolved to the ready
// endpoints of their Services) and swaps it into the Proxy atomically, so
// that routing changes never drop a connection. The Proxy routes each
// request by the Kubernetes Ingress rules and sends it straight to an
// endpoint (round-robin, or by cookie affinity) with
// net/http/httputil.ReverseProxy. The instance holding the status Lease
// writes status.loadBalancer.ingress of the served Ingresses and records
// Events for what it cannot serve.
//
// See README.md for the flags, the supported annotations and the
// differences from ingress-nginx.
package ingress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/proxy"
)

// retryDelay is how soon a failed status write is retried.
const retryDelay = 2 * time.Second

// EventComponent is the source component of the controller's Events.
const EventComponent = "svcnet-ingress"

// LeaderElection configures the Lease that decides which instance writes
// status and Events (every instance proxies).
type LeaderElection struct {
	Namespace string
	Name      string // --election-id
	// Identity defaults to the host name and a random suffix.
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Config configures a Controller.
type Config struct {
	Client kubernetes.Interface
	Class  ClassSelector
	// WatchNamespace limits Ingresses, Services and EndpointSlices to one
	// namespace ("" for all).
	WatchNamespace    string
	AnnotationsPrefix string
	// DefaultBackend is --default-backend-service (nil: the built-in 404).
	DefaultBackend *types.NamespacedName
	// PublishService and PublishStatusAddresses are the status sources
	// (PublishStatusAddresses wins); with neither, status is not written.
	PublishService         *types.NamespacedName
	PublishStatusAddresses []string
	// UpdateStatus enables status writes (--update-status).
	UpdateStatus bool
	// LeaderElection, when set, elects the instance writing status and
	// Events; nil: this instance always does.
	LeaderElection *LeaderElection
	// MinSyncPeriod bounds how often the routing table is rebuilt (and
	// status written); 0 rebuilds on every change.
	MinSyncPeriod time.Duration
	// SyncPeriod is the longest time between status checks (default 60s).
	SyncPeriod time.Duration
	Proxy      ProxyConfig
	Logger     *slog.Logger
	Metrics    *Metrics
	// Recorder records Events (default: a broadcaster writing through
	// Client).
	Recorder record.EventRecorder
	// TLS terminates TLS for the hosts of spec.tls: the controller watches
	// Secrets and TLSConfig serves their certificates.
	TLS bool
	// DefaultCertificate is --default-ssl-certificate, the Secret whose
	// certificate clients of hosts without one get (nil: a self-signed
	// one made at start).
	DefaultCertificate *types.NamespacedName
}

// Controller watches the API and keeps the Proxy's routing table current.
type Controller struct {
	cfg   Config
	log   *slog.Logger
	proxy *Proxy

	factories []informers.SharedInformerFactory
	informers []cache.SharedIndexInformer
	ingresses networkinglisters.IngressLister
	classes   networkinglisters.IngressClassLister
	// services and slices by namespace ("" for the main factory's).
	services map[string]corelisters.ServiceLister
	slices   map[string]cache.Indexer
	publish  corelisters.ServiceLister
	secrets  corelisters.SecretLister
	// fake is the self-signed default certificate; defaultCert the one
	// served (fake, or --default-ssl-certificate's once read).
	fake        *tls.Certificate
	defaultCert atomic.Pointer[tls.Certificate]
	certMu      sync.Mutex
	certs       map[string]cachedCert // parsed key pairs by namespace/name
	// defaultLogged: the unusable --default-ssl-certificate was logged
	// (rebuilds run on one goroutine).
	defaultLogged bool

	runner       *proxy.BoundedFrequencyRunner
	statusRunner atomic.Pointer[proxy.BoundedFrequencyRunner]
	synced       atomic.Bool
	leader       atomic.Bool
	recorder     record.EventRecorder
	stopEvents   func()

	mu sync.Mutex
	// logged and evented are the problem keys already logged and recorded
	// as Events, pruned to the current table's problems.
	logged, evented map[string]bool
	// served is the Ingresses of the current table, to forget the metric
	// series of those that go.
	served map[types.NamespacedName]bool
	// written: status written by this instance (leader only).
	written map[types.NamespacedName]written
}

const sliceServiceIndex = "service"

// New returns a controller; Run starts it, Handler serves the traffic.
func New(cfg Config) *Controller {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = 60 * time.Second
	}
	if cfg.AnnotationsPrefix == "" {
		cfg.AnnotationsPrefix = DefaultAnnotationsPrefix
	}
	c := &Controller{
		cfg:      cfg,
		log:      cfg.Logger,
		proxy:    NewProxy(cfg.Proxy, cfg.Metrics, cfg.Logger),
		services: map[string]corelisters.ServiceLister{},
		slices:   map[string]cache.Indexer{},
		logged:   map[string]bool{},
		evented:  map[string]bool{},
		served:   map[types.NamespacedName]bool{},
		written:  map[types.NamespacedName]written{},
	}
	c.runner = proxy.NewBoundedFrequencyRunner("ingress", c.rebuild, cfg.MinSyncPeriod, time.Hour)
	c.runner.Burst = 2

	rebuild := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.runner.Run() },
		UpdateFunc: func(any, any) { c.runner.Run() },
		DeleteFunc: func(any) { c.runner.Run() },
	}
	// Services and slices rebuild only when the table reads them.
	relevant := func(obj any) {
		if key := serviceKeyOf(obj); key != "" && c.referenced(key) {
			c.runner.Run()
		}
	}
	backendHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    relevant,
		UpdateFunc: func(_, n any) { relevant(n) },
		DeleteFunc: relevant,
	}

	main := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.WatchNamespace))
	c.factories = append(c.factories, main)
	ingInf := main.Networking().V1().Ingresses()
	c.ingresses = ingInf.Lister()
	// Status writes (this controller's own among them) do not change
	// routing.
	c.add(ingInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.runner.Run() },
		UpdateFunc: func(o, n any) {
			oi, ok1 := o.(*networkingv1.Ingress)
			ni, ok2 := n.(*networkingv1.Ingress)
			if ok1 && ok2 && oi.UID == ni.UID && equality.Semantic.DeepEqual(oi.Spec, ni.Spec) &&
				equality.Semantic.DeepEqual(oi.Annotations, ni.Annotations) {
				return
			}
			c.runner.Run()
		},
		DeleteFunc: func(any) { c.runner.Run() },
	})
	c.addBackends(main, cfg.WatchNamespace, backendHandler)
	if cfg.TLS {
		c.watchSecrets(main)
	}

	classFactory := main
	if cfg.WatchNamespace != "" {
		classFactory = informers.NewSharedInformerFactory(cfg.Client, 0)
		c.factories = append(c.factories, classFactory)
	}
	clsInf := classFactory.Networking().V1().IngressClasses()
	c.classes = clsInf.Lister()
	c.add(clsInf.Informer(), rebuild)

	// The default backend may live outside the watched namespace.
	if d := cfg.DefaultBackend; d != nil && cfg.WatchNamespace != "" && d.Namespace != cfg.WatchNamespace {
		f := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(d.Namespace))
		c.factories = append(c.factories, f)
		c.addBackends(f, d.Namespace, backendHandler)
	}
	// The published Service: a watch of that one object.
	if ps := cfg.PublishService; ps != nil && len(cfg.PublishStatusAddresses) == 0 {
		f := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(ps.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ps.Name).String()
			}))
		c.factories = append(c.factories, f)
		inf := f.Core().V1().Services()
		c.publish = inf.Lister()
		poke := func(any) {
			if r := c.statusRunner.Load(); r != nil {
				r.Run()
			}
		}
		c.add(inf.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke})
	}
	return c
}

func (c *Controller) add(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	_, _ = inf.AddEventHandler(h)
	c.informers = append(c.informers, inf)
}

// addBackends watches the Services and EndpointSlices of a factory's
// namespace; the slices are indexed by their Service.
func (c *Controller) addBackends(f informers.SharedInformerFactory, ns string, h cache.ResourceEventHandler) {
	svcInf := f.Core().V1().Services()
	c.services[ns] = svcInf.Lister()
	c.add(svcInf.Informer(), h)
	sliceInf := f.Discovery().V1().EndpointSlices().Informer()
	_ = sliceInf.AddIndexers(cache.Indexers{sliceServiceIndex: func(obj any) ([]string, error) {
		sl, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return nil, nil
		}
		name := sl.Labels[discoveryv1.LabelServiceName]
		if name == "" {
			return nil, nil
		}
		return []string{sl.Namespace + "/" + name}, nil
	}})
	c.slices[ns] = sliceInf.GetIndexer()
	c.add(sliceInf, h)
}

// serviceKeyOf is "namespace/name" of a Service, or of an EndpointSlice's
// Service.
func serviceKeyOf(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch o := obj.(type) {
	case *corev1.Service:
		return o.Namespace + "/" + o.Name
	case *discoveryv1.EndpointSlice:
		if n := o.Labels[discoveryv1.LabelServiceName]; n != "" {
			return o.Namespace + "/" + n
		}
	}
	return ""
}

func (c *Controller) referenced(key string) bool {
	t := c.proxy.Table()
	return t == nil || t.references(key)
}

// Handler is the HTTP handler of the proxy.
func (c *Controller) Handler() http.Handler { return c.proxy }

// Proxy is the controller's data path.
func (c *Controller) Proxy() *Proxy { return c.proxy }

// Synced reports whether the caches have synced and a routing table is in
// place (the /healthz condition).
func (c *Controller) Synced() bool { return c.synced.Load() }

// Leader reports whether this instance writes status and Events.
func (c *Controller) Leader() bool { return c.leader.Load() }

// Run starts the informers, builds the routing table on every change and,
// when leading, writes status, until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	c.recorder = c.cfg.Recorder
	if c.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.cfg.Client.CoreV1().Events("")})
		c.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent})
		c.stopEvents = b.Shutdown
	}
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	syncs := make([]cache.InformerSynced, 0, len(c.informers))
	for _, inf := range c.informers {
		syncs = append(syncs, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), syncs...) {
		c.shutdown()
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("ingress: informer caches did not sync")
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.runner.Loop(ctx) })
	switch {
	case c.cfg.LeaderElection != nil && c.cfg.UpdateStatus:
		wg.Go(func() { c.elect(ctx) })
	default:
		wg.Go(func() { c.lead(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	c.shutdown()
	c.proxy.CloseIdleConnections()
	return nil
}

func (c *Controller) shutdown() {
	for _, f := range c.factories {
		f.Shutdown()
	}
	if c.stopEvents != nil {
		c.stopEvents()
	}
}

// rebuild builds the routing table from the caches and swaps it in.
func (c *Controller) rebuild() {
	all, err := c.ingresses.List(labels.Everything())
	if err != nil {
		c.log.Error("cannot list ingresses", "err", err)
		return
	}
	classOf := func(name string) *networkingv1.IngressClass {
		ic, err := c.classes.Get(name)
		if err != nil {
			return nil
		}
		return ic
	}
	var served []*networkingv1.Ingress
	for _, ing := range all {
		if c.cfg.Class.Serves(ing, classOf) {
			served = append(served, ing)
		}
	}
	in := BuildInput{
		Ingresses:         served,
		Service:           c.service,
		Slices:            c.endpointSlices,
		AnnotationsPrefix: c.cfg.AnnotationsPrefix,
		DefaultBackend:    c.cfg.DefaultBackend,
		Prev:              c.proxy.Table(),
	}
	if c.secrets != nil {
		in.Certificate = c.certificate
	}
	t := Build(in)
	if c.secrets != nil {
		c.pruneCertificates(t)
		c.updateDefaultCertificate()
	}
	c.proxy.SetTable(t)
	c.cfg.Metrics.ConfigSyncs.Inc()
	c.cfg.Metrics.LastConfigSync.SetToCurrentTime()
	c.cfg.Metrics.ServedIngresses.Set(float64(len(t.Served)))
	c.afterBuild(t)
	if !c.synced.Swap(true) {
		c.log.Info("routing table ready", "ingresses", len(t.Served))
	}
	if r := c.statusRunner.Load(); r != nil {
		r.Run()
	}
}

// afterBuild logs the new problems once and forgets the metric series of
// Ingresses no longer served.
func (c *Controller) afterBuild(t *Table) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logged = reportNew(c.logged, t.Problems, func(p Problem) {
		c.log.Warn("ingress not served as written", "ingress", p.Ingress.Namespace+"/"+p.Ingress.Name, "reason", p.Reason, "message", p.Message)
	})
	now := make(map[types.NamespacedName]bool, len(t.Served))
	for _, ing := range t.Served {
		now[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = true
	}
	for k := range c.served {
		if !now[k] {
			c.cfg.Metrics.forget(k.Namespace, k.Name)
		}
	}
	c.served = now
}

// recordEvents records each current problem once as a Warning Event on its
// Ingress (leader only).
func (c *Controller) recordEvents(t *Table) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evented = reportNew(c.evented, t.Problems, func(p Problem) {
		if c.recorder != nil {
			c.recorder.Event(p.Ingress, corev1.EventTypeWarning, p.Reason, p.Message)
		}
	})
}

// reportNew calls report for each problem not in seen (the keys reported
// after the previous table) and returns the keys of problems, so a problem is
// reported once for as long as it lasts, and again if it comes back.
func reportNew(seen map[string]bool, problems []Problem, report func(Problem)) map[string]bool {
	cur := make(map[string]bool, len(problems))
	for _, p := range problems {
		k := p.key()
		cur[k] = true
		if !seen[k] {
			report(p)
		}
	}
	return cur
}

func (c *Controller) service(ns, name string) *corev1.Service {
	l, ok := c.services[ns]
	if !ok {
		// The main factory's lister is keyed "" when it watches every
		// namespace; a namespace nothing watches has no Services.
		if l, ok = c.services[""]; !ok {
			return nil
		}
	}
	svc, err := l.Services(ns).Get(name)
	if err != nil {
		return nil
	}
	return svc
}

func (c *Controller) endpointSlices(ns, name string) []*discoveryv1.EndpointSlice {
	idx, ok := c.slices[ns]
	if !ok {
		if idx, ok = c.slices[""]; !ok {
			return nil
		}
	}
	objs, err := idx.ByIndex(sliceServiceIndex, ns+"/"+name)
	if err != nil {
		return nil
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if sl, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, sl)
		}
	}
	return out
}

// lead writes status and Events until ctx ends (or leadership is lost).
func (c *Controller) lead(ctx context.Context) {
	r := proxy.NewBoundedFrequencyRunner("ingress-status", func() { c.syncStatus(ctx) }, c.cfg.MinSyncPeriod, c.cfg.SyncPeriod)
	c.statusRunner.Store(r)
	c.leader.Store(true)
	c.cfg.Metrics.Leader.Set(1)
	r.Loop(ctx)
	c.statusRunner.Store(nil)
	c.leader.Store(false)
	c.cfg.Metrics.Leader.Set(0)
}

// elect takes part in the election of the status writer until ctx ends.
func (c *Controller) elect(ctx context.Context) {
	le := *c.cfg.LeaderElection
	if le.Identity == "" {
		host, _ := os.Hostname()
		le.Identity = host + "_" + string(uuid.NewUUID())
	}
	if le.LeaseDuration <= 0 {
		le.LeaseDuration = 15 * time.Second
	}
	if le.RenewDeadline <= 0 {
		le.RenewDeadline = 10 * time.Second
	}
	if le.RetryPeriod <= 0 {
		le.RetryPeriod = 2 * time.Second
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name, c.cfg.Client.CoreV1(),
		c.cfg.Client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: le.Identity})
	if err != nil {
		c.log.Error("leader election lock", "err", err)
		return
	}
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   le.LeaseDuration,
			RenewDeadline:   le.RenewDeadline,
			RetryPeriod:     le.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            le.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					c.log.Info("leading: writing ingress status", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
					c.lead(ctx)
				},
				OnStoppedLeading: func() {},
				OnNewLeader: func(id string) {
					if id != le.Identity {
						c.log.Info("another instance writes ingress status", "lease", le.Namespace+"/"+le.Name, "leader", id)
					}
				},
			},
		})
		if err != nil {
			c.log.Error("leader election", "err", err)
			return
		}
		elector.Run(ctx)
	}
}

// ParseNamespacedName parses "namespace/name" ("" gives nil).
func ParseNamespacedName(s string) (*types.NamespacedName, error) {
	if s == "" {
		return nil, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%q is not namespace/name", s)
	}
	return &types.NamespacedName{Namespace: ns, Name: name}, nil
}
