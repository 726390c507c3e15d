//go:build linux

package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKB is this process's resident file-backed memory (RssFile).
func rssFileKB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssFile:" {
			kb, _ := strconv.Atoi(f[1])
			return kb
		}
	}
	t.Skip("kernel reports no RssFile")
	return 0
}

// pageOutExecutable drops the executable's pages from the resident set,
// and the process keeps running (its code faults back in).
func TestPageOutExecutable(t *testing.T) {
	before := rssFileKB(t)
	n := pageOutExecutable()
	after := rssFileKB(t)
	t.Logf("RssFile %d kB -> %d kB (%d bytes advised)", before, after, n)
	if n <= 0 {
		t.Fatalf("nothing advised")
	}
	if after >= before {
		t.Errorf("RssFile did not drop: %d kB -> %d kB", before, after)
	}
}
