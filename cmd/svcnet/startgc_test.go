package main

import (
	"math"
	"runtime/debug"
	"testing"
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
