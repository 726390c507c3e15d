package lb

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
)

func backends(weights ...int) []*Backend {
	var out []*Backend
	for i, w := range weights {
		out = append(out, NewBackend(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 0, byte(i + 1)}), 8080), w))
	}
	return out
}

func mustNew(t *testing.T, name string, bs []*Backend) Scheduler {
	t.Helper()
	s, err := New(name, bs, Options{MaglevTableSize: 251})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func clientKey(i int) Key {
	return Key{
		Src: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
		Dst: netip.MustParseAddr("10.96.0.1"),
	}
}

func sequence(s Scheduler, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		p := s.Pick(Key{}, nil)
		if p == nil {
			b.WriteByte('-')
			continue
		}
		b.WriteByte('a' + p.Addr.Addr().As4()[3] - 1)
	}
	return b.String()
}

func TestRoundRobinCyclesAndSkipsQuiesced(t *testing.T) {
	if got := sequence(mustNew(t, "rr", backends(1, 1, 1)), 7); got != "abcabca" {
		t.Errorf("rr = %q", got)
	}
	// Weights do not matter to rr, except that weight 0 is quiesced.
	if got := sequence(mustNew(t, "rr", backends(5, 0, 1)), 6); got != "acacac" {
		t.Errorf("rr with quiesced b = %q", got)
	}
	if got := sequence(mustNew(t, "rr", backends(0, 0)), 2); got != "--" {
		t.Errorf("rr with no weight = %q", got)
	}
}

func TestWeightedRoundRobinIsIPVSInterleaved(t *testing.T) {
	// ip_vs_wrr with weights 4,3,2: cw 4 → a; cw 3 → a b; cw 2 → a b c; cw 1 → a b c.
	if got := sequence(mustNew(t, "wrr", backends(4, 3, 2)), 18); got != "aababcabcaababcabc" {
		t.Errorf("wrr = %q", got)
	}
	if got := sequence(mustNew(t, "wrr", backends(1, 1)), 4); got != "abab" {
		t.Errorf("wrr equal = %q", got)
	}
	// Distribution over many picks matches the weights exactly per cycle.
	s := mustNew(t, "wrr", backends(5, 1, 0, 2))
	counts := map[string]int{}
	for i := 0; i < 800; i++ {
		counts[s.Pick(Key{}, nil).ID]++
	}
	want := map[string]int{"10.244.0.1:8080": 500, "10.244.0.2:8080": 100, "10.244.0.4:8080": 200}
	for id, n := range want {
		if counts[id] != n {
			t.Errorf("wrr count %s = %d, want %d (all %v)", id, counts[id], n, counts)
		}
	}
	if counts["10.244.0.3:8080"] != 0 {
		t.Errorf("weight-0 backend was picked")
	}
}

func TestSkipGivesNextCandidate(t *testing.T) {
	bs := backends(1, 1, 1)
	dead := func(b *Backend) bool { return b == bs[0] }
	for _, name := range Names() {
		s := mustNew(t, name, bs)
		for i := 0; i < 50; i++ {
			p := s.Pick(clientKey(i), dead)
			if p == nil || p == bs[0] {
				t.Fatalf("%s: picked %v with a skipped", name, p)
			}
		}
		if p := s.Pick(clientKey(1), func(*Backend) bool { return true }); p != nil {
			t.Errorf("%s: everything skipped but picked %s", name, p.ID)
		}
	}
}

func TestConnectionCountingSchedulers(t *testing.T) {
	type tc struct {
		name    string
		weights []int
		active  []int64
		want    int // index of the expected pick
	}
	for _, c := range []tc{
		{"lc", []int{1, 1, 1}, []int64{3, 1, 2}, 1},
		{"lc", []int{1, 1, 1}, []int64{2, 2, 2}, 0}, // tie → first
		{"lc", []int{9, 1, 0}, []int64{3, 2, 0}, 1}, // weight ignored except 0
		// wlc: active/weight → 4/4=1, 1/1=1, 3/2=1.5 → tie a,b → a.
		{"wlc", []int{4, 1, 2}, []int64{4, 1, 3}, 0},
		{"wlc", []int{4, 1, 2}, []int64{5, 1, 1}, 2}, // 1.25, 1, 0.5
		// sed: (active+1)/weight → (0+1)/1=1, (1+1)/4=0.5 → b even though a is idle.
		{"sed", []int{1, 4}, []int64{0, 1}, 1},
		// nq: an idle backend wins outright, whatever the weights.
		{"nq", []int{1, 4}, []int64{0, 1}, 0},
		// nq without idle backends is sed: (3+1)/1=4, (2+1)/4=0.75.
		{"nq", []int{1, 4}, []int64{3, 2}, 1},
		// nq skips weight-0 idle backends.
		{"nq", []int{0, 1, 1}, []int64{0, 2, 1}, 2},
	} {
		bs := backends(c.weights...)
		for i, a := range c.active {
			for j := int64(0); j < a; j++ {
				bs[i].Acquire()
			}
		}
		got := mustNew(t, c.name, bs).Pick(Key{}, nil)
		if got != bs[c.want] {
			t.Errorf("%s weights %v active %v: picked %v, want %s", c.name, c.weights, c.active, got, bs[c.want].ID)
		}
	}
}

func TestLeastConnectionFollowsAcquireRelease(t *testing.T) {
	bs := backends(1, 1, 1)
	s := mustNew(t, "lc", bs)
	// Holding every connection open spreads them evenly.
	for i := 0; i < 9; i++ {
		s.Pick(Key{}, nil).Acquire()
	}
	for _, b := range bs {
		if b.Active() != 3 {
			t.Fatalf("%s active = %d, want 3", b.ID, b.Active())
		}
	}
	bs[2].Release()
	bs[2].Release()
	if p := s.Pick(Key{}, nil); p != bs[2] {
		t.Errorf("after releases picked %s, want %s", p.ID, bs[2].ID)
	}
	bs[2].Release()
	bs[2].Release() // below zero is clamped
	if bs[2].Active() != 0 {
		t.Errorf("active = %d after over-release", bs[2].Active())
	}
}

func TestHashingIsSticky(t *testing.T) {
	for _, name := range []string{"sh", "mh"} {
		bs := backends(1, 1, 1, 1)
		s := mustNew(t, name, bs)
		counts := map[string]int{}
		for i := 0; i < 2000; i++ {
			k := clientKey(i)
			first := s.Pick(k, nil)
			for j := 0; j < 3; j++ {
				if again := s.Pick(k, nil); again != first {
					t.Fatalf("%s: key %v moved from %s to %s", name, k.Src, first.ID, again.ID)
				}
			}
			// A rebuilt scheduler over the same backends agrees (no
			// per-process randomness).
			if other := mustNew(t, name, backends(1, 1, 1, 1)).Pick(k, nil); other.ID != first.ID {
				t.Fatalf("%s: rebuilt scheduler disagrees for %v", name, k.Src)
			}
			counts[first.ID]++
		}
		for _, b := range bs {
			if n := counts[b.ID]; n < 350 || n > 650 {
				t.Errorf("%s: %s got %d of 2000 keys, want about 500 (%v)", name, b.ID, n, counts)
			}
		}
		// Only the source counts for sh/mh: another destination, same backend.
		k := clientKey(7)
		k2 := k
		k2.Dst = netip.MustParseAddr("172.18.0.2")
		if s.Pick(k, nil) != s.Pick(k2, nil) {
			t.Errorf("%s: destination changed the pick", name)
		}
	}
}

func TestDestinationHashingUsesDestination(t *testing.T) {
	s := mustNew(t, "dh", backends(1, 1, 1))
	seen := map[string]bool{}
	for i := 0; i < 300; i++ {
		dst := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		a := s.Pick(Key{Src: netip.MustParseAddr("10.244.9.9"), Dst: dst}, nil)
		b := s.Pick(Key{Src: netip.MustParseAddr("10.244.7.7"), Dst: dst}, nil)
		if a != b {
			t.Fatalf("dh: different sources to %v picked %s and %s", dst, a.ID, b.ID)
		}
		seen[a.ID] = true
	}
	if len(seen) != 3 {
		t.Errorf("dh over 300 destinations used %d backends", len(seen))
	}
}

func TestWeightedHashing(t *testing.T) {
	for _, name := range []string{"sh", "mh"} {
		bs := backends(3, 1)
		s := mustNew(t, name, bs)
		n := 0
		const keys = 4000
		for i := 0; i < keys; i++ {
			if s.Pick(clientKey(i), nil) == bs[0] {
				n++
			}
		}
		if frac := float64(n) / keys; math.Abs(frac-0.75) > 0.06 {
			t.Errorf("%s: weight-3 backend got %.2f of keys, want ≈0.75", name, frac)
		}
	}
}

func TestMaglevDisruptionOnRemoval(t *testing.T) {
	const n, keys = 10, 20000
	all := backends(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	before, err := New("maglev", all, Options{MaglevTableSize: 65537})
	if err != nil {
		t.Fatal(err)
	}
	removed := all[3]
	var rest []*Backend
	for _, b := range all {
		if b != removed {
			rest = append(rest, b)
		}
	}
	after, err := New("mh", rest, Options{MaglevTableSize: 65537})
	if err != nil {
		t.Fatal(err)
	}
	moved, movedOthers := 0, 0
	for i := 0; i < keys; i++ {
		k := clientKey(i)
		a, b := before.Pick(k, nil), after.Pick(k, nil)
		if a != b {
			moved++
			if a != removed {
				movedOthers++
			}
		}
	}
	frac := float64(moved) / keys
	t.Logf("maglev: %.3f of keys moved after removing 1 of %d (%d keys not on the removed backend moved)", frac, n, movedOthers)
	if frac < 0.07 || frac > 0.14 {
		t.Errorf("maglev moved %.3f of keys, want ≈ 1/%d", frac, n)
	}
	if float64(movedOthers)/keys > 0.03 {
		t.Errorf("maglev moved %d keys that were not on the removed backend", movedOthers)
	}
	// Contrast: modulo hashing (sh) moves most keys.
	shBefore, _ := New("sh", all, Options{})
	shAfter, _ := New("sh", rest, Options{})
	shMoved := 0
	for i := 0; i < keys; i++ {
		if shBefore.Pick(clientKey(i), nil) != shAfter.Pick(clientKey(i), nil) {
			shMoved++
		}
	}
	t.Logf("sh: %.3f of keys moved", float64(shMoved)/keys)
}

func TestMaglevTableSizeMustBePrime(t *testing.T) {
	if _, err := New("mh", backends(1), Options{MaglevTableSize: 250}); err == nil {
		t.Error("table size 250 accepted")
	}
	tab, err := MaglevTable(backends(1, 2), 251)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab) != 251 {
		t.Fatalf("table size %d", len(tab))
	}
	for i, b := range tab {
		if b == nil {
			t.Fatalf("slot %d empty", i)
		}
	}
}

func TestRandomSpreads(t *testing.T) {
	bs := backends(1, 1, 1)
	s := mustNew(t, "random", bs)
	counts := map[*Backend]int{}
	for i := 0; i < 3000; i++ {
		counts[s.Pick(Key{}, nil)]++
	}
	// Chi-square with 2 degrees of freedom; 13.8 is p = 0.001.
	chi := 0.0
	for _, b := range bs {
		d := float64(counts[b]) - 1000
		chi += d * d / 1000
	}
	if chi > 13.8 {
		t.Errorf("random distribution %v (chi² %.1f)", counts, chi)
	}
}

func TestResolve(t *testing.T) {
	for _, c := range []struct {
		ann, def, want string
		fell           bool
	}{
		{"", "", "rr", false},
		{"", "wlc", "wlc", false},
		{"sh", "rr", "sh", false},
		{"Maglev", "rr", "mh", false},
		{"bogus", "lc", "lc", true},
		{"bogus", "bogus", "rr", true},
		{" nq ", "rr", "nq", false},
	} {
		got, fell := Resolve(c.ann, c.def)
		if got != c.want || fell != c.fell {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q, %v", c.ann, c.def, got, fell, c.want, c.fell)
		}
	}
	if _, err := New("lblc", nil, Options{}); err == nil || !strings.Contains(err.Error(), "unknown scheduler") {
		t.Errorf("New(lblc) error = %v", err)
	}
}

func TestWeights(t *testing.T) {
	for v, want := range map[string]int{"": 1, "0": 0, "7": 7, " 65535 ": 65535} {
		if got, err := ParseWeight(v); err != nil || got != want {
			t.Errorf("ParseWeight(%q) = %d, %v", v, got, err)
		}
	}
	for _, v := range []string{"-1", "65536", "x", "1.5"} {
		if _, err := ParseWeight(v); err == nil {
			t.Errorf("ParseWeight(%q) accepted", v)
		}
	}
	w, err := ParseEndpointWeights("10.244.1.5=3, 10.244.2.7=0,fd00::1=2,bad,10.0.0.1=x")
	if err == nil {
		t.Error("malformed entries not reported")
	}
	want := map[string]int{"10.244.1.5": 3, "10.244.2.7": 0, "fd00::1": 2}
	if len(w) != len(want) {
		t.Errorf("parsed %v", w)
	}
	for a, n := range want {
		if w[netip.MustParseAddr(a)] != n {
			t.Errorf("weight of %s = %d, want %d", a, w[netip.MustParseAddr(a)], n)
		}
	}
	w[netip.MustParseAddr("10.0.0.9")] = 1
	if got := FormatEndpointWeights(w); got != "10.244.1.5=3,10.244.2.7=0,fd00::1=2" {
		t.Errorf("FormatEndpointWeights = %q", got)
	}
}

func ExampleNew() {
	bs := []*Backend{
		NewBackend(netip.MustParseAddrPort("10.244.1.2:8080"), 2),
		NewBackend(netip.MustParseAddrPort("10.244.2.2:8080"), 1),
	}
	s, _ := New("wrr", bs, Options{})
	for i := 0; i < 3; i++ {
		fmt.Println(s.Pick(Key{}, nil).ID)
	}
	// Output:
	// 10.244.1.2:8080
	// 10.244.1.2:8080
	// 10.244.2.2:8080
}
