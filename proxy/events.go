package proxy

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EventSink receives what a mode wants users to see on a Service with
// `kubectl describe svc`, such as a scheduler annotation it cannot honour.
// Implementations must not block; svcnet proxy records them as core/v1
// Events through client-go's event broadcaster.
type EventSink interface {
	ServiceEvent(svc types.NamespacedName, eventType, reason, message string)
}

// Event reasons the modes use.
const (
	// ReasonUnknownScheduler: the ipvs-scheduler annotation names no known
	// algorithm; the default is used.
	ReasonUnknownScheduler = "UnknownScheduler"
	// ReasonUnsupportedScheduler: the algorithm exists but this proxy mode
	// cannot express it; the mode's fallback is used.
	ReasonUnsupportedScheduler = "UnsupportedScheduler"
)

// SchedulerReporter turns a mode's scheduler fallbacks into Warning Events,
// once per Service and (requested, used) pair, so a sync loop can call it on
// every sync without flooding the API. The zero value drops nothing and
// reports to no one; build it with NewSchedulerReporter.
type SchedulerReporter struct {
	sink EventSink
	mode string

	mu   sync.Mutex
	seen map[types.NamespacedName]string
}

// NewSchedulerReporter reports for mode (e.g. "nftables") to sink; a nil sink
// makes Report a no-op.
func NewSchedulerReporter(sink EventSink, mode string) *SchedulerReporter {
	return &SchedulerReporter{sink: sink, mode: mode, seen: map[types.NamespacedName]string{}}
}

// Report says that svc asked for scheduler requested and gets used instead.
// known tells whether requested is an algorithm svcnet knows at all (reason
// UnknownScheduler when not, UnsupportedScheduler when the mode can't do it).
func (r *SchedulerReporter) Report(svc types.NamespacedName, requested, used string, known bool) {
	if r == nil || r.sink == nil {
		return
	}
	key := requested + "->" + used
	r.mu.Lock()
	if r.seen[svc] == key {
		r.mu.Unlock()
		return
	}
	r.seen[svc] = key
	r.mu.Unlock()
	reason, msg := ReasonUnsupportedScheduler, fmt.Sprintf("%s proxy mode cannot balance with scheduler %q (annotation %s); using %s", r.mode, requested, AnnotationIPVSScheduler, used)
	if !known {
		reason, msg = ReasonUnknownScheduler, fmt.Sprintf("unknown scheduler %q in annotation %s; %s proxy mode uses %s", requested, AnnotationIPVSScheduler, r.mode, used)
	}
	r.sink.ServiceEvent(svc, v1.EventTypeWarning, reason, msg)
}

// Observe reports b's fallback for svc, if it has one, and otherwise
// forgets what was reported (so that a fallback after the annotation was
// fixed is reported again).
func (r *SchedulerReporter) Observe(svc types.NamespacedName, b Balance) {
	if b.Fallback == "" {
		r.Forget(svc)
		return
	}
	r.Report(svc, b.Requested, b.Scheduler, b.Fallback == ReasonUnsupportedScheduler)
}

// Forget drops what was reported for svc, so that a later fallback (after
// the annotation changed back and forth) is reported again.
func (r *SchedulerReporter) Forget(svc types.NamespacedName) {
	if r == nil {
		return
	}
	r.mu.Lock()
	delete(r.seen, svc)
	r.mu.Unlock()
}
