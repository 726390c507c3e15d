package userspace

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/lb"
)

// ModeName is the --proxy-mode value of this mode.
const ModeName = "userspace"

func init() { proxy.RegisterMode(ModeName, NewMode) }

// Mode adapts the Proxier to the proxy core's Provider interface. The
// listeners live in the network namespace of the process, so `svcnet proxy
// --proxy-mode=userspace` must itself run inside the node's namespace (the
// core's Exec only moves programs like iptables-restore, not sockets).
type Mode struct {
	cfg proxy.ModeConfig
	px  *Proxier
	log *slog.Logger
	// warned remembers the Services already reported for an unknown
	// scheduler, so the warning is given once per value.
	warned map[proxy.ServicePortName]string
	// events turns scheduler fallbacks into Warning Events on the Service.
	events *proxy.SchedulerReporter
}

var (
	_ proxy.Provider = (*Mode)(nil)
	_ proxy.Dumper   = (*Mode)(nil)
)

// NewMode builds the userspace mode from the core's configuration. It starts
// nothing; listeners open on the first Sync.
func NewMode(cfg proxy.ModeConfig) (proxy.Provider, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	opt := Options{Logger: log, NodePortAddrs: cfg.NodePortAddresses}
	if cfg.IPv4 || !cfg.IPv6 {
		opt.IPv4 = Iptables{Exec: cfg.Exec}
	}
	if cfg.IPv6 {
		opt.IPv6 = Iptables{IPv6: true, Exec: cfg.Exec}
	}
	return &Mode{cfg: cfg, px: New(opt), log: log, warned: map[proxy.ServicePortName]string{},
		events: proxy.NewSchedulerReporter(cfg.Events, ModeName)}, nil
}

// Sync implements proxy.Provider. Userspace mode always applies the whole
// table: the listener table diff is cheap, and the rules are one small
// iptables-restore per family.
func (m *Mode) Sync(ctx context.Context, req *proxy.SyncRequest) error {
	desired := Plan(req, m.cfg.Scheduler, func(n proxy.ServicePortName, b proxy.Balance) {
		m.events.Observe(n.NamespacedName, b)
		if b.Fallback != "" && m.warned[n] != b.Requested {
			m.warned[n] = b.Requested
			m.log.Warn("unknown scheduler, using the default", "service", n.String(),
				"scheduler", b.Requested, "default", b.Scheduler)
		}
	})
	return m.px.Sync(ctx, desired)
}

// Cleanup implements proxy.Provider: it closes the listeners and removes
// the mode's chains and jumps.
func (m *Mode) Cleanup(ctx context.Context) error {
	return m.px.Cleanup(ctx)
}

// Dump implements proxy.Dumper.
func (m *Mode) Dump(context.Context) (string, error) { return m.px.Dump(), nil }

// Proxier returns the underlying proxier (for tests and benchmarks).
func (m *Mode) Proxier() *Proxier { return m.px }

// Schedulers are what userspace mode can balance with: every proxy/lb
// algorithm, def (--ipvs-scheduler) by default. The choice, and whether
// the endpoints' weights count, is proxy.NewBalance's.
func Schedulers(def string) proxy.ModeSchedulers {
	return proxy.ModeSchedulers{Default: def, Supported: lb.Known}
}

// Plan turns the core's snapshot into the listener table, as a pure
// function. Endpoints are the ones the core's policy (proxy.PortPolicy)
// chose for internal and external traffic, topology hints included. When the internal and external policies pick
// different endpoints (externalTrafficPolicy: Local, or
// internalTrafficPolicy: Local, on an externally reachable Service), the
// port gets two listeners: one for the ClusterIPs and one, named
// "<port> (external)", for NodePorts, externalIPs and LoadBalancer IPs.
// observe (may be nil) is told each Service port's proxy.Balance; a port
// whose service.kubernetes.io/ipvs-scheduler names no known algorithm
// (Balance.Fallback) uses the cluster default.
func Plan(req *proxy.SyncRequest, defaultScheduler string, observe func(proxy.ServicePortName, proxy.Balance)) []ServiceConfig {
	var out []ServiceConfig
	for _, name := range proxy.SortedServicePorts(req.Services) {
		sp := req.Services[name]
		proto := strings.ToLower(string(sp.Protocol))
		if proto != "tcp" && proto != "udp" {
			continue // SCTP is not proxied in user space
		}
		bal := proxy.NewBalance(sp, Schedulers(defaultScheduler))
		if observe != nil {
			observe(name, bal)
		}
		var affinity time.Duration
		if sp.SessionAffinity == v1.ServiceAffinityClientIP {
			affinity = time.Duration(sp.StickyMaxAgeSeconds) * time.Second
		}
		// One listener serves every family of the Service: it takes the
		// endpoints the core's policy chose in each family.
		var internal, external []*proxy.Endpoint
		for _, ipv6 := range []bool{false, true} {
			if pol := req.Policy(name, ipv6); pol != nil {
				internal = append(internal, pol.Internal.Endpoints...)
				external = append(external, pol.External.Endpoints...)
			}
		}
		base := ServiceConfig{
			Name: name.String(), Protocol: proto, Port: sp.Port, Scheduler: bal.Scheduler, AffinityTimeout: affinity,
		}
		var extAddrs []netip.Addr
		extAddrs = append(extAddrs, sp.ExternalIPs...)
		extAddrs = append(extAddrs, sp.LoadBalancerVIPs...)
		split := sp.ExternallyAccessible() && sp.InternalPolicyLocal != sp.ExternalPolicyLocal
		in := base
		in.Addrs = append([]netip.Addr(nil), sp.ClusterIPs...)
		in.Endpoints = toEndpoints(bal, internal)
		if !split {
			in.Addrs = append(in.Addrs, extAddrs...)
			in.NodePort = sp.NodePort
			out = append(out, in)
			continue
		}
		out = append(out, in)
		ext := base
		ext.Name = name.String() + " (external)"
		ext.Addrs = extAddrs
		ext.NodePort = sp.NodePort
		ext.Endpoints = toEndpoints(bal, external)
		out = append(out, ext)
	}
	return out
}

func toEndpoints(bal proxy.Balance, eps []*proxy.Endpoint) []Endpoint {
	out := make([]Endpoint, 0, len(eps))
	for _, ep := range eps {
		out = append(out, Endpoint{Addr: ep.AddrPort(), Weight: bal.Weight(ep)})
	}
	return out
}
