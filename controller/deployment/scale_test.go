package deployment

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

func testRS(name string, age int, size, available int32, desired, maxR string) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			CreationTimestamp: metav1.NewTime(time.Unix(1000, 0).Add(time.Duration(age) * time.Minute)),
			Annotations:       map[string]string{}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(size)},
		Status: appsv1.ReplicaSetStatus{Replicas: size, AvailableReplicas: available},
	}
	if desired != "" {
		rs.Annotations[DesiredReplicasAnnotation] = desired
	}
	if maxR != "" {
		rs.Annotations[MaxReplicasAnnotation] = maxR
	}
	return rs
}

func rsState(rss ...*appsv1.ReplicaSet) string {
	var parts []string
	for _, rs := range rss {
		parts = append(parts, fmt.Sprintf("%s=%d(%s/%s)", rs.Name, *rs.Spec.Replicas,
			rs.Annotations[DesiredReplicasAnnotation], rs.Annotations[MaxReplicasAnnotation]))
	}
	return strings.Join(parts, " ")
}

// TestProportionalScaling follows the Kubernetes documentation's example:
// 10 replicas, maxSurge 3, maxUnavailable 2, a rollout stuck with the old
// ReplicaSet at 8 and the new one at 5; scaling to 15 adds 3 to the old and
// 2 to the new, then scaling to 5 and 0 takes them down in proportion.
func TestProportionalScaling(t *testing.T) {
	ctx := context.Background()
	oldRS := testRS("web-old", 0, 8, 8, "10", "13")
	newRS := testRS("web-new", 1, 5, 0, "10", "13")
	client := fake.NewClientset(oldRS.DeepCopy(), newRS.DeepCopy())
	rec := record.NewFakeRecorder(20)
	c := &Controller{client: client, recorder: rec}
	ms, mu := intstr.FromInt32(3), intstr.FromInt32(2)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](10), Strategy: appsv1.DeploymentStrategy{
			Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &ms, MaxUnavailable: &mu}}},
		Status: appsv1.DeploymentStatus{Replicas: 13},
	}
	olds := []*appsv1.ReplicaSet{oldRS}
	if isScalingEvent(d, newRS, olds) {
		t.Fatal("no scaling event expected before spec.replicas changes")
	}
	for _, step := range []struct {
		replicas int32
		want     string
		events   []string
	}{
		{15, "web-new=7(15/18) web-old=11(15/18)", []string{
			"Normal ScalingReplicaSet Scaled up replica set web-old from 8 to 11",
			"Normal ScalingReplicaSet Scaled up replica set web-new from 5 to 7"}},
		{5, "web-new=3(5/8) web-old=5(5/8)", []string{
			"Normal ScalingReplicaSet Scaled down replica set web-old from 11 to 5",
			"Normal ScalingReplicaSet Scaled down replica set web-new from 7 to 3"}},
		{0, "web-new=0(0/3) web-old=0(0/3)", []string{
			"Normal ScalingReplicaSet Scaled down replica set web-old from 5 to 0",
			"Normal ScalingReplicaSet Scaled down replica set web-new from 3 to 0"}},
	} {
		d.Spec.Replicas = ptr.To(step.replicas)
		if !isScalingEvent(d, newRS, olds) {
			t.Fatalf("scale to %d: not seen as a scaling event", step.replicas)
		}
		if err := c.scaleAll(ctx, d, newRS, olds); err != nil {
			t.Fatal(err)
		}
		l, _ := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
		var got []*appsv1.ReplicaSet
		for i := range l.Items {
			got = append(got, &l.Items[i])
		}
		if s := rsState(got...); s != step.want {
			t.Errorf("scale to %d:\n got %s\nwant %s", step.replicas, s, step.want)
		}
		for _, e := range step.events {
			select {
			case g := <-rec.Events:
				if g != e {
					t.Errorf("scale to %d: event %q, want %q", step.replicas, g, e)
				}
			default:
				t.Errorf("scale to %d: missing event %q", step.replicas, e)
			}
		}
		if isScalingEvent(d, newRS, olds) && step.replicas != 0 {
			t.Errorf("scale to %d: still a scaling event after scaling", step.replicas)
		}
	}
}

// TestScaleAllCases covers the non-proportional branches and the ordering
// and rounding rules of the proportional one.
func TestScaleAllCases(t *testing.T) {
	ctx := context.Background()
	pct := intstr.FromString("25%")
	deploy := func(n, status int32, strategy appsv1.DeploymentStrategyType) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To(n), Strategy: appsv1.DeploymentStrategy{Type: strategy}},
			Status: appsv1.DeploymentStatus{Replicas: status}}
		if strategy == appsv1.RollingUpdateDeploymentStrategyType {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &pct, MaxUnavailable: &pct}
		}
		return d
	}
	for _, tc := range []struct {
		name string
		d    *appsv1.Deployment
		rss  []*appsv1.ReplicaSet // last one is the new ReplicaSet (or nil)
		want string
	}{
		{"single active old, no new", deploy(5, 3, appsv1.RollingUpdateDeploymentStrategyType),
			[]*appsv1.ReplicaSet{testRS("a", 0, 3, 3, "3", "4"), nil}, "a=5(5/7)"},
		{"none active: newest old grows", deploy(2, 0, appsv1.RollingUpdateDeploymentStrategyType),
			[]*appsv1.ReplicaSet{testRS("a", 0, 0, 0, "1", "2"), testRS("b", 1, 0, 0, "1", "2"), nil}, "a=0(1/2) b=2(2/3)"},
		{"saturated new: olds to 0", deploy(4, 4, appsv1.RollingUpdateDeploymentStrategyType),
			[]*appsv1.ReplicaSet{testRS("a", 0, 1, 1, "3", "4"), testRS("n", 1, 4, 4, "4", "5")}, "a=0(4/5) n=4(4/5)"},
		{"recreate with two active: untouched", deploy(6, 4, appsv1.RecreateDeploymentStrategyType),
			[]*appsv1.ReplicaSet{testRS("a", 0, 2, 2, "4", "4"), testRS("n", 1, 2, 0, "4", "4")}, "a=2(4/4) n=2(4/4)"},
		// 4 -> 8 replicas, surge 25%: allowed 10, total 5 (2+3 under max
		// 5): n round(3*10/5)=6 (+3), a min(round(2*10/5)-2=2, 2)=2.
		{"grow, larger first", deploy(8, 5, appsv1.RollingUpdateDeploymentStrategyType),
			[]*appsv1.ReplicaSet{testRS("a", 0, 2, 2, "4", "5"), testRS("n", 1, 3, 0, "4", "5")}, "a=4(8/10) n=6(8/10)"},
		// Equal sizes growing: newer first gets the rounding leftover.
		// 4 -> 5: allowed 7 (surge 2), total 4: each round(2*7/5)=3 (+1,
		// +1), leftover 1 to the newer.
		{"grow tie, newer first", deploy(5, 4, appsv1.RollingUpdateDeploymentStrategyType),
			[]*appsv1.ReplicaSet{testRS("a", 0, 2, 2, "4", "5"), testRS("n", 1, 2, 0, "4", "5")}, "a=3(5/7) n=4(5/7)"},
		// Equal sizes shrinking: older first. 4 -> 1: allowed 2, total 4:
		// a round(2*2/5)=1 (-1), n max(-1, -1)=-1; no leftover.
		{"shrink tie, older first", deploy(1, 4, appsv1.RollingUpdateDeploymentStrategyType),
			[]*appsv1.ReplicaSet{testRS("a", 0, 2, 2, "4", "5"), testRS("n", 1, 2, 0, "4", "5")}, "a=1(1/2) n=1(1/2)"},
		// No max-replicas annotation: status.replicas (4) is the base, so
		// each grows to round(2*10/4)=5; with status.replicas 0 too, no
		// share at all and the leftover (6) goes to the first (newer).
		{"missing annotation uses status.replicas", deploy(8, 4, appsv1.RollingUpdateDeploymentStrategyType),
			[]*appsv1.ReplicaSet{testRS("a", 0, 2, 2, "4", ""), testRS("n", 1, 2, 0, "4", "")}, "a=5(8/10) n=5(8/10)"},
		{"missing annotation and status", deploy(8, 0, appsv1.RollingUpdateDeploymentStrategyType),
			[]*appsv1.ReplicaSet{testRS("a", 0, 2, 2, "4", ""), testRS("n", 1, 2, 0, "4", "")}, "a=2(8/10) n=8(8/10)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, rs := range tc.rss {
				if rs != nil {
					if err := client.Tracker().Add(rs.DeepCopy()); err != nil {
						t.Fatal(err)
					}
				}
			}
			newRS := tc.rss[len(tc.rss)-1]
			olds := tc.rss[:len(tc.rss)-1]
			c := &Controller{client: client}
			if err := c.scaleAll(ctx, tc.d, newRS, olds); err != nil {
				t.Fatal(err)
			}
			l, _ := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
			var got []*appsv1.ReplicaSet
			for i := range l.Items {
				got = append(got, &l.Items[i])
			}
			if s := rsState(got...); s != tc.want {
				t.Errorf("got %s, want %s", s, tc.want)
			}
		})
	}
}
