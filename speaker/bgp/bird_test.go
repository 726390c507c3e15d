package bgp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svcnet/svcnet/apis/metallb/validation"
	"github.com/svcnet/svcnet/internal/testbed"
)

// childEnv makes the test binary a speaker process (see runChild): gobgp
// dials from goroutines of its own, so a speaker must run as a process
// inside its node's network namespace, as svcnet's speaker does.
const childEnv = "SVCNET_BGP_TEST_SPEAKER"

// childLogDir holds the children's logs, shown when a wait fails.
var childLogDir string

func TestMain(m *testing.M) {
	if f := os.Getenv(childEnv); f != "" {
		os.Exit(runChild(f))
	}
	os.Exit(m.Run())
}

// childState is what a child speaker announces; the test rewrites the
// file and the child applies each new version.
type childState struct {
	Name   string
	Peers  []PeerConfig
	Routes []Announcement
	// HTTP, when set, is an address the child serves "<Name>\n" on.
	HTTP string
}

func runChild(path string) int {
	lf, err := os.Create(path + ".log")
	if err != nil {
		return 1
	}
	defer lf.Close()
	log := slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// MetalLB's BGP metrics, on 127.0.0.1:7472 of the child's namespace.
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	ml, err := net.Listen("tcp", metricsAddr)
	if err != nil {
		log.Error("metrics listener", "err", err)
		return 1
	}
	go http.Serve(ml, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	sessions := map[string]Session{}
	defer func() {
		for _, s := range sessions {
			metrics.Untrack(s)
			s.Close()
		}
	}()
	var last []byte
	serving := false
	for {
		data, err := os.ReadFile(path)
		if err == nil && string(data) != string(last) {
			last = data
			var st childState
			if err := json.Unmarshal(data, &st); err != nil {
				log.Error("bad state", "err", err)
				return 1
			}
			if st.HTTP != "" && !serving {
				serving = true
				l, err := net.Listen("tcp", st.HTTP)
				if err != nil {
					log.Error("listen", "err", err)
					return 1
				}
				name := st.Name
				go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, name) }))
			}
			want := map[string]bool{}
			for _, pc := range st.Peers {
				want[pc.Name] = true
				if sessions[pc.Name] == nil {
					s, err := NewGoBGPSession(ctx, pc, log)
					if err != nil {
						log.Error("session", "err", err)
						return 1
					}
					sessions[pc.Name] = s
					metrics.Track(pc, s)
				}
				if err := sessions[pc.Name].SetRoutes(RoutesFor(pc, st.Routes)); err != nil {
					log.Error("routes", "err", err)
				}
			}
			for name, s := range sessions {
				if !want[name] {
					metrics.Untrack(s)
					s.Close()
					delete(sessions, name)
				}
			}
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(100 * time.Millisecond):
		}
	}
}

const metricsAddr = "127.0.0.1:7472"

// metric is the value of the series name{peer="peer"} a child speaker
// serves, or -1 when it has none.
func metric(t *testing.T, ns *testbed.NetNS, name, peer string) float64 {
	t.Helper()
	out, err := ns.Run("curl", "-sS", "--max-time", "5", "http://"+metricsAddr+"/metrics")
	if err != nil {
		t.Fatalf("metrics: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+`{peer="`+peer+`"}`) + ` (\S+)$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", m[0], err)
	}
	return v
}

type birdRouter struct {
	ns   *testbed.NetNS
	sock string
}

func (r *birdRouter) cmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := r.ns.Run(append([]string{"birdc", "-s", r.sock}, args...)...)
	if err != nil && !strings.Contains(out, "Network not found") {
		t.Fatalf("birdc %v: %v", args, err)
	}
	return out
}

func eventually(t *testing.T, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ok, s := f()
		if ok {
			return
		}
		last = s
		time.Sleep(300 * time.Millisecond)
	}
	logs, _ := filepath.Glob(filepath.Join(childLogDir, "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		t.Logf("%s:\n%s", l, data)
	}
	t.Fatalf("%s: not within 90s; last:\n%s", what, last)
}

var viaRE = regexp.MustCompile(`via (\d+\.\d+\.\d+\.\d+)`)

// nextHops are the next hops bird shows for prefix, sorted.
func (r *birdRouter) nextHops(t *testing.T, prefix string) ([]string, string) {
	out := r.cmd(t, "show", "route", prefix)
	var hops []string
	for _, m := range viaRE.FindAllStringSubmatch(out, -1) {
		hops = append(hops, m[1])
	}
	sort.Strings(hops)
	return hops, out
}

// TestBirdPeersWithSpeakers runs Debian's bird2 as a router in its own
// namespace, peering with five speaker processes (gobgp sessions) in node
// namespaces, and a client namespace behind the router:
//   - n1..n3 (eBGP, AS 64512; n2 with a TCP MD5 password) announce
//     10.99.0.10/32: bird lists it with one next hop per node, installs an
//     ECMP route in its kernel, and the client reaches the address through
//     it; the route carries the advertisement's community;
//   - n4 (iBGP, AS 64500) announces 10.99.0.32/28 (an aggregated route)
//     with local preference 150 and a large community;
//   - n5 sends the wrong TCP MD5 password: its session stays down;
//   - a node withdrawing, then a speaker process stopping, removes its next
//     hop; the last withdrawal removes the route.
func TestBirdPeersWithSpeakers(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "bird", "birdc", "curl")
	dir := t.TempDir()
	childLogDir = dir
	r := &birdRouter{ns: testbed.NewNetNS(t, "bgp-router"), sock: filepath.Join(dir, "bird.ctl")}
	r.ns.MustRun("sysctl", "-qw", "net.ipv4.ip_forward=1")
	client := testbed.NewNetNS(t, "bgp-client")
	testbed.Link(t, r.ns, "cli", "10.20.0.1/24", client, "eth0", "10.20.0.2/24")
	client.MustRun("ip", "route", "add", "default", "via", "10.20.0.1")

	type node struct {
		name  string
		ns    *testbed.NetNS
		state string
		peer  PeerConfig
	}
	var nodes []*node
	birdConf := `router id 10.20.0.1;
protocol device {}
protocol kernel { ipv4 { export all; }; merge paths yes; }
`
	for i := 1; i <= 5; i++ {
		n := &node{name: fmt.Sprintf("n%d", i), ns: testbed.NewNetNS(t, fmt.Sprintf("bgp-n%d", i))}
		rAddr, nAddr := fmt.Sprintf("10.10.%d.1", i), fmt.Sprintf("10.10.%d.2", i)
		testbed.Link(t, r.ns, n.name, rAddr+"/24", n.ns, "eth0", nAddr+"/24")
		n.ns.MustRun("ip", "route", "add", "default", "via", rAddr)
		n.peer = PeerConfig{Name: "metallb-system/router", PeerName: "router", MyASN: 64512, PeerASN: 64500,
			Address: netip.MustParseAddr(rAddr), Port: 179, RouterID: netip.MustParseAddr(nAddr), HoldTime: 9 * time.Second, Keepalive: 3 * time.Second}
		extra := ""
		switch i {
		case 2:
			n.peer.Password = "s3cret"
			extra = `password "s3cret";`
		case 5:
			// The router expects a password the speaker does not send:
			// TCP MD5 must keep this session down.
			n.peer.Password = "wrong"
			extra = `password "s3cret";`
		case 4:
			n.peer.MyASN = 64500
			extra = "direct;" // the peer is on the link (bird treats iBGP as multihop by default)
		}
		birdConf += fmt.Sprintf("protocol bgp %s { local %s as 64500; neighbor %s as %d; hold time 9; %s ipv4 { import all; export none; }; }\n",
			n.name, rAddr, nAddr, n.peer.MyASN, extra)
		n.state = filepath.Join(dir, n.name+".json")
		nodes = append(nodes, n)
	}
	conf := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(birdConf), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ns.Run("bird", "-p", "-c", conf); err != nil {
		t.Fatalf("bird config: %v\n%s", err, birdConf)
	}
	r.ns.Start("bird", "-f", "-c", conf, "-s", r.sock, "-P", filepath.Join(dir, "bird.pid"))

	lb := netip.MustParsePrefix("10.99.0.10/32")
	std, _ := validation.ParseCommunity("64512:100")
	large, _ := validation.ParseCommunity("large:1:2:3")
	write := func(n *node, routes []Announcement) {
		st := childState{Name: n.name, Peers: []PeerConfig{n.peer}, Routes: routes, HTTP: "10.99.0.10:80"}
		data, _ := json.Marshal(st)
		tmp := n.state + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, n.state); err != nil {
			t.Fatal(err)
		}
	}
	procs := map[string]interface{ Signal(os.Signal) error }{}
	for _, n := range nodes {
		// Every node has the address, as the proxies program it.
		n.ns.MustRun("ip", "addr", "add", "10.99.0.10/32", "dev", "lo")
		routes := []Announcement{{Route: Route{Prefix: lb, Communities: []validation.Community{std}}}}
		if n.name == "n4" || n.name == "n5" {
			routes = []Announcement{{Route: Route{Prefix: netip.MustParsePrefix("10.99.0.32/28"), LocalPref: 150, Communities: []validation.Community{large}}}}
		}
		write(n, routes)
		procs[n.name] = n.ns.Start("env", childEnv+"="+n.state, os.Args[0], "-test.run=^$").Process
	}

	eventually(t, "four sessions established", func() (bool, string) {
		out, _ := r.ns.Run("birdc", "-s", r.sock, "show", "protocols") // bird may not listen yet
		return strings.Count(out, "Established") == 4, out
	})
	eventually(t, "10.99.0.10/32 with one next hop per announcing node", func() (bool, string) {
		hops, out := r.nextHops(t, "10.99.0.10/32")
		return slices.Equal(hops, []string{"10.10.1.2", "10.10.2.2", "10.10.3.2"}), out
	})
	all := r.cmd(t, "show", "route", "10.99.0.10/32", "all")
	if !strings.Contains(all, "BGP.community: (64512,100)") || !strings.Contains(all, "BGP.as_path: 64512") {
		t.Errorf("attributes of 10.99.0.10/32:\n%s", all)
	}
	eventually(t, "ECMP route in the router's kernel", func() (bool, string) {
		out, _ := r.ns.Run("ip", "route", "show", "10.99.0.10")
		return strings.Count(out, "nexthop via") == 3, out
	})
	got, err := client.Run("curl", "-sS", "--max-time", "5", "http://10.99.0.10/")
	if err != nil || !regexp.MustCompile(`^n[123]\n$`).MatchString(got) {
		t.Errorf("client through the router: %q %v", got, err)
	}
	agg := r.cmd(t, "show", "route", "10.99.0.32/28", "all")
	if !strings.Contains(agg, "via 10.10.4.2") || !strings.Contains(agg, "BGP.local_pref: 150") || !strings.Contains(agg, "BGP.large_community: (1, 2, 3)") {
		t.Errorf("aggregated iBGP route:\n%s", agg)
	}

	// n5's session, with the wrong MD5 password, never came up (the four
	// others did, over the same kind of link, in the meantime).
	if out := r.cmd(t, "show", "protocols", "n5"); strings.Contains(out, "Established") {
		t.Errorf("session with a wrong TCP MD5 password established:\n%s", out)
	}

	// MetalLB's BGP metrics, as each speaker serves them: n1's session is
	// up with its one prefix advertised; n5's is down, its prefix pending.
	n1Peer, n5Peer := "10.10.1.1:179", "10.10.5.1:179"
	eventually(t, "n1's metrics: up, 1 prefix announced, UPDATEs sent", func() (bool, string) {
		up := metric(t, nodes[0].ns, "metallb_bgp_session_up", n1Peer)
		ann := metric(t, nodes[0].ns, "metallb_bgp_announced_prefixes_total", n1Peer)
		pend := metric(t, nodes[0].ns, "metallb_bgp_pending_prefixes_total", n1Peer)
		upd := metric(t, nodes[0].ns, "metallb_bgp_updates_total", n1Peer)
		return up == 1 && ann == 1 && pend == 1 && upd >= 1, fmt.Sprintf("up %v announced %v pending %v updates %v", up, ann, pend, upd)
	})
	n1Updates := metric(t, nodes[0].ns, "metallb_bgp_updates_total", n1Peer)
	for name, want := range map[string]float64{"metallb_bgp_session_up": 0, "metallb_bgp_announced_prefixes_total": 0,
		"metallb_bgp_pending_prefixes_total": 1, "metallb_bgp_updates_total": 0} {
		if got := metric(t, nodes[4].ns, name, n5Peer); got != want {
			t.Errorf("n5 (session down): %s = %v, want %v", name, got, want)
		}
	}

	// n1 withdraws (its Service lost its local endpoints).
	write(nodes[0], nil)
	eventually(t, "n1's next hop withdrawn", func() (bool, string) {
		hops, out := r.nextHops(t, "10.99.0.10/32")
		return slices.Equal(hops, []string{"10.10.2.2", "10.10.3.2"}), out
	})
	eventually(t, "n1's metrics after the withdrawal: nothing announced or pending, one more UPDATE", func() (bool, string) {
		ann := metric(t, nodes[0].ns, "metallb_bgp_announced_prefixes_total", n1Peer)
		pend := metric(t, nodes[0].ns, "metallb_bgp_pending_prefixes_total", n1Peer)
		upd := metric(t, nodes[0].ns, "metallb_bgp_updates_total", n1Peer)
		return ann == 0 && pend == 0 && upd > n1Updates, fmt.Sprintf("announced %v pending %v updates %v (before %v)", ann, pend, upd, n1Updates)
	})
	// n3's speaker stops: it withdraws and closes its session.
	_ = procs["n3"].Signal(syscall.SIGTERM)
	eventually(t, "n3's next hop gone", func() (bool, string) {
		hops, out := r.nextHops(t, "10.99.0.10/32")
		return slices.Equal(hops, []string{"10.10.2.2"}), out
	})
	write(nodes[1], nil)
	eventually(t, "route withdrawn everywhere", func() (bool, string) {
		out := r.cmd(t, "show", "route", "10.99.0.10/32")
		return !strings.Contains(out, "10.99.0.10/32"), out
	})
	eventually(t, "kernel route gone", func() (bool, string) {
		out, _ := r.ns.Run("ip", "route", "show", "10.99.0.10")
		return strings.TrimSpace(out) == "", out
	})
}
