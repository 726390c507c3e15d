package userspace

import (
	"context"
	"log/slog"

	"github.com/svcnet/svcnet/proxy"
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

// RedirectPort implements proxy.Redirector: the Service port's traffic is
// REDIRECTed to its listener, so its UDP conntrack entries reply from there.
func (m *Mode) RedirectPort(n proxy.ServicePortName) int {
	return m.px.ProxyPort(n.String(), string(n.Protocol))
}

var _ proxy.Redirector = (*Mode)(nil)

// Proxier returns the underlying proxier (for tests and benchmarks).
func (m *Mode) Proxier() *Proxier { return m.px }
