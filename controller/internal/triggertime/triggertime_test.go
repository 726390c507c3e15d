package triggertime

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/node/podstatus"
)

func readyPod(name string, transition time.Time, annotation string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(transition.Add(-time.Minute).Truncate(time.Second))},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(transition.Truncate(time.Second))}}}}
	if annotation != "" {
		p.Annotations = map[string]string{podstatus.ReadyTransitionAnnotation: annotation}
	}
	return p
}

// The trigger time is the node agent's precise Ready time when it lies in
// the condition's second, and the condition's whole second otherwise.
func TestPreciseReadyTime(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	sec := at.Truncate(time.Second)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at.Add(-time.Hour).Truncate(time.Second))}}
	cases := []struct {
		name, annotation string
		want             time.Time
	}{
		{"precise", at.Format(time.RFC3339Nano), at},
		{"no annotation", "", sec},
		{"stale (an earlier transition)", at.Add(-3 * time.Second).Format(time.RFC3339Nano), sec},
		{"later second", at.Add(time.Second).Format(time.RFC3339Nano), sec},
		{"unparsable", "soon", sec},
	}
	for _, c := range cases {
		tr := NewTracker()
		// The first sync sees the Service and the pod; the Service is older.
		tr.Compute("ns/s", svc, nil)
		if got := tr.Compute("ns/s", svc, []*corev1.Pod{readyPod("p", at, c.annotation)}); !got.Equal(c.want) {
			t.Errorf("%s: trigger %s, want %s", c.name, got.Format(time.RFC3339Nano), c.want.Format(time.RFC3339Nano))
		}
	}
}
