package main

import (
	"bufio"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A proxy's start is one burst of allocation: the informers' initial lists
// and the first full sync build everything at once (about 800 MB allocated
// at 10,000 Services × 10 endpoints, 85 MB of it live at the end), while
// the live heap grows from nothing to its steady size. Go's collector,
// pacing itself on that growing heap, runs a cycle every time it grows by
// GOGC percent, each marking all that is live so far: at 10,000 Services
// they took a quarter of the time from start to rules in the kernel.
// Until the first sync ends the collector is therefore paced by a memory
// limit instead (startHeapLimit): it runs when the heap reaches the limit,
// a few times instead of a dozen. The steady GOGC comes back after the
// first sync, which then returns the garbage to the kernel
// (AfterFirstSync's FreeOSMemory), or if the first sync does not come.
// When the live heap turns out to be near the limit (a large cluster: the
// informers alone hold more), the rest of the start runs at
// startLargeGCPercent, not the steady GOGC, under a ceiling (largeStartLimit)
// that makes the collector work harder rather than let the heap outgrow
// the machine or the cgroup. GOGC or GOMEMLIMIT in the environment disable
// all of this.
//
// At 50,000 Services (`bench/run -only proxy -impls svcnet -modes
// nftables-shared -sizes 50000 -reps 2`, live heap 385 MB after the first
// sync) the start took 14.1 s [13.3–14.8] with the steady GOGC 50 taking
// over, 13.0 s with GOGC 100 and 12.1 s [11.5–12.6] with GOGC 200, anon RSS
// after the first sync 464 / 468 / 480 MB.
//
// Measured with `bench/run -only proxy -sizes 10000 -impls svcnet`
// (--nftables-endpoint-choice=rules, start to rules in the kernel / anon
// RSS after the first sync): GOGC 50 throughout 2.24 s / 109 MB; no
// collection under a 1 GiB limit 1.67 s / 136 MB (the larger heap leaves
// more fragmentation and metadata behind); under 384 MiB 1.77 s / 119 MB;
// GOGC 400 under 1 GiB 1.82 s / 124 MB.

// startHeapMax caps the heap of the start (startHeapLimit).
const startHeapMax = 384 << 20

// startLargeGCPercent is the GOGC of the rest of a start whose live heap
// outgrew half of startHeapLimit.
const startLargeGCPercent = 200

// startGCTimeout restores the steady collector if the first sync has not
// come by then (an API server out of reach).
const startGCTimeout = 2 * time.Minute

// relaxGCForStart switches the collector off under a memory limit and
// returns the function that restores GOGC steady and the previous limit;
// it is safe to call more than once. If the live heap reaches half the
// limit first, it switches to startLargeGCPercent under largeStartLimit
// until then.
func relaxGCForStart(steady int) (restore func()) {
	return relaxGC(steady, startHeapLimit())
}

func relaxGC(steady int, limit int64) (restore func()) {
	debug.SetGCPercent(-1)
	prev := debug.SetMemoryLimit(limit)
	done := make(chan struct{})
	var (
		once sync.Once
		mu   sync.Mutex // orders the switch to the large start before restore
	)
	restore = func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			close(done)
			debug.SetGCPercent(steady)
			debug.SetMemoryLimit(prev)
		})
	}
	large := func() {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-done:
			return
		default:
		}
		debug.SetMemoryLimit(largeStartLimit(prev))
		debug.SetGCPercent(startLargeGCPercent)
	}
	go func() {
		// The limit makes the collector run when the heap reaches it; a
		// live heap of half the limit would make it run again and again,
		// so then GOGC paces it (large).
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		timeout := time.After(startGCTimeout)
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			select {
			case <-done:
				return
			case <-timeout:
				restore()
				return
			case <-tick.C:
			}
			metrics.Read(live)
			if live[0].Value.Kind() == metrics.KindUint64 && live[0].Value.Uint64() > uint64(limit/2) {
				large()
				select {
				case <-done:
				case <-timeout:
					restore()
				}
				return
			}
		}
	}()
	return restore
}

// largeStartLimit is the memory limit of a large start (relaxGCForStart):
// half the machine's memory, nine tenths of the cgroup's limit, and no more
// than a limit set before.
func largeStartLimit(prev int64) int64 {
	limit := prev
	if total := memTotal(); total > 0 {
		limit = min(limit, total/2)
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 {
			limit = min(limit, v/10*9)
		}
	}
	return limit
}

// startHeapLimit is the memory limit of the start: startHeapMax, or less
// on a small machine or in a small cgroup (a quarter of the memory, half
// the cgroup's limit), and at least 64 MiB.
func startHeapLimit() int64 {
	limit := int64(startHeapMax)
	if total := memTotal(); total > 0 {
		limit = min(limit, total/4)
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 {
			limit = min(limit, v/2)
		}
	}
	return max(limit, 64<<20)
}

// memTotal is the machine's memory from /proc/meminfo (0 if unknown).
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// MemTotal:       24558112 kB
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
