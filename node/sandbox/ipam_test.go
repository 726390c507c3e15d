package sandbox

import (
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
)

func TestIPAM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	m, err := NewIPAM(netip.MustParsePrefix("10.244.1.0/29"), path)
	if err != nil {
		t.Fatal(err)
	}
	if m.Gateway().String() != "10.244.1.1" {
		t.Errorf("gateway %s", m.Gateway())
	}
	var got []string
	for _, o := range []string{"a", "b", "c", "d", "e"} {
		a, err := m.Allocate(o)
		if err != nil {
			t.Fatalf("allocate %s: %v", o, err)
		}
		got = append(got, a.String())
	}
	want := []string{"10.244.1.2", "10.244.1.3", "10.244.1.4", "10.244.1.5", "10.244.1.6"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	if _, err := m.Allocate("f"); !errors.Is(err, ErrPoolFull) {
		t.Fatalf("full pool: %v", err)
	}
	if a, _ := m.Allocate("c"); a.String() != "10.244.1.4" {
		t.Errorf("same owner got %s", a)
	}
	if err := m.Release("b"); err != nil {
		t.Fatal(err)
	}
	// Reloaded state keeps assignments.
	m2, err := NewIPAM(netip.MustParsePrefix("10.244.1.0/29"), path)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := m2.Allocate("d"); a.String() != "10.244.1.5" {
		t.Errorf("reloaded d = %s", a)
	}
	if a, _ := m2.Allocate("g"); a.String() != "10.244.1.3" {
		t.Errorf("freed address not reused: %s", a)
	}
	if _, err := NewIPAM(netip.MustParsePrefix("10.0.0.0/31"), ""); err == nil {
		t.Error("an IPv4 /31 pod CIDR accepted")
	}
}

// An IPv6 pod CIDR (the second family of a dual-stack node): no broadcast
// address, so the last address is handed out too; the gateway never is.
func TestIPAMIPv6(t *testing.T) {
	m, err := NewIPAM(netip.MustParsePrefix("fd00:10:244:1::/126"), "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Gateway().String() != "fd00:10:244:1::1" {
		t.Errorf("gateway %s", m.Gateway())
	}
	var got []string
	for _, o := range []string{"a", "b"} {
		a, err := m.Allocate(o)
		if err != nil {
			t.Fatalf("allocate %s: %v", o, err)
		}
		got = append(got, a.String())
	}
	if got[0] != "fd00:10:244:1::2" || got[1] != "fd00:10:244:1::3" {
		t.Errorf("got %v", got)
	}
	if _, err := m.Allocate("c"); !errors.Is(err, ErrPoolFull) {
		t.Errorf("full pool: %v", err)
	}
	if _, err := NewIPAM(netip.MustParsePrefix("fd00::/127"), ""); err == nil {
		t.Error("an IPv6 /127 pod CIDR accepted")
	}
	big, err := NewIPAM(netip.MustParsePrefix("fd00:10:244:2::/64"), "")
	if err != nil {
		t.Fatal(err)
	}
	if a, err := big.Allocate("x"); err != nil || a.String() != "fd00:10:244:2::2" {
		t.Errorf("/64: %v %v", a, err)
	}
}

// A pod whose sandbox could not be set up gets the same address on its next
// attempt (ReleaseUnused steps the round-robin back); an address released
// after use is not handed out again at once.
func TestIPAMReleaseUnused(t *testing.T) {
	m, err := NewIPAM(netip.MustParsePrefix("10.244.1.0/24"), "")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.Allocate("dns")
	if err := m.ReleaseUnused("dns"); err != nil {
		t.Fatal(err)
	}
	if again, _ := m.Allocate("dns"); again != a || a.String() != "10.244.1.2" {
		t.Errorf("retry got %s, first attempt %s", again, a)
	}
	b, _ := m.Allocate("web") // .3
	c, _ := m.Allocate("api") // .4
	if err := m.ReleaseUnused("web"); err != nil {
		t.Fatal(err)
	}
	if d, _ := m.Allocate("db"); d.String() != "10.244.1.5" {
		t.Errorf("an unused address that was not the last one handed out: next is %s (web had %s, api %s)", d, b, c)
	}
	if err := m.Release("db"); err != nil {
		t.Fatal(err)
	}
	if e, _ := m.Allocate("cache"); e.String() != "10.244.1.6" {
		t.Errorf("a released address was reused at once: %s", e)
	}
	if err := m.ReleaseUnused("nobody"); err != nil {
		t.Errorf("releasing an owner without an address: %v", err)
	}
}
