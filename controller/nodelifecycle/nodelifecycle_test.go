package nodelifecycle

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// TestSilentNodeAndBack: a Node whose heartbeat and Lease are older than
// the grace period goes Unknown, tainted unreachable, its ready pod not
// ready; a Lease renewed within the grace period keeps it; Ready=True again
// removes the taints.
func TestSilentNodeAndBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(t0)},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
			{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.NewTime(t0)},
			{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, LastHeartbeatTime: metav1.NewTime(t0)},
		}}}
	renew := metav1.NewMicroTime(t0.Add(30 * time.Second))
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: leaseNamespace},
		Spec: coordinationv1.LeaseSpec{RenewTime: &renew}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: v1.PodSpec{NodeName: "n1"},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}}
	client := fake.NewSimpleClientset(node, lease, pod)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, 50*time.Second, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	factory.Start(ctx.Done())
	defer factory.Shutdown() // after cancel: the informers stop with ctx
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches not synced")
	}
	now := t0.Add(70 * time.Second) // 70 s after the heartbeat, 40 s after the Lease renewal
	c.now = func() time.Time { return now }
	c.monitor(ctx)
	if n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); readyCondition(n).Status != v1.ConditionTrue || len(n.Spec.Taints) != 0 {
		t.Fatalf("node with a Lease renewed 40 s ago (grace 50 s) changed: %+v %v", n.Status.Conditions, n.Spec.Taints)
	}

	now = t0.Add(81 * time.Second)
	c.monitor(ctx)
	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	for _, cond := range n.Status.Conditions {
		if cond.Status != v1.ConditionUnknown || cond.Reason != reasonUnknown && cond.Reason != reasonNeverUpdated {
			t.Errorf("condition %s: %s %s, want Unknown", cond.Type, cond.Status, cond.Reason)
		}
	}
	if len(n.Status.Conditions) != 4 {
		t.Errorf("conditions %v: want Ready, MemoryPressure, DiskPressure, PIDPressure", n.Status.Conditions)
	}
	if len(n.Spec.Taints) != 2 || n.Spec.Taints[0].Key != v1.TaintNodeUnreachable {
		t.Errorf("taints %v: want the two unreachable taints", n.Spec.Taints)
	}
	if p, _ := client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); podReady(p) {
		t.Error("pod of the silent node still ready")
	}

	// The agent is back: it posts Ready=True.
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(now)}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The new status, not the first one (Ready=True at t0): the informer
		// may not even have seen the Unknown yet.
		if cur, _ := c.nodes.Get("n1"); cur != nil && readyCondition(cur).Status == v1.ConditionTrue &&
			readyCondition(cur).LastHeartbeatTime.Time.Equal(now) && hasUnreachableTaint(cur) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("informer did not see the node's new status")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.monitor(ctx)
	if n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); len(n.Spec.Taints) != 0 {
		t.Errorf("taints %v after the node is Ready again", n.Spec.Taints)
	}
}

// TestTaintRetried: when the taint write fails after the status went
// Unknown, the next pass (which sees an Unknown node) still taints it.
func TestTaintRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(t0)},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
			{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(t0)}}}}
	client := fake.NewSimpleClientset(node)
	failing := true
	client.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "" && failing {
			return true, nil, apierrors.NewServiceUnavailable("etcd leader changed")
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, 50*time.Second, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches not synced")
	}
	c.now = func() time.Time { return t0.Add(time.Minute) }
	c.monitor(ctx)
	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if readyCondition(n).Status != v1.ConditionUnknown || len(n.Spec.Taints) != 0 {
		t.Fatalf("after a failed taint write: Ready=%s taints %v, want Unknown and none", readyCondition(n).Status, n.Spec.Taints)
	}
	failing = false
	deadline := time.Now().Add(10 * time.Second)
	for cur, _ := c.nodes.Get("n1"); cur == nil || readyCondition(cur).Status != v1.ConditionUnknown; cur, _ = c.nodes.Get("n1") {
		if time.Now().After(deadline) {
			t.Fatal("informer did not see the Unknown status")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.monitor(ctx)
	if n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); !hasUnreachableTaint(n) {
		t.Errorf("taints %v: the next pass did not taint the silent node", n.Spec.Taints)
	}
}
