package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	gnft "github.com/google/nftables"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
)

// schedulerWorld has one Service per scheduler plus wrr with affinity and
// a firewall with several ranges (anonymous interval sets).
func schedulerWorld() *world {
	w := overallWorld()
	for i, s := range []string{"rr", "wrr", "sh", "dh", "mh", "lc"} {
		sched := s
		ip := netip.AddrFrom4([4]byte{172, 30, 1, byte(i + 1)}).String()
		e1, e2 := ep("10.180.1.1", 80, false), ep("10.180.2.1", 80, false)
		e1.Weight = 3
		w.add(service("sched", sched, ip, func(s *v1.Service) {
			s.Annotations = map[string]string{"service.kubernetes.io/ipvs-scheduler": sched}
		}), e1, e2)
	}
	e1, e2 := ep("10.180.1.1", 80, false), ep("10.180.2.1", 80, true)
	e1.Weight = 3
	w.add(service("sched", "wrr-affinity", "172.30.1.99", func(s *v1.Service) {
		s.Annotations = map[string]string{"service.kubernetes.io/ipvs-scheduler": "wrr"}
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		t := int32(60)
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &t}}
	}), e1, e2)
	w.add(service("fw", "multi", "172.30.2.1", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 3100
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "5.6.7.9"}}
		s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/25", "198.51.100.0/24", "192.168.0.0/16"}
	}), ep("10.180.3.1", 80, false))
	return w
}

// nftList lists our table in ns, without the comments of the table and of
// reject-chain: google/nftables v0.3.0 cannot write table or chain
// comments, so the netlink path leaves them out (see docs/proxy-modes.md).
func nftList(t *testing.T, ns string, fam knftables.Family) string {
	t.Helper()
	// The namespace holds only the proxy's tables (with --nftables-shards,
	// more than one).
	out, err := proxy.OSExecutor{NetNS: ns}.Run(context.Background(), nil, "nft", "list", "ruleset", string(fam))
	if err != nil {
		t.Fatal(err)
	}
	s := regexp.MustCompile(`(?m)^\s*comment "(rules for kube-proxy|helper for @no-endpoint-services / @no-endpoint-nodeports|Service dispatch for kube-proxy \(svcnet --nftables-shards\))"\n`).ReplaceAllString(string(out), "")
	return s
}

// TestNetlinkMatchesNFT programs the same plans through netlink in one
// namespace and as nft scripts in another, and compares what the kernel
// holds (`nft list table`), after a full sync and after partial ones: the
// rule compiler must produce what nft itself does from the same text. It
// runs with kube-proxy's layout and with --nftables-endpoint-choice=rules
// and shared.
func TestNetlinkMatchesNFT(t *testing.T) {
	testbed.RequireCommand(t, "nft")
	for _, choice := range []string{"map", "rules", "shared", "shared-shards"} {
		t.Run(choice, func(t *testing.T) { netlinkMatchesNFT(t, choice) })
	}
	// A table written from nothing in parts (applyTx; netlink encodes the
	// next part while the kernel commits one): here a part per Service.
	t.Run("parts", func(t *testing.T) {
		defer func(sets, parts, minOps int) {
			freshTableAnonSets, freshTableParts, freshTableMinOps = sets, parts, minOps
		}(freshTableAnonSets, freshTableParts, freshTableMinOps)
		freshTableAnonSets, freshTableParts, freshTableMinOps = 1, 1000, 1
		if n := len(freshParts(func() *txn {
			pl := &txn{}
			for i := 0; i < 5; i++ {
				pl.ports = append(pl.ports, len(pl.ops))
				pl.add(&knftables.Rule{Chain: "c", Rule: "numgen random mod 2 vmap { 0 : goto a, 1 : goto b }"})
			}
			return pl
		}())); n != 5 {
			t.Fatalf("5 Services with a map each: %d parts, want 5", n)
		}
		netlinkMatchesNFT(t, "map")
	})
}

func netlinkMatchesNFT(t *testing.T, choice string) {
	ctx := context.Background()
	for _, v6 := range []bool{false, true} {
		nsText, nsNL := testbed.NewNetNS(t, "nfttext"), testbed.NewNetNS(t, "nftnl")
		cfg := testConfig()
		fam := knftables.IPv4Family
		w := schedulerWorld()
		if v6 {
			fam = knftables.IPv6Family
			cfg = Config{IPv6: true, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10::/64"), netip.MustParsePrefix("fd00:11::/64")},
				NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("2001:db8::/64")}}
			w = newWorld()
			w.add(&v1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "dual"},
				Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ClusterIP: "fd00:10:96::41", ClusterIPs: []string{"fd00:10:96::41"},
					Ports:                    []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053}},
					LoadBalancerSourceRanges: []string{"2001:db8:1::/48", "2001:db8:2::/56"}},
				Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "2001:db8:99::1"}}}},
			}, ep("fd00:10::1", 53, true), ep("fd00:10::2", 53, false))
		}
		// A NodePort Service of three protocols (direct ClusterIP and
		// NodePort choices in the shared layout), whose endpoint count
		// changes below.
		cip, epIP := "172.30.0.77", func(i int) string { return fmt.Sprintf("10.180.1.%d", i) }
		if v6 {
			cip, epIP = "fd00:10:96::77", func(i int) string { return fmt.Sprintf("fd00:10::1:%d", i) }
		}
		w.add(&v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "direct"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ClusterIP: cip, ClusterIPs: []string{cip},
				Ports: []v1.ServicePort{{Name: "tcp", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30777},
					{Name: "udp", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30777}, {Name: "sctp", Port: 9000, Protocol: v1.ProtocolSCTP, NodePort: 30778}}},
		}, ep(epIP(1), 8080, false), ep(epIP(2), 8080, true), ep(epIP(3), 8080, false))
		cfg.ChoiceRules, cfg.ChoiceShared = choice == "rules", strings.HasPrefix(choice, "shared")
		if strings.HasSuffix(choice, "-shards") {
			cfg.Shards = 3
		}
		text := NewProxier(cfg, NewExecNFT(fam, TableName, proxy.OSExecutor{NetNS: nsText.Name}))
		nl := NewNetlinkProxier(cfg, nsNL.Name, nil)
		req := func(full bool, changed ...string) *proxy.SyncRequest {
			r := w.request(full, changed...)
			r.Node.IPs = append(r.Node.IPs, netip.MustParseAddr("2001:db8::1"))
			return r
		}
		// One clock for both, so that they retire stale chains (a second
		// after they became unreferenced) at the same syncs however slowly
		// the machine runs them.
		clock := time.Unix(1_700_000_000, 0)
		text.now = func() time.Time { return clock }
		nl.now = text.now
		step := func(what string, r *proxy.SyncRequest) {
			t.Helper()
			clock = clock.Add(2 * time.Second)
			if err := text.Sync(ctx, r); err != nil {
				t.Fatalf("%s: nft: %v", what, err)
			}
			if err := nl.Sync(ctx, r); err != nil {
				t.Fatalf("%s: netlink: %v", what, err)
			}
			if a, b := nftList(t, nsText.Name, fam), nftList(t, nsNL.Name, fam); a != b {
				t.Fatalf("v6=%v %s: netlink and nft differ:\n%s", v6, what, lineDiff(a, b))
			}
		}
		step("full sync", req(true))
		// Partial: change endpoints of one Service, delete another.
		for n := range w.svcs {
			switch n.Name {
			case "svc1", "dual":
				w.eps[n] = append(w.eps[n][:1:1], ep(map[bool]string{false: "10.180.0.9", true: "fd00:10::9"}[v6], int(w.svcs[n].Port), true))
			case "svc6", "mh":
				delete(w.svcs, n)
			case "direct":
				w.eps[n] = w.eps[n][:2:2]
			}
		}
		step("partial sync", req(false, "ns1/svc1", "ns6/svc6", "sched/mh", "ns1/dual", "ns1/direct"))
		// The second full sync replaces a table that exists: with the
		// parts subtest's thresholds in parts (replaceParts), each of which
		// must leave every Service reachable as before: the old dispatch
		// elements stay until the last part and lead to chains that are
		// there and not empty.
		var before []string
		if a, ok := nl.apply.(*netlinkApplier); ok && choice == "map" && freshTableAnonSets == 1 {
			before = dispatchElements(t, nsNL.Name, fam)
			parts := 0
			a.afterPart = func() {
				parts++
				table := nftList(t, nsNL.Name, fam)
				now := dispatchElements(t, nsNL.Name, fam)
				for _, e := range before {
					if !slices.Contains(now, e) {
						t.Errorf("v6=%v after part %d: dispatch element %q is gone", v6, parts, e)
					}
				}
				for _, e := range now {
					chain := e[strings.LastIndex(e, " ")+1:]
					if m := regexp.MustCompile(`(?s)chain ` + regexp.QuoteMeta(chain) + ` \{\n(.*?)\n\t\}`).FindStringSubmatch(table); m == nil || strings.TrimSpace(m[1]) == "" {
						t.Errorf("v6=%v after part %d: %q leads to a missing or empty chain", v6, parts, e)
					}
				}
			}
			defer func() {
				a.afterPart = nil
				if parts < 3 {
					t.Errorf("v6=%v: the second full sync came in %d parts, want several", v6, parts)
				}
			}()
		}
		step("second full sync", req(true))
		_ = before
	}
}

// dispatchElements lists the elements of the service-ips and
// service-nodeports maps ("key : goto chain").
func dispatchElements(t *testing.T, ns string, fam knftables.Family) []string {
	t.Helper()
	var out []string
	for _, m := range []string{serviceIPsMap, serviceNodePortsMap} {
		list, err := proxy.OSExecutor{NetNS: ns}.Run(context.Background(), nil, "nft", "list", "map", string(fam), TableName, m)
		if err != nil {
			t.Fatal(err)
		}
		body := string(list)
		if i := strings.Index(body, "elements = {"); i >= 0 {
			body = body[i+len("elements = {"):]
			body = body[:strings.Index(body, "}")]
			for _, e := range strings.Split(body, ",") {
				if e = strings.Join(strings.Fields(e), " "); e != "" {
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// lineDiff lists the lines only one side has (-nft, +netlink).
func lineDiff(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if count[l] > 0 {
			out = append(out, "-"+l)
			count[l]--
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if count[l] < 0 {
			out = append(out, "+"+l)
			count[l]++
		}
	}
	if len(out) == 0 {
		return "(same lines, different order)\n" + a + "\n----\n" + b
	}
	return strings.Join(out, "\n")
}

// Transactions share one socket (socket); a refused one closes
// it, and the next opens a fresh one and succeeds.
func TestLastingConnectionAfterError(t *testing.T) {
	testbed.RequireCommand(t, "nft")
	ctx := context.Background()
	ns := testbed.NewNetNS(t, "nftlast")
	p := NewNetlinkProxier(testConfig(), ns.Name, nil)
	w := overallWorld()
	if err := p.Sync(ctx, w.request(true)); err != nil {
		t.Fatal(err)
	}
	a := p.apply.(*netlinkApplier)
	// Deleting a chain that does not exist: the kernel refuses the batch.
	bad := &txn{}
	bad.delete(&knftables.Chain{Name: "no-such-chain"})
	err := a.apply(ctx, bad.ops)
	if err == nil {
		t.Fatal("deleting a missing chain succeeded")
	}
	// The kernel's answer names the message and its errno.
	if !isNotFound(err) || !strings.Contains(err.Error(), "message 1:") {
		t.Errorf("error %q: want ENOENT of message 1", err)
	}
	t.Logf("refused: %v", err)
	if a.sock != nil {
		t.Error("the connection of a failed batch is kept")
	}
	for i := 0; i < 3; i++ {
		if err := p.Sync(ctx, w.request(false, "ns1/svc1")); err != nil {
			t.Fatalf("partial sync %d after a refused batch: %v", i, err)
		}
	}
	if a.sock == nil {
		t.Error("partial syncs did not reuse a connection")
	}
	out, err := exec.Command("ip", "netns", "exec", ns.Name, "nft", "list", "table", "ip", TableName).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "service-") {
		t.Fatalf("table after the syncs: %v\n%s", err, out)
	}
}

// Element messages of an anonymous set name it by transaction ID only
// (the kernel's name lookup walks every set); those of a named set keep
// the name, which may be all the kernel knows it by.
func TestElementsByID(t *testing.T) {
	a := newNetlinkApplier(false, "")
	enc, err := gnft.New(gnft.WithTestDial(a.capture))
	if err != nil {
		t.Fatal(err)
	}
	tbl := a.table("")
	anon := &gnft.Set{Table: tbl, Name: "__map1", ID: 1<<31 | 1, Anonymous: true, Constant: true, KeyType: gnft.TypeInetService}
	named := &gnft.Set{Table: tbl, Name: "service-ips", ID: 7, KeyType: gnft.TypeInetService}
	elems := []gnft.SetElement{{Key: []byte{0, 80}}}
	for _, s := range []*gnft.Set{anon, named} {
		if err := enc.AddSet(s, elems); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	msgs := a.captured
	elementsByID(msgs)
	var named0, anon0 int
	for _, m := range msgs {
		if m.Header.Type != nftMsg(unix.NFT_MSG_NEWSETELEM) {
			continue
		}
		id, _ := attrU32(m.Data, unix.NFTA_SET_ELEM_LIST_SET_ID)
		hasName := false
		attrs(m.Data, func(typ uint16, _, _ []byte) { hasName = hasName || typ == unix.NFTA_SET_ELEM_LIST_SET })
		switch id {
		case anon.ID:
			anon0++
			if hasName {
				t.Error("the anonymous set's elements still name it")
			}
		case named.ID:
			named0++
			if !hasName {
				t.Error("the named set's elements lost its name")
			}
		}
	}
	if anon0 != 1 || named0 != 1 {
		t.Errorf("element messages: anonymous %d, named %d; want 1 and 1", anon0, named0)
	}
}

// A refused part ends applyParts with its error; the parts after it are
// not applied, and the applier stays usable.
func TestApplyPartsStopsAtError(t *testing.T) {
	testbed.RequireCommand(t, "nft")
	ctx := context.Background()
	ns := testbed.NewNetNS(t, "nftparts")
	a := newNetlinkApplier(false, ns.Name)
	var first, bad, after txn
	first.add(&knftables.Table{})
	first.add(&knftables.Chain{Name: "one"})
	bad.delete(&knftables.Chain{Name: "no-such-chain"})
	after.add(&knftables.Chain{Name: "three"})
	err := a.applyParts(ctx, [][]op{first.ops, bad.ops, after.ops})
	if !isNotFound(err) {
		t.Fatalf("applyParts: %v, want the refused part's ENOENT", err)
	}
	chains, _, err := a.list(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(chains) != 1 || chains[0] != (tobj{"", "one"}) {
		t.Errorf("chains %v, want only the first part's", chains)
	}
	if err := a.apply(ctx, after.ops); err != nil {
		t.Fatalf("apply after a refused part: %v", err)
	}
}
