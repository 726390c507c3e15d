package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	kpipvs "k8s.io/kubernetes/pkg/proxy/ipvs"
	kpipset "k8s.io/kubernetes/pkg/proxy/ipvs/ipset"
	ipsettest "k8s.io/kubernetes/pkg/proxy/ipvs/ipset/testing"
	netlinktest "k8s.io/kubernetes/pkg/proxy/ipvs/testing"
	utilipvs "k8s.io/kubernetes/pkg/proxy/ipvs/util"
	ipvstest "k8s.io/kubernetes/pkg/proxy/ipvs/util/testing"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"

	"github.com/svcnet/svcnet/proxy/iptables"
	"github.com/svcnet/svcnet/proxy/ipvs"
)

// IPVS mode's output is four sections, each a list of lines:
//
//	*ipvs      "TCP 172.30.1.1:80 rr flags=0x0" and, per real server,
//	           "TCP 172.30.1.1:80 -> 10.0.1.1:8080 weight=1"
//	           (persistent virtual servers add "timeout=N")
//	*ipset     "KUBE-CLUSTER-IP hash:ip,port" per set, "KUBE-CLUSTER-IP 172.30.1.1,tcp:80" per entry
//	*bind      the addresses on kube-ipvs0
//	*iptables  iptables-save text of the filter and nat tables
//
// The first three are compared as multisets (kube-proxy fills them in Go
// map order), the last as in iptables mode.

var (
	ipvsMakers   makers
	ipsetTmpl    map[string]*kpipvs.IPSet // ipsetList of the template proxier (IPv4 names)
	ipvsTmplOnce bool
)

// initIPVS builds one IPVS proxier through kube-proxy's public NewProxier,
// on fakes (iptables, IPVS, ipset, sysctl), for its tracker constructors
// and its list of ipsets (ipsetInfo is unexported). It is never synced.
func initIPVS() error {
	if ipvsTmplOnce {
		return nil
	}
	p, err := kpipvs.NewProxier(context.Background(), kpConfig(), v1.IPv4Protocol, iptablestest.NewFake(), ipvstest.NewFake(),
		ipsettest.NewFake("7.17"), sysctltest.NewFake(), proxyutil.NewNoOpLocalDetector(), "template",
		net.ParseIP("127.0.0.1"), nil, nil, false)
	if err != nil {
		return fmt.Errorf("kube-proxy ipvs NewProxier: %w", err)
	}
	ipvsMakers = makersOf(p)
	ipsetTmpl = get(p, "ipsetList").Interface().(map[string]*kpipvs.IPSet)
	ipvsTmplOnce = true
	return nil
}

// ipvsScheduler is --ipvs-scheduler for a scenario ("" = the default, rr).
// It is drawn from the scenario id, not from the scenario's random source,
// so that the other modes' scenarios stay what they were.
func ipvsScheduler(sc *Scenario) string {
	return []string{"", "", "rr", "lc", "wrr", "sh", "mh"}[sc.ID%7]
}

func ipvsVSLine(proto string, addr net.IP, port uint16, sched string, flags uint32, persistent bool, timeout uint32) string {
	s := fmt.Sprintf("%s %s %s flags=%#x", strings.ToUpper(proto), net.JoinHostPort(addr.String(), fmt.Sprint(port)), sched, flags)
	if persistent {
		s += fmt.Sprintf(" timeout=%d", timeout)
	}
	return s
}

func ipvsRSLine(vs string, addr net.IP, port uint16, weight int) string {
	// vs is the virtual server's line; its first two words name it.
	w := strings.Fields(vs)
	return fmt.Sprintf("%s %s -> %s weight=%d", w[0], w[1], net.JoinHostPort(addr.String(), fmt.Sprint(port)), weight)
}

func ipvsSections(ipvsLines, ipsetLines, bind []string, ipt string) string {
	var b strings.Builder
	for _, sec := range []struct {
		name  string
		lines []string
	}{{"*ipvs", ipvsLines}, {"*ipset", ipsetLines}, {"*bind", bind}} {
		sort.Strings(sec.lines)
		b.WriteString(sec.name + "\n")
		for _, l := range sec.lines {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString("*iptables\n" + ipt)
	return b.String()
}

// kubeProxyIPVS runs kube-proxy's IPVS proxier for one family with its
// fakes and returns the four sections.
func kubeProxyIPVS(sc *Scenario, fam v1.IPFamily) (string, error) {
	if err := initIPVS(); err != nil {
		return "", err
	}
	v6 := fam == v1.IPv6Protocol
	var ipt *iptablestest.FakeIPTables
	if v6 {
		ipt = iptablestest.NewIPv6Fake()
	} else {
		ipt = iptablestest.NewFake()
	}
	ipvsF := ipvstest.NewFake()
	ipsetF := ipsettest.NewFake("7.17")
	nl := netlinktest.NewFakeNetlinkHandle(v6)
	var local []string
	for _, a := range addrsOf(sc.NodeIPs, fam) {
		local = append(local, a.String())
	}
	if err := nl.SetLocalAddresses("eth0", local...); err != nil {
		return "", err
	}
	if err := nl.SetLocalAddresses("lo", "127.0.0.1", "::1"); err != nil {
		return "", err
	}
	ipsetList := map[string]*kpipvs.IPSet{}
	for name, s := range ipsetTmpl {
		ipsetList[name] = kpipvs.NewIPSet(ipsetF, name, s.SetType, v6, s.Comment)
	}
	p := &kpipvs.Proxier{}
	sched := ipvsScheduler(sc)
	if sched == "" {
		sched = "rr"
	}
	setBase(p, ipvsMakers, sc, fam)
	set(p, "initialSync", true)
	set(p, "minSyncPeriod", time.Hour)
	set(p, "iptables", utiliptables.Interface(ipt))
	set(p, "ipvs", utilipvs.Interface(ipvsF))
	set(p, "ipset", kpipset.Interface(ipsetF))
	set(p, "ipvsScheduler", sched)
	set(p, "iptablesData", bytes.NewBuffer(nil))
	set(p, "filterChainsData", bytes.NewBuffer(nil))
	set(p, "natChains", proxyutil.NewLineBuffer())
	set(p, "natRules", proxyutil.NewLineBuffer())
	set(p, "filterChains", proxyutil.NewLineBuffer())
	set(p, "filterRules", proxyutil.NewLineBuffer())
	set(p, "netlinkHandle", kpipvs.NetLinkHandle(nl))
	set(p, "ipsetList", ipsetList)
	set(p, "nodePortAddresses", proxyutil.NewNodePortAddresses(fam, sc.NodePortAddresses))
	set(p, "gracefuldeleteManager", kpipvs.NewGracefulTerminationManager(ipvsF))
	feed(p, sc)

	var ipvsLines []string
	vss, err := ipvsF.GetVirtualServers()
	if err != nil {
		return "", err
	}
	for _, vs := range vss {
		l := ipvsVSLine(vs.Protocol, vs.Address, vs.Port, vs.Scheduler, uint32(vs.Flags),
			vs.Flags&utilipvs.FlagPersistent != 0, vs.Timeout)
		ipvsLines = append(ipvsLines, l)
		rss, err := ipvsF.GetRealServers(vs)
		if err != nil {
			return "", err
		}
		for _, rs := range rss {
			ipvsLines = append(ipvsLines, ipvsRSLine(l, rs.Address, rs.Port, rs.Weight))
		}
	}
	var ipsetLines []string
	for name, s := range ipsetF.Sets {
		ipsetLines = append(ipsetLines, name+" "+string(s.SetType))
		for _, e := range ipsetF.Entries[name].List() {
			ipsetLines = append(ipsetLines, name+" "+e)
		}
	}
	bind, err := nl.ListBindAddress("kube-ipvs0")
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for _, t := range []utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		var b bytes.Buffer
		if err := ipt.SaveInto(t, &b); err != nil {
			return "", err
		}
		out.Write(b.Bytes())
	}
	return ipvsSections(ipvsLines, ipsetLines, slices.Clone(bind), out.String()), nil
}

// memSets is svcnet's IPSets over memory: it interprets the restore
// payloads IPVS mode writes.
type memSets struct {
	types   map[string]string
	entries map[string]map[string]bool
}

func (m *memSets) List(context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	for n := range m.types {
		out[n] = []string{}
		for e := range m.entries[n] {
			out[n] = append(out[n], e)
		}
	}
	return out, nil
}

func (m *memSets) Restore(_ context.Context, payload []byte) error {
	for _, line := range strings.Split(strings.TrimSpace(string(payload)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			return fmt.Errorf("ipset restore: bad line %q", line)
		}
		switch f[0] {
		case "create":
			if _, ok := m.types[f[1]]; !ok {
				m.types[f[1]] = f[2]
				m.entries[f[1]] = map[string]bool{}
			}
		case "add", "del":
			if _, ok := m.types[f[1]]; !ok {
				return fmt.Errorf("ipset restore: %s on missing set %s", f[0], f[1])
			}
			if f[0] == "add" {
				m.entries[f[1]][f[2]] = true
			} else {
				delete(m.entries[f[1]], f[2])
			}
		default:
			return fmt.Errorf("ipset restore: bad command %q", line)
		}
	}
	return nil
}

// memIface is kube-ipvs0 in memory.
type memIface struct{ addrs map[netip.Addr]bool }

func (m *memIface) Ensure(context.Context) error { return nil }
func (m *memIface) Addrs(_ context.Context, v6 bool) ([]netip.Addr, error) {
	var out []netip.Addr
	for a := range m.addrs {
		if a.Is6() == v6 {
			out = append(out, a)
		}
	}
	return out, nil
}
func (m *memIface) Add(_ context.Context, a netip.Addr) error { m.addrs[a] = true; return nil }
func (m *memIface) Del(_ context.Context, a netip.Addr) error { delete(m.addrs, a); return nil }
func (m *memIface) Delete(context.Context) error              { clear(m.addrs); return nil }

// svcnetIPVS runs svcnet's IPVS mode for one family on its fakes and
// returns the four sections.
func svcnetIPVS(sc *Scenario, fam v1.IPFamily) (string, error) {
	v6 := fam == v1.IPv6Protocol
	h := ipvs.NewFake()
	ms := &memSets{types: map[string]string{}, entries: map[string]map[string]bool{}}
	ipt := iptables.NewFake()
	iface := &memIface{addrs: map[netip.Addr]bool{}}
	cfg := svcnetModeConfig(sc, fam)
	cfg.Scheduler = ipvsScheduler(sc)
	m, err := ipvs.New(ipvs.Config{ModeConfig: cfg, Handle: h, Sets: ms, IPT: ipt, Iface: iface, SkipSysctls: true})
	if err != nil {
		return "", err
	}
	if err := m.Sync(context.Background(), svcnetRequest(sc)); err != nil {
		return "", err
	}
	var ipvsLines []string
	vss, err := h.GetServices()
	if err != nil {
		return "", err
	}
	for _, vs := range vss {
		var flags uint32
		if vs.Persistent {
			flags |= ipvs.FlagPersistent
		}
		if vs.HashPort {
			flags |= ipvs.FlagSchedPort
		}
		l := ipvsVSLine(string(vs.Protocol), net.IP(vs.Addr.AsSlice()), vs.Port, vs.Scheduler, flags, vs.Persistent, vs.Timeout)
		ipvsLines = append(ipvsLines, l)
		rss, err := h.GetDestinations(vs)
		if err != nil {
			return "", err
		}
		for _, rs := range rss {
			ipvsLines = append(ipvsLines, ipvsRSLine(l, net.IP(rs.Addr.AsSlice()), rs.Port, rs.Weight))
		}
	}
	var ipsetLines []string
	for n, t := range ms.types {
		ipsetLines = append(ipsetLines, n+" "+t)
		for e := range ms.entries[n] {
			ipsetLines = append(ipsetLines, n+" "+e)
		}
	}
	var bind []string
	for a := range iface.addrs {
		bind = append(bind, a.String())
	}
	return ipvsSections(ipvsLines, ipsetLines, bind, ipt.Dump(v6)), nil
}

// diffIPVS compares two outputs of the IPVS runners.
func diffIPVS(kp, sv string) []string {
	a, b := splitSections(kp), splitSections(sv)
	var out []string
	for _, sec := range []string{"*ipvs", "*ipset", "*bind"} {
		onlyA, onlyB := multisetDiff(a[sec], b[sec])
		for _, l := range onlyA {
			out = append(out, "- "+sec[1:]+" "+l)
		}
		for _, l := range onlyB {
			out = append(out, "+ "+sec[1:]+" "+l)
		}
	}
	return append(out, diffIPTables(strings.Join(a["*iptables"], "\n"), strings.Join(b["*iptables"], "\n"))...)
}

func splitSections(s string) map[string][]string {
	out := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(s, "\n") {
		switch l {
		case "*ipvs", "*ipset", "*bind", "*iptables":
			cur = l
			continue
		}
		if l != "" || cur == "*iptables" {
			out[cur] = append(out[cur], l)
		}
	}
	return out
}
