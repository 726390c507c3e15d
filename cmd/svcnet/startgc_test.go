package main

import (
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestRelaxGCForStart(t *testing.T) {
	prevPct, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prevPct); debug.SetMemoryLimit(prevLimit) })

	limit := startHeapLimit()
	if limit < 64<<20 || limit > startHeapMax {
		t.Fatalf("startHeapLimit() = %d, want within [64 MiB, %d]", limit, startHeapMax)
	}
	restore := relaxGCForStart(50)
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("during the start GOGC = %d, want off (-1)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("during the start the memory limit = %d, want %d", got, limit)
	}
	restore()
	restore() // a second call changes nothing
	if got := debug.SetGCPercent(50); got != 50 {
		t.Errorf("after the first sync GOGC = %d, want the steady 50", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("after the first sync the memory limit = %d, want the previous (none)", got)
	}
}

// A live heap beyond half the start's limit switches to the large start's
// pacing (GOGC startLargeGCPercent under largeStartLimit) until restore.
// It runs in a process of its own: the collector's settings are the
// process's, and other tests' proxies (and their start pacing) may still be
// running in this one.
func TestRelaxGCLargeStart(t *testing.T) {
	if os.Getenv("SVCNET_TEST_GC_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRelaxGCLargeStart$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "SVCNET_TEST_GC_CHILD=1", "GOGC=", "GOMEMLIMIT=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("in its own process: %v\n%s", err, out)
		}
		return
	}
	prevPct, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prevPct); debug.SetMemoryLimit(prevLimit) })

	const limit = 64 << 20
	restore := relaxGC(50, limit)
	live := make([][]byte, 0, 48)
	for range 48 { // 48 MiB live, more than half the limit
		live = append(live, make([]byte, 1<<20))
	}
	var pct int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		runtime.GC() // the live heap is measured by a collection
		pct = debug.SetGCPercent(-1)
		debug.SetGCPercent(pct)
		if pct == startLargeGCPercent {
			break
		}
	}
	if pct != startLargeGCPercent {
		t.Fatalf("with %d MiB live under a %d MiB start limit GOGC = %d, want %d", len(live), limit>>20, pct, startLargeGCPercent)
	}
	if got, want := debug.SetMemoryLimit(-1), largeStartLimit(math.MaxInt64); got != want || got <= limit {
		t.Errorf("large start memory limit = %d, want %d (above the start's %d)", got, want, limit)
	}
	restore()
	if got := debug.SetGCPercent(50); got != 50 {
		t.Errorf("after the first sync GOGC = %d, want the steady 50", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("after the first sync the memory limit = %d, want the previous (none)", got)
	}
	runtime.KeepAlive(live)
}
