package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func node(name string, ready bool, lbls map[string]string) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
}

func pod(name, nodeName string, hostPort int32) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c"}}}}
	if hostPort > 0 {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: hostPort, Protocol: corev1.ProtocolTCP}}
	}
	return p
}

func TestPick(t *testing.T) {
	s := &Scheduler{assumed: map[string]assumedPod{}}
	nodes := []*corev1.Node{node("n1", true, map[string]string{"disk": "ssd"}), node("n2", true, nil), node("n3", false, nil)}
	cordoned := node("n4", true, nil)
	cordoned.Spec.Unschedulable = true
	tainted := node("n5", true, nil)
	tainted.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	nodes = append(nodes, cordoned, tainted)
	existing := []*corev1.Pod{pod("a", "n1", 0), pod("b", "n1", 8080)}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"fewest pods first", pod("x", "", 0), "n2"},
		{"nodeSelector", func() *corev1.Pod {
			p := pod("x", "", 0)
			p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
			return p
		}(), "n1"},
		{"hostPort conflict avoided", func() *corev1.Pod {
			p := pod("x", "", 8080)
			p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
			return p
		}(), ""},
		{"toleration admits tainted node", func() *corev1.Pod {
			p := pod("x", "", 0)
			p.Spec.NodeSelector = map[string]string{}
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
			return p
		}(), "n2"},
	}
	for _, c := range cases {
		got, msg := s.Pick(c.pod, nodes, existing)
		if got != c.want {
			t.Errorf("%s: got %q (%s), want %q", c.name, got, msg, c.want)
		}
	}
	_, msg := s.Pick(cases[2].pod, nodes, existing)
	want := "0/5 nodes are available: 1 node(s) didn't have free ports for the requested pod ports, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
	if msg != want {
		t.Errorf("message:\n got %s\nwant %s", msg, want)
	}
}

func run(t *testing.T, opts Options, bindReactor k8stesting.ReactionFunc) (*fake.Clientset, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(node("n1", true, nil), node("n2", true, nil), node("n3", true, nil))
	if bindReactor != nil {
		client.PrependReactor("create", "pods", bindReactor)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	s := New(client, factory, nil, opts, nil)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return client, ctx
}

func spread(t *testing.T, client *fake.Clientset, ctx context.Context) {
	t.Helper()
	for i := 0; i < 6; i++ {
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod(fmt.Sprintf("p%d", i), "", 0), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var counts map[string]int
	for i := 0; i < 300; i++ {
		l, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		counts = map[string]int{}
		for _, p := range l.Items {
			counts[p.Spec.NodeName]++
		}
		if counts["n1"] == 2 && counts["n2"] == 2 && counts["n3"] == 2 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pods per node = %v, want 2 each", counts)
}

func TestBindingSubresource(t *testing.T) {
	var client *fake.Clientset
	// Emulate the API server: a binding sets spec.nodeName.
	client, ctx := run(t, Options{}, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		obj, err := client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*corev1.Pod)
		p.Spec.NodeName = b.Target.Name
		return true, b, client.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, p, b.Namespace)
	})
	spread(t, client, ctx)
}

func TestFallbackToUpdate(t *testing.T) {
	client, ctx := run(t, Options{FallbackUpdate: true}, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/binding"}, "create")
	})
	spread(t, client, ctx)
}
