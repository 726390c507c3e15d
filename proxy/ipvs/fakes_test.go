package ipvs

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
)

// memSets is an in-memory IPSets that interprets restore payloads.
type memSets struct {
	sets    map[string][]string
	lists   int    // List calls
	payload []byte // the last restore payload
}

func (m *memSets) List(context.Context) (map[string][]string, error) {
	m.lists++
	out := map[string][]string{}
	for k, v := range m.sets {
		out[k] = slices.Clone(v)
	}
	return out, nil
}

func (m *memSets) Restore(_ context.Context, payload []byte) error {
	m.payload = payload
	for _, line := range strings.Split(strings.TrimSpace(string(payload)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "create":
			if _, ok := m.sets[f[1]]; !ok {
				m.sets[f[1]] = []string{}
			}
		case "destroy":
			delete(m.sets, f[1])
		case "add":
			if _, ok := m.sets[f[1]]; !ok {
				return fmt.Errorf("add to missing set %s", f[1])
			}
			m.sets[f[1]] = append(m.sets[f[1]], f[2])
		case "del":
			m.sets[f[1]] = slices.DeleteFunc(m.sets[f[1]], func(e string) bool { return e == f[2] })
		default:
			return fmt.Errorf("bad ipset command %q", line)
		}
	}
	return nil
}

type memIPT struct {
	last     []byte
	restores int
	rules    map[string]bool
}

func (m *memIPT) Restore(_ context.Context, _ bool, data []byte) error {
	m.last = data
	m.restores++
	return nil
}
func (m *memIPT) EnsureRule(_ context.Context, _ bool, table, chain string, args ...string) error {
	m.rules[table+" "+chain+" "+strings.Join(args, " ")] = true
	return nil
}
func (m *memIPT) DeleteRule(_ context.Context, _ bool, table, chain string, args ...string) error {
	delete(m.rules, table+" "+chain+" "+strings.Join(args, " "))
	return nil
}
func (m *memIPT) ChainExists(context.Context, bool, string, string) (bool, error) { return true, nil }

type memIface struct {
	addrs []netip.Addr
	reads int // Addrs calls
	// local are the node's addresses on its other links
	// (ModeConfig.LocalAddrs), loopback's among them.
	local []netip.Addr
}

func (m *memIface) localAddrs(context.Context) ([]proxy.LinkAddr, error) {
	out := []proxy.LinkAddr{{Link: "lo", Addr: netip.MustParseAddr("127.0.0.1")}}
	for _, a := range m.local {
		out = append(out, proxy.LinkAddr{Link: "eth0", Addr: a})
	}
	for _, a := range m.addrs {
		out = append(out, proxy.LinkAddr{Link: defaultInterface, Addr: a})
	}
	return out, nil
}

func (m *memIface) Ensure(context.Context) error { return nil }
func (m *memIface) Addrs(_ context.Context, v6 bool) ([]netip.Addr, error) {
	m.reads++
	var out []netip.Addr
	for _, a := range m.addrs {
		if a.Is6() == v6 {
			out = append(out, a)
		}
	}
	return out, nil
}
func (m *memIface) Add(_ context.Context, a netip.Addr) error {
	m.addrs = append(m.addrs, a)
	return nil
}
func (m *memIface) Del(_ context.Context, a netip.Addr) error {
	m.addrs = slices.DeleteFunc(m.addrs, func(b netip.Addr) bool { return a == b })
	return nil
}
func (m *memIface) Delete(context.Context) error { m.addrs = nil; return nil }

type testKernel struct {
	ipvs  *Fake
	calls *countingHandle
	sets  *memSets
	ipt   *memIPT
	iface *memIface
	mode  *Mode
	fell  []string
	// synced is the state of the last sync (shallow copies), to tell
	// partial syncs what changed as the proxy's core does.
	synced *state
}

var nodeIP = netip.MustParseAddr("192.168.0.11")

func newTestKernel(t *testing.T, sched string) *testKernel {
	t.Helper()
	k := &testKernel{ipvs: NewFake(), sets: &memSets{sets: map[string][]string{}}, ipt: &memIPT{rules: map[string]bool{}}, iface: &memIface{local: []netip.Addr{nodeIP}}}
	k.calls = &countingHandle{Handle: k.ipvs, n: map[string]int{}}
	m, err := New(Config{
		ModeConfig: proxy.ModeConfig{NodeName: "node-1", NodeIPs: []netip.Addr{nodeIP}, IPv4: true, Scheduler: sched,
			ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, LocalAddrs: k.iface.localAddrs},
		Handle: k.calls, Sets: k.sets, IPT: k.ipt, Iface: k.iface, SkipSysctls: true,
		Report: func(svc proxy.ServicePortName, req, used string) {
			k.fell = append(k.fell, svc.String()+" "+req+"->"+used)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	k.mode = m
	return k
}

// state is a Service world handed to the mode.
type state struct {
	svcs proxy.ServicePortMap
	eps  proxy.EndpointsMap
}

func newState() *state { return &state{svcs: proxy.ServicePortMap{}, eps: proxy.EndpointsMap{}} }

func spn(ns, name, port string, p v1.Protocol) proxy.ServicePortName {
	return proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: port, Protocol: p}
}

func (s *state) service(sp *proxy.ServicePort, eps ...*proxy.Endpoint) {
	s.svcs[sp.Name] = sp
	s.eps[sp.Name] = eps
}

func clusterIP(name, ip string, port int, p v1.Protocol) *proxy.ServicePort {
	return &proxy.ServicePort{Name: spn("default", name, "", p), Type: v1.ServiceTypeClusterIP,
		ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)}, Port: port, Protocol: p}
}

func ep(ip string, port int, local bool) *proxy.Endpoint {
	node := "node-2"
	if local {
		node = "node-1"
	}
	return &proxy.Endpoint{Addr: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true, NodeName: node, IsLocal: local, Weight: 1}
}

func (k *testKernel) sync(t *testing.T, s *state) {
	t.Helper()
	k.syncFull(t, s, true)
}

// syncFull is a full (true) or partial sync.
func (k *testKernel) syncFull(t *testing.T, s *state, full bool) {
	t.Helper()
	if err := k.mode.Sync(context.Background(), k.request(s, full)); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// request is the SyncRequest the core would send for s, with what changed
// since the last request.
func (k *testKernel) request(s *state, full bool) *proxy.SyncRequest {
	req := &proxy.SyncRequest{Full: full, Services: s.svcs, Endpoints: s.eps, Node: proxy.NodeInfo{Name: "node-1", IPs: []netip.Addr{nodeIP}}}
	req.ServiceResult.UpdatedServices = k.changedSince(s)
	k.synced = &state{svcs: maps.Clone(s.svcs), eps: maps.Clone(s.eps)}
	return req
}

// changedSince returns the Services whose ports or endpoints differ from
// the last sync's (by pointer, as the tests replace what they change).
func (k *testKernel) changedSince(s *state) sets.Set[types.NamespacedName] {
	out := sets.New[types.NamespacedName]()
	prev := k.synced
	if prev == nil {
		prev = newState()
	}
	for _, pair := range [][2]*state{{prev, s}, {s, prev}} {
		a, b := pair[0], pair[1]
		for name, sp := range a.svcs {
			if b.svcs[name] != sp || !slices.Equal(a.eps[name], b.eps[name]) {
				out.Insert(name.NamespacedName)
			}
		}
	}
	return out
}

func (k *testKernel) dump(t *testing.T) string {
	t.Helper()
	d, err := Dump(k.ipvs)
	if err != nil {
		t.Fatal(err)
	}
	// Drop the three header lines.
	lines := strings.SplitN(d, "\n", 4)
	return lines[3]
}

// dumpLines normalizes a dump to single-spaced lines (as ipvsadm's
// columns are width-padded) for readable expectations.
func norm(s string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		prefix := ""
		if strings.HasPrefix(l, "  ->") {
			prefix = "  "
		}
		out = append(out, prefix+strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(out, "\n")
}

// countingHandle counts the calls to each Handle method and can make the
// next call of one fail.
type countingHandle struct {
	Handle
	n    map[string]int
	fail string
}

func (c *countingHandle) count(m string) error {
	c.n[m]++
	if c.fail == m {
		c.fail = ""
		return fmt.Errorf("%s: injected failure", m)
	}
	return nil
}

func (c *countingHandle) GetServices() ([]VirtualServer, error) {
	if err := c.count("GetServices"); err != nil {
		return nil, err
	}
	return c.Handle.GetServices()
}
func (c *countingHandle) AddService(vs VirtualServer) error {
	if err := c.count("AddService"); err != nil {
		return err
	}
	return c.Handle.AddService(vs)
}
func (c *countingHandle) UpdateService(vs VirtualServer) error {
	if err := c.count("UpdateService"); err != nil {
		return err
	}
	return c.Handle.UpdateService(vs)
}
func (c *countingHandle) DelService(vs VirtualServer) error {
	if err := c.count("DelService"); err != nil {
		return err
	}
	return c.Handle.DelService(vs)
}
func (c *countingHandle) GetDestinations(vs VirtualServer) ([]RealServer, error) {
	if err := c.count("GetDestinations"); err != nil {
		return nil, err
	}
	return c.Handle.GetDestinations(vs)
}
func (c *countingHandle) AddDestination(vs VirtualServer, rs RealServer) error {
	if err := c.count("AddDestination"); err != nil {
		return err
	}
	return c.Handle.AddDestination(vs, rs)
}
func (c *countingHandle) UpdateDestination(vs VirtualServer, rs RealServer) error {
	if err := c.count("UpdateDestination"); err != nil {
		return err
	}
	return c.Handle.UpdateDestination(vs, rs)
}
func (c *countingHandle) DelDestination(vs VirtualServer, rs RealServer) error {
	if err := c.count("DelDestination"); err != nil {
		return err
	}
	return c.Handle.DelDestination(vs, rs)
}

// take returns the calls counted since the last take, as "Method:n"
// sorted, and resets the counts.
func (c *countingHandle) take() string {
	var out []string
	for m, n := range c.n {
		out = append(out, fmt.Sprintf("%s:%d", m, n))
	}
	slices.Sort(out)
	clear(c.n)
	return strings.Join(out, " ")
}
