package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A report from before the markers is split at its headings, each section
// carrying the run line; a marked report round-trips.
func TestKeptSections(t *testing.T) {
	legacy := "# Benchmarks\n\n- Run: 2026-11-24 01:04 UTC, took 15m.\n- Command: `cd bench/run && go run . -sizes 1000`\n\n" +
		"## Service proxy: svcnet proxy against kube-proxy v1.37.2\n\ntable\n\n### API server (svcnet apiserver alone)\n\nx\n\n" +
		"## Userspace proxy against HAProxy\n\nu\n\n## Not measured here\n\n- IPVS\n"
	p := filepath.Join(t.TempDir(), "b.md")
	if err := os.WriteFile(p, []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	k := keptSections(p)
	if len(k) != 2 || !strings.Contains(k["proxy"], "### API server") || !strings.Contains(k["proxy"], "run of 2026-11-24 01:04 UTC, took 15m, `cd bench/run && go run . -sizes 1000`") {
		t.Fatalf("legacy: %q", k)
	}
	if strings.Contains(k["userspace"], "Not measured") {
		t.Fatalf("userspace section runs into the next: %q", k["userspace"])
	}
	if err := os.WriteFile(p, []byte("# B\n\n"+k["proxy"]+k["userspace"]+"## Not measured here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k2 := keptSections(p)
	if k2["proxy"] != k["proxy"] || k2["userspace"] != k["userspace"] {
		t.Fatalf("marked report does not round-trip: %q", k2)
	}
}
