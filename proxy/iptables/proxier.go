package iptables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/proxy"
)

func init() {
	proxy.RegisterMode("iptables", func(cfg proxy.ModeConfig) (proxy.Provider, error) {
		if cfg.Exec == nil {
			cfg.Exec = proxy.OSExecutor{}
		}
		if _, err := ParseDispatch(cfg.IPTablesDispatch); err != nil {
			return nil, err
		}
		run, err := NewRunner(cfg)
		if err != nil {
			return nil, err
		}
		return New(cfg, run), nil
	})
}

// jumpRule is a rule in a builtin chain that leads into one of ours.
type jumpRule struct {
	table, src, dst, comment string
	extra                    []string
}

// jumpRules are kube-proxy's jumps from the builtin chains, installed at the
// top of each builtin chain on every full sync (and removed by Cleanup).
var jumpRules = []jumpRule{
	{"filter", "INPUT", ChainExternalServices, "kubernetes externally-visible service portals", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{"filter", "FORWARD", ChainExternalServices, "kubernetes externally-visible service portals", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{"filter", "INPUT", ChainNodePorts, "kubernetes health check service ports", nil},
	{"filter", "FORWARD", ChainServices, "kubernetes service portals", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{"filter", "OUTPUT", ChainServices, "kubernetes service portals", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{"filter", "FORWARD", ChainForward, "kubernetes forwarding rules", nil},
	{"filter", "INPUT", ChainProxyFirewall, "kubernetes load balancer firewall", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{"filter", "OUTPUT", ChainProxyFirewall, "kubernetes load balancer firewall", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{"filter", "FORWARD", ChainProxyFirewall, "kubernetes load balancer firewall", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{"nat", "OUTPUT", ChainServices, "kubernetes service portals", nil},
	{"nat", "PREROUTING", ChainServices, "kubernetes service portals", nil},
	{"nat", "POSTROUTING", ChainPostrouting, "kubernetes postrouting rules", nil},
}

// kubeletJumpRules are the jumps kubelet normally owns; kube-proxy (1.37)
// ensures them too, in both families and whether or not localhost
// NodePorts are on (the KUBE-FIREWALL rule itself is only written for IPv4
// localhost NodePorts, see BuildPlan).
var kubeletJumpRules = []jumpRule{
	{"filter", "INPUT", ChainKubeletFirewall, "", nil},
	{"filter", "OUTPUT", ChainKubeletFirewall, "", nil},
}

func (j jumpRule) args() []string {
	args := append([]string{}, j.extra...)
	if j.comment != "" {
		args = append(args, "-m", "comment", "--comment", j.comment)
	}
	return append(args, "-j", j.dst)
}

// Proxier is the iptables mode's proxy.Provider.
type Proxier struct {
	cfg      proxy.ModeConfig
	ipt      Interface
	log      *slog.Logger
	families []bool
	needFull bool
	// LocalhostNodePorts mirrors kube-proxy's --iptables-localhost-nodeports
	// (default true).
	LocalhostNodePorts bool
	lastSweep          time.Time
	localnetDone       bool
	// LastPlan is the last plan applied per family (for tests and benches).
	LastPlan map[bool]*Plan
	// events reports scheduler annotations this mode cannot honour.
	events *proxy.SchedulerReporter
	// Dispatch is the layout of nat KUBE-SERVICES (--iptables-dispatch):
	// kube-proxy's linear chain by default.
	Dispatch Dispatch
}

var _ proxy.Provider = (*Proxier)(nil)

// New returns an iptables Proxier that applies its plans through ipt. It
// starts nothing; the first Sync is full.
func New(cfg proxy.ModeConfig, ipt Interface) *Proxier {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	var fams []bool
	if cfg.IPv4 || !cfg.IPv6 {
		fams = append(fams, false)
	}
	if cfg.IPv6 {
		fams = append(fams, true)
	}
	// An invalid --iptables-dispatch is refused by the mode's constructor
	// (and the command line); here it falls back to the default.
	dispatch, err := ParseDispatch(cfg.IPTablesDispatch)
	if err != nil {
		dispatch = DispatchLinear
	}
	return &Proxier{cfg: cfg, ipt: ipt, log: log.With("mode", "iptables"), families: fams, needFull: true,
		LocalhostNodePorts: true, LastPlan: map[bool]*Plan{}, events: proxy.NewSchedulerReporter(cfg.Events, "iptables"),
		Dispatch: dispatch}
}

// reportSchedulers tells users (as Warning Events) about Services whose
// service.kubernetes.io/ipvs-scheduler annotation iptables mode cannot
// honour (anything but random and wrr, see Schedulers): they get
// kube-proxy's uniform random choice.
func (p *Proxier) reportSchedulers(req *proxy.SyncRequest) {
	for name, sp := range req.Services {
		p.events.Observe(name.NamespacedName, proxy.NewBalance(sp, Schedulers))
	}
}

func (p *Proxier) mark() string { return fmt.Sprintf("%#x", p.cfg.MasqueradeValue()) }

// Sync implements proxy.Provider.
func (p *Proxier) Sync(ctx context.Context, req *proxy.SyncRequest) error {
	p.reportSchedulers(req)
	full := req.Full || p.needFull
	// Stale chains are swept on every sync, except that in large clusters
	// (where iptables-save is slow) they are swept once per sync period.
	sweep := full || time.Since(p.lastSweep) > p.syncPeriod()
	for _, v6 := range p.families {
		if lp := p.LastPlan[v6]; lp == nil || !lp.LargeClusterMode {
			sweep = true
		}
	}
	// The nat chains the sweep needs, listed before the plan: their list
	// also tells whether nat still holds the canary.
	natChains := map[bool][]string{}
	if sweep {
		for _, v6 := range p.families {
			chains, err := p.ipt.SaveChains(ctx, v6, "nat")
			if err != nil {
				p.log.Warn("listing nat chains failed; stale chains are kept", "err", err)
				continue
			}
			if chains == nil {
				chains = []string{}
			}
			natChains[v6] = chains
		}
	}
	if !full && p.flushed(ctx, sweep, natChains) {
		full = true
	}
	p.needFull = true // cleared on success
	if full {
		if err := p.ensureBase(ctx); err != nil {
			return err
		}
	}
	var errs []error
	for _, v6 := range p.families {
		in := p.planInput(ctx, req, v6)
		in.Partial = !full
		in.Changed = req.ChangedServices()
		if !full {
			// Plan only the changed Services and edit the top-level
			// chains rule by rule, from what the last plan wrote (a failed
			// restore forces a full sync, so the last plan is what the
			// kernel holds). The plan also deletes the chains the changed
			// Services no longer use.
			in.Prev = p.LastPlan[v6]
		}
		if chains, ok := natChains[v6]; ok {
			in.ExistingNATChains = chains
		}
		plan := BuildPlan(in)
		if err := p.ipt.Restore(ctx, v6, plan.Data); err != nil {
			if p.cfg.Metrics != nil {
				p.cfg.Metrics.IPTablesRestoreFailuresTotal.WithLabelValues(proxy.Family(v6)).Inc()
				if !full {
					p.cfg.Metrics.IPTablesPartialRestoreFails.WithLabelValues(proxy.Family(v6)).Inc()
				}
			}
			errs = append(errs, fmt.Errorf("ipv6=%v: %w", v6, err))
			continue
		}
		p.LastPlan[v6] = plan
		if p.cfg.Metrics != nil {
			fam := proxy.Family(v6)
			p.cfg.Metrics.IPTablesRulesTotal.WithLabelValues("filter", fam).Set(float64(plan.FilterRules))
			p.cfg.Metrics.IPTablesRulesTotal.WithLabelValues("nat", fam).Set(float64(plan.NATRules))
			p.cfg.Metrics.IPTablesRulesLastSync.WithLabelValues("filter", fam).Set(float64(plan.FilterRules))
			p.cfg.Metrics.IPTablesRulesLastSync.WithLabelValues("nat", fam).Set(float64(plan.NATRules))
		}
		req.Stats.AddNoLocal(v6, plan.NoLocalInternal, plan.NoLocalExternal)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("iptables sync: %w", err)
	}
	if sweep {
		p.lastSweep = time.Now()
	}
	req.Stats.Partial = !full
	p.needFull = false
	return nil
}

// flushed reports whether someone flushed our tables (firewalld reload,
// iptables -F, ...) since the last sync, from the canary chains. mangle,
// the smallest table, is asked on every sync, as kube-proxy's canary
// monitor polls it; nat and filter only when the sweep lists nat anyway
// (its list shows nat's canary): with iptables-legacy any question about
// a table reads the whole table from the kernel, a second of nat at
// 10,000 Services.
func (p *Proxier) flushed(ctx context.Context, sweep bool, natChains map[bool][]string) bool {
	for _, v6 := range p.families {
		tables := []string{"mangle"}
		if sweep {
			tables = append(tables, "filter")
			if chains, ok := natChains[v6]; !ok {
				tables = append(tables, "nat")
			} else if !slices.Contains(chains, ChainProxyCanary) {
				p.log.Info("canary chain missing, forcing full sync", "table", "nat", "ipv6", v6)
				return true
			}
		}
		for _, table := range tables {
			if ok, err := p.ipt.ChainExists(ctx, v6, table, ChainProxyCanary); err != nil || !ok {
				p.log.Info("canary chain missing, forcing full sync", "table", table, "ipv6", v6)
				return true
			}
		}
	}
	return false
}

// FullSyncDue implements proxy.FullSyncScheduler as kube-proxy 1.37's
// iptables proxier: a full sync every proxy.DefaultFullSyncPeriod, never
// periodically in large clusters (more than 1,000 endpoints, where a full
// iptables-restore is the expensive thing to avoid).
func (p *Proxier) FullSyncDue(sinceLastFull, _ time.Duration) bool {
	for _, v6 := range p.families {
		if lp := p.LastPlan[v6]; lp != nil && lp.LargeClusterMode {
			return false
		}
	}
	return sinceLastFull >= proxy.DefaultFullSyncPeriod
}

func (p *Proxier) syncPeriod() time.Duration {
	if p.cfg.SyncPeriod > 0 {
		return p.cfg.SyncPeriod
	}
	return 30 * time.Second
}

// ensureBase creates the canary chains, our top-level chains and the jumps
// into them. It reads each table once with iptables-save and only runs
// iptables for what is missing, so a steady-state full sync costs three
// extra commands per family rather than thirty.
func (p *Proxier) ensureBase(ctx context.Context) error {
	for _, v6 := range p.families {
		saved := map[string]string{}
		for _, table := range []string{"mangle", "nat", "filter"} {
			out, err := p.ipt.SaveTable(ctx, v6, table)
			if err != nil {
				return fmt.Errorf("read %s table: %w", table, err)
			}
			saved[table] = string(out)
		}
		hasChain := func(table, chain string) bool {
			return strings.Contains(saved[table], "\n:"+chain+" ") || strings.HasPrefix(saved[table], ":"+chain+" ")
		}
		for _, table := range []string{"mangle", "nat", "filter"} {
			if hasChain(table, ChainProxyCanary) {
				continue
			}
			if err := p.ipt.EnsureChain(ctx, v6, table, ChainProxyCanary); err != nil {
				return fmt.Errorf("canary: %w", err)
			}
		}
		for _, j := range append(append([]jumpRule{}, jumpRules...), kubeletJumpRules...) {
			if !hasChain(j.table, j.dst) {
				if err := p.ipt.EnsureChain(ctx, v6, j.table, j.dst); err != nil {
					return fmt.Errorf("ensure chain %s/%s: %w", j.table, j.dst, err)
				}
			}
			if strings.Contains(saved[j.table], "\n"+j.saveLine()+"\n") {
				continue
			}
			if err := p.ipt.EnsureRule(ctx, v6, j.table, j.src, j.args()...); err != nil {
				return fmt.Errorf("ensure jump %s/%s -> %s: %w", j.table, j.src, j.dst, err)
			}
		}
	}
	if !p.localnetDone && p.LocalhostNodePorts && p.cfg.Exec != nil && len(p.cfg.NodePortAddresses) == 0 {
		// IPv4 NodePorts on 127.0.0.1 need route_localnet; best effort
		// (it may be read-only inside some namespaces).
		if _, err := p.cfg.Exec.Run(ctx, nil, "sysctl", "-q", "-w", "net.ipv4.conf.all.route_localnet=1"); err != nil {
			p.log.Debug("could not enable route_localnet", "err", err)
		}
		p.localnetDone = true
	}
	return nil
}

// saveLine is the jump as iptables-save prints it.
func (j jumpRule) saveLine() string {
	words := []string{"-A", j.src}
	for _, a := range j.args() {
		if strings.Contains(a, " ") {
			a = `"` + a + `"`
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

func (p *Proxier) planInput(ctx context.Context, req *proxy.SyncRequest, v6 bool) PlanInput {
	in := PlanInput{
		IPv6:                v6,
		Services:            req.Services,
		Endpoints:           req.Endpoints,
		LocalCIDRs:          p.cfg.ClusterCIDRs,
		MasqueradeAll:       p.cfg.MasqueradeAll,
		MasqueradeMark:      p.mark(),
		LocalhostNodePorts:  p.LocalhostNodePorts,
		ConntrackTCPLiberal: p.cfg.ConntrackTCPLiberal,
		NodeName:            req.Node.Name,
		NodeLabels:          req.Node.Labels,
		Policy:              req.Policy,
		Dispatch:            p.Dispatch,
	}
	if in.NodeName == "" {
		in.NodeName = p.cfg.NodeName
	}
	for _, ip := range append(append([]netip.Addr{}, req.Node.IPs...), p.cfg.NodeIPs...) {
		if ip.Is6() == v6 {
			in.NodeIP = ip
			break
		}
	}
	npCIDRs, matchAll, v4Loopback := proxy.NodePortCIDRs(p.cfg.NodePortAddresses, v6)
	if !v4Loopback {
		in.LocalhostNodePorts = false
	}
	if !matchAll {
		local, err := p.cfg.ListLocalAddrs(ctx)
		if err != nil {
			p.log.Error("listing local addresses for --nodeport-addresses; NodePorts may not work", "err", err)
		}
		addrs := make([]netip.Addr, 0, len(local))
		for _, a := range local {
			addrs = append(addrs, a.Addr)
		}
		in.NodePortIPs = append([]netip.Addr{}, proxy.NodePortIPs(addrs, npCIDRs, false)...)
	}
	return in
}

// Cleanup implements proxy.Provider: it removes the jumps from the builtin
// chains, then flushes and deletes every chain this mode creates (and the
// canaries), in both families. Missing pieces are not errors.
func (p *Proxier) Cleanup(ctx context.Context) error {
	return Cleanup(ctx, p.ipt)
}

// Cleanup removes everything the iptables mode installs through ipt. Each
// table is read once; only jumps that are present are deleted, and all our
// chains of a table go in one restore.
func Cleanup(ctx context.Context, ipt Interface) error {
	var errs []error
	for _, v6 := range []bool{false, true} {
		saved := map[string]string{}
		for _, table := range []string{"nat", "filter", "mangle"} {
			out, err := ipt.SaveTable(ctx, v6, table)
			if err != nil {
				// ip6tables may be unusable (no IPv6): nothing to clean.
				continue
			}
			saved[table] = string(out)
		}
		for _, j := range append(append([]jumpRule{}, jumpRules...), kubeletJumpRules...) {
			if !strings.Contains(saved[j.table], "\n"+j.saveLine()+"\n") {
				continue
			}
			if err := ipt.DeleteRule(ctx, v6, j.table, j.src, j.args()...); err != nil {
				errs = append(errs, err)
			}
		}
		for _, table := range []string{"nat", "filter", "mangle"} {
			var ours []string
			for _, c := range ChainsFromSave([]byte(saved[table])) {
				if isServiceChainName(c) || isFixedChain(c) {
					ours = append(ours, c)
				}
			}
			if len(ours) == 0 {
				continue
			}
			var b strings.Builder
			fmt.Fprintf(&b, "*%s\n", table)
			for _, c := range ours {
				fmt.Fprintf(&b, ":%s - [0:0]\n", c)
			}
			for _, c := range ours {
				fmt.Fprintf(&b, "-X %s\n", c)
			}
			b.WriteString("COMMIT\n")
			if err := ipt.Restore(ctx, v6, []byte(b.String())); err != nil {
				errs = append(errs, fmt.Errorf("delete %s chains: %w", table, err))
			}
		}
	}
	return errors.Join(errs...)
}

func isFixedChain(c string) bool {
	switch c {
	case ChainServices, ChainExternalServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq,
		ChainForward, ChainProxyFirewall, ChainProxyCanary, ChainKubeletFirewall:
		return true
	}
	return false
}
