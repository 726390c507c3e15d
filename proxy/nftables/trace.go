package nftables

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
)

// Tracer walks a virtual first packet through the kube-proxy table held by
// a knftables.Fake (and the dispatch tables of --nftables-shards, whose NAT
// chains follow the main table's at the same hook until one DNATs, as the
// kernel runs a hook's NAT chains), hook by hook in priority order, and reports every
// outcome (one per endpoint a load-balancing vmap may pick). It understands
// exactly the rule forms this package writes; an unknown rule is an error,
// so a new rule form cannot silently pass a behaviour test.
type Tracer struct {
	Fake *knftables.Fake
	// LocalAddrs are the node's addresses (for fib ... type local).
	LocalAddrs []netip.Addr

	// tables are the main table and the dispatch tables; cur is the one
	// whose chain runs.
	tables []*knftables.FakeTable
	cur    *knftables.FakeTable
}

var _ proxy.Tracer = (*Tracer)(nil)

type tpkt struct {
	src, dst netip.Addr
	proto    string
	dport    int
	mark     uint32
	dnat     string
	verdict  string // "" while undecided
}

// Trace implements proxy.Tracer.
func (tr *Tracer) Trace(pkt proxy.TracePacket) ([]proxy.TraceOutcome, error) {
	main := tr.Fake.Table
	if main == nil { // a Fake without a default table (--nftables-shards)
		for _, fam := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
			if t := tr.Fake.Tables[fam][TableName]; t != nil && main == nil {
				main = t
			}
		}
	}
	if main == nil {
		return nil, fmt.Errorf("no table")
	}
	w := &Tracer{Fake: tr.Fake, LocalAddrs: tr.LocalAddrs, tables: []*knftables.FakeTable{main}}
	tables := tr.Fake.Tables[main.Family]
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		if isShardTable(name) {
			w.tables = append(w.tables, tables[name])
		}
	}
	return w.trace(pkt)
}

func (tr *Tracer) trace(pkt proxy.TracePacket) ([]proxy.TraceOutcome, error) {
	start := tpkt{src: pkt.Src, dst: pkt.Dst, proto: strings.ToLower(string(pkt.Protocol)), dport: pkt.DPort}
	if start.proto == "" {
		start.proto = "tcp"
	}
	var pre []string
	if pkt.FromLocalHost {
		pre = []string{filterOutputPreDNATChain, natOutputChain}
	} else {
		pre = []string{filterPreroutingPreDNATChain, natPreroutingChain}
	}
	states := []tpkt{start}
	var err error
	for _, c := range pre {
		if states, err = tr.runAll(states, c); err != nil {
			return nil, err
		}
	}
	var out []proxy.TraceOutcome
	for _, s := range states {
		if s.verdict == "" {
			post := filterForwardChain
			if pkt.FromLocalHost {
				post = filterOutputChain
			} else if tr.local(s.dst) {
				post = filterInputChain
			}
			more, err := tr.runAll([]tpkt{s}, post)
			if err != nil {
				return nil, err
			}
			for _, m := range more {
				if m.verdict == "" {
					ms, err := tr.runAll([]tpkt{m}, natPostroutingChain)
					if err != nil {
						return nil, err
					}
					m = ms[0]
				}
				out = append(out, outcome(m))
			}
			continue
		}
		out = append(out, outcome(s))
	}
	return out, nil
}

func outcome(s tpkt) proxy.TraceOutcome {
	o := proxy.TraceOutcome{Endpoint: s.dnat, Verdict: proxy.VerdictAccept}
	switch s.verdict {
	case "drop":
		o = proxy.TraceOutcome{Verdict: proxy.VerdictDrop}
	case "reject":
		o = proxy.TraceOutcome{Verdict: proxy.VerdictReject}
	case "masquerade":
		o.Masquerade = true
	}
	return o
}

func (tr *Tracer) local(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	for _, l := range tr.LocalAddrs {
		if l == a {
			return true
		}
	}
	return false
}

// runAll runs the base chain of each table that has it for each state;
// "accept" (end of a base chain or a dnat) leaves verdict empty so the next
// table's chain or the next hook runs. Once a NAT chain has translated a
// connection, the hook's NAT chains of later tables do not see it.
func (tr *Tracer) runAll(in []tpkt, chain string) ([]tpkt, error) {
	for _, t := range tr.tables {
		c := t.Chains[chain]
		if c == nil || (t != tr.tables[0] && c.Hook == nil) {
			continue
		}
		tr.cur = t
		var err error
		// A dispatch table's NAT chains are dstnat's, the hook a DNAT
		// happened in.
		laterNAT := t != tr.tables[0] && c.Type != nil && *c.Type == knftables.NATType
		if in, err = tr.runTable(in, chain, laterNAT); err != nil {
			return nil, err
		}
	}
	tr.cur = tr.tables[0]
	return in, nil
}

func (tr *Tracer) runTable(in []tpkt, chain string, laterNAT bool) ([]tpkt, error) {
	var out []tpkt
	for _, s := range in {
		if s.verdict != "" || (laterNAT && s.dnat != "") {
			out = append(out, s)
			continue
		}
		res, err := tr.run(s, chain, 0)
		if err != nil {
			return nil, err
		}
		for _, r := range res {
			if r.verdict == "accept" || r.verdict == "return" {
				r.verdict = ""
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// run evaluates chain for s and returns the resulting states; a state whose
// verdict is "return" came back from the chain without a decision.
func (tr *Tracer) run(s tpkt, chain string, depth int) ([]tpkt, error) {
	if depth > 16 {
		return nil, fmt.Errorf("chain recursion too deep at %s", chain)
	}
	c := tr.cur.Chains[chain]
	if c == nil {
		return nil, fmt.Errorf("no chain %q", chain)
	}
	// maybe holds the outcomes of rules that may or may not match (a
	// generator match): the packet also goes on past them.
	var maybe []tpkt
	for _, r := range c.Rules {
		res, cont, err := tr.rule(s, r.Rule, depth)
		if err != nil {
			return nil, fmt.Errorf("chain %s rule %q: %w", chain, r.Rule, err)
		}
		if cont != nil {
			maybe = append(maybe, res...)
			s = *cont
			continue
		}
		return append(maybe, res...), nil
	}
	s.verdict = "return"
	return append(maybe, s), nil
}

// rule evaluates one rule: either it decides (res) or the packet continues
// with the (possibly modified) state cont.
func (tr *Tracer) rule(s tpkt, rule string, depth int) (res []tpkt, cont *tpkt, err error) {
	toks := strings.Fields(rule)
	if n := generatorMatch(toks); n > 0 {
		// numgen random mod R < W ... / jhash ... LO-HI ...: the rule
		// matches some packets (the rest of it decides those) and not
		// others, which go on.
		res, cont, err := tr.rule(s, strings.Join(toks[n:], " "), depth)
		if err != nil || cont != nil {
			return nil, &s, err
		}
		return res, &s, nil
	}
	i := 0
	// Matches.
	for i < len(toks) {
		t := toks[i]
		switch {
		case t == "ct" && i+2 < len(toks) && toks[i+1] == "state" && toks[i+2] == "new":
			i += 3
		case t == "ct" && i+2 < len(toks) && toks[i+1] == "status" && toks[i+2] == "dnat":
			if s.dnat == "" {
				return nil, &s, nil
			}
			i += 3
		case (t == "ip" || t == "ip6") && i+9 < len(toks) && toks[i+1] == "saddr" && toks[i+2] == ".":
			// ip saddr . ip daddr . meta l4proto . th dport @set
			key := s.src.String() + " . " + s.dst.String() + " . " + s.proto + " . " + fmt.Sprint(s.dport)
			if !tr.setHas(strings.TrimPrefix(toks[i+11], "@"), key) {
				return nil, &s, nil
			}
			i += 12
		case t == "fib" && i+3 < len(toks) && toks[i+2] == "type" && toks[i+3] == "local":
			a := s.dst
			if toks[i+1] == "saddr" {
				a = s.src
			}
			if !tr.local(a) {
				return nil, &s, nil
			}
			i += 4
		case (t == "ip" || t == "ip6") && i+1 < len(toks) && (toks[i+1] == "daddr" || toks[i+1] == "saddr") &&
			!(i+2 < len(toks) && toks[i+2] == "."):
			a := s.dst
			if toks[i+1] == "saddr" {
				a = s.src
			}
			j := i + 2
			neg := false
			if toks[j] == "!=" {
				neg = true
				j++
			}
			var ok bool
			switch {
			case strings.HasPrefix(toks[j], "@"):
				ok = tr.setHas(toks[j][1:], a.String())
				j++
			case toks[j] == "{":
				k := j + 1
				for toks[k] != "}" {
					ok = ok || prefixHas(strings.TrimSuffix(toks[k], ","), a)
					k++
				}
				j = k + 1
			default:
				ok = prefixHas(toks[j], a)
				j++
			}
			if ok == neg {
				return nil, &s, nil
			}
			i = j
		case (t == "ip" || t == "ip6") && i+8 < len(toks) && toks[i+1] == "daddr" && toks[i+2] == "." && strings.HasPrefix(toks[i+8], "@"):
			// ip daddr . meta l4proto . th dport @set
			if !tr.setHas(toks[i+8][1:], s.dst.String()+" . "+s.proto+" . "+fmt.Sprint(s.dport)) {
				return nil, &s, nil
			}
			i += 9
		case (t == "ip" || t == "ip6") && i+9 < len(toks) && toks[i+1] == "daddr" && toks[i+2] == ".":
			// ip daddr . meta l4proto . th dport vmap @map
			v, ok := tr.mapGet(strings.TrimPrefix(toks[i+9], "@"), s.dst.String()+" . "+s.proto+" . "+fmt.Sprint(s.dport))
			if !ok {
				return nil, &s, nil
			}
			return tr.verdict(s, v, depth)
		case t == "meta" && toks[i+1] == "l4proto" && toks[i+2] == "." && i+5 < len(toks) && strings.HasPrefix(toks[i+5], "@"):
			// meta l4proto . th dport @set
			if !tr.setHas(toks[i+5][1:], s.proto+" . "+fmt.Sprint(s.dport)) {
				return nil, &s, nil
			}
			i += 6
		case t == "meta" && toks[i+1] == "l4proto" && toks[i+2] == ".":
			// meta l4proto . th dport vmap @map
			v, ok := tr.mapGet(strings.TrimPrefix(toks[i+6], "@"), s.proto+" . "+fmt.Sprint(s.dport))
			if !ok {
				return nil, &s, nil
			}
			return tr.verdict(s, v, depth)
		case t == "meta" && toks[i+1] == "l4proto":
			if toks[i+2] != s.proto {
				return nil, &s, nil
			}
			i += 3
		case t == "mark" && toks[i+1] == "and" && i+4 < len(toks):
			// mark and M ==|!= 0
			var m uint32
			fmt.Sscanf(toks[i+2], "0x%x", &m)
			if (s.mark&m == 0) != (toks[i+3] == "==") {
				return nil, &s, nil
			}
			i += 5
		default:
			return tr.action(s, toks[i:], depth)
		}
	}
	return nil, &s, nil
}

func (tr *Tracer) action(s tpkt, toks []string, depth int) ([]tpkt, *tpkt, error) {
	switch toks[0] {
	case "jump", "goto":
		res, err := tr.run(s, toks[1], depth+1)
		if err != nil {
			return nil, nil, err
		}
		if toks[0] == "jump" && len(res) == 1 && res[0].verdict == "return" {
			n := res[0]
			n.verdict = ""
			return nil, &n, nil
		}
		return res, nil, nil
	case "return":
		s.verdict = "return"
		return []tpkt{s}, nil, nil
	case "drop", "reject":
		s.verdict = toks[0]
		return []tpkt{s}, nil, nil
	case "update":
		return nil, &s, nil
	case "mark":
		// mark set mark or|xor M
		var m uint32
		fmt.Sscanf(toks[4], "0x%x", &m)
		if toks[3] == "or" {
			s.mark |= m
		} else {
			s.mark ^= m
		}
		if len(toks) > 5 {
			return tr.action(s, toks[5:], depth)
		}
		return nil, &s, nil
	case "masquerade":
		s.verdict = "masquerade"
		return []tpkt{s}, nil, nil
	case "dnat":
		if len(toks) > 2 && toks[1] != "to" {
			return tr.dnatMap(s, toks)
		}
		// dnat to ip:port
		s.dnat = toks[2]
		ap, err := netip.ParseAddrPort(toks[2])
		if err != nil {
			return nil, nil, err
		}
		s.dst, s.dport = ap.Addr(), int(ap.Port())
		s.verdict = "accept"
		return []tpkt{s}, nil, nil
	case "numgen", "jhash":
		// ... vmap { k : goto X , ... }: every target is a possible outcome.
		var all []tpkt
		seen := map[string]bool{}
		for j, t := range toks {
			if t == "goto" && !seen[toks[j+1]] {
				seen[toks[j+1]] = true
				res, err := tr.run(s, toks[j+1], depth+1)
				if err != nil {
					return nil, nil, err
				}
				all = append(all, res...)
			}
		}
		return all, nil, nil
	}
	return nil, nil, fmt.Errorf("unknown rule form at %q", strings.Join(toks, " "))
}

// dnatMap follows `dnat ip addr . port to GEN map { K : IP . PORT , ... }`:
// every endpoint the map holds is a possible outcome.
func (tr *Tracer) dnatMap(s tpkt, toks []string) ([]tpkt, *tpkt, error) {
	if n := len(toks); n > 2 && toks[n-2] == "map" && strings.HasPrefix(toks[n-1], "@") {
		return tr.dnatNamedMap(s, toks)
	}
	j := 0
	for j < len(toks) && toks[j] != "{" {
		j++
	}
	if j == len(toks) || toks[j-1] != "map" {
		return nil, nil, fmt.Errorf("unknown dnat form at %q", strings.Join(toks, " "))
	}
	var all []tpkt
	seen := map[netip.AddrPort]bool{}
	for k := j + 1; k+4 < len(toks); k += 6 {
		// K : IP . PORT [,|}]
		if toks[k+1] != ":" || toks[k+3] != "." {
			return nil, nil, fmt.Errorf("unknown dnat map element at %q", strings.Join(toks[k:], " "))
		}
		var err error
		if all, err = dnatOutcome(all, seen, s, strings.Join(toks[k+2:k+5], " ")); err != nil {
			return nil, nil, err
		}
	}
	if len(all) == 0 {
		return nil, nil, fmt.Errorf("empty dnat map at %q", strings.Join(toks, " "))
	}
	return all, nil, nil
}

// dnatNamedMap follows `dnat ip addr . port to numgen random mod N offset
// O map @NAME` (--nftables-endpoint-choice=shared): the possible outcomes
// are the values of keys O .. O+N-1; a key the map lacks is an error (the
// kernel would not DNAT such a packet: a sync bug).
func (tr *Tracer) dnatNamedMap(s tpkt, toks []string) ([]tpkt, *tpkt, error) {
	if len(toks) == 18 && toks[7] == "daddr" && toks[12] == "numgen" {
		return tr.dnatDirect(s, toks)
	}
	if len(toks) == 15 && toks[7] == "dport" && toks[9] == "numgen" {
		// dnat ip addr . port to P dport . numgen random mod N map @NAME:
		// a direct NodePort choice, keyed by port . i.
		if toks[6] != s.proto || toks[10] != "random" || toks[11] != "mod" || toks[13] != "map" {
			return nil, nil, fmt.Errorf("unknown dnat form at %q", strings.Join(toks, " "))
		}
		return tr.dnatDirectKeys(s, toks, toks[12], toks[14], strconv.Itoa(s.dport)+" . ")
	}
	// dnat ip addr . port to numgen random mod N offset O map @NAME
	if len(toks) != 14 || toks[6] != "numgen" || toks[8] != "mod" || toks[10] != "offset" {
		return nil, nil, fmt.Errorf("unknown dnat form at %q", strings.Join(toks, " "))
	}
	n, err1 := strconv.ParseUint(toks[9], 10, 32)
	off, err2 := strconv.ParseUint(toks[11], 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, nil, err
	}
	name := strings.TrimPrefix(toks[13], "@")
	var all []tpkt
	seen := map[netip.AddrPort]bool{}
	for k := off; k < off+n; k++ {
		v, ok := tr.mapGet(name, strconv.FormatUint(k, 10))
		if !ok {
			return nil, nil, fmt.Errorf("map %s has no key %d (%s)", name, k, strings.Join(toks, " "))
		}
		var err error
		if all, err = dnatOutcome(all, seen, s, v); err != nil {
			return nil, nil, err
		}
	}
	return all, nil, nil
}

// dnatDirect follows `dnat ip addr . port to ip daddr . P dport . numgen
// random mod N map @NAME` (a direct ClusterIP choice, planner.direct): the
// possible outcomes are the values of keys DST . DPORT . 0 .. N-1. Without
// key 0 the lookup fails and the rule does not match (the packet goes on,
// as in the kernel); with some keys but not all the map is broken (a sync
// bug), an error.
func (tr *Tracer) dnatDirect(s tpkt, toks []string) ([]tpkt, *tpkt, error) {
	// 0 dnat 1 ip 2 addr 3 . 4 port 5 to 6 ip 7 daddr 8 . 9 P 10 dport 11 . 12 numgen 13 random 14 mod 15 N 16 map 17 @NAME
	if toks[6] != toks[1] || toks[9] != s.proto || toks[10] != "dport" || toks[13] != "random" || toks[14] != "mod" || toks[16] != "map" {
		return nil, nil, fmt.Errorf("unknown dnat form at %q", strings.Join(toks, " "))
	}
	return tr.dnatDirectKeys(s, toks, toks[15], toks[17], s.dst.String()+" . "+strconv.Itoa(s.dport)+" . ")
}

// dnatDirectKeys follows a direct choice map @NAME of N endpoints whose
// keys for this packet are prefix . 0 .. prefix . N-1: every value is a
// possible outcome; no key 0 is no match (the next rule tries its map).
func (tr *Tracer) dnatDirectKeys(s tpkt, toks []string, nTok, nameTok, prefix string) ([]tpkt, *tpkt, error) {
	n, err := strconv.ParseUint(nTok, 10, 32)
	if err != nil {
		return nil, nil, err
	}
	name := strings.TrimPrefix(nameTok, "@")
	var all []tpkt
	seen := map[netip.AddrPort]bool{}
	for k := range n {
		v, ok := tr.mapGet(name, prefix+strconv.FormatUint(k, 10))
		if !ok && k == 0 {
			return nil, &s, nil
		}
		if !ok {
			return nil, nil, fmt.Errorf("map %s has %s0 but not %s%d (%s)", name, prefix, prefix, k, strings.Join(toks, " "))
		}
		if all, err = dnatOutcome(all, seen, s, v); err != nil {
			return nil, nil, err
		}
	}
	if _, extra := tr.mapGet(name, prefix+strconv.FormatUint(n, 10)); extra {
		return nil, nil, fmt.Errorf("map %s has %s%d beyond its rule's %d endpoints", name, prefix, n, n)
	}
	return all, nil, nil
}

// dnatOutcome appends s DNATed to map value v ("IP . PORT") to all,
// unless seen has that target already.
func dnatOutcome(all []tpkt, seen map[netip.AddrPort]bool, s tpkt, v string) ([]tpkt, error) {
	ap, err := parseDNATTarget(v)
	if err != nil || seen[ap] {
		return all, err
	}
	seen[ap] = true
	s.dnat, s.dst, s.dport, s.verdict = ap.String(), ap.Addr(), int(ap.Port()), "accept"
	return append(all, s), nil
}

// parseDNATTarget parses a map value "IP . PORT".
func parseDNATTarget(v string) (netip.AddrPort, error) {
	f := strings.Fields(v)
	if len(f) != 3 || f[1] != "." {
		return netip.AddrPort{}, fmt.Errorf("bad dnat target %q", v)
	}
	a, err := netip.ParseAddr(f[0])
	if err != nil {
		return netip.AddrPort{}, err
	}
	port, err := strconv.ParseUint(f[2], 10, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}

// generatorMatch returns the number of tokens of a generator match at the
// start of a rule ("numgen random mod R < W", "jhash ip saddr mod T seed S
// LO-HI"), 0 when the rule does not start with one.
func generatorMatch(toks []string) int {
	n := 0
	switch {
	case len(toks) > 4 && toks[0] == "numgen" && toks[2] == "mod":
		n = 4
	case len(toks) > 7 && toks[0] == "jhash" && toks[3] == "mod" && toks[5] == "seed":
		n = 7
	default:
		return 0
	}
	switch {
	case toks[n] == "vmap":
		return 0
	case toks[n] == "<" && len(toks) > n+1:
		return n + 2
	}
	return n + 1
}

func (tr *Tracer) verdict(s tpkt, v string, depth int) ([]tpkt, *tpkt, error) {
	return tr.action(s, strings.Fields(v), depth)
}

func prefixHas(p string, a netip.Addr) bool {
	if pr, err := netip.ParsePrefix(p); err == nil {
		return pr.Contains(a)
	}
	if ad, err := netip.ParseAddr(p); err == nil {
		return ad == a
	}
	return false
}

func (tr *Tracer) setHas(name, key string) bool {
	if s := tr.cur.Sets[name]; s != nil {
		for _, e := range s.Elements {
			if strings.Join(e.Key, " . ") == key {
				return true
			}
		}
	}
	return false
}

func (tr *Tracer) mapGet(name, key string) (string, bool) {
	if m := tr.cur.Maps[name]; m != nil {
		for _, e := range m.Elements {
			if strings.Join(e.Key, " . ") == key {
				return strings.Join(e.Value, " . "), true // a concatenation parsed from a dump is split
			}
		}
	}
	return "", false
}
