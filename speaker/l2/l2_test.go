package l2

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
)

// lab is a speaker namespace and a client namespace on one link: the
// responder runs inside the speaker namespace, and the client asks with the
// real arping (iputils) and, for NDP, its own kernel (ping, then ip -6
// neigh). ndisc6 is not used: it only accepts advertisements sent from the
// target address itself, and a responder, like MetalLB's, sends from its
// link-local address (the LoadBalancer address is not assigned to it).
type lab struct {
	spk, client *testbed.NetNS
	mac         string // the speaker's eth0
	r           *Responder
}

func newLab(t *testing.T) *lab { return newLabWith(t, nil) }

// newLabWith is newLab with a responder counting into m (may be nil).
func newLabWith(t *testing.T, m *Metrics) *lab {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "arping", "ping")
	spk := testbed.NewNetNS(t, "l2-speaker")
	client := testbed.NewNetNS(t, "l2-client")
	testbed.Link(t, spk, "eth0", "10.0.0.2/24", client, "eth0", "10.0.0.1/24")
	spk.MustRun("ip", "-6", "addr", "add", "fd00::2/64", "dev", "eth0", "nodad")
	client.MustRun("ip", "-6", "addr", "add", "fd00::1/64", "dev", "eth0", "nodad")
	// Link-local addresses come with DAD; NDP needs one on both sides.
	for _, ns := range []*testbed.NetNS{spk, client} {
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(ns.MustRun("ip", "-6", "addr", "show", "dev", "eth0", "scope", "link"), "fe80") ||
			strings.Contains(ns.MustRun("ip", "-6", "addr", "show", "dev", "eth0"), "tentative") {
			if time.Now().After(deadline) {
				t.Fatalf("no usable link-local address in %s", ns.Name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	mac := strings.TrimSpace(spk.MustRun("cat", "/sys/class/net/eth0/address"))
	r := New(Options{ScanInterval: 500 * time.Millisecond, ReannounceInterval: time.Hour, Metrics: m})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- spk.Do(func() error { return r.Run(ctx) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("responder: %v", err)
		}
	})
	l := &lab{spk: spk, client: client, mac: mac, r: r}
	l.eventually(t, "responders on eth0", func() bool {
		ifs := r.Interfaces()
		return len(ifs) == 1 && ifs[0] == "eth0"
	})
	return l
}

func (l *lab) eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after 20s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var macRE = regexp.MustCompile(`(?i)\[([0-9a-f:]{17})\]`)

// arping returns the distinct MACs answering for ip (iputils arping prints
// "Unicast reply from IP [MAC]").
func (l *lab) arping(ip string) (map[string]bool, string) {
	out, _ := l.client.Run("arping", "-c", "2", "-w", "3", "-I", "eth0", ip)
	macs := map[string]bool{}
	for _, m := range macRE.FindAllStringSubmatch(out, -1) {
		macs[strings.ToLower(m[1])] = true
	}
	return macs, out
}

// resolve6 makes the client's kernel solicit ip (one ping, whose answer
// nobody gives: the address is not assigned anywhere) and returns the
// link-layer address it learnt, or "" when the solicitation failed.
func (l *lab) resolve6(t *testing.T, ip string) string {
	t.Helper()
	_, _ = l.client.Run("ping", "-c", "1", "-W", "1", ip)
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := l.client.MustRun("ip", "-6", "neigh", "show", ip, "dev", "eth0")
		if m := regexp.MustCompile(`lladdr (\S+) (REACHABLE|STALE|DELAY|PROBE)`).FindStringSubmatch(out); m != nil {
			return strings.ToLower(m[1])
		}
		if strings.Contains(out, "FAILED") || strings.TrimSpace(out) == "" || time.Now().After(deadline) {
			return ""
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestARPAndNDPAnswers(t *testing.T) {
	l := newLab(t)
	if macs, out := l.arping("10.0.0.100"); len(macs) != 0 {
		t.Fatalf("answered before announcing:\n%s", out)
	}
	l.r.SetBalancer("default/web", []netip.Addr{netip.MustParseAddr("10.0.0.100"), netip.MustParseAddr("fd00::100")}, nil)
	macs, out := l.arping("10.0.0.100")
	if len(macs) != 1 || !macs[l.mac] {
		t.Fatalf("arping 10.0.0.100: want exactly %s, got %v:\n%s", l.mac, macs, out)
	}
	// ndisc6 sends a real neighbor solicitation to the solicited-node
	// group and prints the target link-layer address of the answer.
	// The client's kernel resolves the address with a real neighbor
	// solicitation (triggered by a ping) and must accept the answer.
	if mac := l.resolve6(t, "fd00::100"); mac != l.mac {
		t.Fatalf("fd00::100 resolved to %q, want %s", mac, l.mac)
	}
	// An address that is not announced gets no answer.
	if mac := l.resolve6(t, "fd00::101"); mac != "" {
		t.Fatalf("fd00::101 resolved to %s; nobody announces it", mac)
	}
	// Withdrawn: silence on both.
	l.r.DeleteBalancer("default/web")
	if macs, out := l.arping("10.0.0.100"); len(macs) != 0 {
		t.Fatalf("answered after DeleteBalancer:\n%s", out)
	}
	l.client.MustRun("ip", "-6", "neigh", "flush", "dev", "eth0")
	if mac := l.resolve6(t, "fd00::100"); mac != "" {
		t.Fatalf("fd00::100 resolved to %s after DeleteBalancer", mac)
	}
}

func TestInterfacesRestrictAnswers(t *testing.T) {
	l := newLab(t)
	l.r.SetBalancer("default/web", []netip.Addr{netip.MustParseAddr("10.0.0.100")}, []string{"eth7"})
	if macs, out := l.arping("10.0.0.100"); len(macs) != 0 {
		t.Fatalf("answered on eth0 though only eth7 is selected:\n%s", out)
	}
	l.r.SetBalancer("default/web", []netip.Addr{netip.MustParseAddr("10.0.0.100")}, []string{"eth0"})
	if macs, out := l.arping("10.0.0.100"); len(macs) != 1 || !macs[l.mac] {
		t.Fatalf("want %s on eth0, got %v:\n%s", l.mac, macs, out)
	}
}

// TestTakeoverRewritesNeighborEntries: a client still holding the old
// node's MAC for the address (as after a failover) learns the new one from
// the gratuitous ARP / unsolicited NA alone, without asking.
func TestTakeoverRewritesNeighborEntries(t *testing.T) {
	l := newLab(t)
	old := "02:00:00:00:00:99"
	l.client.MustRun("ip", "neigh", "replace", "10.0.0.100", "lladdr", old, "dev", "eth0", "nud", "stale")
	l.client.MustRun("ip", "-6", "neigh", "replace", "fd00::100", "lladdr", old, "dev", "eth0", "nud", "stale")
	l.r.SetBalancer("default/web", []netip.Addr{netip.MustParseAddr("10.0.0.100"), netip.MustParseAddr("fd00::100")}, nil)
	for _, ip := range []string{"10.0.0.100", "fd00::100"} {
		l.eventually(t, "client's neighbor entry for "+ip+" points at the speaker", func() bool {
			out, _ := l.client.Run("ip", "neigh", "show", ip, "dev", "eth0")
			return strings.Contains(out, l.mac)
		})
	}
}
