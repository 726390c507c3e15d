package bgp

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/prometheus/client_golang/prometheus"
)

// SessionStats is what a Session reports for MetalLB's BGP metrics.
type SessionStats struct {
	// Up: the session is established.
	Up bool
	// Updates is the number of UPDATE messages sent on the session so far.
	Updates uint64
	// Announced is the number of prefixes advertised to the peer now (0
	// while the session is down).
	Announced int
	// Pending is the number of prefixes that should be advertised on the
	// session (what the speaker wants the peer to have).
	Pending int
}

// StatsSession is a Session that reports SessionStats; sessions that do
// not are left out of the metrics.
type StatsSession interface {
	Stats(ctx context.Context) SessionStats
}

// Metrics are MetalLB's native-mode BGP metrics, read from the sessions
// when Prometheus scrapes:
//
//	metallb_bgp_session_up{peer}                 gauge, 1 established, 0 not
//	metallb_bgp_updates_total{peer}              counter, UPDATE messages sent
//	metallb_bgp_announced_prefixes_total{peer}   gauge, prefixes advertised now
//	metallb_bgp_pending_prefixes_total{peer}     gauge, prefixes to advertise
//
// peer is "address:port" as MetalLB writes it (fmt "%s:%d", so an IPv6
// address is not bracketed). A session's series exist from its creation
// until it is closed, as MetalLB's do. Two BGPPeers with the same address
// and port on one node share a series (their values are added; up is 1 if
// either is established). A nil *Metrics records nothing.
type Metrics struct {
	up, updates, announced, pending *prometheus.Desc

	mu       sync.Mutex
	sessions map[Session]string // session -> peer label
}

// NewMetrics registers the BGP metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("metallb", "bgp", name), help, []string{"peer"}, nil)
	}
	m := &Metrics{
		up:        d("session_up", "BGP session state (1 is up, 0 is down)"),
		updates:   d("updates_total", "Number of BGP UPDATE messages sent"),
		announced: d("announced_prefixes_total", "Number of prefixes currently being advertised on the BGP session"),
		pending:   d("pending_prefixes_total", "Number of prefixes that should be advertised on the BGP session"),
		sessions:  map[Session]string{},
	}
	reg.MustRegister(m)
	return m
}

// PeerLabel is the peer label of a session with cfg.
func PeerLabel(cfg PeerConfig) string { return fmt.Sprintf("%s:%d", cfg.Address, cfg.Port) }

// Track adds a session to the metrics; Untrack removes it (before or
// after Close).
func (m *Metrics) Track(cfg PeerConfig, s Session) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions[s] = PeerLabel(cfg)
}

// Untrack removes a session's series.
func (m *Metrics) Untrack(s Session) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, s)
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.up
	ch <- m.updates
	ch <- m.announced
	ch <- m.pending
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.mu.Lock()
	byPeer := map[string]*SessionStats{}
	for s, peer := range m.sessions {
		ss, ok := s.(StatsSession)
		if !ok {
			continue
		}
		st := ss.Stats(ctx)
		agg := byPeer[peer]
		if agg == nil {
			agg = &SessionStats{}
			byPeer[peer] = agg
		}
		agg.Up = agg.Up || st.Up
		agg.Updates += st.Updates
		agg.Announced += st.Announced
		agg.Pending += st.Pending
	}
	m.mu.Unlock()
	peers := make([]string, 0, len(byPeer))
	for p := range byPeer {
		peers = append(peers, p)
	}
	sort.Strings(peers)
	for _, p := range peers {
		st := byPeer[p]
		up := 0.0
		if st.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, up, p)
		ch <- prometheus.MustNewConstMetric(m.updates, prometheus.CounterValue, float64(st.Updates), p)
		ch <- prometheus.MustNewConstMetric(m.announced, prometheus.GaugeValue, float64(st.Announced), p)
		ch <- prometheus.MustNewConstMetric(m.pending, prometheus.GaugeValue, float64(st.Pending), p)
	}
}

// Stats implements StatsSession: gobgp's counters for the peer (UPDATE
// messages sent; prefixes advertised, counted by gobgp only while the
// session is established) and the distinct prefixes set for it.
func (s *goBGPSession) Stats(ctx context.Context) SessionStats {
	s.mu.Lock()
	st := SessionStats{Up: s.up}
	prefixes := map[string]bool{}
	for k := range s.paths {
		p, _, _ := strings.Cut(k, "|") // Route.key: prefix first
		prefixes[p] = true
	}
	st.Pending = len(prefixes)
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return SessionStats{Pending: st.Pending}
	}
	_ = s.srv.ListPeer(ctx, &api.ListPeerRequest{Address: s.cfg.Address.String(), EnableAdvertised: true}, func(p *api.Peer) {
		if p.State != nil && p.State.Messages != nil && p.State.Messages.Sent != nil {
			st.Updates = p.State.Messages.Sent.Update
		}
		for _, af := range p.AfiSafis {
			if af.State != nil {
				st.Announced += int(af.State.Advertised)
			}
		}
	})
	if !st.Up {
		st.Announced = 0
	}
	return st
}
