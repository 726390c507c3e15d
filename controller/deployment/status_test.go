package deployment

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

// TestStatusCountsAsKubeControllerManager: the Deployment's
// unavailableReplicas counts against the replicas its ReplicaSets are asked
// to run (so a scale-up not yet acted on reports none), and
// terminatingReplicas is the sum of the ReplicaSets' — unknown (nil) when a
// synced ReplicaSet does not report it, with never-synced ReplicaSets
// counting for nothing.
func TestStatusCountsAsKubeControllerManager(t *testing.T) {
	rs := func(spec, replicas, available int32, observed int64, terminating *int32) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{}
		r.Spec.Replicas = ptr.To(spec)
		r.Status = appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: available, AvailableReplicas: available,
			ObservedGeneration: observed, TerminatingReplicas: terminating}
		return r
	}
	d := deployment("web", 4, "v1") // scaled from 2 to 4, not acted on yet
	now := time.Now()

	st := CalculateStatus(d, rs(2, 2, 2, 1, ptr.To(int32(0))), nil, "", now)
	if st.UnavailableReplicas != 0 {
		t.Errorf("unavailableReplicas before the scale-up is acted on: %d, want 0", st.UnavailableReplicas)
	}
	st = CalculateStatus(d, rs(4, 4, 1, 2, ptr.To(int32(0))), nil, "", now)
	if st.UnavailableReplicas != 3 {
		t.Errorf("unavailableReplicas with 1 of 4 available: %d, want 3", st.UnavailableReplicas)
	}

	for _, c := range []struct {
		name string
		olds []*appsv1.ReplicaSet
		want *int32
	}{
		{"sum", []*appsv1.ReplicaSet{rs(0, 0, 0, 3, ptr.To(int32(2)))}, ptr.To(int32(3))},
		{"never synced counts for nothing", []*appsv1.ReplicaSet{rs(0, 0, 0, 0, nil)}, ptr.To(int32(1))},
		{"synced without the field: unknown", []*appsv1.ReplicaSet{rs(0, 0, 0, 3, nil)}, nil},
	} {
		st := CalculateStatus(d, rs(4, 4, 4, 2, ptr.To(int32(1))), c.olds, "", now)
		if !ptr.Equal(st.TerminatingReplicas, c.want) {
			t.Errorf("%s: terminatingReplicas %v, want %v", c.name, ptr.Deref(st.TerminatingReplicas, -1), ptr.Deref(c.want, -1))
		}
	}
}
