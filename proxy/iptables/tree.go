package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
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
// same decisions as the linear chain. It lives on from plan to plan, so a
// partial plan only regroups the changed Services' rules.
type dispatchTree struct {
	branchBits, leafBits int
	branches             map[netip.Prefix]map[netip.Prefix][]topRule
}

func newDispatchTree(ipv6 bool) *dispatchTree {
	t := &dispatchTree{branchBits: branchBits4, leafBits: leafBits4, branches: map[netip.Prefix]map[netip.Prefix][]topRule{}}
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
		b = map[netip.Prefix][]topRule{}
		t.branches[bp] = b
	}
	b[lp] = append(b[lp], r)
}

// remove takes a Service's dispatched rules out of their leaves; empty
// leaves and branches disappear.
func (t *dispatchTree) remove(nn types.NamespacedName, rules []topRule) {
	for _, r := range rules {
		if !r.dispatched(true) {
			continue
		}
		bp, lp := t.prefixes(r.dst)
		b := t.branches[bp]
		if b == nil {
			continue
		}
		b[lp] = slices.DeleteFunc(b[lp], func(x topRule) bool { return x.port.NamespacedName == nn })
		if len(b[lp]) == 0 {
			delete(b, lp)
		}
		if len(b) == 0 {
			delete(t.branches, bp)
		}
	}
}

func sortedPrefixes[V any](m map[netip.Prefix]V) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// dirtySets turns changed addresses into the branches and leaves holding
// them (nil: everything is dirty).
func (t *dispatchTree) dirtySets(dirty []netip.Addr) (branches, leaves sets.Set[netip.Prefix]) {
	if dirty == nil {
		return nil, nil
	}
	branches, leaves = sets.New[netip.Prefix](), sets.New[netip.Prefix]()
	for _, a := range dirty {
		bp, lp := t.prefixes(a)
		branches.Insert(bp)
		leaves.Insert(lp)
	}
	return branches, leaves
}

// write appends KUBE-SERVICES's jumps to the branches to rules, and the
// branches and leaves (their declarations to chains, their rules to
// rules). With dirty == nil every chain is written; otherwise only the
// branches and leaves holding one of the dirty addresses (the others are
// already in the kernel as they should be).
func (t *dispatchTree) write(chains, rules *lineBuffer, dirty []netip.Addr) {
	dirtyBranch, dirtyLeaf := t.dirtySets(dirty)
	branches := sortedPrefixes(t.branches)
	for _, bp := range branches {
		rules.write("-A", ChainServices, "-d", bp.String(), "-j", DispatchChain(bp))
	}
	for _, bp := range branches {
		if dirtyBranch != nil && !dirtyBranch.Has(bp) {
			continue
		}
		b := t.branches[bp]
		leaves := sortedPrefixes(b)
		bc := DispatchChain(bp)
		chains.chain(bc)
		for _, lp := range leaves {
			rules.write("-A", bc, "-d", lp.String(), "-j", DispatchChain(lp))
		}
		for _, lp := range leaves {
			if dirtyLeaf != nil && !dirtyLeaf.Has(lp) {
				continue
			}
			lc := DispatchChain(lp)
			chains.chain(lc)
			// The canonical order: Service ports sorted, then each
			// port's rules in the order they were made.
			slices.SortStableFunc(b[lp], func(x, y topRule) int {
				if c := x.port.Compare(y.port); c != 0 {
					return c
				}
				return x.seq - y.seq
			})
			for _, r := range b[lp] {
				rules.write("-A", lc, r.args)
			}
		}
	}
}

// chainsOf lists the chains of the branches holding the dirty addresses
// (every chain when dirty is nil).
func (t *dispatchTree) chainsOf(dirty []netip.Addr) sets.Set[string] {
	dirtyBranch, _ := t.dirtySets(dirty)
	out := sets.New[string]()
	if dirtyBranch == nil {
		dirtyBranch = sets.New[netip.Prefix]()
		for bp := range t.branches {
			dirtyBranch.Insert(bp)
		}
	}
	for bp := range dirtyBranch {
		b := t.branches[bp]
		if b == nil {
			continue
		}
		out.Insert(DispatchChain(bp))
		for lp := range b {
			out.Insert(DispatchChain(lp))
		}
	}
	return out
}

// jumps counts the rules of KUBE-SERVICES and of the branches.
func (t *dispatchTree) jumps() int {
	n := len(t.branches)
	for _, b := range t.branches {
		n += len(b)
	}
	return n
}
