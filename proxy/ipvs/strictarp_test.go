package ipvs

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/proxy"
)

// recordingExec records the programs a mode runs and runs none.
type recordingExec struct{ runs []string }

func (r *recordingExec) Run(_ context.Context, _ []byte, name string, args ...string) ([]byte, error) {
	r.runs = append(r.runs, name+" "+strings.Join(args, " "))
	return nil, nil
}

// TestStrictARP: kube-proxy's ipvs.strictARP (--ipvs-strict-arp) makes the
// first sync set arp_ignore=1 and arp_announce=2 beside the IPVS settings;
// without it they are left alone.
func TestStrictARP(t *testing.T) {
	for _, strict := range []bool{false, true} {
		k := newTestKernel(t, "rr")
		exe := &recordingExec{}
		m, err := New(Config{
			ModeConfig: proxy.ModeConfig{Exec: exe, NodeName: "node-1", NodeIPs: []netip.Addr{nodeIP}, IPv4: true,
				LocalAddrs: k.iface.localAddrs, IPVSStrictARP: strict},
			Handle: k.calls, Sets: k.sets, IPT: k.ipt, Iface: k.iface,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Sync(context.Background(), &proxy.SyncRequest{Full: true, Services: proxy.ServicePortMap{}, Endpoints: proxy.EndpointsMap{}}); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(exe.runs, func(s string) bool { return strings.HasPrefix(s, "sysctl ") })
		if i < 0 {
			t.Fatalf("strict %v: no sysctl run in %q", strict, exe.runs)
		}
		run := exe.runs[i]
		has := strings.Contains(run, "net.ipv4.conf.all.arp_ignore=1") && strings.Contains(run, "net.ipv4.conf.all.arp_announce=2")
		if has != strict || !strings.Contains(run, "net.ipv4.vs.conntrack=1") {
			t.Errorf("strict %v: %q", strict, run)
		}
	}
}
