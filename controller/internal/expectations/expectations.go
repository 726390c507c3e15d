// Package expectations records the pod creations and deletions a controller
// has asked for but not yet seen in its informer cache, so that a sync never
// acts twice on the same stale view (creating or deleting pods again).
// Expectations expire after Timeout so that a lost watch event cannot block
// a controller forever.
package expectations

import (
	"sync"
	"time"
)

// Timeout after which unmet expectations are ignored.
const Timeout = 5 * time.Minute

// Expectations is safe for concurrent use.
type Expectations struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	add, del int
	at       time.Time
}

// New returns an empty set.
func New() *Expectations { return &Expectations{m: map[string]*entry{}} }

// Expect records that key awaits add creations and del deletions.
func (e *Expectations) Expect(key string, add, del int) {
	e.mu.Lock()
	e.m[key] = &entry{add: add, del: del, at: time.Now()}
	e.mu.Unlock()
}

// Observed lowers the pending counts of key by one creation (created) or
// one deletion.
func (e *Expectations) Observed(key string, created bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil {
		if created {
			x.add--
		} else {
			x.del--
		}
	}
}

// Satisfied reports whether key has nothing pending (or its expectations
// expired).
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.m[key]
	return x == nil || (x.add <= 0 && x.del <= 0) || time.Since(x.at) > Timeout
}

// Delete forgets key.
func (e *Expectations) Delete(key string) {
	e.mu.Lock()
	delete(e.m, key)
	e.mu.Unlock()
}
