package proxy

import (
	"context"
	"sync"
	"time"
)

// BoundedFrequencyRunner runs a function serially, on average at most once
// per MinInterval and at least once per MaxInterval. Run asks for a run soon
// (coalescing with other requests); RetryAfter asks for one after a delay
// (used when a sync failed). Nothing runs until Loop is called.
//
// The minimum interval is a token bucket refilled at one run per
// MinInterval holding up to Burst runs (kube-proxy's iptables runner did
// the same with a burst of 2 until 1.28). With Burst 1 every run waits
// MinInterval after the previous one started. With 2, a change that arrives
// right after a sync (a pod's address, then its readiness a few hundred
// milliseconds later) is programmed at once instead of up to MinInterval
// later, while sustained churn is still held to one run per MinInterval.
type BoundedFrequencyRunner struct {
	name        string
	fn          func()
	minInterval time.Duration
	maxInterval time.Duration
	// Burst is how many runs may happen back to back before MinInterval
	// applies (values below 1 mean 1). Set it before Loop.
	Burst int

	mu         sync.Mutex
	lastRun    time.Time
	tokens     float64
	lastRefill time.Time
	retryAt    time.Time
	pending    bool
	wake       chan struct{}
}

// NewBoundedFrequencyRunner returns a runner for fn. A minInterval of 0 lets
// every request run immediately; maxInterval must be positive.
func NewBoundedFrequencyRunner(name string, fn func(), minInterval, maxInterval time.Duration) *BoundedFrequencyRunner {
	if maxInterval <= 0 {
		maxInterval = time.Hour
	}
	return &BoundedFrequencyRunner{name: name, fn: fn, minInterval: minInterval, maxInterval: maxInterval, wake: make(chan struct{}, 1)}
}

// Run requests a run as soon as MinInterval allows. It never blocks.
func (r *BoundedFrequencyRunner) Run() {
	r.mu.Lock()
	r.pending = true
	r.mu.Unlock()
	r.poke()
}

// RetryAfter requests a run after d unless one happens earlier.
func (r *BoundedFrequencyRunner) RetryAfter(d time.Duration) {
	r.mu.Lock()
	at := time.Now().Add(d)
	if r.retryAt.IsZero() || at.Before(r.retryAt) {
		r.retryAt = at
	}
	r.mu.Unlock()
	r.poke()
}

func (r *BoundedFrequencyRunner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Loop runs fn once immediately and then as requested until ctx ends.
func (r *BoundedFrequencyRunner) Loop(ctx context.Context) {
	r.runOnce()
	for {
		wait := r.nextDelay(time.Now())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.wake:
			t.Stop()
		case <-t.C:
		}
		if r.due(time.Now()) {
			r.runOnce()
		}
	}
}

func (r *BoundedFrequencyRunner) burst() float64 {
	if r.Burst < 1 {
		return 1
	}
	return float64(r.Burst)
}

// refill adds the tokens earned since the last refill. Callers hold mu.
func (r *BoundedFrequencyRunner) refill(now time.Time) {
	if r.lastRefill.IsZero() {
		r.tokens, r.lastRefill = r.burst(), now
		return
	}
	if r.minInterval <= 0 {
		r.tokens = r.burst()
	} else if d := now.Sub(r.lastRefill); d > 0 {
		r.tokens = min(r.burst(), r.tokens+float64(d)/float64(r.minInterval))
	}
	r.lastRefill = now
}

// allowedAt is the earliest time a requested run may start. Callers hold mu.
func (r *BoundedFrequencyRunner) allowedAt(now time.Time) time.Time {
	r.refill(now)
	if r.tokens >= 1 || r.minInterval <= 0 {
		return now
	}
	return now.Add(time.Duration((1 - r.tokens) * float64(r.minInterval)))
}

func (r *BoundedFrequencyRunner) nextDelay(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.lastRun.Add(r.maxInterval)
	if r.pending {
		if at := r.allowedAt(now); at.Before(next) {
			next = at
		}
	}
	if !r.retryAt.IsZero() && r.retryAt.Before(next) {
		next = r.retryAt
	}
	if d := next.Sub(now); d > 0 {
		return d
	}
	return 0
}

func (r *BoundedFrequencyRunner) due(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !now.Before(r.lastRun.Add(r.maxInterval)) {
		return true
	}
	if r.pending && !now.Before(r.allowedAt(now)) {
		return true
	}
	return !r.retryAt.IsZero() && !now.Before(r.retryAt)
}

func (r *BoundedFrequencyRunner) runOnce() {
	r.mu.Lock()
	r.pending = false
	r.retryAt = time.Time{}
	r.lastRun = time.Now()
	r.refill(r.lastRun)
	r.tokens = max(0, r.tokens-1)
	r.mu.Unlock()
	r.fn()
}
