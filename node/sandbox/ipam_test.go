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
	if _, err := NewIPAM(netip.MustParsePrefix("fd00::/64"), ""); err == nil {
		t.Error("IPv6 pod CIDR accepted")
	}
}
