package speaker

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"
	"sort"
	"testing"
)

// expectedOrder sorts by the hex text of sha256(node+"#"+ip), a second,
// independent way to the same order (hex preserves byte order).
func expectedOrder(nodes []string, ip string) []string {
	out := slices.Clone(nodes)
	key := func(n string) string { h := sha256.Sum256([]byte(n + "#" + ip)); return hex.EncodeToString(h[:]) }
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

// TestSortCandidatesPinned pins one order computed outside Go
// (printf 'node-a#172.18.0.200' | sha256sum, for each node, sorted), so a
// change of the hashed text (separator, address form) cannot go unnoticed.
func TestSortCandidatesPinned(t *testing.T) {
	got := []string{"node-a", "node-b", "node-c", "node-d"}
	SortCandidates(got, netip.MustParseAddr("172.18.0.200"))
	if want := []string{"node-d", "node-b", "node-a", "node-c"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
