package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/svcnet/svcnet/apis/metallb/validation"
)

// PeerConfig is one BGP session as this node runs it, from a BGPPeer.
type PeerConfig struct {
	// Name is the BGPPeer's namespace/name; advertisements' peers lists
	// name BGPPeers by their name alone (PeerName).
	Name     string
	PeerName string
	MyASN    uint32
	PeerASN  uint32
	Address  netip.Addr
	Port     uint16
	// SourceAddress is the local address (zero: the kernel's choice).
	SourceAddress netip.Addr
	RouterID      netip.Addr
	// HoldTime and Keepalive (zero: 90s and 30s).
	HoldTime, Keepalive time.Duration
	// ConnectTime is the wait between connection attempts (zero: 120s,
	// gobgp's default; MetalLB's native speaker retries sooner, so svcnet
	// uses 5s unless set).
	ConnectTime time.Duration
	// Password enables TCP MD5 signatures (RFC 2385).
	Password string
	// EBGPMultiHop lets an eBGP peer be more than one hop away (TTL 255).
	EBGPMultiHop bool
}

// Route is one prefix announced to a peer, with its attributes.
type Route struct {
	Prefix      netip.Prefix
	Communities []validation.Community
	LocalPref   uint32
}

func (r Route) key() string {
	var cs []string
	for _, c := range r.Communities {
		cs = append(cs, c.String())
	}
	sort.Strings(cs)
	return fmt.Sprintf("%s|%s|%d", r.Prefix, strings.Join(cs, ","), r.LocalPref)
}

// Session is one BGP session with a peer: the announcer keeps the routes
// the peer should have.
type Session interface {
	// SetRoutes makes the routes announced to the peer exactly routes.
	SetRoutes(routes []Route) error
	// Established reports whether the session is up.
	Established() bool
	// Close withdraws everything and ends the session.
	Close()
}

// NewSessionFunc makes a Session; the default is NewGoBGPSession.
type NewSessionFunc func(ctx context.Context, cfg PeerConfig, log *slog.Logger) (Session, error)

// goBGPSession is a Session on its own gobgp BgpServer: one server per
// peer keeps MetalLB's per-peer myASN and router ID, and per-peer route
// sets, without policies. The server never listens (listen port -1): the
// speaker dials out, as MetalLB's does.
type goBGPSession struct {
	srv    *server.BgpServer
	cfg    PeerConfig
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	paths  map[string]uuid.UUID // route key -> gobgp path
	up     bool
	closed bool
}

// NewGoBGPSession starts a gobgp server for one peer. Sockets belong to
// the network namespace of the process (run the speaker inside the node's
// namespace).
func NewGoBGPSession(ctx context.Context, cfg PeerConfig, log *slog.Logger) (Session, error) {
	if cfg.RouterID.Is6() || !cfg.RouterID.IsValid() {
		return nil, fmt.Errorf("peer %s: router ID %v: an IPv4 address is needed (set routerID on the BGPPeer)", cfg.Name, cfg.RouterID)
	}
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelWarn)
	srv := server.NewBgpServer(server.LoggerOption(log.With("peer", cfg.Name), lv))
	sctx, cancel := context.WithCancel(context.Background())
	s := &goBGPSession{srv: srv, cfg: cfg, cancel: cancel, done: make(chan struct{}), paths: map[string]uuid.UUID{}}
	go func() {
		defer close(s.done)
		srv.Serve()
	}()
	fail := func(err error) (Session, error) {
		srv.Stop()
		cancel()
		return nil, fmt.Errorf("peer %s: %w", cfg.Name, err)
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: cfg.MyASN, RouterId: cfg.RouterID.String(), ListenPort: -1,
	}}); err != nil {
		return fail(err)
	}
	if err := srv.WatchEvent(sctx, server.WatchEventMessageCallbacks{
		OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
			if ev.Type != apiutil.PEER_EVENT_STATE {
				return
			}
			up := ev.Peer.State.SessionState == bgppkt.BGP_FSM_ESTABLISHED
			s.mu.Lock()
			changed := s.up != up
			s.up = up
			s.mu.Unlock()
			if changed {
				log.Info("bgp session", "peer", cfg.Name, "address", cfg.Address, "established", up)
			}
		},
	}, server.WatchPeer()); err != nil {
		return fail(err)
	}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peerMessage(cfg)}); err != nil {
		return fail(err)
	}
	return s, nil
}

func peerMessage(cfg PeerConfig) *api.Peer {
	fam := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if cfg.Address.Is6() {
		fam = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	}
	connect := cfg.ConnectTime
	if connect == 0 {
		connect = 5 * time.Second
	}
	p := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: cfg.Address.String(),
			PeerAsn:         cfg.PeerASN,
			AuthPassword:    cfg.Password,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry:                 uint64(connect / time.Second),
			HoldTime:                     uint64(cfg.HoldTime / time.Second),
			KeepaliveInterval:            uint64(cfg.Keepalive / time.Second),
			IdleHoldTimeAfterReset:       1,
			MinimumAdvertisementInterval: 0,
		}},
		Transport: &api.Transport{RemotePort: uint32(cfg.Port)},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: fam, Enabled: true}}},
	}
	if cfg.SourceAddress.IsValid() {
		p.Transport.LocalAddress = cfg.SourceAddress.String()
	}
	if cfg.EBGPMultiHop {
		p.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: 255}
	}
	return p
}

func (s *goBGPSession) Established() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up
}

// SetRoutes adds the missing routes and withdraws the extra ones (add
// before delete, so that a changed attribute never leaves a gap).
func (s *goBGPSession) SetRoutes(routes []Route) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]Route{}
	for _, r := range routes {
		if r.Prefix.Addr().Is4() != s.cfg.Address.Is4() {
			continue // one family per session, as MetalLB's native speaker
		}
		want[r.key()] = r
	}
	var errs []error
	for k, r := range want {
		if _, ok := s.paths[k]; ok {
			continue
		}
		p, err := gobgpPath(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resp, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}})
		if err != nil {
			errs = append(errs, fmt.Errorf("announce %s to %s: %w", r.Prefix, s.cfg.Name, err))
			continue
		}
		s.paths[k] = resp[0].UUID
	}
	for k, id := range s.paths {
		if _, ok := want[k]; ok {
			continue
		}
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{UUIDs: []uuid.UUID{id}}); err != nil {
			errs = append(errs, fmt.Errorf("withdraw %s from %s: %w", k, s.cfg.Name, err))
			continue
		}
		delete(s.paths, k)
	}
	if len(errs) > 0 {
		return fmt.Errorf("bgp: %v", errs)
	}
	return nil
}

func gobgpPath(r Route) (*apiutil.Path, error) {
	nlri, err := bgppkt.NewIPAddrPrefix(r.Prefix)
	if err != nil {
		return nil, err
	}
	fam := bgppkt.RF_IPv4_UC
	nh := netip.IPv4Unspecified() // the session's local address, set by gobgp
	if r.Prefix.Addr().Is6() {
		fam, nh = bgppkt.RF_IPv6_UC, netip.IPv6Unspecified()
	}
	attrs := []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(bgppkt.BGP_ORIGIN_ATTR_TYPE_IGP)}
	if fam == bgppkt.RF_IPv4_UC {
		a, err := bgppkt.NewPathAttributeNextHop(nh)
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, a)
	} else {
		a, err := bgppkt.NewPathAttributeMpReachNLRI(fam, []bgppkt.PathNLRI{{NLRI: nlri}}, nh)
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, a)
	}
	var std []uint32
	var large []*bgppkt.LargeCommunity
	for _, c := range r.Communities {
		if c.Large {
			large = append(large, bgppkt.NewLargeCommunity(c.Global, c.Local1, c.Local2))
		} else {
			std = append(std, c.Value)
		}
	}
	if len(std) > 0 {
		attrs = append(attrs, bgppkt.NewPathAttributeCommunities(std))
	}
	if len(large) > 0 {
		attrs = append(attrs, bgppkt.NewPathAttributeLargeCommunities(large))
	}
	if r.LocalPref != 0 {
		// gobgp sends LOCAL_PREF to iBGP peers only (RFC 4271 5.1.5).
		attrs = append(attrs, bgppkt.NewPathAttributeLocalPref(r.LocalPref))
	}
	return &apiutil.Path{Family: fam, Nlri: nlri, Attrs: attrs}, nil
}

// Close withdraws every route (the peer sees them go before the session
// closes) and stops the server.
func (s *goBGPSession) Close() {
	_ = s.SetRoutes(nil)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.StopBgp(ctx, &api.StopBgpRequest{})
	s.srv.Stop()
	s.cancel()
	<-s.done
}
