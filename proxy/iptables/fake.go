package iptables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Fake is an in-memory Interface. It parses every restore payload the way
// iptables-restore --noflush does (a chain line creates or flushes a chain,
// -A appends, -I inserts, -D deletes a rule by its text, -X deletes a chain; a payload with an error changes nothing), records
// the payloads, and can dump its tables in iptables-save form or trace a
// packet through them (Trace).
type Fake struct {
	mu sync.Mutex
	// LocalAddrs are the addresses that `-m addrtype --dst-type LOCAL` and
	// `--src-type LOCAL` treat as this node's.
	LocalAddrs []netip.Addr
	// Restores records every Restore payload, per family.
	Restores []FakeRestore
	// FailNextRestore makes the next Restore fail (then resets).
	FailNextRestore bool
	state           map[bool]map[string]*fakeTable
}

// FakeRestore is one recorded Restore call.
type FakeRestore struct {
	IPv6 bool
	Data string
}

type fakeTable struct {
	order []string
	rules map[string][][]string
}

var builtinChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
}

// NewFake returns an empty fake with the builtin chains of filter, nat and
// mangle in both families.
func NewFake() *Fake {
	f := &Fake{state: map[bool]map[string]*fakeTable{}}
	for _, v6 := range []bool{false, true} {
		f.state[v6] = map[string]*fakeTable{}
		for t, chains := range builtinChains {
			ft := &fakeTable{rules: map[string][][]string{}}
			for _, c := range chains {
				ft.order = append(ft.order, c)
				ft.rules[c] = nil
			}
			f.state[v6][t] = ft
		}
	}
	return f
}

var _ Interface = (*Fake)(nil)

func (t *fakeTable) clone() *fakeTable {
	n := &fakeTable{order: slices.Clone(t.order), rules: map[string][][]string{}}
	for c, r := range t.rules {
		n.rules[c] = slices.Clone(r)
	}
	return n
}

func isBuiltin(table, chain string) bool { return slices.Contains(builtinChains[table], chain) }

// Restore implements Interface.
func (f *Fake) Restore(_ context.Context, ipv6 bool, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Restores = append(f.Restores, FakeRestore{IPv6: ipv6, Data: string(data)})
	if f.FailNextRestore {
		f.FailNextRestore = false
		return fmt.Errorf("fake iptables-restore failure")
	}
	work := map[string]*fakeTable{}
	for n, t := range f.state[ipv6] {
		work[n] = t.clone()
	}
	var cur *fakeTable
	var curName string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			curName = line[1:]
			cur = work[curName]
			if cur == nil {
				cur = &fakeTable{rules: map[string][][]string{}}
				work[curName] = cur
			}
		case line == "COMMIT":
			cur = nil
		case cur == nil:
			return fmt.Errorf("line %d: %q outside a table", i+1, line)
		case strings.HasPrefix(line, ":"):
			name := strings.Fields(line[1:])[0]
			if _, ok := cur.rules[name]; !ok {
				cur.order = append(cur.order, name)
			}
			cur.rules[name] = nil
		default:
			words, err := SplitRule(line)
			if err != nil || len(words) < 2 {
				return fmt.Errorf("line %d: cannot parse %q", i+1, line)
			}
			chain := words[1]
			if _, ok := cur.rules[chain]; !ok {
				return fmt.Errorf("line %d: chain %s does not exist", i+1, chain)
			}
			switch words[0] {
			case "-A":
				cur.rules[chain] = append(cur.rules[chain], words[2:])
			case "-I":
				// -I chain [rulenum] rule...: insert at rulenum (1-based,
				// default 1).
				pos, rest := 0, words[2:]
				if len(rest) > 0 {
					if n, err := strconv.Atoi(rest[0]); err == nil {
						if n < 1 || n > len(cur.rules[chain])+1 {
							return fmt.Errorf("line %d: index of insertion too big", i+1)
						}
						pos, rest = n-1, rest[1:]
					}
				}
				cur.rules[chain] = slices.Insert(cur.rules[chain], pos, rest)
			case "-D":
				// -D chain rule...: delete the first rule with exactly
				// these words, as iptables compares rule specs.
				idx := slices.IndexFunc(cur.rules[chain], func(r []string) bool { return slices.Equal(r, words[2:]) })
				if idx < 0 {
					return fmt.Errorf("line %d: Bad rule (does a matching rule exist in that chain?)", i+1)
				}
				cur.rules[chain] = slices.Delete(cur.rules[chain], idx, idx+1)
			case "-F":
				cur.rules[chain] = nil
			case "-X":
				if isBuiltin(curName, chain) {
					return fmt.Errorf("line %d: cannot delete builtin chain %s", i+1, chain)
				}
				delete(cur.rules, chain)
				cur.order = slices.DeleteFunc(cur.order, func(c string) bool { return c == chain })
			default:
				return fmt.Errorf("line %d: unsupported command %s", i+1, words[0])
			}
		}
	}
	// A jump to a chain that does not exist is an error, as in the kernel.
	for tn, t := range work {
		for c, rules := range t.rules {
			for _, r := range rules {
				if j := target(r); j != "" && !isTargetExtension(j) {
					if _, ok := t.rules[j]; !ok {
						return fmt.Errorf("table %s chain %s: jump to missing chain %s", tn, c, j)
					}
				}
			}
		}
	}
	f.state[ipv6] = work
	return nil
}

func isTargetExtension(t string) bool {
	switch t {
	case "ACCEPT", "DROP", "REJECT", "RETURN", "DNAT", "SNAT", "MASQUERADE", "MARK":
		return true
	}
	return false
}

func target(rule []string) string {
	for i := 0; i < len(rule)-1; i++ {
		if rule[i] == "-j" {
			return rule[i+1]
		}
	}
	return ""
}

// SplitRule splits one restore line into words, honouring double quotes
// (which are removed).
func SplitRule(line string) ([]string, error) {
	var words []string
	var b strings.Builder
	inQuote, have := false, false
	for _, r := range line {
		switch {
		case r == '"':
			inQuote = !inQuote
			have = true
		case r == ' ' && !inQuote:
			if have {
				words = append(words, b.String())
				b.Reset()
				have = false
			}
		default:
			b.WriteRune(r)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote")
	}
	if have {
		words = append(words, b.String())
	}
	return words, nil
}

// SaveChains implements Interface.
func (f *Fake) SaveChains(_ context.Context, ipv6 bool, table string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.state[ipv6][table]
	if t == nil {
		return nil, nil
	}
	return slices.Clone(t.order), nil
}

// EnsureChain implements Interface.
func (f *Fake) EnsureChain(_ context.Context, ipv6 bool, table, chain string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.state[ipv6][table]
	if _, ok := t.rules[chain]; !ok {
		t.order = append(t.order, chain)
		t.rules[chain] = nil
	}
	return nil
}

// ChainExists implements Interface.
func (f *Fake) ChainExists(_ context.Context, ipv6 bool, table, chain string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.state[ipv6][table].rules[chain]
	return ok, nil
}

// DeleteChain removes a chain (as an administrator flushing our state would);
// used by tests of the canary.
func (f *Fake) DeleteChain(ipv6 bool, table, chain string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.state[ipv6][table]
	delete(t.rules, chain)
	t.order = slices.DeleteFunc(t.order, func(c string) bool { return c == chain })
}

func normArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		out = append(out, strings.Trim(a, `"`))
	}
	return out
}

// EnsureRule implements Interface.
func (f *Fake) EnsureRule(_ context.Context, ipv6 bool, table, chain string, args ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.state[ipv6][table]
	if _, ok := t.rules[chain]; !ok {
		return fmt.Errorf("chain %s/%s does not exist", table, chain)
	}
	a := normArgs(args)
	for _, r := range t.rules[chain] {
		if slices.Equal(r, a) {
			return nil
		}
	}
	t.rules[chain] = append([][]string{a}, t.rules[chain]...)
	return nil
}

// DeleteRule implements Interface.
func (f *Fake) DeleteRule(_ context.Context, ipv6 bool, table, chain string, args ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.state[ipv6][table]
	a := normArgs(args)
	for i, r := range t.rules[chain] {
		if slices.Equal(r, a) {
			t.rules[chain] = slices.Delete(t.rules[chain], i, i+1)
			return nil
		}
	}
	return nil
}

// Dump returns the tables of a family in iptables-save form (chains sorted,
// builtin chains first, rules in order, comments re-quoted when they contain
// spaces), for comparing whole states in tests.
func (f *Fake) Dump(ipv6 bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	tables := make([]string, 0, len(f.state[ipv6]))
	for n := range f.state[ipv6] {
		tables = append(tables, n)
	}
	sort.Strings(tables)
	for _, tn := range tables {
		t := f.state[ipv6][tn]
		var chains []string
		for _, c := range t.order {
			if !isBuiltin(tn, c) {
				chains = append(chains, c)
			}
		}
		sort.Strings(chains)
		chains = append(slices.Clone(builtinChains[tn]), chains...)
		fmt.Fprintf(&b, "*%s\n", tn)
		for _, c := range chains {
			if _, ok := t.rules[c]; !ok {
				continue
			}
			policy := "-"
			if isBuiltin(tn, c) {
				policy = "ACCEPT"
			}
			fmt.Fprintf(&b, ":%s %s [0:0]\n", c, policy)
		}
		for _, c := range chains {
			for _, r := range t.rules[c] {
				words := make([]string, len(r))
				for i, w := range r {
					if strings.ContainsAny(w, " ;") || w == "" {
						w = `"` + w + `"`
					}
					words[i] = w
				}
				fmt.Fprintf(&b, "-A %s %s\n", c, strings.Join(words, " "))
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// SaveTable implements Interface.
func (f *Fake) SaveTable(_ context.Context, ipv6 bool, table string) ([]byte, error) {
	d := f.Dump(ipv6)
	start := strings.Index(d, "*"+table+"\n")
	if start < 0 {
		return nil, nil
	}
	end := strings.Index(d[start:], "COMMIT\n")
	return []byte(d[start : start+end+len("COMMIT\n")]), nil
}

// rulesOf returns a copy of a chain's rules (nil, false if missing).
func (f *Fake) rulesOf(ipv6 bool, table, chain string) ([][]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.state[ipv6][table].rules[chain]
	return r, ok
}
