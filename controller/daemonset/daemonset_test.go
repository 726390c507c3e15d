package daemonset

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/controller/internal/fakeapi"
)

func start(t *testing.T, objs ...runtime.Object) (*fake.Clientset, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fakeapi.NewClientset(objs...)
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
	for i := 0; i < 500; i++ {
		var ok bool
		if ok, msg = f(); ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: %s", what, msg)
}

func node(name string, ready bool, lbls map[string]string, taints ...corev1.Taint) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}},
	}
}

func daemonSet(name string) *appsv1.DaemonSet {
	sel := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Generation: 1,
			Annotations: map[string]string{appsv1.DeprecatedTemplateGeneration: "1"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}},
		},
	}
}

func mustCreate(t *testing.T, ctx context.Context, client *fake.Clientset, objs ...any) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Node:
			_, err = client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.DaemonSet:
			_, err = client.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = client.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// pods returns the pods not being deleted, by node.
func pods(client *fake.Clientset, ctx context.Context) map[string][]corev1.Pod {
	l, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	out := map[string][]corev1.Pod{}
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
		}
	}
	return out
}

func nodesOf(m map[string][]corev1.Pod) string {
	var ns []string
	for n, ps := range m {
		ns = append(ns, fmt.Sprintf("%s:%d", n, len(ps)))
	}
	sort.Strings(ns)
	return fmt.Sprint(ns)
}

func status(client *fake.Clientset, ctx context.Context, name string) appsv1.DaemonSetStatus {
	ds, _ := client.AppsV1().DaemonSets("default").Get(ctx, name, metav1.GetOptions{})
	return ds.Status
}

func setReady(t *testing.T, ctx context.Context, client *fake.Clientset, p corev1.Pod) {
	t.Helper()
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := client.CoreV1().Pods("default").Update(ctx, &p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPlacement: one pod per eligible node (nodeSelector, taints, the
// tolerations daemon pods get), placed with kube's node affinity and
// spec.nodeName, owned, labelled; pods leave nodes that stop matching and
// arrive on new ones; status counts follow.
func TestPlacement(t *testing.T) {
	client, ctx := start(t)
	linux := map[string]string{"kubernetes.io/os": "linux"}
	mustCreate(t, ctx, client,
		node("a", true, linux),
		node("b", true, linux, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}),
		node("c", true, map[string]string{"kubernetes.io/os": "windows"}),
		// Not ready and unschedulable: daemon pods tolerate both taints.
		node("d", false, linux, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
			corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}))
	ds := daemonSet("agent")
	ds.Spec.Template.Spec.NodeSelector = linux
	mustCreate(t, ctx, client, ds)

	eventually(t, "pods on a and d", func() (bool, string) {
		m := pods(client, ctx)
		return nodesOf(m) == "[a:1 d:1]", nodesOf(m)
	})
	p := pods(client, ctx)["a"][0]
	if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "DaemonSet" || ref.UID != ds.UID {
		t.Errorf("owner = %v", p.OwnerReferences)
	}
	if p.GenerateName != "agent-" || p.Labels["app"] != "agent" || p.Labels[RevisionHashLabel] != TemplateHash(&ds.Spec.Template) || p.Labels[TemplateGenerationLabel] != "1" {
		t.Errorf("generateName %q labels %v", p.GenerateName, p.Labels)
	}
	req := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(req) != 1 || len(req[0].MatchFields) != 1 || req[0].MatchFields[0].Key != "metadata.name" || req[0].MatchFields[0].Values[0] != "a" {
		t.Errorf("node affinity = %+v", req)
	}
	keys := map[string]corev1.TaintEffect{}
	for _, tol := range p.Spec.Tolerations {
		keys[tol.Key] = tol.Effect
	}
	for k, e := range map[string]corev1.TaintEffect{corev1.TaintNodeNotReady: corev1.TaintEffectNoExecute, corev1.TaintNodeUnreachable: corev1.TaintEffectNoExecute,
		corev1.TaintNodeDiskPressure: corev1.TaintEffectNoSchedule, corev1.TaintNodeMemoryPressure: corev1.TaintEffectNoSchedule,
		corev1.TaintNodePIDPressure: corev1.TaintEffectNoSchedule, corev1.TaintNodeUnschedulable: corev1.TaintEffectNoSchedule} {
		if keys[k] != e {
			t.Errorf("toleration %s = %q, want %s", k, keys[k], e)
		}
	}
	if _, ok := keys[corev1.TaintNodeNetworkUnavailable]; ok {
		t.Errorf("network-unavailable toleration on a pod without hostNetwork")
	}
	setReady(t, ctx, client, p)
	eventually(t, "status", func() (bool, string) {
		s := status(client, ctx, "agent")
		return s.DesiredNumberScheduled == 2 && s.CurrentNumberScheduled == 2 && s.NumberReady == 1 && s.NumberAvailable == 1 &&
			s.NumberUnavailable == 1 && s.UpdatedNumberScheduled == 2 && s.NumberMisscheduled == 0 && s.ObservedGeneration == 1, fmt.Sprintf("%+v", s)
	})

	// Node a stops matching the selector: its pod goes. A new node gets one.
	a, _ := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	a.Labels = map[string]string{"kubernetes.io/os": "windows"}
	if _, err := client.CoreV1().Nodes().Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, ctx, client, node("e", true, linux))
	eventually(t, "pods on d and e", func() (bool, string) {
		m := pods(client, ctx)
		return nodesOf(m) == "[d:1 e:1]", nodesOf(m)
	})

	// An untolerated NoSchedule taint keeps the pod (misscheduled); a
	// NoExecute one removes it.
	e, _ := client.CoreV1().Nodes().Get(ctx, "e", metav1.GetOptions{})
	e.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	if _, err := client.CoreV1().Nodes().Update(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "misscheduled", func() (bool, string) {
		s := status(client, ctx, "agent")
		return s.NumberMisscheduled == 1 && s.DesiredNumberScheduled == 1, fmt.Sprintf("%+v", s)
	})
	if m := pods(client, ctx); nodesOf(m) != "[d:1 e:1]" {
		t.Errorf("pods after NoSchedule taint: %s", nodesOf(m))
	}
	e, _ = client.CoreV1().Nodes().Get(ctx, "e", metav1.GetOptions{})
	e.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
	if _, err := client.CoreV1().Nodes().Update(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod leaves e", func() (bool, string) {
		m := pods(client, ctx)
		return nodesOf(m) == "[d:1]", nodesOf(m)
	})
}

// TestExtraAndOrphanPods: a matching orphan on a node is adopted (and,
// under OnDelete, kept though out of date); a second
// pod on a node is deleted (the oldest stays); a failed pod is replaced.
func TestExtraAndOrphanPods(t *testing.T) {
	// The orphan is there (and older) before the controller starts.
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", Labels: map[string]string{"app": "agent"},
		CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Spec: corev1.PodSpec{NodeName: "a", Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}
	client, ctx := start(t, orphan, node("a", true, nil))
	// OnDelete: under a RollingUpdate the unavailable, out-of-date orphan
	// would be replaced at once.
	ds := daemonSet("agent")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	mustCreate(t, ctx, client, ds)
	eventually(t, "orphan adopted, nothing added", func() (bool, string) {
		m := pods(client, ctx)
		if len(m["a"]) != 1 {
			return false, nodesOf(m)
		}
		p := m["a"][0]
		return p.Name == "orphan" && metav1.GetControllerOf(&p) != nil, fmt.Sprintf("%s %v", p.Name, p.OwnerReferences)
	})
	extra := NewPod(daemonSet("agent"), "a", "x")
	extra.GenerateName, extra.Name = "", "extra"
	mustCreate(t, ctx, client, extra)
	eventually(t, "extra deleted", func() (bool, string) {
		m := pods(client, ctx)
		return len(m["a"]) == 1 && m["a"][0].Name == "orphan", nodesOf(m)
	})
	o, _ := client.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{})
	o.Status.Phase = corev1.PodFailed
	client.CoreV1().Pods("default").Update(ctx, o, metav1.UpdateOptions{})
	eventually(t, "failed pod replaced", func() (bool, string) {
		m := pods(client, ctx)
		return len(m["a"]) == 1 && m["a"][0].Name != "orphan", nodesOf(m)
	})
}

// TestRollingUpdate: a template change replaces pods node by node, never
// more than maxUnavailable (1) without an available pod.
func TestRollingUpdate(t *testing.T) {
	client, ctx := start(t)
	mustCreate(t, ctx, client, node("a", true, nil), node("b", true, nil), node("c", true, nil), daemonSet("agent"))
	eventually(t, "3 pods", func() (bool, string) {
		m := pods(client, ctx)
		return nodesOf(m) == "[a:1 b:1 c:1]", nodesOf(m)
	})
	for _, ps := range pods(client, ctx) {
		setReady(t, ctx, client, ps[0])
	}
	eventually(t, "all available", func() (bool, string) {
		s := status(client, ctx, "agent")
		return s.NumberAvailable == 3, fmt.Sprintf("%+v", s)
	})
	ds := setTemplate(t, ctx, client, "agent:2", 2)
	newHash := TemplateHash(&ds.Spec.Template)
	for round := 0; round < 3; round++ {
		var fresh corev1.Pod
		eventually(t, fmt.Sprintf("round %d: one new unready pod", round), func() (bool, string) {
			m := pods(client, ctx)
			updated, unready := 0, 0
			for _, ps := range m {
				if len(ps) != 1 {
					return false, nodesOf(m)
				}
				if ps[0].Labels[RevisionHashLabel] == newHash {
					updated++
					if ps[0].Status.Phase != corev1.PodRunning {
						unready++
						fresh = ps[0]
					}
				}
			}
			return len(m) == 3 && updated == round+1 && unready == 1, fmt.Sprintf("%s updated %d unready %d", nodesOf(m), updated, unready)
		})
		// Wait a little: nothing else may go while this one is unavailable.
		time.Sleep(100 * time.Millisecond)
		m := pods(client, ctx)
		n := 0
		for _, ps := range m {
			n += len(ps)
		}
		if n != 3 || len(m) != 3 {
			t.Fatalf("round %d: %s while a new pod is unavailable", round, nodesOf(m))
		}
		if s := status(client, ctx, "agent"); s.UpdatedNumberScheduled != int32(round+1) || s.NumberUnavailable != 1 || s.ObservedGeneration != 2 {
			t.Errorf("round %d: status %+v", round, s)
		}
		setReady(t, ctx, client, fresh)
	}
	eventually(t, "all updated and available", func() (bool, string) {
		s := status(client, ctx, "agent")
		return s.UpdatedNumberScheduled == 3 && s.NumberAvailable == 3 && s.NumberUnavailable == 0, fmt.Sprintf("%+v", s)
	})
}

// setTemplate changes the image of DaemonSet agent's template as the API
// server would (generation and template generation gen). The fake
// clientset's UpdateStatus writes the metadata it is given, so a status
// write of the controller from its older copy can put back the old
// template generation annotation: the change is made again until it holds.
func setTemplate(t *testing.T, ctx context.Context, client *fake.Clientset, image string, gen int64) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	eventually(t, "template "+image, func() (bool, string) {
		cur, err := client.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		g := strconv.FormatInt(gen, 10)
		if cur.Spec.Template.Spec.Containers[0].Image == image && cur.Generation == gen && cur.Annotations[appsv1.DeprecatedTemplateGeneration] == g {
			ds = cur
			return true, ""
		}
		cur.Spec.Template.Spec.Containers[0].Image = image
		cur.Generation, cur.Annotations[appsv1.DeprecatedTemplateGeneration] = gen, g
		_, err = client.AppsV1().DaemonSets("default").Update(ctx, cur, metav1.UpdateOptions{})
		time.Sleep(200 * time.Millisecond)
		return false, fmt.Sprint(err)
	})
	return ds
}

// TestOnDelete: a template change replaces no pod; a deleted pod comes back
// from the new template.
func TestOnDelete(t *testing.T) {
	client, ctx := start(t)
	ds := daemonSet("agent")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	mustCreate(t, ctx, client, node("a", true, nil), node("b", true, nil), ds)
	eventually(t, "2 pods", func() (bool, string) {
		m := pods(client, ctx)
		return nodesOf(m) == "[a:1 b:1]", nodesOf(m)
	})
	setTemplate(t, ctx, client, "agent:2", 2)
	eventually(t, "observed, nothing updated", func() (bool, string) {
		s := status(client, ctx, "agent")
		return s.ObservedGeneration == 2 && s.UpdatedNumberScheduled == 0, fmt.Sprintf("%+v", s)
	})
	time.Sleep(100 * time.Millisecond)
	victim := pods(client, ctx)["a"][0]
	if victim.Spec.Containers[0].Image != "agent:1" {
		t.Fatalf("pod on a was replaced: %s", victim.Spec.Containers[0].Image)
	}
	client.CoreV1().Pods("default").Delete(ctx, victim.Name, metav1.DeleteOptions{})
	eventually(t, "new pod on a", func() (bool, string) {
		m := pods(client, ctx)
		if len(m["a"]) != 1 {
			return false, nodesOf(m)
		}
		return m["a"][0].Spec.Containers[0].Image == "agent:2" && m["b"][0].Spec.Containers[0].Image == "agent:1", nodesOf(m)
	})
	eventually(t, "one updated", func() (bool, string) {
		s := status(client, ctx, "agent")
		return s.UpdatedNumberScheduled == 1, fmt.Sprintf("%+v", s)
	})
}

// TestNodeAgent: an annotated DaemonSet gets no pods; its status counts
// the node agents' mirror pods its selector matches, on eligible nodes.
func TestNodeAgent(t *testing.T) {
	client, ctx := start(t)
	ds := daemonSet("kube-proxy")
	ds.Annotations[NodeAgentAnnotation] = "true"
	ds.Spec.Template.Spec.HostNetwork = true
	mirror := func(nodeName string, ready bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kube-proxy-" + nodeName,
			Labels:      map[string]string{"app": "kube-proxy"},
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "h"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: types.UID("node-" + nodeName),
				Controller: ptr.To(true)}}},
			Spec:   corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "kube-proxy", Image: "p"}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	// c's taint is not tolerated: its pod is misscheduled; d has none yet.
	mustCreate(t, ctx, client, node("a", true, nil), node("b", true, nil),
		node("c", true, nil, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}), node("d", true, nil),
		mirror("a", true), mirror("b", false), mirror("c", true), ds)
	eventually(t, "status", func() (bool, string) {
		s := status(client, ctx, "kube-proxy")
		return s.DesiredNumberScheduled == 3 && s.CurrentNumberScheduled == 2 && s.UpdatedNumberScheduled == 2 && s.NumberMisscheduled == 1 &&
			s.NumberReady == 1 && s.NumberAvailable == 1 && s.NumberUnavailable == 2 && s.ObservedGeneration == 1, fmt.Sprintf("%+v", s)
	})
	b, _ := client.CoreV1().Pods("default").Get(ctx, "kube-proxy-b", metav1.GetOptions{})
	b.Status.Conditions[0].Status = corev1.ConditionTrue
	client.CoreV1().Pods("default").UpdateStatus(ctx, b, metav1.UpdateOptions{})
	mustCreate(t, ctx, client, mirror("d", true))
	eventually(t, "b ready, d running", func() (bool, string) {
		s := status(client, ctx, "kube-proxy")
		return s.CurrentNumberScheduled == 3 && s.NumberReady == 3 && s.NumberAvailable == 3 && s.NumberUnavailable == 0, fmt.Sprintf("%+v", s)
	})
	client.CoreV1().Pods("default").Delete(ctx, "kube-proxy-a", metav1.DeleteOptions{})
	eventually(t, "a's mirror pod gone", func() (bool, string) {
		s := status(client, ctx, "kube-proxy")
		return s.CurrentNumberScheduled == 2 && s.NumberReady == 2 && s.NumberUnavailable == 1, fmt.Sprintf("%+v", s)
	})
	for n, ps := range pods(client, ctx) {
		for _, p := range ps {
			if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; !ok {
				t.Errorf("node-agent DaemonSet got pod %s on %s", p.Name, n)
			}
		}
	}
}

// TestShouldRun covers the eligibility rules directly.
func TestShouldRun(t *testing.T) {
	ds := daemonSet("agent")
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.NodeSelectorOpDoesNotExist}}}}}}}
	hostNet := ds.DeepCopy()
	hostNet.Spec.Template.Spec.HostNetwork = true
	netTaint := corev1.Taint{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name      string
		ds        *appsv1.DaemonSet
		node      *corev1.Node
		run, keep bool
	}{
		{"plain", ds, node("n", true, nil), true, true},
		{"affinity excludes", ds, node("n", true, map[string]string{"node-role.kubernetes.io/control-plane": ""}), false, false},
		{"NoSchedule", ds, node("n", true, nil, corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoSchedule}), false, true},
		{"NoExecute", ds, node("n", true, nil, corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoExecute}), false, false},
		{"PreferNoSchedule", ds, node("n", true, nil, corev1.Taint{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}), true, true},
		{"unreachable", ds, node("n", false, nil, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}), true, true},
		{"network unavailable", ds, node("n", true, nil, netTaint), false, true},
		{"network unavailable, host network", hostNet, node("n", true, nil, netTaint), true, true},
	} {
		if run, keep := ShouldRun(tc.ds, tc.node); run != tc.run || keep != tc.keep {
			t.Errorf("%s: ShouldRun = %v, %v; want %v, %v", tc.name, run, keep, tc.run, tc.keep)
		}
	}
}
