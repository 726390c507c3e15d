package speaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/controller/lbipam"
	"github.com/svcnet/svcnet/internal/metallbmetrics"
	"github.com/svcnet/svcnet/internal/metallbstate"
)

// Component is the event source, as MetalLB's speaker names itself.
const Component = "metallb-speaker"

// LeaseLabel marks the speakers' Leases (value "true").
const LeaseLabel = "svcnet.io/speaker"

// LeaseName is the name of a node's speaker Lease.
func LeaseName(node string) string { return "svcnet-speaker-" + node }

const allKey = "\x00all"

// Config configures a Speaker.
type Config struct {
	Client   kubernetes.Interface
	Dynamic  dynamic.Interface
	NodeName string
	// LeaseNamespace holds the speakers' Leases (default kube-system).
	LeaseNamespace string
	// LeaseDuration is how long a speaker counts as alive after a renewal
	// (default 6s); it renews every third of it.
	LeaseDuration time.Duration
	Protocols     []Protocol
	Logger        *slog.Logger
	// Recorder records the nodeAssigned events (default: one writing
	// core/v1 Events through Client, source metallb-speaker on NodeName).
	// A Layer2 protocol without a Recorder of its own uses it for
	// announceFailed.
	Recorder record.EventRecorder
	// IgnoreExcludeLB is MetalLB's --ignore-exclude-lb: nodes labelled
	// node.kubernetes.io/exclude-from-external-load-balancers may announce
	// (ServiceInput.IgnoreExcludeLB).
	IgnoreExcludeLB bool
	// Metrics, when set, keeps metallb_speaker_announced.
	Metrics *Metrics
	// ClientMetrics, when set, counts the Services and configuration
	// reloads processed (metallb_k8s_client_*).
	ClientMetrics *metallbmetrics.K8sClient
	// ConfigState, when set, reports what of the layer 2 configuration
	// could not be used in MetalLB's ConfigurationState (part "layer2").
	ConfigState *metallbstate.Reporter
}

// Speaker announces this node's share of the LoadBalancer addresses.
type Speaker struct {
	cfg Config
	log *slog.Logger

	services cache.SharedIndexInformer
	svcs     corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	nodes    corelisters.NodeLister
	pools    cache.SharedIndexInformer
	l2ads    cache.SharedIndexInformer
	leases   cache.SharedIndexInformer
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]

	mu        sync.Mutex
	observed  map[string]time.Time // node -> when its lease was last seen renewed
	lastRenew time.Time            // last successful renewal of our own lease
	// joined is when this speaker counts itself alive: one renewal period
	// after its first renewal, so that speakers started together see each
	// other's Leases before any of them announces (without it each would
	// announce alone for a moment, then hand over).
	joined time.Time
	alive  map[string]bool // the live set the last sync used

	// Worker state (only the worker goroutine touches it).
	announced map[string]map[types.NamespacedName][]netip.Addr // protocol -> service -> IPs
	poolList  []*Pool
	ads       []*metallbv1beta1.L2Advertisement

	factories []func(<-chan struct{})
}

// New wires the informers; call Run.
func New(cfg Config) *Speaker {
	if cfg.LeaseNamespace == "" {
		cfg.LeaseNamespace = "kube-system"
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 6 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Speaker{cfg: cfg, log: cfg.Logger, observed: map[string]time.Time{}, alive: map[string]bool{},
		announced: map[string]map[types.NamespacedName][]netip.Addr{}}
	for _, p := range cfg.Protocols {
		s.announced[p.Name()] = map[types.NamespacedName][]netip.Addr{}
	}
	s.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "speaker"})

	f := informers.NewSharedInformerFactory(cfg.Client, 0)
	svcInf := f.Core().V1().Services()
	sliceInf := f.Discovery().V1().EndpointSlices()
	nodeInf := f.Core().V1().Nodes()
	s.services, s.svcs = svcInf.Informer(), svcInf.Lister()
	s.slices, s.nodes = sliceInf.Lister(), nodeInf.Lister()
	leaseF := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.LeaseNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LeaseLabel + "=true" }))
	s.leases = leaseF.Coordination().V1().Leases().Informer()
	df := dynamicinformer.NewDynamicSharedInformerFactory(cfg.Dynamic, 0)
	s.pools = df.ForResource(metallbv1beta1.IPAddressPoolsResource).Informer()
	s.l2ads = df.ForResource(metallbv1beta1.L2AdvertisementsResource).Informer()
	s.synced = []cache.InformerSynced{s.services.HasSynced, sliceInf.Informer().HasSynced, nodeInf.Informer().HasSynced,
		s.leases.HasSynced, s.pools.HasSynced, s.l2ads.HasSynced}

	svcKey := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			s.queue.Add(k)
		}
	}
	_, _ = s.services.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: svcKey,
		UpdateFunc: func(_, o any) { svcKey(o) }, DeleteFunc: svcKey})
	sliceKey := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if es, ok := obj.(*discoveryv1.EndpointSlice); ok {
			if name := es.Labels[discoveryv1.LabelServiceName]; name != "" {
				s.queue.Add(es.Namespace + "/" + name)
			}
		}
	}
	_, _ = sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: sliceKey,
		UpdateFunc: func(_, o any) { sliceKey(o) }, DeleteFunc: sliceKey})
	all := func(any) { s.queue.Add(allKey) }
	allH := cache.ResourceEventHandlerFuncs{AddFunc: all, UpdateFunc: func(_, o any) { all(o) }, DeleteFunc: all}
	_, _ = nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: all,
		UpdateFunc: func(o, n any) {
			// Nodes post status every few seconds; only eligibility and
			// labels matter here.
			on, ok1 := o.(*corev1.Node)
			nn, ok2 := n.(*corev1.Node)
			if ok1 && ok2 && labels.Equals(on.Labels, nn.Labels) && nodeUsableEq(on, nn) {
				return
			}
			all(n)
		}, DeleteFunc: all})
	_, _ = s.pools.AddEventHandler(allH)
	_, _ = s.l2ads.AddEventHandler(allH)
	seen := func(obj any) {
		if l, ok := obj.(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil {
			s.mu.Lock()
			s.observed[*l.Spec.HolderIdentity] = time.Now()
			s.mu.Unlock()
		}
	}
	_, _ = s.leases.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen,
		UpdateFunc: func(o, n any) {
			ol, ok1 := o.(*coordinationv1.Lease)
			nl, ok2 := n.(*coordinationv1.Lease)
			if ok1 && ok2 && ol.ResourceVersion == nl.ResourceVersion {
				return // a resync, not a renewal
			}
			seen(n)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if l, ok := obj.(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil {
				s.mu.Lock()
				delete(s.observed, *l.Spec.HolderIdentity)
				s.mu.Unlock()
				s.queue.Add(allKey)
			}
		}})
	s.factories = []func(<-chan struct{}){f.Start, leaseF.Start, df.Start}
	return s
}

func nodeUsableEq(a, b *corev1.Node) bool {
	oa, wa := NodeUsable(a)
	ob, wb := NodeUsable(b)
	return oa == ob && wa == wb
}

// Run starts the informers, keeps this speaker's Lease, and decides every
// Service until ctx ends. On the way out it withdraws every announcement
// and deletes its Lease, so that another node takes over at once.
func (s *Speaker) Run(ctx context.Context) error {
	if s.cfg.Recorder == nil {
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.cfg.Client.CoreV1().Events("")})
		defer b.Shutdown()
		s.cfg.Recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component, Host: s.cfg.NodeName})
	}
	for _, p := range s.cfg.Protocols {
		if l2, ok := p.(*Layer2); ok && l2.Recorder == nil {
			l2.Recorder = s.cfg.Recorder
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	for _, start := range s.factories {
		start(stop)
	}
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return fmt.Errorf("speaker: caches did not sync: %w", ctx.Err())
	}
	s.log.Info("caches synced")
	var wg sync.WaitGroup
	errc := make(chan error, len(s.cfg.Protocols))
	for _, p := range s.cfg.Protocols {
		if r, ok := p.(Runner); ok {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := r.Run(ctx, func() { s.queue.Add(allKey) }); err != nil && ctx.Err() == nil {
					errc <- fmt.Errorf("%s: %w", p.Name(), err)
				}
			}()
		}
	}
	wg.Add(2)
	go func() { defer wg.Done(); s.leaseLoop(ctx) }()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	s.queue.Add(allKey)
	for s.processNext(ctx) {
	}
	// Withdraw, then let the others know at once.
	for _, p := range s.cfg.Protocols {
		for key := range s.announced[p.Name()] {
			s.withdraw(context.Background(), p, key, "speakerStopping")
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.cfg.Client.CoordinationV1().Leases(s.cfg.LeaseNamespace).Delete(dctx, LeaseName(s.cfg.NodeName), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		s.log.Warn("delete lease", "err", err)
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	return nil
}

// leaseLoop renews this speaker's Lease every third of the lease duration
// and re-decides every Service when the set of live speakers changes.
func (s *Speaker) leaseLoop(ctx context.Context) {
	renewEvery := s.cfg.LeaseDuration / 3
	nextRenew := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if !time.Now().Before(nextRenew) {
			if err := s.renew(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("renew speaker lease", "err", err)
			} else {
				s.mu.Lock()
				s.lastRenew = time.Now()
				if s.joined.IsZero() {
					s.joined = s.lastRenew.Add(renewEvery)
				}
				s.mu.Unlock()
			}
			nextRenew = time.Now().Add(renewEvery)
		}
		if changed := s.updateAlive(); changed {
			s.queue.Add(allKey)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *Speaker) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseDuration)
	defer cancel()
	leases := s.cfg.Client.CoordinationV1().Leases(s.cfg.LeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	secs := int32((s.cfg.LeaseDuration + time.Second - 1) / time.Second)
	holder := s.cfg.NodeName
	l, err := leases.Get(ctx, LeaseName(holder), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: LeaseName(holder), Namespace: s.cfg.LeaseNamespace, Labels: map[string]string{LeaseLabel: "true"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, &secs, &now
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LeaseLabel] = "true"
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// liveSpeakers is the set of nodes whose speaker is alive now: others whose
// Lease was seen renewed within its duration, and this node while its own
// renewals succeed (a speaker cut off from the apiserver stops announcing
// when the others, no longer seeing its Lease, take over), from one renewal
// period after it started.
func (s *Speaker) liveSpeakers() map[string]bool {
	now := time.Now()
	out := map[string]bool{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, obj := range s.leases.GetStore().List() {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == s.cfg.NodeName {
			continue
		}
		d := s.cfg.LeaseDuration
		if l.Spec.LeaseDurationSeconds != nil {
			d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		}
		if t, ok := s.observed[*l.Spec.HolderIdentity]; ok && now.Sub(t) < d {
			out[*l.Spec.HolderIdentity] = true
		}
	}
	if !s.lastRenew.IsZero() && now.Sub(s.lastRenew) < s.cfg.LeaseDuration && !now.Before(s.joined) {
		out[s.cfg.NodeName] = true
	}
	return out
}

func (s *Speaker) updateAlive() bool {
	live := s.liveSpeakers()
	s.mu.Lock()
	defer s.mu.Unlock()
	if mapsEqual(live, s.alive) {
		return false
	}
	s.log.Info("live speakers changed", "speakers", sortedKeys(live))
	s.alive = live
	return true
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *Speaker) processNext(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	var err error
	if key == allKey {
		err = s.syncAll(ctx)
	} else {
		err = s.syncService(ctx, key)
	}
	if err != nil && ctx.Err() == nil {
		s.log.Warn("sync failed; retrying", "key", key, "err", err)
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	return true
}

// loadConfig parses the pools and advertisements from the caches. Invalid
// pools are skipped (controller/lbipam reports them); of overlapping pools
// the first by name wins, as in lbipam.
func (s *Speaker) loadConfig() {
	var problems []string // what could not be used: the configuration is stale
	defer func() {
		s.cfg.ClientMetrics.ConfigLoaded("speaker", len(problems) > 0)
		s.cfg.ConfigState.Set("layer2", problems)
	}()
	s.poolList = s.poolList[:0]
	for _, obj := range s.pools.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var p metallbv1beta1.IPAddressPool
		if err := metallbv1beta1.FromUnstructured(u, &p); err != nil {
			s.log.Warn("ignoring pool", "err", err)
			problems = append(problems, err.Error())
			continue
		}
		pp, err := lbipam.ParsePool(&p)
		if err != nil {
			s.log.Warn("ignoring pool", "err", err)
			problems = append(problems, err.Error())
			continue
		}
		s.poolList = append(s.poolList, &Pool{Pool: pp, Namespace: p.Namespace, Labels: p.Labels})
	}
	sort.Slice(s.poolList, func(i, j int) bool { return s.poolList[i].Name < s.poolList[j].Name })
	s.ads = s.ads[:0]
	for _, obj := range s.l2ads.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		ad := &metallbv1beta1.L2Advertisement{}
		if err := metallbv1beta1.FromUnstructured(u, ad); err != nil {
			s.log.Warn("ignoring L2Advertisement", "err", err)
			problems = append(problems, err.Error())
			continue
		}
		s.ads = append(s.ads, ad)
	}
	sort.Slice(s.ads, func(i, j int) bool {
		return s.ads[i].Namespace+"/"+s.ads[i].Name < s.ads[j].Namespace+"/"+s.ads[j].Name
	})
}

func (s *Speaker) syncAll(ctx context.Context) error {
	s.loadConfig()
	s.cfg.ClientMetrics.Processed(nil) // the configuration, reloaded
	keys := map[string]bool{}
	svcs, err := s.svcs.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, svc := range svcs {
		keys[svc.Namespace+"/"+svc.Name] = true
	}
	for _, m := range s.announced {
		for k := range m {
			keys[k.String()] = true
		}
	}
	var errs []error
	for k := range keys {
		if err := s.syncService(ctx, k); err != nil {
			errs = append(errs, err)
			s.queue.AddRateLimited(k)
		}
	}
	if len(errs) > 0 {
		s.log.Warn("some services failed to sync; retrying them", "err", errors.Join(errs...))
	}
	return nil
}

// input builds a Service's ServiceInput, or returns nil and why the Service
// must not be announced at all.
func (s *Speaker) input(key types.NamespacedName) (*ServiceInput, string, error) {
	svc, err := s.svcs.Services(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil, "serviceDeleted", nil
	}
	if err != nil {
		return nil, "", err
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil, "notLoadBalancer", nil
	}
	if len(svc.Status.LoadBalancer.Ingress) == 0 {
		return nil, "noIPAllocated", nil
	}
	in := &ServiceInput{Key: key, Service: svc, MyNode: s.cfg.NodeName, IgnoreExcludeLB: s.cfg.IgnoreExcludeLB}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		ip, err := netip.ParseAddr(ing.IP)
		if err != nil {
			s.log.Warn("invalid LoadBalancer IP", "service", key.String(), "ip", ing.IP)
			return nil, "invalidIP", nil
		}
		in.IPs = append(in.IPs, ip.Unmap())
	}
	for _, p := range s.poolList {
		if p.ContainsAll(in.IPs) {
			in.Pool = p
			break
		}
	}
	if in.Pool == nil {
		return nil, "ipNotAllowed", nil
	}
	for _, ad := range s.ads {
		if AdvertisementSelectsPool(ad.Namespace, ad.Spec.IPAddressPools, ad.Spec.IPAddressPoolSelectors, in.Pool) {
			in.L2Advertisements = append(in.L2Advertisements, ad)
		}
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: key.Name})
	if in.Slices, err = s.slices.EndpointSlices(key.Namespace).List(sel); err != nil {
		return nil, "", err
	}
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return nil, "", err
	}
	in.Nodes = make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		in.Nodes[n.Name] = n
	}
	s.mu.Lock()
	in.Speakers = make(map[string]bool, len(s.alive))
	for k := range s.alive {
		in.Speakers[k] = true
	}
	s.mu.Unlock()
	return in, "", nil
}

func (s *Speaker) syncService(ctx context.Context, k string) (err error) {
	defer func() { s.cfg.ClientMetrics.Processed(err) }()
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return nil
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	in, why, err := s.input(key)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range s.cfg.Protocols {
		if in == nil {
			errs = append(errs, s.withdraw(ctx, p, key, why))
			continue
		}
		if reason := p.ShouldAnnounce(in); reason != "" {
			errs = append(errs, s.withdraw(ctx, p, key, reason))
			continue
		}
		prev, had := s.announced[p.Name()][key]
		if had && !sameIPs(prev, in.IPs) {
			if err := s.withdraw(ctx, p, key, "loadBalancerIPChanged"); err != nil {
				errs = append(errs, err)
				continue
			}
			had = false
		}
		if err := p.SetBalancer(ctx, in); err != nil {
			errs = append(errs, fmt.Errorf("%s: announce %s: %w", p.Name(), key, err))
			// A status object that could not be written does not undo the
			// announcement; the key is retried for the status.
			var se *StatusError
			if !errors.As(err, &se) {
				continue
			}
		}
		s.cfg.Metrics.announce(key, p.Name(), s.cfg.NodeName, in.IPs)
		if !had {
			s.announced[p.Name()][key] = in.IPs
			s.log.Info("announcing", "service", key.String(), "protocol", p.Name(), "ips", in.IPs, "pool", in.Pool.Name)
			s.cfg.Recorder.Eventf(in.Service, corev1.EventTypeNormal, "nodeAssigned",
				"announcing from node %q with protocol %q", s.cfg.NodeName, p.Name())
		}
	}
	return errors.Join(errs...)
}

func (s *Speaker) withdraw(ctx context.Context, p Protocol, key types.NamespacedName, reason string) error {
	ips, had := s.announced[p.Name()][key]
	if !had {
		return nil
	}
	err := p.DeleteBalancer(ctx, key, reason)
	var se *StatusError
	if err != nil && !errors.As(err, &se) {
		return fmt.Errorf("%s: withdraw %s: %w", p.Name(), key, err)
	}
	delete(s.announced[p.Name()], key)
	s.cfg.Metrics.withdraw(key, p.Name(), s.cfg.NodeName, ips)
	if err != nil {
		// Withdrawn; only this node's status object may be left. The next
		// announcer deletes it (as MetalLB's does), so it is not retried.
		s.log.Warn("withdrawn, but its status object may remain", "service", key.String(), "protocol", p.Name(), "err", err)
	}
	s.log.Info("withdrawing", "service", key.String(), "protocol", p.Name(), "ips", ips, "reason", reason)
	return nil
}

func sameIPs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
