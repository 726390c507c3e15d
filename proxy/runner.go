package proxy

import (
	"context"
	"sync"
	"time"
)

// BoundedFrequencyRunner runs a function serially, at most once per
// MinInterval and at least once per MaxInterval. Run asks for a run soon
// (coalescing with other requests); RetryAfter asks for one after a delay
// (used when a sync failed). Nothing runs until Loop is called.
type BoundedFrequencyRunner struct {
	name        string
	fn          func()
	minInterval time.Duration
	maxInterval time.Duration

	mu      sync.Mutex
	lastRun time.Time
	retryAt time.Time
	pending bool
	wake    chan struct{}
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

func (r *BoundedFrequencyRunner) nextDelay(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.lastRun.Add(r.maxInterval)
	if r.pending {
		if at := r.lastRun.Add(r.minInterval); at.Before(next) {
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
	if r.pending && !now.Before(r.lastRun.Add(r.minInterval)) {
		return true
	}
	return !r.retryAt.IsZero() && !now.Before(r.retryAt)
}

func (r *BoundedFrequencyRunner) runOnce() {
	r.mu.Lock()
	r.pending = false
	r.retryAt = time.Time{}
	r.lastRun = time.Now()
	r.mu.Unlock()
	r.fn()
}
