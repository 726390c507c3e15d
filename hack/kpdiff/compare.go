package main

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Normalisation keeps only what the kernel would hold:
//   - iptables: rules per table and chain, words re-joined after
//     unquoting, hexadecimal marks as numbers (kube-proxy writes %#08x,
//     "0x004000"; iptables-save prints 0x4000); empty built-in chains are
//     dropped (one fake lists them, the other does not). Rule order is
//     compared exactly, except in the dispatch chains that kube-proxy fills
//     in Go map order (sharedChains, IPVS mode's KUBE-IPVS-OUT-FILTER too), compared as multisets, and the jumps to KUBE-NODEPORTS must
//     come last.
//   - nftables: knftables.Fake's dump line by line; set and map elements
//     as a multiset (kube-proxy adds them in map order).

var sharedChains = map[string]bool{
	"KUBE-SERVICES": true, "KUBE-EXTERNAL-SERVICES": true, "KUBE-NODEPORTS": true, "KUBE-PROXY-FIREWALL": true,
	// IPVS mode: one DROP per load-balancer IP the node may not reach.
	"KUBE-IPVS-OUT-FILTER": true,
}

func nodePortsLast(rules []string) bool {
	seen := false
	for _, r := range rules {
		jump := strings.HasSuffix(r, "-j KUBE-NODEPORTS")
		if seen && !jump {
			return false
		}
		seen = seen || jump
	}
	return true
}

var builtin = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}

// splitWords splits an iptables-save rule into words, honouring quotes.
func splitWords(line string) []string {
	var out []string
	var cur strings.Builder
	inQ, have := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			inQ = !inQ
			have = true
		case c == ' ' && !inQ:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

func normHex(w string) string {
	parts := strings.Split(w, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "0x") {
			if v, err := strconv.ParseUint(p[2:], 16, 64); err == nil {
				parts[i] = fmt.Sprintf("%#x", v)
			}
		}
	}
	return strings.Join(parts, "/")
}

type ipt map[string]map[string][]string // table -> chain -> rules

func parseIPTables(s string) ipt {
	out := ipt{}
	table := ""
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line == "COMMIT" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			table = line[1:]
			if out[table] == nil {
				out[table] = map[string][]string{}
			}
		case strings.HasPrefix(line, ":"):
			c := strings.Fields(line[1:])[0]
			if out[table][c] == nil {
				out[table][c] = []string{}
			}
		case strings.HasPrefix(line, "-A "):
			w := splitWords(line)
			for i := range w {
				w[i] = normHex(w[i])
			}
			c := w[1]
			out[table][c] = append(out[table][c], strings.Join(w[2:], " "))
		}
	}
	for t, chains := range out {
		for c, rules := range chains {
			if builtin[c] && len(rules) == 0 {
				delete(chains, c)
			}
		}
		if len(chains) == 0 {
			delete(out, t)
		}
	}
	return out
}

// multisetDiff returns the elements of a not in b and of b not in a.
func multisetDiff(a, b []string) (onlyA, onlyB []string) {
	count := map[string]int{}
	for _, x := range a {
		count[x]++
	}
	for _, x := range b {
		count[x]--
	}
	for _, x := range a {
		if count[x] > 0 {
			onlyA = append(onlyA, x)
			count[x]--
		}
	}
	for x, n := range count {
		for ; n < 0; n++ {
			onlyB = append(onlyB, x)
		}
	}
	sort.Strings(onlyB)
	return
}

// diffIPTables lists the differences; "-" lines are kube-proxy's, "+" svcnet's.
func diffIPTables(kp, sv string) []string {
	a, b := parseIPTables(kp), parseIPTables(sv)
	var out []string
	tables := map[string]bool{}
	for t := range a {
		tables[t] = true
	}
	for t := range b {
		tables[t] = true
	}
	for _, t := range sortedKeys(tables) {
		chains := map[string]bool{}
		for c := range a[t] {
			chains[c] = true
		}
		for c := range b[t] {
			chains[c] = true
		}
		for _, c := range sortedKeys(chains) {
			ra, oka := a[t][c]
			rb, okb := b[t][c]
			switch {
			case oka && !okb:
				out = append(out, fmt.Sprintf("- %s chain %s (%d rules) only in kube-proxy", t, c, len(ra)))
				continue
			case okb && !oka:
				out = append(out, fmt.Sprintf("+ %s chain %s (%d rules) only in svcnet", t, c, len(rb)))
				continue
			}
			onlyA, onlyB := multisetDiff(ra, rb)
			for _, r := range onlyA {
				out = append(out, fmt.Sprintf("- %s -A %s %s", t, c, r))
			}
			for _, r := range onlyB {
				out = append(out, fmt.Sprintf("+ %s -A %s %s", t, c, r))
			}
			if len(onlyA)+len(onlyB) > 0 {
				continue
			}
			if sharedChains[c] {
				// The KUBE-NODEPORTS jumps (one per NodePort address, in
				// interface order) must come after every other rule.
				if !nodePortsLast(ra) || !nodePortsLast(rb) {
					out = append(out, fmt.Sprintf("! %s chain %s: KUBE-NODEPORTS jumps not last:\n    kube-proxy: %q\n    svcnet:     %q", t, c, ra, rb))
				}
			} else if !slices.Equal(ra, rb) {
				out = append(out, fmt.Sprintf("! %s chain %s: same rules, different order:\n    kube-proxy: %q\n    svcnet:     %q", t, c, ra, rb))
			}
		}
	}
	return out
}

func normNFT(s string) (lines, elems []string) {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
		case strings.HasPrefix(l, "add element "):
			elems = append(elems, l)
		default:
			lines = append(lines, l)
		}
	}
	return
}

// diffNFT compares two knftables dumps.
func diffNFT(kp, sv string) []string {
	la, ea := normNFT(kp)
	lb, eb := normNFT(sv)
	var out []string
	onlyA, onlyB := multisetDiff(la, lb)
	for _, r := range onlyA {
		out = append(out, "- "+r)
	}
	for _, r := range onlyB {
		out = append(out, "+ "+r)
	}
	if len(out) == 0 && !slices.Equal(la, lb) {
		for i := range la {
			if la[i] != lb[i] {
				out = append(out, fmt.Sprintf("! same lines, different order from line %d: %q vs %q", i, la[i], lb[i]))
				break
			}
		}
	}
	onlyA, onlyB = multisetDiff(ea, eb)
	for _, r := range onlyA {
		out = append(out, "- "+r)
	}
	for _, r := range onlyB {
		out = append(out, "+ "+r)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
