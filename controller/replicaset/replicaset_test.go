package replicaset

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/controller/internal/fakeapi"
)

func start(t *testing.T) (*fake.Clientset, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fakeapi.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, nil, nil)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return client, ctx
}

func eventually(t *testing.T, what string, f func() (bool, string)) {
	t.Helper()
	var msg string
	for i := 0; i < 400; i++ {
		var ok bool
		if ok, msg = f(); ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: %s", what, msg)
}

func activePods(client *fake.Clientset, ctx context.Context) []corev1.Pod {
	l, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func TestReplicaSetStates(t *testing.T) {
	client, ctx := start(t)
	sel := map[string]string{"app": "myapp", "pod-template-hash": "abc"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "myapp-abc", Namespace: "default", UID: "rs-uid", Generation: 1},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}},
		},
	}
	if _, err := client.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	count := func(n int) func() (bool, string) {
		return func() (bool, string) {
			ps := activePods(client, ctx)
			return len(ps) == n, fmt.Sprintf("%d pods, want %d", len(ps), n)
		}
	}
	eventually(t, "scale to 3", count(3))
	for _, p := range activePods(client, ctx) {
		if !strings.HasPrefix(p.Name, "myapp-abc-") || len(p.Name) != len("myapp-abc-")+5 {
			t.Errorf("pod name %q is not <rs>-<5 chars>", p.Name)
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != "rs-uid" || ref.Kind != "ReplicaSet" {
			t.Errorf("pod %s owner = %v", p.Name, p.OwnerReferences)
		}
	}
	// Two pods become ready: status follows.
	for i, p := range activePods(client, ctx)[:2] {
		p.Spec.NodeName = "node-1"
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = fmt.Sprintf("10.244.1.%d", i+2)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if _, err := client.CoreV1().Pods("default").Update(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "status", func() (bool, string) {
		got, _ := client.AppsV1().ReplicaSets("default").Get(ctx, "myapp-abc", metav1.GetOptions{})
		s := got.Status
		return s.Replicas == 3 && s.ReadyReplicas == 2 && s.AvailableReplicas == 2 && s.FullyLabeledReplicas == 3 && s.ObservedGeneration == 1,
			fmt.Sprintf("%+v", s)
	})
	// Scale down to 1: the unready, unscheduled pod goes first, then one ready one.
	cur, _ := client.AppsV1().ReplicaSets("default").Get(ctx, "myapp-abc", metav1.GetOptions{})
	cur.Spec.Replicas = ptr.To[int32](1)
	if _, err := client.AppsV1().ReplicaSets("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "scale to 1", count(1))
	if left := activePods(client, ctx)[0]; left.Spec.NodeName != "node-1" {
		t.Errorf("kept the unscheduled pod %s", left.Name)
	}
	// A matching orphan is adopted and counts: scale 2 creates nothing new beyond it.
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", Labels: sel}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "orphan adopted then surplus removed", func() (bool, string) {
		ps := activePods(client, ctx)
		for _, p := range ps {
			if metav1.GetControllerOf(&p) == nil {
				return false, "orphan still unowned"
			}
		}
		return len(ps) == 1, fmt.Sprintf("%d pods", len(ps))
	})
}
