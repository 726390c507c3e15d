package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/proxy"
)

// Tracer walks virtual packets through a Fake's tables the way netfilter
// would: nat PREROUTING (or OUTPUT for the node's own packets), then filter
// INPUT, FORWARD or OUTPUT, then nat POSTROUTING. Random (statistic) matches
// branch, so a trace returns every endpoint a packet may reach; `recent`
// checks never match (no affinity has been recorded for a fresh client).
type Tracer struct {
	Fake *Fake
	IPv6 bool
}

var _ proxy.Tracer = (*Tracer)(nil)

type tstate struct {
	pkt     proxy.TracePacket
	mark    uint32
	dnat    string
	masq    bool
	verdict string
	done    bool
}

// Trace implements proxy.Tracer.
func (t *Tracer) Trace(pkt proxy.TracePacket) ([]proxy.TraceOutcome, error) {
	start := tstate{pkt: pkt}
	natChain, filterChain := "PREROUTING", ""
	if pkt.FromLocalHost {
		natChain = "OUTPUT"
	}
	var errs []error
	w := &walker{t: t, errs: &errs}
	var out []proxy.TraceOutcome
	for _, s := range w.chain("nat", natChain, start, 0) {
		s.done, s.verdict = false, ""
		dst := s.pkt.Dst
		if s.dnat != "" {
			ap, err := netip.ParseAddrPort(s.dnat)
			if err != nil {
				return nil, fmt.Errorf("bad DNAT target %q", s.dnat)
			}
			dst = ap.Addr()
			// Later hooks see the translated destination.
			s.pkt.Dst, s.pkt.DPort = dst, int(ap.Port())
		}
		switch {
		case pkt.FromLocalHost:
			filterChain = "OUTPUT"
		case t.isLocal(dst):
			filterChain = "INPUT"
		default:
			filterChain = "FORWARD"
		}
		for _, f := range w.chain("filter", filterChain, s, 0) {
			if f.done && f.verdict != proxy.VerdictAccept {
				out = appendOutcome(out, proxy.TraceOutcome{Endpoint: f.dnat, Verdict: f.verdict})
				continue
			}
			f.done, f.verdict = false, ""
			for _, p := range w.chain("nat", "POSTROUTING", f, 0) {
				out = appendOutcome(out, proxy.TraceOutcome{Endpoint: p.dnat, Masquerade: p.masq, Verdict: proxy.VerdictAccept})
			}
		}
	}
	if len(errs) > 0 {
		return out, errs[0]
	}
	slices.SortFunc(out, func(a, b proxy.TraceOutcome) int { return strings.Compare(a.Endpoint+a.Verdict, b.Endpoint+b.Verdict) })
	return out, nil
}

func appendOutcome(out []proxy.TraceOutcome, o proxy.TraceOutcome) []proxy.TraceOutcome {
	if slices.Contains(out, o) {
		return out
	}
	return append(out, o)
}

func (t *Tracer) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(t.Fake.LocalAddrs, a)
}

type walker struct {
	t    *Tracer
	errs *[]error
}

func (w *walker) fail(format string, args ...any) {
	*w.errs = append(*w.errs, fmt.Errorf(format, args...))
}

func (w *walker) chain(table, chain string, st tstate, depth int) []tstate {
	if depth > 32 {
		w.fail("jump depth exceeded at %s/%s", table, chain)
		return nil
	}
	rules, ok := w.t.Fake.rulesOf(w.t.IPv6, table, chain)
	if !ok {
		return []tstate{st}
	}
	return w.rules(table, rules, 0, st, depth)
}

func (w *walker) rules(table string, rules [][]string, i int, st tstate, depth int) []tstate {
	for ; i < len(rules); i++ {
		switch w.match(rules[i], st) {
		case matchNo:
			continue
		case matchMaybe:
			return append(w.rules(table, rules, i+1, st, depth), w.apply(table, rules, i, st, depth)...)
		default:
			return w.apply(table, rules, i, st, depth)
		}
	}
	return []tstate{st}
}

func (w *walker) apply(table string, rules [][]string, i int, st tstate, depth int) []tstate {
	r := rules[i]
	tgt := target(r)
	switch tgt {
	case "":
		return w.rules(table, rules, i+1, st, depth)
	case "ACCEPT", "DROP", "REJECT":
		st.done, st.verdict = true, tgt
		return []tstate{st}
	case "RETURN":
		return []tstate{st}
	case "DNAT":
		st.dnat = optValue(r, "--to-destination")
		st.done, st.verdict = true, proxy.VerdictAccept
		return []tstate{st}
	case "MASQUERADE":
		st.masq = true
		st.done, st.verdict = true, proxy.VerdictAccept
		return []tstate{st}
	case "MARK":
		if v := optValue(r, "--or-mark"); v != "" {
			st.mark |= parseMark(v)
		}
		if v := optValue(r, "--xor-mark"); v != "" {
			st.mark ^= parseMark(v)
		}
		return w.rules(table, rules, i+1, st, depth)
	}
	var out []tstate
	for _, s := range w.chain(table, tgt, st, depth+1) {
		if s.done {
			out = append(out, s)
		} else {
			out = append(out, w.rules(table, rules, i+1, s, depth)...)
		}
	}
	return out
}

func optValue(r []string, opt string) string {
	for i := 0; i+1 < len(r); i++ {
		if r[i] == opt {
			return r[i+1]
		}
	}
	return ""
}

func parseMark(s string) uint32 {
	v, _ := strconv.ParseUint(strings.Split(s, "/")[0], 0, 32)
	return uint32(v)
}

type matchResult int

const (
	matchYes matchResult = iota
	matchNo
	matchMaybe
)

// match evaluates a rule's matches against the packet. Unknown options are
// reported as trace errors.
func (w *walker) match(r []string, st tstate) matchResult {
	res := matchYes
	pkt := st.pkt
	neg := false
	for i := 0; i < len(r); i++ {
		opt := r[i]
		if opt == "!" {
			neg = true
			continue
		}
		val := ""
		if i+1 < len(r) {
			val = r[i+1]
		}
		var ok bool
		consumed := 1
		switch opt {
		case "-j":
			return res
		case "-m":
			ok, consumed = true, 1
			if val == "recent" {
				// --rcheck never matches in a fresh trace; --set always does.
				if slices.Contains(r, "--rcheck") {
					return matchNo
				}
			}
		case "--comment", "--name", "--mode", "--seconds", "--mask":
			ok = true
		case "--reap", "--set", "--rcheck", "--rsource":
			ok, consumed = true, 0
		case "-p":
			ok = strings.EqualFold(val, string(pkt.Protocol))
		case "-s":
			ok = prefixContains(val, pkt.Src)
		case "-d":
			ok = prefixContains(val, pkt.Dst)
		case "--dport":
			ok = val == strconv.Itoa(pkt.DPort)
		case "--dst-type":
			ok = val == "LOCAL" && w.t.isLocal(pkt.Dst)
		case "--src-type":
			ok = val == "LOCAL" && (pkt.FromLocalHost || w.t.isLocal(pkt.Src))
		case "--ctstate":
			states := []string{"NEW"}
			if st.dnat != "" {
				states = append(states, "DNAT")
			}
			ok = false
			for _, s := range strings.Split(val, ",") {
				if slices.Contains(states, s) {
					ok = true
				}
			}
		case "--mark":
			parts := strings.Split(val, "/")
			v := parseMark(parts[0])
			m := ^uint32(0)
			if len(parts) == 2 {
				m = parseMark(parts[1])
			}
			ok = st.mark&m == v
		case "--probability":
			p, _ := strconv.ParseFloat(val, 64)
			if p < 1 {
				if neg {
					w.fail("negated statistic match")
				}
				res = matchMaybe
			}
			ok = true
		default:
			w.fail("tracer: unsupported option %q in rule %q", opt, strings.Join(r, " "))
			return matchNo
		}
		if neg {
			ok = !ok
			neg = false
		}
		if !ok {
			return matchNo
		}
		i += consumed
	}
	return res
}

func prefixContains(s string, a netip.Addr) bool {
	if !strings.Contains(s, "/") {
		b, err := netip.ParseAddr(s)
		return err == nil && b == a
	}
	p, err := netip.ParsePrefix(s)
	return err == nil && p.Contains(a)
}
