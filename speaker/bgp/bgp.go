// Package bgp is the BGP mode of svcnet's speaker (MetalLB's BGP mode),
// with gobgp (github.com/osrg/gobgp/v4) as a library rather than a
// daemon.
//
// BGP implements speaker.Protocol and speaker.Runner. Run watches
// BGPPeers (metallb.io/v1beta2), BGPAdvertisements and Communities, and
// this node's Node object, and keeps one gobgp session per BGPPeer whose
// nodeSelectors match the node (PeersFor: myASN, peerASN, peerPort,
// holdTime/keepaliveTime, connectTime, password as TCP MD5,
// sourceAddress, routerID (default: the node's IPv4 InternalIP),
// ebgpMultiHop as TTL 255; BFD is never used). The speaker core asks
// ShouldAnnounce for every LoadBalancer Service (MetalLB's rules: an
// advertisement must select the pool, the node and the Service; with
// externalTrafficPolicy Local only nodes with a local serving endpoint
// announce, with Cluster every such node while any endpoint can serve),
// then SetBalancer or DeleteBalancer. Each address becomes a route per
// advertisement: the address masked to aggregationLength /
// aggregationLengthV6, with its communities (Community aliases resolved)
// and localPref (sent to iBGP peers only), to the advertisement's peers
// (all when none are named). Routes go only to sessions of their family.
// The next hop is the session's local address, so a router peering with
// every node sees one next hop per announcing node (ECMP).
//
// Pure parts (PeersFor, ShouldAnnounce, Announcements, RoutesFor) are in
// plan.go; the gobgp session, one BgpServer per peer, in session.go.
package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	metallbv1beta2 "github.com/svcnet/svcnet/apis/metallb/v1beta2"
	"github.com/svcnet/svcnet/apis/metallb/validation"
	"github.com/svcnet/svcnet/internal/metallbmetrics"
	"github.com/svcnet/svcnet/internal/metallbstate"
	"github.com/svcnet/svcnet/speaker"
)

// Config configures the BGP protocol.
type Config struct {
	Client   kubernetes.Interface
	Dynamic  dynamic.Interface
	NodeName string
	Logger   *slog.Logger
	// NewSession makes sessions (default NewGoBGPSession).
	NewSession NewSessionFunc
	// StatusNamespace, when set, holds this node's ServiceBGPStatus
	// objects (MetalLB's speaker namespace, metallb-system).
	StatusNamespace string
	// Metrics, when set, reports the sessions (metallb_bgp_*).
	Metrics *Metrics
	// ClientMetrics, when set, gets the BGP configuration's state (part
	// "bgp" of metallb_k8s_client_config_stale_bool).
	ClientMetrics *metallbmetrics.K8sClient
	// ConfigState, when set, reports what of the BGP configuration could
	// not be used in MetalLB's ConfigurationState (part "bgp").
	ConfigState *metallbstate.Reporter
}

// BGP is the speaker's BGP protocol. Create with New; pass it in
// speaker.Config.Protocols.
type BGP struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	ads      []*metallbv1beta1.BGPAdvertisement
	aliases  map[string]validation.Community
	sessions map[string]*session
	services map[types.NamespacedName][]Announcement
	status   *statusWriter // nil: no ServiceBGPStatus objects
}

type session struct {
	cfg PeerConfig
	s   Session
}

var (
	_ speaker.Protocol = (*BGP)(nil)
	_ speaker.Runner   = (*BGP)(nil)
)

// New returns the protocol; it does nothing until Run.
func New(cfg Config) *BGP {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NewSession == nil {
		cfg.NewSession = NewGoBGPSession
	}
	b := &BGP{cfg: cfg, log: cfg.Logger.With("protocol", "bgp"), sessions: map[string]*session{},
		services: map[types.NamespacedName][]Announcement{}, aliases: map[string]validation.Community{}}
	if cfg.StatusNamespace != "" && cfg.Dynamic != nil {
		b.status = &statusWriter{dyn: cfg.Dynamic, namespace: cfg.StatusNamespace, node: cfg.NodeName}
	}
	return b
}

// Name implements speaker.Protocol.
func (*BGP) Name() string { return "bgp" }

// ShouldAnnounce implements speaker.Protocol.
func (b *BGP) ShouldAnnounce(in *speaker.ServiceInput) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return ShouldAnnounce(in, b.ads)
}

// SetBalancer implements speaker.Protocol.
func (b *BGP) SetBalancer(ctx context.Context, in *speaker.ServiceInput) error {
	b.mu.Lock()
	anns, errs := Announcements(in, b.ads, b.aliases)
	for _, err := range errs {
		b.log.Warn("skipping part of an advertisement", "service", in.Key.String(), "err", err)
	}
	b.services[in.Key] = anns
	err := b.pushLocked()
	peers := b.peersOfLocked(anns)
	b.mu.Unlock()
	if err != nil {
		return err
	}
	if b.status != nil {
		return b.status.announcing(ctx, in.Key, peers)
	}
	return nil
}

// DeleteBalancer implements speaker.Protocol.
func (b *BGP) DeleteBalancer(ctx context.Context, key types.NamespacedName, _ string) error {
	b.mu.Lock()
	delete(b.services, key)
	err := b.pushLocked()
	b.mu.Unlock()
	if b.status != nil {
		err = errors.Join(err, b.status.notAnnouncing(ctx, key))
	}
	return err
}

// peersOfLocked names the BGPPeers (of this node's sessions) that some of
// the announcements go to, sorted.
func (b *BGP) peersOfLocked(anns []Announcement) []string {
	var out []string
	for _, s := range b.sessions {
		for _, r := range RoutesFor(s.cfg, anns) {
			if r.Prefix.Addr().Is4() == s.cfg.Address.Is4() && !slices.Contains(out, s.cfg.PeerName) {
				out = append(out, s.cfg.PeerName) // a session carries its own family only
			}
		}
	}
	sort.Strings(out)
	return out
}

// pushLocked gives every session its routes.
func (b *BGP) pushLocked() error {
	var all []Announcement
	keys := make([]types.NamespacedName, 0, len(b.services))
	for k := range b.services {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		all = append(all, b.services[k]...)
	}
	var errs []error
	for _, s := range b.sessions {
		if err := s.s.SetRoutes(RoutesFor(s.cfg, all)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Sessions returns the running sessions' configurations and whether each
// is established, by name.
func (b *BGP) Sessions() map[string]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]bool{}
	for name, s := range b.sessions {
		out[name] = s.s.Established()
	}
	return out
}

// Run implements speaker.Runner: it watches the BGP configuration and
// this node, keeps the sessions, and calls resync when advertisements or
// communities change. On the way out it closes every session (withdrawing
// its routes first).
func (b *BGP) Run(ctx context.Context, resync func()) error {
	df := dynamicinformer.NewDynamicSharedInformerFactory(b.cfg.Dynamic, 0)
	peerInf := df.ForResource(metallbv1beta2.BGPPeersResource).Informer()
	adInf := df.ForResource(metallbv1beta1.BGPAdvertisementsResource).Informer()
	commInf := df.ForResource(metallbv1beta1.CommunitiesResource).Informer()
	nf := informers.NewSharedInformerFactoryWithOptions(b.cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", b.cfg.NodeName).String()
	}))
	nodeInf := nf.Core().V1().Nodes().Informer()

	kick := make(chan struct{}, 1)
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify(kick) },
		UpdateFunc: func(o, n any) { notify(kick) },
		DeleteFunc: func(any) { notify(kick) },
	}
	for _, inf := range []cache.SharedIndexInformer{peerInf, adInf, commInf} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	// The Node posts status every few seconds; only its labels (peers'
	// nodeSelectors) and addresses (the router ID) matter here.
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { notify(kick) },
		UpdateFunc: func(o, n any) {
			on, ok1 := o.(*corev1.Node)
			nn, ok2 := n.(*corev1.Node)
			if ok1 && ok2 && maps.Equal(on.Labels, nn.Labels) && NodeIP(on) == NodeIP(nn) {
				return
			}
			notify(kick)
		},
		DeleteFunc: func(any) { notify(kick) },
	}); err != nil {
		return err
	}
	df.Start(ctx.Done())
	nf.Start(ctx.Done())
	defer b.closeAll()
	if !cache.WaitForCacheSync(ctx.Done(), peerInf.HasSynced, adInf.HasSynced, commInf.HasSynced, nodeInf.HasSynced) {
		return ctx.Err()
	}
	for {
		b.reload(ctx, peerInf.GetStore(), adInf.GetStore(), commInf.GetStore(), nodeInf.GetStore())
		resync()
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		}
	}
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// fromStore converts the objects of a store; what could not be converted
// is added to problems.
func fromStore[T any](st cache.Store, log *slog.Logger, problems *[]string) []*T {
	var out []*T
	for _, obj := range st.List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		v := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, v); err != nil {
			log.Warn("ignoring object", "kind", u.GetKind(), "name", u.GetNamespace()+"/"+u.GetName(), "err", err)
			*problems = append(*problems, fmt.Sprintf("%s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err))
			continue
		}
		out = append(out, v)
	}
	return out
}

// reload reads the configuration and reconciles the sessions.
func (b *BGP) reload(ctx context.Context, peerSt, adSt, commSt, nodeSt cache.Store) {
	var node *corev1.Node
	if objs := nodeSt.List(); len(objs) > 0 {
		node, _ = objs[0].(*corev1.Node)
	}
	var problems []string // what could not be used: the configuration is stale
	defer func() {
		b.cfg.ClientMetrics.ConfigLoaded("bgp", len(problems) > 0)
		b.cfg.ConfigState.Set("bgp", problems)
	}()
	peers := fromStore[metallbv1beta2.BGPPeer](peerSt, b.log, &problems)
	ads := fromStore[metallbv1beta1.BGPAdvertisement](adSt, b.log, &problems)
	sort.Slice(ads, func(i, j int) bool {
		return ads[i].Namespace+"/"+ads[i].Name < ads[j].Namespace+"/"+ads[j].Name
	})
	var comms []metallbv1beta1.Community
	for _, c := range fromStore[metallbv1beta1.Community](commSt, b.log, &problems) {
		comms = append(comms, *c)
	}
	aliases, err := validation.Communities(comms)
	if err != nil {
		b.log.Warn("ignoring Community aliases", "err", err)
		aliases = map[string]validation.Community{}
		problems = append(problems, err.Error())
	}
	var want []PeerConfig
	if node != nil {
		var errs []error
		want, errs = PeersFor(peers, node)
		for _, err := range errs {
			b.log.Warn("skipping BGPPeer", "err", err)
			problems = append(problems, err.Error())
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	b.ads, b.aliases = ads, aliases
	wanted := map[string]PeerConfig{}
	for _, c := range want {
		wanted[c.Name] = c
	}
	for name, s := range b.sessions {
		if c, ok := wanted[name]; ok && c == s.cfg {
			continue
		}
		b.log.Info("closing bgp session", "peer", name)
		b.cfg.Metrics.Untrack(s.s)
		s.s.Close()
		delete(b.sessions, name)
	}
	for name, c := range wanted {
		if _, ok := b.sessions[name]; ok {
			continue
		}
		s, err := b.cfg.NewSession(ctx, c, b.log)
		if err != nil {
			b.log.Warn("cannot start bgp session", "peer", name, "err", err)
			continue
		}
		b.log.Info("bgp session configured", "peer", name, "address", c.Address, "myASN", c.MyASN, "peerASN", c.PeerASN, "routerID", c.RouterID)
		b.sessions[name] = &session{cfg: c, s: s}
		b.cfg.Metrics.Track(c, s)
	}
	if err := b.pushLocked(); err != nil {
		b.log.Warn("bgp routes", "err", err)
	}
}

func (b *BGP) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, s := range b.sessions {
		b.cfg.Metrics.Untrack(s.s)
		s.s.Close()
		delete(b.sessions, name)
	}
}

// String describes the sessions, for logs.
func (b *BGP) String() string {
	return fmt.Sprintf("bgp(%d sessions)", len(b.Sessions()))
}
