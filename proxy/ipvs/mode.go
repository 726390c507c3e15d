package ipvs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/iptables"
	"github.com/svcnet/svcnet/proxy/lb"
)

// ModeName is the --proxy-mode value of this mode.
const ModeName = "ipvs"

func init() { proxy.RegisterMode(ModeName, NewMode) }

// Config configures a Mode beyond proxy.ModeConfig.
type Config struct {
	proxy.ModeConfig
	// Handle, Sets, IPT and Iface replace the kernel (tests); nil means the
	// real one (netlink, ipset, iptables-restore and ip through Exec).
	Handle Handle
	Sets   IPSets
	IPT    IPTables
	Iface  Interface
	// Report is called once per Service and annotation value whose
	// scheduler is not an IPVS scheduler (the proxy makes an Event of it:
	// reason "UnknownScheduler"). Optional.
	Report func(svc proxy.ServicePortName, requested, used string)
	// SkipSysctls leaves the kernel settings alone (tests with fakes).
	// Otherwise the first sync sets, as kube-proxy does,
	// net.ipv4.vs.conntrack=1 (so iptables can masquerade IPVS traffic),
	// net.ipv4.vs.expire_nodest_conn=1,
	// net.ipv4.vs.expire_quiescent_template=1 and net.ipv4.ip_forward=1.
	SkipSysctls bool
}

var sysctls = []string{
	"net.ipv4.vs.conntrack=1", "net.ipv4.vs.expire_nodest_conn=1",
	"net.ipv4.vs.expire_quiescent_template=1", "net.ipv4.ip_forward=1",
}

// strictARP are the settings of kube-proxy's ipvs.strictARP: answer ARP
// only for addresses on the interface asked (not those on kube-ipvs0), and
// announce from the outgoing interface's own address.
var strictARP = []string{"net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2"}

// sysctls are the kernel settings of the first sync.
func (m *Mode) sysctls() []string {
	if m.cfg.IPVSStrictARP {
		return append(append([]string{}, sysctls...), strictARP...)
	}
	return sysctls
}

// Mode is the IPVS data plane for the configured families.
type Mode struct {
	cfg      Config
	families []bool
	applier  *Applier
	log      *slog.Logger

	mu         sync.Mutex
	reported   map[proxy.ServicePortName]string
	sysctlDone bool
	// state is each family's plan as last applied without an error (nil
	// after a failure): partial syncs update it.
	state [2]*planState
}

var (
	_ proxy.Provider = (*Mode)(nil)
	_ proxy.Dumper   = (*Mode)(nil)
)

// NewMode builds the mode with the real kernel interfaces. It fails when
// the kernel has no IPVS (ErrNoIPVS, naming the ip_vs module).
func NewMode(cfg proxy.ModeConfig) (proxy.Provider, error) {
	events := proxy.NewSchedulerReporter(cfg.Events, ModeName)
	return New(Config{ModeConfig: cfg, Report: func(svc proxy.ServicePortName, requested, used string) {
		events.Report(svc.NamespacedName, requested, used, lb.Known(requested))
	}})
}

// New builds the mode from cfg.
func New(cfg Config) (*Mode, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Exec == nil {
		cfg.Exec = proxy.OSExecutor{}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	netNS, nsPath := "", ""
	if e, ok := cfg.Exec.(proxy.OSExecutor); ok && e.NetNS != "" {
		netNS, nsPath = e.NetNS, "/var/run/netns/"+e.NetNS
	}
	if cfg.Handle == nil {
		h, err := NewNetlink(nsPath)
		if err != nil {
			return nil, fmt.Errorf("ipvs proxy mode: %w", err)
		}
		cfg.Handle = h
	}
	if cfg.Sets == nil {
		cfg.Sets = ExecIPSets{Exec: cfg.Exec}
	}
	if cfg.IPT == nil {
		run, err := iptables.NewRunner(cfg.ModeConfig)
		if err != nil {
			return nil, fmt.Errorf("ipvs proxy mode: %w", err)
		}
		cfg.IPT = run
	}
	if cfg.Iface == nil {
		li, err := NewLinkInterface(netNS, defaultInterface)
		if err != nil {
			return nil, fmt.Errorf("ipvs proxy mode: %w", err)
		}
		cfg.Iface = li
	}
	m := &Mode{cfg: cfg, log: cfg.Log, reported: map[proxy.ServicePortName]string{}}
	if cfg.IPv4 || !cfg.IPv6 {
		m.families = append(m.families, false)
	}
	if cfg.IPv6 {
		m.families = append(m.families, true)
	}
	m.applier = &Applier{IPVS: cfg.Handle, Sets: cfg.Sets, IPT: cfg.IPT, Iface: cfg.Iface, Log: cfg.Log}
	return m, nil
}

// planConfig is the PlanConfig of one family for req; local are the
// node's addresses of the family outside kube-ipvs0 (localAddrs).
func (m *Mode) planConfig(req *proxy.SyncRequest, ipv6 bool, local []netip.Addr) PlanConfig {
	pc := PlanConfig{
		IPv6: ipv6, Scheduler: m.cfg.Scheduler, MasqueradeAll: m.cfg.MasqueradeAll,
		MasqueradeMark: fmt.Sprintf("%#08x", m.cfg.MasqueradeValue()),
		NodeName:       req.Node.Name, NodeLabels: req.Node.Labels, Policy: req.Policy,
		LocalAddrs: local,
	}
	if pc.NodeName == "" {
		pc.NodeName = m.cfg.NodeName
	}
	for _, c := range m.cfg.ClusterCIDRs {
		if c.Addr().Is6() == ipv6 {
			pc.ClusterCIDR = c
			break
		}
	}
	for _, a := range append(append([]netip.Addr{}, req.Node.IPs...), m.cfg.NodeIPs...) {
		if a.Is6() == ipv6 && !slices.Contains(pc.NodeIPs, a) {
			pc.NodeIPs = append(pc.NodeIPs, a)
		}
	}
	// As kube-proxy's IPVS mode: NodePorts get a virtual server on every
	// local address (loopback and kube-ipvs0's aside) or on those in
	// --nodeport-addresses.
	cidrs, matchAll, _ := proxy.NodePortCIDRs(m.cfg.NodePortAddresses, ipv6)
	pc.NodePortAddrs = proxy.NodePortIPs(local, cidrs, matchAll)
	return pc
}

// Sync implements proxy.Provider. A full sync reconciles everything with
// the kernel (read back); a partial one writes only what differs from the
// last plan applied, plus the virtual servers whose real servers are
// draining, which every sync visits to advance graceful termination
// (Applier.Apply).
func (m *Mode) Sync(ctx context.Context, req *proxy.SyncRequest) error {
	if !m.cfg.SkipSysctls && !m.sysctlDone {
		if _, err := m.cfg.Exec.Run(ctx, nil, "sysctl", append([]string{"-w"}, m.sysctls()...)...); err != nil {
			return fmt.Errorf("ipvs kernel settings: %w", err)
		}
		m.sysctlDone = true
	}
	// The node's addresses, read once for both families.
	all, err := m.cfg.ListLocalAddrs(ctx)
	if err != nil {
		m.state = [2]*planState{}
		return fmt.Errorf("sync ipvs: %w", err)
	}
	var errs []error
	var changed sets.Set[types.NamespacedName]
	for _, v6 := range m.families {
		fam := b2i(v6)
		local := localAddrs(all, v6)
		pc := m.planConfig(req, v6, local)
		st := m.state[fam]
		m.state[fam] = nil // until this sync has succeeded
		// A change of the node's addresses changes every NodePort:
		// replan everything.
		if st != nil && !slices.Equal(st.local, local) {
			st = nil
		}
		if req.Full || st == nil {
			plan, frags := buildPlan(pc, req.Services, req.Endpoints)
			m.report(plan.Fallbacks)
			req.Stats.AddNoLocal(v6, plan.NoLocalEndpointsInternal, plan.NoLocalEndpointsExternal)
			if err = m.applier.Apply(ctx, plan, v6, true); err == nil {
				st = newPlanState(frags, plan)
				st.local = local
			}
		} else {
			if changed == nil {
				changed = req.ChangedServices()
			}
			var d *delta
			if d, err = st.update(pc, req, changed); err == nil {
				m.report(d.fallbacks)
				req.Stats.AddNoLocal(v6, len(st.noLocalInt), len(st.noLocalExt))
				req.Stats.Partial = true
				err = m.applier.applyDelta(ctx, d, func(o vsOwner) *PlannedService { return st.planned(pc, req, o) }, st, v6)
			}
			if err == nil {
				st.settle()
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sync ipvs (ipv6=%v): %w", v6, err))
			continue
		}
		m.state[fam] = st
	}
	return errors.Join(errs...)
}

// localAddrs returns, sorted, the node's addresses of a family on every
// link but kube-ipvs0, loopback and IPv6 link-local addresses left out:
// where NodePorts listen (kube-proxy's GetAllLocalAddressesExcept).
func localAddrs(all []proxy.LinkAddr, ipv6 bool) []netip.Addr {
	var out []netip.Addr
	for _, a := range all {
		if a.Link != defaultInterface && a.Addr.Is6() == ipv6 && !a.Addr.IsLoopback() && !a.Addr.IsLinkLocalUnicast() {
			out = append(out, a.Addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// FullSyncDue implements proxy.FullSyncScheduler: each periodic sync is a
// full one (read back and repaired), as every sync of kube-proxy's IPVS
// proxier is; the syncs in between, for changes, are partial.
func (m *Mode) FullSyncDue(sinceLastFull, syncPeriod time.Duration) bool {
	return sinceLastFull >= syncPeriod
}

func (m *Mode) report(fb []SchedulerFallback) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range fb {
		if m.reported[f.Service] == f.Requested {
			continue
		}
		m.reported[f.Service] = f.Requested
		m.log.Warn("unknown IPVS scheduler in annotation "+proxy.AnnotationIPVSScheduler+"; using the default",
			"service", f.Service.String(), "scheduler", f.Requested, "default", f.Used)
		if m.cfg.Report != nil {
			m.cfg.Report(f.Service, f.Requested, f.Used)
		}
	}
}

// Cleanup implements proxy.Provider: it deletes the virtual servers, the
// iptables chains and jumps, the ipsets and kube-ipvs0.
func (m *Mode) Cleanup(ctx context.Context) error {
	m.state = [2]*planState{}
	var errs []error
	for _, v6 := range []bool{false, true} {
		if err := m.applier.Cleanup(ctx, v6); err != nil {
			errs = append(errs, err)
		}
	}
	if m.cfg.Iface != nil {
		if err := m.cfg.Iface.Delete(ctx); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", defaultInterface, err))
		}
	}
	return errors.Join(errs...)
}

// Dump implements proxy.Dumper in `ipvsadm -Ln` form.
func (m *Mode) Dump(context.Context) (string, error) { return Dump(m.cfg.Handle) }

// Handle returns the mode's IPVS handle.
func (m *Mode) Handle() Handle { return m.cfg.Handle }
