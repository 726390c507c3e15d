package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"slices"
)

// prefixDST names the chains of the tree dispatch (--iptables-dispatch=tree).
const prefixDST = "KUBE-DST-"

// Prefix lengths of the tree's two levels: a branch per /24 (IPv4) or /120
// (IPv6) holding a leaf per /28 or /124, so a leaf serves at most 16
// addresses.
const (
	branchBits4, leafBits4 = 24, 28
	branchBits6, leafBits6 = 120, 124
)

// DispatchChain returns the KUBE-DST- chain of a tree prefix.
func DispatchChain(p netip.Prefix) string {
	h := sha256.Sum256([]byte(p.String()))
	return prefixDST + base32.StdEncoding.EncodeToString(h[:])[:16]
}

// dispatchTree groups the nat KUBE-SERVICES rules by destination prefix.
// KUBE-SERVICES jumps by /24 to a branch, a branch by /28 to a leaf, and
// a leaf holds the Services' own rules for its 16 addresses, in their
// canonical order. Rules for the same address keep their relative order,
// and no packet can match a rule of another leaf, so the tree makes the
// same decisions as the linear chain.
type dispatchTree struct {
	branchBits, leafBits int
	branches             map[netip.Prefix]*dispatchBranch
	// jumps counts the rules of KUBE-SERVICES and the branches (after
	// write).
	jumps int
}

type dispatchBranch struct {
	leaves map[netip.Prefix][]string
}

func newDispatchTree(ipv6 bool) *dispatchTree {
	t := &dispatchTree{branchBits: branchBits4, leafBits: leafBits4, branches: map[netip.Prefix]*dispatchBranch{}}
	if ipv6 {
		t.branchBits, t.leafBits = branchBits6, leafBits6
	}
	return t
}

func (t *dispatchTree) prefixes(a netip.Addr) (branch, leaf netip.Prefix) {
	branch, _ = a.Prefix(t.branchBits)
	leaf, _ = a.Prefix(t.leafBits)
	return branch, leaf
}

// add puts a KUBE-SERVICES rule (with its destination) in its leaf.
func (t *dispatchTree) add(r topRule) {
	bp, lp := t.prefixes(r.dst)
	b := t.branches[bp]
	if b == nil {
		b = &dispatchBranch{leaves: map[netip.Prefix][]string{}}
		t.branches[bp] = b
	}
	b.leaves[lp] = append(b.leaves[lp], r.args)
}

func sortedPrefixes[V any](m map[netip.Prefix]V) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// write appends KUBE-SERVICES's jumps to the branches to rules, and the
// branches and leaves (their declarations to chains, their rules to
// rules). With dirty == nil every chain is written; otherwise only the
// branches and leaves holding one of the dirty addresses (the others are
// already in the kernel as they should be).
func (t *dispatchTree) write(chains, rules *lineBuffer, dirty []netip.Addr) {
	var dirtyBranch, dirtyLeaf map[netip.Prefix]bool
	if dirty != nil {
		dirtyBranch, dirtyLeaf = map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
		for _, a := range dirty {
			bp, lp := t.prefixes(a)
			dirtyBranch[bp], dirtyLeaf[lp] = true, true
		}
	}
	t.jumps = 0
	branches := sortedPrefixes(t.branches)
	for _, bp := range branches {
		rules.write("-A", ChainServices, "-d", bp.String(), "-j", DispatchChain(bp))
		t.jumps++
	}
	for _, bp := range branches {
		b := t.branches[bp]
		leaves := sortedPrefixes(b.leaves)
		t.jumps += len(leaves)
		if dirty != nil && !dirtyBranch[bp] {
			continue
		}
		bc := DispatchChain(bp)
		chains.chain(bc)
		for _, lp := range leaves {
			rules.write("-A", bc, "-d", lp.String(), "-j", DispatchChain(lp))
		}
		for _, lp := range leaves {
			if dirty != nil && !dirtyLeaf[lp] {
				continue
			}
			lc := DispatchChain(lp)
			chains.chain(lc)
			for _, r := range b.leaves[lp] {
				rules.write("-A", lc, r)
			}
		}
	}
}

// chains lists every chain of the tree.
func (t *dispatchTree) chains() []string {
	var out []string
	for bp, b := range t.branches {
		out = append(out, DispatchChain(bp))
		for lp := range b.leaves {
			out = append(out, DispatchChain(lp))
		}
	}
	return out
}
