package apiserver_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestEventsV1 checks events.k8s.io/v1 Events as kube-apiserver serves
// them: the same objects as core/v1 Events in another version (note is
// message, regarding is involvedObject, ...), the strict validation of
// events.k8s.io/v1 writes, its field labels, and watches.
func TestEventsV1(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	ev1 := c.EventsV1().Events("default")
	now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	w, err := ev1.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// What kube-proxy's events.k8s.io recorder sends at start.
	starting := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "node-1.starting"},
		EventTime:           now,
		ReportingController: "kube-proxy",
		ReportingInstance:   "kube-proxy-node-1",
		Action:              "StartKubeProxy",
		Reason:              "Starting",
		Regarding:           corev1.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-1"},
		Type:                corev1.EventTypeNormal,
	}
	if _, err := ev1.Create(ctx, starting, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kube-proxy's Starting event: %v", err)
	}
	core, err := c.CoreV1().Events("default").Get(ctx, "node-1.starting", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if core.InvolvedObject.Kind != "Node" || core.InvolvedObject.Name != "node-1" || core.Reason != "Starting" ||
		core.ReportingController != "kube-proxy" || core.ReportingInstance != "kube-proxy-node-1" || core.Action != "StartKubeProxy" ||
		!core.EventTime.Equal(&now) {
		t.Errorf("read as core/v1: %+v", core)
	}
	select {
	case e := <-w.ResultChan():
		if got, ok := e.Object.(*eventsv1.Event); e.Type != watch.Added || !ok || got.Reason != "Starting" {
			t.Errorf("watch: %v %#v", e.Type, e.Object)
		}
	case <-time.After(30 * time.Second):
		t.Error("no watch event")
	}

	// A core/v1 Event (client-go's record package) read as events.k8s.io/v1.
	first := metav1.NewTime(time.Now().Truncate(time.Second))
	if _, err := c.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.legacy"},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: "web"},
		Reason:         "Synced", Message: "all good", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "endpoint-controller"}, FirstTimestamp: first, LastTimestamp: first, Count: 3,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	legacy, err := ev1.Get(ctx, "web.legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if legacy.Note != "all good" || legacy.Regarding.Name != "web" || legacy.DeprecatedSource.Component != "endpoint-controller" ||
		legacy.DeprecatedCount != 3 || !legacy.DeprecatedFirstTimestamp.Equal(&first) {
		t.Errorf("read as events.k8s.io/v1: %+v", legacy)
	}

	// Field selectors: events.k8s.io/v1 labels, mapped to the same fields.
	l, err := ev1.List(ctx, metav1.ListOptions{FieldSelector: "regarding.kind=Node,reportingController=kube-proxy"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "node-1.starting" {
		t.Errorf("field selector: %v %v", l, err)
	}
	if _, err := ev1.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web"}); !apierrors.IsBadRequest(err) ||
		!strings.Contains(err.Error(), "field label not supported: involvedObject.name") {
		t.Errorf("core/v1 label on events.k8s.io/v1: %v", err)
	}

	// Strict validation of events.k8s.io/v1 writes.
	for _, tc := range []struct {
		name   string
		change func(*eventsv1.Event)
		want   []string
	}{
		{"no eventTime", func(e *eventsv1.Event) { e.EventTime = metav1.MicroTime{} }, []string{"eventTime: Required value"}},
		{"no action", func(e *eventsv1.Event) { e.Action = "" }, []string{"action: Required value"}},
		{"deprecated fields", func(e *eventsv1.Event) { e.DeprecatedCount = 2; e.DeprecatedSource.Component = "x" },
			[]string{`count: Invalid value: "": needs to be unset`, `source: Invalid value: "": needs to be unset`}},
		{"bad type", func(e *eventsv1.Event) { e.Type = "Info" }, []string{`type: Invalid value: "": has invalid value: Info`}},
		{"short series", func(e *eventsv1.Event) { e.Series = &eventsv1.EventSeries{Count: 1, LastObservedTime: now} },
			[]string{`series.count: Invalid value: "": should be at least 2`}},
		{"bad controller", func(e *eventsv1.Event) { e.ReportingController = "no spaces allowed" }, []string{"reportingController: Invalid value"}},
	} {
		e := starting.DeepCopy()
		e.Name = "bad"
		tc.change(e)
		_, err := ev1.Create(ctx, e, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want Invalid", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", tc.name, err, w)
			}
		}
	}
	// core/v1 keeps the legacy rules: an Event with eventTime needs the
	// reporting fields, named reportingComponent there.
	_, err = c.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "half"}, EventTime: now, Reason: "R", Action: "A", ReportingInstance: "i"}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "reportingComponent: Required value") {
		t.Errorf("core/v1 event with eventTime and no controller: %v", err)
	}

	// Updates through events.k8s.io/v1: the series may grow, the note not.
	got, err := ev1.Get(ctx, "node-1.starting", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now())}
	if got, err = ev1.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("series update: %v", err)
	}
	got.Note = "changed"
	if _, err := ev1.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "message: Invalid value: \"changed\": field is immutable") {
		t.Errorf("note update: %v", err)
	}
	if err := ev1.Delete(ctx, "node-1.starting", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Events("default").Get(ctx, "node-1.starting", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deleted through events.k8s.io/v1, core/v1 get: %v", err)
	}
}
