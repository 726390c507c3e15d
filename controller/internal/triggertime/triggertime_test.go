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

// The tracker follows kube-controller-manager's TriggerTimeTracker sync by
// sync: the first sync is the Service's creation; later syncs report only
// trigger times that moved forward; pods without a Ready transition time
// trigger nothing.
func TestKubeControllerManagerRules(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(base)}}
	noCondition := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", CreationTimestamp: metav1.NewTime(base.Add(time.Minute))}}
	noTime := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "untimed", CreationTimestamp: metav1.NewTime(base.Add(time.Minute))},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	a1 := readyPod("a", base.Add(2*time.Minute), "")
	a0 := readyPod("a", base.Add(time.Minute), "") // the same pod, an earlier transition
	b := readyPod("b", base.Add(3*time.Minute), "")
	steps := []struct {
		name string
		pods []*corev1.Pod
		want time.Time
	}{
		{"first sync: the Service's creation, whatever the pods", []*corev1.Pod{a1, noCondition}, base},
		{"nothing new", []*corev1.Pod{a1, noCondition}, time.Time{}},
		{"pods without a Ready time trigger nothing", []*corev1.Pod{a1, noCondition, noTime}, time.Time{}},
		{"a new ready pod", []*corev1.Pod{a1, b}, b.Status.Conditions[0].LastTransitionTime.Time},
		{"a transition time that moved back", []*corev1.Pod{a0, b}, time.Time{}},
		{"forward again", []*corev1.Pod{a1, b}, a1.Status.Conditions[0].LastTransitionTime.Time},
		{"a pod gone and back counts again", []*corev1.Pod{a1}, time.Time{}},
		{"back", []*corev1.Pod{a1, b}, b.Status.Conditions[0].LastTransitionTime.Time},
	}
	tr := NewTracker()
	for _, s := range steps {
		if got := tr.Compute("ns/s", svc, s.pods); !got.Equal(s.want) {
			t.Errorf("%s: trigger %v, want %v", s.name, got, s.want)
		}
	}
	newer := svc.DeepCopy()
	newer.CreationTimestamp = metav1.NewTime(base.Add(time.Hour))
	if got := tr.Compute("ns/s", newer, []*corev1.Pod{a1, b}); !got.Equal(newer.CreationTimestamp.Time) {
		t.Errorf("Service made again: trigger %v, want its creation", got)
	}
	tr.Forget("ns/s")
	if got := tr.Compute("ns/s", svc, []*corev1.Pod{a1, b}); !got.Equal(base) {
		t.Errorf("after Forget: trigger %v, want the Service's creation", got)
	}
}
