package proxy

import (
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

type recordedEvent struct{ svc, typ, reason, msg string }

type fakeSink struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (f *fakeSink) ServiceEvent(svc types.NamespacedName, typ, reason, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, recordedEvent{svc.String(), typ, reason, msg})
}

func TestSchedulerReporterOncePerServiceAndValue(t *testing.T) {
	sink := &fakeSink{}
	r := NewSchedulerReporter(sink, "iptables")
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	r.Report(web, "lc", "random", true)
	r.Report(web, "lc", "random", true) // every sync: still one event
	r.Report(web, "bogus", "random", false)
	r.Forget(web)
	r.Report(web, "bogus", "random", false)
	want := []recordedEvent{
		{"default/web", "Warning", ReasonUnsupportedScheduler, `iptables proxy mode cannot balance with scheduler "lc" (annotation service.kubernetes.io/ipvs-scheduler); using random`},
		{"default/web", "Warning", ReasonUnknownScheduler, `unknown scheduler "bogus" in annotation service.kubernetes.io/ipvs-scheduler; iptables proxy mode uses random`},
		{"default/web", "Warning", ReasonUnknownScheduler, `unknown scheduler "bogus" in annotation service.kubernetes.io/ipvs-scheduler; iptables proxy mode uses random`},
	}
	if len(sink.events) != len(want) {
		t.Fatalf("events = %+v", sink.events)
	}
	for i := range want {
		if sink.events[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, sink.events[i], want[i])
		}
	}
	// No sink: nothing happens, nothing panics.
	NewSchedulerReporter(nil, "x").Report(web, "lc", "rr", true)
	var nilReporter *SchedulerReporter
	nilReporter.Report(web, "lc", "rr", true)
}
