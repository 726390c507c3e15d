package userspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/proxy/lb"
)

// ServiceConfig is one Service port as the userspace proxy serves it: the
// desired state that Sync makes real.
type ServiceConfig struct {
	// Name is the ServicePortName string ("namespace/name:port"); with
	// Protocol it identifies the listener across syncs.
	Name     string
	Protocol string // "tcp" or "udp"
	Port     int
	// Addrs are every address that reaches the Service port: ClusterIPs,
	// externalIPs and LoadBalancer ingress IPs.
	Addrs    []netip.Addr
	NodePort int
	// Scheduler is a proxy/lb scheduler name; unknown names are the
	// caller's business (lb.Resolve) and fall back to rr here.
	Scheduler string
	// AffinityTimeout > 0 turns on ClientIP session affinity.
	AffinityTimeout time.Duration
	// Endpoints are the backends already selected for this node (traffic
	// policy applied by the caller), with their weights.
	Endpoints []Endpoint
}

// Endpoint is one backend of a ServiceConfig.
type Endpoint struct {
	Addr   netip.AddrPort
	Weight int // 0 = quiesced (no new connections); <0 treated as 1
}

func (c ServiceConfig) key() string { return c.Name + "/" + c.Protocol }

// Options configure a Proxier. Zero values give kube-proxy userspace mode's
// defaults.
type Options struct {
	// UDPIdleTimeout closes a client's UDP session after this long without
	// traffic in either direction (kube-proxy's --udp-timeout, 250ms).
	UDPIdleTimeout time.Duration
	// DialTimeouts are the connect timeouts of successive attempts, each to
	// a different endpoint (kube-proxy: 250ms, 500ms, 1s, 2s).
	DialTimeouts []time.Duration
	// NodePortAddrs limits NodePorts to local addresses in these CIDRs
	// (--nodeport-addresses); empty means every local address.
	NodePortAddrs []netip.Prefix
	// IPv4 and IPv6 install the redirect rules of each family; nil skips
	// the family (no rules, the proxy then only answers on its own ports).
	IPv4, IPv6 Netfilter
	// ListenHost is the address listeners bind ("" = every address, both
	// families).
	ListenHost string
	// AcceptLoops is the number of listeners (and accept loops) of each
	// TCP Service port, all on one port with SO_REUSEPORT; 0 means one
	// per CPU of the Go runtime, at most 4.
	AcceptLoops int
	Logger      *slog.Logger
	// Now is the clock of session affinity (time.Now by default).
	Now func() time.Time
}

// Proxier is the userspace data plane: a listener per Service port that
// forwards each TCP connection or UDP session to an endpoint chosen by the
// Service's scheduler, plus the iptables redirects that bring the Service's
// addresses to the listener. It is safe for concurrent use.
type Proxier struct {
	opt Options
	log *slog.Logger

	mu        sync.Mutex // serialises Sync and Close
	services  map[string]*service
	jumpsDone [2]bool
	closed    bool
	tcp       tcpLoops // the TCP relays' event loops (loop.go)
}

// New returns a Proxier with no services; nothing runs until Sync.
func New(opt Options) *Proxier {
	if opt.UDPIdleTimeout <= 0 {
		opt.UDPIdleTimeout = 250 * time.Millisecond
	}
	if len(opt.DialTimeouts) == 0 {
		opt.DialTimeouts = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.AcceptLoops <= 0 {
		opt.AcceptLoops = min(runtime.GOMAXPROCS(0), 4)
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return &Proxier{opt: opt, log: opt.Logger.With("mode", "userspace"), services: map[string]*service{}}
}

// Sync makes the listeners and rules match desired: it opens listeners for
// new Service ports, swaps the endpoint sets of existing ones (established
// connections to removed endpoints continue; UDP sessions to them are
// closed so the next datagram picks a live endpoint), closes listeners of
// removed ports, and rewrites the redirect rules in one iptables-restore per
// family. On error the listeners stay as far as they got and the next Sync
// retries the rest.
func (p *Proxier) Sync(ctx context.Context, desired []ServiceConfig) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("userspace proxier is closed")
	}
	want := map[string]ServiceConfig{}
	var errs []error
	for _, c := range desired {
		c.Protocol = strings.ToLower(c.Protocol)
		if c.Protocol != "tcp" && c.Protocol != "udp" {
			errs = append(errs, fmt.Errorf("service %s: protocol %q is not supported in userspace mode", c.Name, c.Protocol))
			continue
		}
		want[c.key()] = c
	}
	for k, s := range p.services {
		if _, ok := want[k]; !ok {
			s.close()
			delete(p.services, k)
			p.log.Info("stopped proxying", "service", s.cfg().Name, "protocol", s.proto)
		}
	}
	for k, c := range want {
		s := p.services[k]
		if s == nil {
			var err error
			s, err = p.open(c)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			p.services[k] = s
			p.log.Info("proxying", "service", c.Name, "protocol", c.Protocol, "proxyPort", s.port)
		}
		s.update(c)
	}
	if err := p.applyRules(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (p *Proxier) portals() []Portal {
	var out []Portal
	for _, s := range p.services {
		c := s.cfg()
		out = append(out, Portal{
			Name: c.Name, Protocol: s.proto, ProxyPort: s.port, Port: c.Port, Addrs: c.Addrs,
			NodePort: c.NodePort, NodePortAddrs: p.opt.NodePortAddrs, NoEndpoints: !s.hasEndpoints(),
		})
	}
	return out
}

func (p *Proxier) applyRules(ctx context.Context) error {
	portals := p.portals()
	var errs []error
	for i, nf := range []Netfilter{p.opt.IPv4, p.opt.IPv6} {
		if nf == nil {
			continue
		}
		if !p.jumpsDone[i] {
			if err := nf.EnsureJumps(ctx, Jumps()); err != nil {
				errs = append(errs, fmt.Errorf("install jumps: %w", err))
				continue
			}
			p.jumpsDone[i] = true
		}
		if err := nf.Restore(ctx, BuildRules(portals, i == 1)); err != nil {
			errs = append(errs, fmt.Errorf("restore rules: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Close stops every listener and UDP session. Established TCP connections
// are left to finish. Rules stay in place (so that a restarted proxy takes
// over without a gap); Cleanup removes them.
func (p *Proxier) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.services {
		s.close()
		delete(p.services, k)
	}
	p.tcp.stop()
	p.closed = true
}

// Cleanup removes every rule and chain the mode owns in both families.
func (p *Proxier) Cleanup(ctx context.Context) error {
	var errs []error
	for _, nf := range []Netfilter{p.opt.IPv4, p.opt.IPv6} {
		if nf != nil {
			errs = append(errs, nf.Cleanup(ctx, Jumps()))
		}
	}
	p.jumpsDone = [2]bool{}
	return errors.Join(errs...)
}

// ProxyPort returns the local port serving a Service port, or 0.
func (p *Proxier) ProxyPort(name, protocol string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.services[name+"/"+strings.ToLower(protocol)]; s != nil {
		return s.port
	}
	return 0
}

// Dump returns the listener table, one line per Service port and one per
// endpoint, in the spirit of ipvsadm -Ln:
//
//	TCP  default/web:http 10.96.0.10:80 nodePort 30080 -> :41377 rr
//	  -> 10.244.1.2:8080  weight 1  active 3
func (p *Proxier) Dump() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]string, 0, len(p.services))
	for k := range p.services {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		s := p.services[k]
		c := s.cfg()
		addrs := make([]string, len(c.Addrs))
		for i, a := range c.Addrs {
			addrs[i] = netip.AddrPortFrom(a, uint16(c.Port)).String()
		}
		fmt.Fprintf(&b, "%-4s %s %s", strings.ToUpper(s.proto), c.Name, strings.Join(addrs, ","))
		if c.NodePort != 0 {
			fmt.Fprintf(&b, " nodePort %d", c.NodePort)
		}
		set := s.set.Load()
		fmt.Fprintf(&b, " -> :%d %s", s.port, set.sched.Name())
		if c.AffinityTimeout > 0 {
			fmt.Fprintf(&b, " persistent %d", int(c.AffinityTimeout/time.Second))
		}
		b.WriteByte('\n')
		for _, be := range set.sched.Backends() {
			fmt.Fprintf(&b, "  -> %-22s weight %d  active %d\n", be.ID, be.Weight, be.Active())
		}
	}
	return b.String()
}

func (p *Proxier) open(c ServiceConfig) (*service, error) {
	s := &service{p: p, proto: c.Protocol, backends: map[string]*lb.Backend{}, affinity: map[netip.Addr]affinityEntry{}}
	s.set.Store(&backendSet{sched: mustSched(lb.RoundRobin, nil)})
	host := net.JoinHostPort(p.opt.ListenHost, "0")
	switch c.Protocol {
	case "tcp":
		lfds, port, err := listenTCP(host, p.opt.AcceptLoops)
		if err != nil {
			return nil, fmt.Errorf("service %s: listen: %w", c.Name, err)
		}
		s.lfds = lfds
		s.port = port
		for i, ln := range lfds {
			l, err := p.loop(i)
			if err == nil {
				err = l.addListener(s, ln)
			}
			if err != nil {
				s.close()
				return nil, fmt.Errorf("service %s: event loop: %w", c.Name, err)
			}
			s.loops = append(s.loops, l)
		}
	case "udp":
		u, err := listenUDP(p.opt.ListenHost)
		if err != nil {
			return nil, fmt.Errorf("service %s: listen udp: %w", c.Name, err)
		}
		s.udp = u
		s.port = u.port
		s.sessions = map[netip.AddrPort]*udpSession{}
		for _, pc := range u.socks {
			s.wg.Add(1)
			go s.serveUDP(pc)
		}
	}
	return s, nil
}

func mustSched(name string, bs []*lb.Backend) lb.Scheduler {
	s, err := lb.New(name, bs, lb.Options{})
	if err != nil {
		s, _ = lb.New(lb.RoundRobin, bs, lb.Options{})
	}
	return s
}

// service is the live state of one Service port.
type service struct {
	p     *Proxier
	proto string
	port  int
	lfds  []int      // listening sockets, one per loop, same port (SO_REUSEPORT)
	loops []*tcpLoop // the event loop accepting on each of lfds
	udp   *udpListener

	conf atomic.Pointer[ServiceConfig]
	set  atomic.Pointer[backendSet]

	mu       sync.Mutex // guards backends, affinity, sessions
	backends map[string]*lb.Backend
	affinity map[netip.Addr]affinityEntry
	sessions map[netip.AddrPort]*udpSession

	closing atomic.Bool
	wg      sync.WaitGroup
}

type backendSet struct {
	sched lb.Scheduler
	ids   map[string]*lb.Backend
}

type affinityEntry struct {
	backend *lb.Backend
	last    time.Time
}

func (s *service) cfg() ServiceConfig { return *s.conf.Load() }

func (s *service) hasEndpoints() bool {
	for _, b := range s.set.Load().sched.Backends() {
		if b.Weight > 0 {
			return true
		}
	}
	return false
}

// update installs a new endpoint set. Backends that stay keep their
// *lb.Backend (and so their connection counts); removed ones simply drop
// out of the scheduler, so their established TCP connections run on.
func (s *service) update(c ServiceConfig) {
	s.conf.Store(&c)
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string]*lb.Backend{}
	var list []*lb.Backend
	eps := append([]Endpoint(nil), c.Endpoints...)
	sort.Slice(eps, func(i, j int) bool {
		a, b := eps[i].Addr, eps[j].Addr
		if a.Addr() != b.Addr() {
			return a.Addr().Less(b.Addr())
		}
		return a.Port() < b.Port()
	})
	for _, ep := range eps {
		w := ep.Weight
		if w < 0 {
			w = 1
		}
		id := ep.Addr.String()
		if _, dup := next[id]; dup {
			continue
		}
		be := s.backends[id]
		if be == nil || be.Weight != w {
			nb := lb.NewBackend(ep.Addr, w)
			if be != nil {
				for i := int64(0); i < be.Active(); i++ {
					nb.Acquire()
				}
			}
			be = nb
		}
		next[id] = be
		list = append(list, be)
	}
	name, _ := lb.Resolve(c.Scheduler, lb.DefaultScheduler)
	s.backends = next
	s.set.Store(&backendSet{sched: mustSched(name, list), ids: next})
	for ip, e := range s.affinity {
		if next[e.backend.ID] != e.backend {
			delete(s.affinity, ip)
		}
	}
	// A UDP session has no end the client can see: close those whose
	// endpoint is gone so that the next datagram is balanced again.
	for k, u := range s.sessions {
		if next[u.backend.ID] != u.backend {
			u.close()
			delete(s.sessions, k)
		}
	}
}

// pick chooses the backend for a new connection from client, honouring
// session affinity; tried backends are skipped.
func (s *service) pick(client, dst netip.Addr, tried map[*lb.Backend]bool) *lb.Backend {
	set := s.set.Load()
	c := s.cfg()
	skip := func(b *lb.Backend) bool { return tried[b] }
	if c.AffinityTimeout > 0 {
		now := s.p.opt.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		if e, ok := s.affinity[client]; ok && now.Sub(e.last) <= c.AffinityTimeout && set.ids[e.backend.ID] == e.backend && !tried[e.backend] && e.backend.Weight > 0 {
			e.last = now
			s.affinity[client] = e
			return e.backend
		}
		b := set.sched.Pick(lb.Key{Src: client, Dst: dst}, skip)
		if b != nil {
			s.affinity[client] = affinityEntry{backend: b, last: now}
		} else {
			delete(s.affinity, client)
		}
		return b
	}
	return set.sched.Pick(lb.Key{Src: client, Dst: dst}, skip)
}

func (s *service) close() {
	s.closing.Store(true)
	for i, fd := range s.lfds {
		if i < len(s.loops) {
			s.loops[i].removeListener(fd) // before the descriptor can be reused
		}
		unix.Close(fd)
	}
	s.lfds = nil
	if s.udp != nil {
		s.udp.close()
	}
	s.mu.Lock()
	for k, u := range s.sessions {
		u.close()
		delete(s.sessions, k)
	}
	s.mu.Unlock()
}
