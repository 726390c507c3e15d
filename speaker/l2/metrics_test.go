package l2

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// counter is the value of name{ip="ip"} in reg, or -1 without that series.
func counter(t *testing.T, reg *prometheus.Registry, name, ip string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if len(m.Label) == 1 && m.Label[0].GetName() == "ip" && m.Label[0].GetValue() == ip {
				return m.Counter.GetValue()
			}
		}
	}
	return -1
}

var sentRE = regexp.MustCompile(`Sent (\d+) probes`)

// TestLayer2Counters checks MetalLB's layer 2 counters against real
// packets: the takeover burst's gratuitous ARP (two packets each) and
// unsolicited NAs, one request and one response per arping probe for an
// announced address, none for an address not announced, and the client
// kernel's neighbor solicitation for an announced IPv6 address.
func TestLayer2Counters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	l := newLabWith(t, m)
	const help = `# HELP metallb_layer2_gratuitous_sent Number of gratuitous layer2 packets sent for owned IPs as a result of failovers
# TYPE metallb_layer2_gratuitous_sent counter
# HELP metallb_layer2_requests_received Number of layer2 requests received for owned IPs
# TYPE metallb_layer2_requests_received counter
# HELP metallb_layer2_responses_sent Number of layer2 responses sent for owned IPs in response to requests
# TYPE metallb_layer2_responses_sent counter
`
	// Nothing announced: nothing counted, even for a request.
	l.arping("10.0.0.100")
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("%d series before announcing (%v)", n, err)
	}

	v4, v6 := netip.MustParseAddr("10.0.0.100"), netip.MustParseAddr("fd00::100")
	l.r.SetBalancer("default/web", []netip.Addr{v4, v6}, nil)
	// The takeover burst: at once, then every 1.1 s for 5 s.
	l.eventually(t, "gratuitous packets for both addresses", func() bool {
		return counter(t, reg, "metallb_layer2_gratuitous_sent", "10.0.0.100") >= 4 &&
			counter(t, reg, "metallb_layer2_gratuitous_sent", "fd00::100") >= 2
	})
	if g := counter(t, reg, "metallb_layer2_gratuitous_sent", "10.0.0.100"); int(g)%2 != 0 {
		t.Errorf("gratuitous ARP packets for 10.0.0.100: %v, want an even number (a request and a reply each time)", g)
	}

	macs, out := l.arping("10.0.0.100")
	if !macs[l.mac] {
		t.Fatalf("no answer from the speaker:\n%s", out)
	}
	sent := sentRE.FindStringSubmatch(out)
	if sent == nil {
		t.Fatalf("arping did not say how many probes it sent:\n%s", out)
	}
	probes, _ := strconv.Atoi(sent[1])
	if got := counter(t, reg, "metallb_layer2_requests_received", "10.0.0.100"); got != float64(probes) {
		t.Errorf("requests_received{ip=10.0.0.100} = %v, arping sent %d probes:\n%s", got, probes, out)
	}
	if got := counter(t, reg, "metallb_layer2_responses_sent", "10.0.0.100"); got != float64(probes) {
		t.Errorf("responses_sent{ip=10.0.0.100} = %v, want %d", got, probes)
	}
	// An address nobody announces: asked, not counted.
	l.arping("10.0.0.101")
	if got := counter(t, reg, "metallb_layer2_requests_received", "10.0.0.101"); got != -1 {
		t.Errorf("requests_received{ip=10.0.0.101} = %v for an address not announced", got)
	}

	if mac := l.resolve6(t, "fd00::100"); mac != l.mac {
		t.Fatalf("fd00::100 resolved to %q, want %s", mac, l.mac)
	}
	req6 := counter(t, reg, "metallb_layer2_requests_received", "fd00::100")
	if req6 < 1 || counter(t, reg, "metallb_layer2_responses_sent", "fd00::100") != req6 {
		t.Errorf("fd00::100: requests_received %v, responses_sent %v; want equal, at least 1", req6, counter(t, reg, "metallb_layer2_responses_sent", "fd00::100"))
	}

	// Names, types and help texts are MetalLB's.
	want := help + `metallb_layer2_requests_received{ip="10.0.0.100"} ` + strconv.Itoa(probes) + "\n" +
		`metallb_layer2_requests_received{ip="fd00::100"} ` + strconv.FormatFloat(req6, 'g', -1, 64) + "\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "metallb_layer2_requests_received"); err != nil {
		t.Error(err)
	}
}
