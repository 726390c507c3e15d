package ipvs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/proxy"
)

// IPSets is the kernel's ipsets. The real one runs `ipset` through an
// Executor.
type IPSets interface {
	// List returns the entries of every existing set whose name starts
	// with "KUBE-" (kernel names), in `ipset save` form.
	List(ctx context.Context) (map[string][]string, error)
	// Restore runs an `ipset restore -exist` payload.
	Restore(ctx context.Context, payload []byte) error
}

// ExecIPSets runs the ipset program.
type ExecIPSets struct{ Exec proxy.Executor }

// List implements IPSets.
func (e ExecIPSets) List(ctx context.Context) (map[string][]string, error) {
	out, err := e.Exec.Run(ctx, nil, "ipset", "save")
	if err != nil {
		return nil, fmt.Errorf("list ipsets: %w", err)
	}
	return parseIPSetSave(out), nil
}

// Restore implements IPSets.
func (e ExecIPSets) Restore(ctx context.Context, payload []byte) error {
	if _, err := e.Exec.Run(ctx, payload, "ipset", "restore", "-exist"); err != nil {
		return fmt.Errorf("restore ipsets: %w", err)
	}
	return nil
}

func parseIPSetSave(out []byte) map[string][]string {
	sets := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "KUBE-") {
			continue
		}
		switch {
		case f[0] == "create":
			if sets[f[1]] == nil {
				sets[f[1]] = []string{}
			}
		case f[0] == "add" && len(f) >= 3:
			sets[f[1]] = append(sets[f[1]], f[2])
		}
	}
	return sets
}

// ipsetPayload returns the restore payload turning cur into want: sets are
// created if missing, stale entries deleted, new ones added. Sets are never
// flushed, so a packet never sees a half-filled set.
func ipsetPayload(want, cur map[string][]string, ipv6 bool) []byte {
	var b strings.Builder
	family := "inet"
	if ipv6 {
		family = "inet6"
	}
	for _, s := range Sets {
		n := SetName(s.Name, ipv6)
		if _, ok := cur[n]; !ok {
			if s.Type == "bitmap:port" {
				fmt.Fprintf(&b, "create %s %s range 0-65535 comment\n", n, s.Type)
			} else {
				fmt.Fprintf(&b, "create %s %s family %s hashsize 1024 maxelem 65536 comment\n", n, s.Type, family)
			}
		}
		// A merge of the sorted lists (the plan's are; the kernel's are
		// sorted here): a one-Service change costs no map of every entry.
		have, need := sortedEntries(cur[n]), sortedEntries(want[n])
		var dels []string
		i, j := 0, 0
		for i < len(have) || j < len(need) {
			switch {
			case j == len(need) || (i < len(have) && have[i] < need[j]):
				dels = append(dels, have[i])
				i++
			case i == len(have) || need[j] < have[i]:
				fmt.Fprintf(&b, "add %s %s\n", n, need[j])
				j++
			default:
				for e := have[i]; i < len(have) && have[i] == e; {
					i++
				}
				j++
			}
		}
		// Adds first: a set never holds fewer entries than it needs.
		for _, e := range dels {
			fmt.Fprintf(&b, "del %s %s\n", n, e)
		}
	}
	return []byte(b.String())
}

// sortedEntries returns the entries sorted and without repeats, as they
// are if they already were.
func sortedEntries(es []string) []string {
	if slices.IsSorted(es) {
		return es
	}
	es = slices.Clone(es)
	slices.Sort(es)
	return slices.Compact(es)
}

// IPTables is the part of proxy/iptables' Interface IPVS mode uses.
type IPTables interface {
	Restore(ctx context.Context, ipv6 bool, data []byte) error
	EnsureRule(ctx context.Context, ipv6 bool, table, chain string, args ...string) error
	DeleteRule(ctx context.Context, ipv6 bool, table, chain string, args ...string) error
	ChainExists(ctx context.Context, ipv6 bool, table, chain string) (bool, error)
}

// Interface is the kube-ipvs0 device holding the service addresses.
type Interface interface {
	// Ensure creates the device (dummy, else a port-less bridge) and sets
	// it up.
	Ensure(ctx context.Context) error
	// Addrs lists the device's addresses of a family.
	Addrs(ctx context.Context, ipv6 bool) ([]netip.Addr, error)
	Add(ctx context.Context, a netip.Addr) error
	Del(ctx context.Context, a netip.Addr) error
	// Delete removes the device; a missing device is not an error.
	Delete(ctx context.Context) error
}

// Applier writes plans to the kernel.
type Applier struct {
	IPVS  Handle
	Sets  IPSets
	IPT   IPTables
	Iface Interface
	Log   *slog.Logger

	// jumpsChecked: the jumps of a family (index: IPv6) were all in place
	// at the last check.
	jumpsChecked [2]bool
	// draining holds the virtual servers with real servers in graceful
	// termination (quiesced, still carrying connections): every sync
	// visits them until they are gone, partial syncs included.
	draining [2]map[Key]bool
}

// applyIPVS makes the IPVS table of one family match plan, read back from
// the kernel. Stale real servers are drained (weight 0) and deleted once
// they have no connections (at once for UDP and SCTP). Virtual servers of
// the family that the plan does not hold are deleted. It keeps going after
// an error, returns all errors joined, and the virtual servers left
// draining.
func applyIPVS(h Handle, plan *Plan, ipv6 bool, log *slog.Logger) (map[Key]bool, error) {
	if log == nil {
		log = slog.Default()
	}
	cur, err := h.GetServices()
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	curByKey := map[Key]VirtualServer{}
	for _, vs := range cur {
		curByKey[vs.Key()] = vs
	}
	var errs []error
	draining := map[Key]bool{}
	want := map[Key]bool{}
	for i := range plan.Services {
		ps := &plan.Services[i]
		want[ps.VS.Key()] = true
		old, ok := curByKey[ps.VS.Key()]
		var oldp *VirtualServer
		if ok {
			oldp = &old
		}
		left, err := syncVS(h, ps, oldp, log)
		if err != nil {
			errs = append(errs, err)
		}
		if left {
			draining[ps.VS.Key()] = true
		}
	}
	for _, vs := range cur {
		if vs.Addr.Is6() != ipv6 || want[vs.Key()] {
			continue
		}
		if err := h.DelService(vs); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("delete virtual server %s: %w", vs, err))
		}
	}
	return draining, errors.Join(errs...)
}

// syncVS brings one virtual server and its real servers to ps; old is its
// state in the kernel (nil: it has none). Real servers are added before
// stale ones are drained, so the service never has fewer than it needs.
// It reports whether real servers are left draining.
func syncVS(h Handle, ps *PlannedService, old *VirtualServer, log *slog.Logger) (draining bool, err error) {
	vs := ps.VS
	if old == nil {
		if err := h.AddService(vs); err != nil {
			return false, fmt.Errorf("add virtual server %s for %s: %w", vs, ps.Name, err)
		}
	} else if !old.sameSettings(vs) {
		if err := h.UpdateService(vs); err != nil {
			return false, fmt.Errorf("update virtual server %s for %s: %w", vs, ps.Name, err)
		}
	}
	var dests []RealServer
	if old != nil {
		if dests, err = h.GetDestinations(vs); err != nil {
			return false, fmt.Errorf("list real servers of %s: %w", vs, err)
		}
	}
	have := make(map[netip.AddrPort]RealServer, len(dests))
	for _, d := range dests {
		have[d.AddrPort()] = d
	}
	need := make(map[netip.AddrPort]bool, len(ps.Dests))
	var errs []error
	for _, d := range ps.Dests {
		need[d.AddrPort()] = true
		old, ok := have[d.AddrPort()]
		switch {
		case !ok:
			err = h.AddDestination(vs, d)
		case old.Weight != d.Weight:
			err = h.UpdateDestination(vs, d)
		default:
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("real server %s of %s: %w", d.AddrPort(), vs, err))
		}
	}
	for _, d := range dests {
		if need[d.AddrPort()] {
			continue
		}
		gone, err := drain(h, vs, d, log)
		if err != nil {
			errs = append(errs, err)
		}
		if !gone {
			draining = true
		}
	}
	return draining, errors.Join(errs...)
}

// drain performs one step of graceful termination of a real server and
// reports whether it is gone.
func drain(h Handle, vs VirtualServer, d RealServer, log *slog.Logger) (gone bool, err error) {
	if vs.Protocol == v1.ProtocolUDP || vs.Protocol == v1.ProtocolSCTP || d.ActiveConn+d.InactiveConn == 0 {
		if err := h.DelDestination(vs, d); err != nil && !errors.Is(err, ErrNotFound) {
			return false, fmt.Errorf("delete real server %s of %s: %w", d.AddrPort(), vs, err)
		}
		log.Debug("deleted real server", "vs", vs.String(), "rs", d.AddrPort().String())
		return true, nil
	}
	if d.Weight != 0 {
		d.Weight = 0
		if err := h.UpdateDestination(vs, d); err != nil {
			return false, fmt.Errorf("quiesce real server %s of %s: %w", d.AddrPort(), vs, err)
		}
		log.Debug("real server terminating", "vs", vs.String(), "rs", d.AddrPort().String(), "active", d.ActiveConn, "inactive", d.InactiveConn)
	}
	return false, nil
}

// Apply writes a whole plan of one family, reading the kernel back: ipsets
// first (the iptables rules refer to them), then kube-ipvs0's addresses,
// the iptables chains and jumps, and finally the IPVS table. Partial syncs
// go through applyDelta instead.
//
// The jumps from the built-in chains live outside what the restore
// rewrites, so they are checked (one `iptables -C` each) on full syncs and
// until a check has passed, not on every sync: as kube-proxy's iptables
// mode does, a jump someone deleted comes back with the next full sync
// (--sync-period), and a one-Service change costs no nine extra programs.
func (a *Applier) Apply(ctx context.Context, plan *Plan, ipv6, full bool) error {
	fam := b2i(ipv6)
	var errs []error
	if a.Sets != nil {
		cur, err := a.Sets.List(ctx)
		if err != nil {
			return err
		}
		if payload := ipsetPayload(plan.IPSets, cur, ipv6); len(payload) > 0 {
			if err := a.Sets.Restore(ctx, payload); err != nil {
				return err
			}
		}
	}
	if a.Iface != nil {
		if err := a.syncAddrs(ctx, plan.Bind, ipv6); err != nil {
			errs = append(errs, err)
		}
	}
	if a.IPT != nil {
		if err := a.IPT.Restore(ctx, ipv6, plan.IPTables); err != nil {
			errs = append(errs, fmt.Errorf("iptables: %w", err))
		} else {
			errs = append(errs, a.checkJumps(ctx, ipv6, full)...)
		}
	}
	draining, err := applyIPVS(a.IPVS, plan, ipv6, a.Log)
	if err != nil {
		errs = append(errs, err)
	}
	a.draining[fam] = draining
	return errors.Join(errs...)
}

// checkJumps ensures the jumps from the built-in chains on full syncs and
// until a check has passed.
func (a *Applier) checkJumps(ctx context.Context, ipv6, full bool) []error {
	fam := b2i(ipv6)
	if !full && a.jumpsChecked[fam] {
		return nil
	}
	var errs []error
	for _, j := range jumps {
		if err := a.IPT.EnsureRule(ctx, ipv6, j.table, j.from, "-m", "comment", "--comment", j.comment, "-j", j.to); err != nil {
			errs = append(errs, fmt.Errorf("iptables jump %s -> %s: %w", j.from, j.to, err))
		}
	}
	a.jumpsChecked[fam] = len(errs) == 0
	return errs
}

// applyDelta writes a partial sync: the ipset entries and addresses that
// came and went, the iptables payload if it changed, and the virtual
// servers that changed or have real servers draining (st holds the whole
// plan they are looked up in, planned gives one with its real servers).
// Nothing is read back but the real servers of the virtual servers it
// touches.
func (a *Applier) applyDelta(ctx context.Context, d *delta, planned func(vsOwner) *PlannedService, st *planState, ipv6 bool) error {
	fam := b2i(ipv6)
	var errs []error
	if a.Sets != nil {
		if payload := d.payload(ipv6); len(payload) > 0 {
			if err := a.Sets.Restore(ctx, payload); err != nil {
				return err
			}
		}
	}
	if a.Iface != nil {
		for _, ip := range d.bindAdd {
			if err := a.Iface.Add(ctx, ip); err != nil {
				errs = append(errs, fmt.Errorf("bind %s: %w", ip, err))
			}
		}
	}
	if a.IPT != nil {
		if d.iptables != nil {
			if err := a.IPT.Restore(ctx, ipv6, d.iptables); err != nil {
				errs = append(errs, fmt.Errorf("iptables: %w", err))
			}
		}
		errs = append(errs, a.checkJumps(ctx, ipv6, false)...)
	}
	draining := map[Key]bool{}
	visited := map[Key]bool{}
	for _, c := range d.vs {
		k := c.ps.VS.Key()
		visited[k] = true
		if c.same && !a.draining[fam][k] {
			continue
		}
		left, err := syncVS(a.IPVS, c.ps, c.old, a.Log)
		if err != nil {
			errs = append(errs, err)
		}
		if left {
			draining[k] = true
		}
	}
	for _, vs := range d.delVS {
		if err := a.IPVS.DelService(vs); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("delete virtual server %s: %w", vs, err))
		}
	}
	// Graceful termination goes on in the virtual servers this change did
	// not touch.
	for k := range a.draining[fam] {
		own, ok := st.vs[k]
		if visited[k] || !ok {
			continue
		}
		ps := planned(own)
		if ps == nil {
			errs = append(errs, fmt.Errorf("virtual server %s: the plan kept of %s is not its policy's", k, own.f.name))
			continue
		}
		left, err := syncVS(a.IPVS, ps, &ps.VS, a.Log)
		if err != nil {
			errs = append(errs, err)
		}
		if left {
			draining[k] = true
		}
	}
	a.draining[fam] = draining
	// Addresses go last, after their virtual servers.
	if a.Iface != nil {
		for _, ip := range d.bindDel {
			if err := a.Iface.Del(ctx, ip); err != nil {
				errs = append(errs, fmt.Errorf("unbind %s: %w", ip, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (a *Applier) syncAddrs(ctx context.Context, want []netip.Addr, ipv6 bool) error {
	if err := a.Iface.Ensure(ctx); err != nil {
		return err
	}
	cur, err := a.Iface.Addrs(ctx, ipv6)
	if err != nil {
		return err
	}
	// Sets, not list scans: both lists hold every Service address.
	have := make(map[netip.Addr]bool, len(cur))
	for _, c := range cur {
		have[c] = true
	}
	need := make(map[netip.Addr]bool, len(want))
	var errs []error
	for _, w := range want {
		need[w] = true
		if !have[w] {
			if err := a.Iface.Add(ctx, w); err != nil {
				errs = append(errs, fmt.Errorf("bind %s: %w", w, err))
			}
		}
	}
	for _, c := range cur {
		if !need[c] {
			if err := a.Iface.Del(ctx, c); err != nil {
				errs = append(errs, fmt.Errorf("unbind %s: %w", c, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Cleanup removes everything the mode installs in one family: the virtual
// servers of the family, the jumps and chains, the ipsets. The device is
// removed by the caller once for both families.
func (a *Applier) Cleanup(ctx context.Context, ipv6 bool) error {
	a.jumpsChecked[b2i(ipv6)] = false
	a.draining[b2i(ipv6)] = nil
	var errs []error
	if a.IPVS != nil {
		svcs, err := a.IPVS.GetServices()
		if err != nil {
			errs = append(errs, err)
		}
		for _, vs := range svcs {
			if vs.Addr.Is6() == ipv6 {
				if err := a.IPVS.DelService(vs); err != nil && !errors.Is(err, ErrNotFound) {
					errs = append(errs, err)
				}
			}
		}
	}
	if a.IPT != nil {
		for _, j := range jumps {
			if err := a.IPT.DeleteRule(ctx, ipv6, j.table, j.from, "-m", "comment", "--comment", j.comment, "-j", j.to); err != nil {
				errs = append(errs, err)
			}
		}
		var b strings.Builder
		for _, t := range []struct {
			name   string
			chains []string
		}{{"filter", filterChains}, {"nat", natChains}} {
			var present []string
			for _, c := range t.chains {
				if ok, err := a.IPT.ChainExists(ctx, ipv6, t.name, c); err == nil && ok {
					present = append(present, c)
				}
			}
			if len(present) == 0 {
				continue
			}
			fmt.Fprintf(&b, "*%s\n", t.name)
			for _, c := range present {
				fmt.Fprintf(&b, ":%s - [0:0]\n", c)
			}
			for _, c := range present {
				fmt.Fprintf(&b, "-X %s\n", c)
			}
			b.WriteString("COMMIT\n")
		}
		if b.Len() > 0 {
			if err := a.IPT.Restore(ctx, ipv6, []byte(b.String())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if a.Sets != nil {
		cur, err := a.Sets.List(ctx)
		if err != nil {
			errs = append(errs, err)
		} else {
			var b strings.Builder
			for _, s := range Sets {
				if _, ok := cur[SetName(s.Name, ipv6)]; ok {
					fmt.Fprintf(&b, "destroy %s\n", SetName(s.Name, ipv6))
				}
			}
			if b.Len() > 0 {
				if err := a.Sets.Restore(ctx, []byte(b.String())); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
