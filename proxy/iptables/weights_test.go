package iptables

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/proxy"
)

// chainShares reads the statistic rules of one KUBE-SVC- chain of data and
// returns the share of new connections each endpoint chain gets, in rule
// order, together with the probabilities as written.
func chainShares(t *testing.T, data []byte, chain string) (shares []float64, probs []string) {
	t.Helper()
	left := 1.0
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "-A "+chain+" ") {
			continue
		}
		f := strings.Fields(line)
		p := 1.0
		for i := range f {
			if f[i] == "--probability" {
				probs = append(probs, f[i+1])
				v, err := strconv.ParseFloat(f[i+1], 64)
				if err != nil {
					t.Fatal(err)
				}
				p = v
			}
		}
		shares = append(shares, left*p)
		left *= 1 - p
	}
	return shares, probs
}

func weightedService(name, ip, sched string, weights ...int) (proxy.ServicePortName, *proxy.ServicePort, []*proxy.Endpoint) {
	n := spn("default", name, "", v1.ProtocolTCP)
	sp := &proxy.ServicePort{Name: n, Type: v1.ServiceTypeClusterIP, ClusterIPs: addrs(ip), Port: 80,
		Protocol: v1.ProtocolTCP, SessionAffinity: v1.ServiceAffinityNone, Scheduler: sched}
	var out []*proxy.Endpoint
	for i, w := range weights {
		ep := eps("node2", false, 8080, "10.244.2."+strconv.Itoa(10+i))[0]
		ep.Weight = w
		out = append(out, ep)
	}
	return n, sp, out
}

// TestWeightedProbabilities checks the statistic chain of wrr: each
// endpoint's share of new connections is its weight's share of the total;
// equal weights, and weights under any scheduler that does not use them,
// give kube-proxy's 1/(n-i) rules byte for byte.
func TestWeightedProbabilities(t *testing.T) {
	svcs, epm := proxy.ServicePortMap{}, proxy.EndpointsMap{}
	add := func(n proxy.ServicePortName, sp *proxy.ServicePort, e []*proxy.Endpoint) {
		svcs[n], epm[n] = sp, e
	}
	cases := []struct {
		name, sched string
		weights     []int
		want        []float64 // shares
	}{
		{"heavy", "wrr", []int{7, 1, 1, 1}, []float64{0.7, 0.1, 0.1, 0.1}},
		{"last-heavy", "WRR", []int{1, 2, 3, 4}, []float64{0.1, 0.2, 0.3, 0.4}},
		{"big", "wrr", []int{65535, 1, 100}, []float64{65535.0 / 65636, 1.0 / 65636, 100.0 / 65636}},
		{"random", "", []int{7, 1, 1, 1}, []float64{0.25, 0.25, 0.25, 0.25}},
		{"lc", "lc", []int{7, 1, 1, 1}, []float64{0.25, 0.25, 0.25, 0.25}},
	}
	for i, c := range cases {
		add(weightedService(c.name, "10.96.1."+strconv.Itoa(i+1), c.sched, c.weights...))
	}
	// Equal weights under wrr and no scheduler at all: the same bytes.
	for i, n := range []int{2, 3, 5, 7, 13} {
		w := make([]int, n)
		for j := range w {
			w[j] = 4
		}
		add(weightedService("even-wrr-"+strconv.Itoa(n), "10.96.2."+strconv.Itoa(i+1), "wrr", w...))
		add(weightedService("even-none-"+strconv.Itoa(n), "10.96.3."+strconv.Itoa(i+1), "", w...))
	}
	plan := BuildPlan(PlanInput{Services: svcs, Endpoints: epm, NodeName: "node1"})
	for _, c := range cases {
		chain := ClusterPolicyChain(svcs[spn("default", c.name, "", v1.ProtocolTCP)])
		got, probs := chainShares(t, plan.Data, chain)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d rules in %s, want %d", c.name, len(got), chain, len(c.want))
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-9 {
				t.Errorf("%s: endpoint %d gets %.12f of new connections (probabilities %v), want %.12f", c.name, i, got[i], probs, c.want[i])
			}
		}
	}
	for _, n := range []int{2, 3, 5, 7, 13} {
		_, a := chainShares(t, plan.Data, ClusterPolicyChain(svcs[spn("default", "even-wrr-"+strconv.Itoa(n), "", v1.ProtocolTCP)]))
		_, b := chainShares(t, plan.Data, ClusterPolicyChain(svcs[spn("default", "even-none-"+strconv.Itoa(n), "", v1.ProtocolTCP)]))
		if strings.Join(a, " ") != strings.Join(b, " ") || len(a) != n-1 {
			t.Errorf("%d equal weights under wrr: probabilities %v, kube-proxy's are %v", n, a, b)
		}
		for i, p := range b {
			if p != proxy.FormatProbability(n-i) {
				t.Errorf("%d endpoints, rule %d: probability %s, want %s", n, i, p, proxy.FormatProbability(n-i))
			}
		}
	}
}

type sinkEvent struct{ svc, reason string }

type eventSink struct {
	mu     sync.Mutex
	events []sinkEvent
}

func (s *eventSink) ServiceEvent(svc types.NamespacedName, _, reason, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, sinkEvent{svc.String(), reason})
}

// TestSchedulerEvents: iptables mode honours wrr (and random), so only
// other algorithms get a Warning Event: UnsupportedScheduler for ones it
// cannot program, UnknownScheduler for names no mode knows.
func TestSchedulerEvents(t *testing.T) {
	sink := &eventSink{}
	p := New(proxy.ModeConfig{Events: sink}, nil)
	svcs := proxy.ServicePortMap{}
	for _, s := range []struct{ name, sched string }{{"plain", ""}, {"wrr", "wrr"}, {"random", "random"}, {"lc", "lc"}, {"bogus", "heavy-first"}} {
		n, sp, _ := weightedService(s.name, "10.96.4.1", s.sched)
		svcs[n] = sp
	}
	req := &proxy.SyncRequest{Services: svcs}
	p.reportSchedulers(req)
	p.reportSchedulers(req) // once per Service and value, not per sync
	got := map[sinkEvent]int{}
	for _, e := range sink.events {
		got[e]++
	}
	want := map[sinkEvent]int{{"default/lc", proxy.ReasonUnsupportedScheduler}: 1, {"default/bogus", proxy.ReasonUnknownScheduler}: 1}
	if len(got) != len(want) || len(sink.events) != 2 {
		t.Fatalf("events = %+v, want %v", sink.events, want)
	}
	for e, n := range want {
		if got[e] != n {
			t.Errorf("events = %+v, want %v", sink.events, want)
		}
	}
}
