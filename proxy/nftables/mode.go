package nftables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"

	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/lb"
)

// ModeName is the --proxy-mode value of this mode.
const ModeName = "nftables"

func init() { proxy.RegisterMode(ModeName, NewMode) }

// Mode is the nftables data plane for every family the proxy programs: one
// Proxier (one kube-proxy table) per family.
type Mode struct {
	families []*Proxier
	log      *slog.Logger

	// reporter turns scheduler fallbacks into Warning Events on the
	// Service (once per Service and fallback).
	reporter *proxy.SchedulerReporter

	mu     sync.Mutex
	warned map[proxy.ServicePortName]string
}

var (
	_ proxy.Provider = (*Mode)(nil)
	_ proxy.Dumper   = (*Mode)(nil)
)

// NewMode builds the mode from the core's configuration: it programs
// through netlink in cfg.Exec's network namespace when cfg.Exec is a
// proxy.OSExecutor (or nil), else by running nft through cfg.Exec. The "drop traffic to unallocated ClusterIPs" rule is written
// for cfg.ServiceCIDRs (none when empty).
func NewMode(cfg proxy.ModeConfig) (proxy.Provider, error) {
	return NewModeWithServiceCIDRs(cfg, cfg.ServiceCIDRs, nil)
}

// NewModeWithServiceCIDRs is NewMode plus the Service CIDRs (both families
// mixed) and, for tests, the NFT of each family (nil: as NewMode).
// nfts[0] is IPv4, nfts[1] IPv6.
func NewModeWithServiceCIDRs(cfg proxy.ModeConfig, serviceCIDRs []netip.Prefix, nfts []NFT) (*Mode, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	m := &Mode{log: log, warned: map[proxy.ServicePortName]string{}, reporter: proxy.NewSchedulerReporter(cfg.Events, ModeName)}
	fams := []bool{}
	if cfg.IPv4 || !cfg.IPv6 {
		fams = append(fams, false)
	}
	if cfg.IPv6 {
		fams = append(fams, true)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	choice, err := ParseEndpointChoice(cfg.NFTablesEndpointChoice)
	if err != nil {
		return nil, err
	}
	if err := ValidateShards(cfg.NFTablesShards); err != nil {
		return nil, err
	}
	for _, v6 := range fams {
		c := Config{
			IPv6: v6, MasqueradeAll: cfg.MasqueradeAll, MasqueradeMark: fmt.Sprintf("%#08x", cfg.MasqueradeValue()),
			PodCIDRs: ofFamily(cfg.ClusterCIDRs, v6), ServiceCIDRs: ofFamily(serviceCIDRs, v6),
			NodePortAddresses: ofFamily(cfg.NodePortAddresses, v6), Log: log,
			UnsupportedScheduler: m.unsupported, Metrics: cfg.Metrics, ChoiceRules: choice == ChoiceRules, ChoiceShared: choice == ChoiceShared,
			LocalAddrs: cfg.ListLocalAddrs, Shards: cfg.NFTablesShards,
		}
		m.families = append(m.families, newModeProxier(c, cfg.Exec, nfts, v6))
	}
	return m, nil
}

// EndpointChoice is how a Service chain picks an endpoint
// (--nftables-endpoint-choice).
type EndpointChoice uint8

const (
	// ChoiceMap is kube-proxy's: an anonymous map per Service chain.
	ChoiceMap EndpointChoice = iota
	// ChoiceRules: one rule per endpoint, no set.
	ChoiceRules
	// ChoiceShared: one map for every Service, each chain a range of its
	// keys.
	ChoiceShared
)

// ParseEndpointChoice validates an --nftables-endpoint-choice value (""
// is map).
func ParseEndpointChoice(v string) (EndpointChoice, error) {
	switch v {
	case "", "map":
		return ChoiceMap, nil
	case "rules":
		return ChoiceRules, nil
	case "shared":
		return ChoiceShared, nil
	}
	return ChoiceMap, fmt.Errorf("unknown nftables endpoint choice %q (map, rules or shared)", v)
}

// ValidateShards checks an --nftables-shards value.
func ValidateShards(n int) error {
	if n < 0 || n > MaxShards {
		return fmt.Errorf("--nftables-shards %d: want 0 (one table, as kube-proxy) to %d", n, MaxShards)
	}
	return nil
}

// newModeProxier returns one family's Proxier: over the test's NFT when
// given, through netlink when the proxy runs programs on this host
// (proxy.OSExecutor, possibly in a named network namespace), else through
// the nft binary run by exec.
func newModeProxier(c Config, exec proxy.Executor, nfts []NFT, v6 bool) *Proxier {
	idx := 0
	if v6 {
		idx = 1
	}
	if idx < len(nfts) && nfts[idx] != nil {
		return NewProxier(c, nfts[idx])
	}
	fam := knftables.IPv4Family
	if v6 {
		fam = knftables.IPv6Family
	}
	switch e := exec.(type) {
	case nil:
		return NewNetlinkProxier(c, "", nil)
	case proxy.OSExecutor:
		return NewNetlinkProxier(c, e.NetNS, e)
	case *proxy.OSExecutor:
		return NewNetlinkProxier(c, e.NetNS, e)
	}
	return NewProxier(c, NewExecNFT(fam, TableName, exec))
}

func ofFamily(ps []netip.Prefix, v6 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if p.Addr().Is6() == v6 {
			out = append(out, p)
		}
	}
	return out
}

// unsupported logs (once per Service port and scheduler) and reports
// (once per Service, see proxy.SchedulerReporter) that sched cannot be
// honoured and the Service gets random; unknown names are reported as
// UnknownScheduler, known ones nftables cannot express (lc, wlc, sed, nq)
// as UnsupportedScheduler.
func (m *Mode) unsupported(n proxy.ServicePortName, sched string) {
	m.reporter.Report(n.NamespacedName, sched, lb.Random, lb.Known(sched))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.warned[n] == sched {
		return
	}
	m.warned[n] = sched
	m.log.Warn("scheduler cannot be expressed in nftables; using random", "service", n.String(), "scheduler", sched)
}

// Sync implements proxy.Provider: one transaction per family.
func (m *Mode) Sync(ctx context.Context, req *proxy.SyncRequest) error {
	var errs []error
	for _, p := range m.families {
		if err := p.Sync(ctx, req); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Cleanup implements proxy.Provider: it deletes the kube-proxy table of both
// families (never any other table).
func (m *Mode) Cleanup(ctx context.Context) error {
	var errs []error
	for _, v6 := range []bool{false, true} {
		var p *Proxier
		for _, f := range m.families {
			if f.cfg.IPv6 == v6 {
				p = f
			}
		}
		if p == nil {
			if len(m.families) == 0 || m.families[0].other == nil {
				continue // tests with fakes: nothing of the other family
			}
			p = m.families[0].other(Config{IPv6: v6})
		}
		if err := p.Cleanup(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Dump implements proxy.Dumper with `nft list table` of each family (the
// kernel's state, whichever way it was programmed).
func (m *Mode) Dump(ctx context.Context) (string, error) {
	var b strings.Builder
	for _, p := range m.families {
		switch n := p.nft.(type) {
		case *knftables.Fake:
			b.WriteString(n.Dump())
			continue
		case *ExecNFT:
			for _, t := range append([]string{n.Table}, p.shardTables(ctx)...) {
				out, err := n.Exec.Run(ctx, nil, "nft", "list", "table", string(n.Family), t)
				if err != nil {
					return b.String(), err
				}
				b.Write(out)
			}
			continue
		}
		if p.exec != nil {
			for _, t := range append([]string{TableName}, p.shardTables(ctx)...) {
				out, err := p.exec.Run(ctx, nil, "nft", "list", "table", string(p.family), t)
				if err != nil {
					return b.String(), err
				}
				b.Write(out)
			}
		}
	}
	return b.String(), nil
}
