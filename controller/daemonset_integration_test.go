package controller_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/controller"
	"github.com/svcnet/svcnet/controller/daemonset"
)

// TestDaemonSetAgainstAPIServer runs the DaemonSet controller against
// svcnet's real apiserver: two Ready nodes and a DaemonSet give one pod on
// each node and a status that counts them (ready once a fake kubelet says
// so); a node-agent DaemonSet gets no pods and its status from the nodes.
func TestDaemonSetAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the apiserver")
	}
	srv := apiservertest.Start(t)
	client := kubernetes.NewForConfigOrDie(srv.Config)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		done <- controller.Run(ctx, client, nil, controller.Options{Controllers: []string{controller.DaemonSet}}, log)
	}()
	t.Cleanup(func() { cancel(); <-done })

	for _, n := range []string{"node-1", "node-2"} {
		got, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sel := map[string]string{"app": "agent"}
	mk := func(name string, annotations map[string]string) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Annotations: annotations},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
					Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}},
			},
		}
	}
	if _, err := client.AppsV1().DaemonSets("kube-system").Create(ctx, mk("agent", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	wait := func(what string, f func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ok, msg := f()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", what, msg)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var pods []corev1.Pod
	wait("one pod per node", func() (bool, string) {
		l, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods = l.Items
		var nodes []string
		for _, p := range pods {
			nodes = append(nodes, p.Spec.NodeName)
		}
		sort.Strings(nodes)
		return fmt.Sprint(nodes) == "[node-1 node-2]", fmt.Sprint(nodes)
	})
	for _, p := range pods {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "DaemonSet" || ref.Name != "agent" {
			t.Errorf("pod %s owner %v", p.Name, p.OwnerReferences)
		}
	}
	status := func(name string, want appsv1.DaemonSetStatus) func() (bool, string) {
		return func() (bool, string) {
			ds, err := client.AppsV1().DaemonSets("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			s := ds.Status
			s.Conditions = nil
			return equality.Semantic.DeepEqual(s, want), fmt.Sprintf("%+v", ds.Status)
		}
	}
	wait("status", status("agent", appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2,
		UpdatedNumberScheduled: 2, NumberUnavailable: 2}))
	// Fake kubelet: the pods run and are ready.
	for _, p := range pods {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if _, err := client.CoreV1().Pods("kube-system").UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wait("ready status", status("agent", appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2,
		UpdatedNumberScheduled: 2, NumberReady: 2, NumberAvailable: 2}))

	// A node agent: no pods; its status counts the nodes' mirror pods (the
	// node agents' static pods) its selector matches.
	proxy := mk("kube-proxy", map[string]string{daemonset.NodeAgentAnnotation: "true"})
	proxy.Spec.Selector.MatchLabels = map[string]string{"k8s-app": "kube-proxy"}
	proxy.Spec.Template.Labels = proxy.Spec.Selector.MatchLabels
	if _, err := client.AppsV1().DaemonSets("kube-system").Create(ctx, proxy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("node agent status without mirror pods", status("kube-proxy", appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 2,
		NumberUnavailable: 2}))
	for _, n := range []string{"node-1", "node-2"} {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy-" + n, Namespace: "kube-system", Labels: proxy.Spec.Selector.MatchLabels,
			Annotations:     map[string]string{corev1.MirrorPodAnnotationKey: "hash-" + n},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n, UID: node.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: n, HostNetwork: true, Containers: []corev1.Container{{Name: "kube-proxy", Image: "proxy:1"}}}}
		m, err = client.CoreV1().Pods("kube-system").Create(ctx, m, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m.Status.Phase = corev1.PodRunning
		m.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if _, err := client.CoreV1().Pods("kube-system").UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wait("node agent status", status("kube-proxy", appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2,
		UpdatedNumberScheduled: 2, NumberReady: 2, NumberAvailable: 2}))
	l, _ := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
	for _, p := range l.Items {
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; !mirror {
			t.Errorf("node-agent DaemonSet has pod %s", p.Name)
		}
	}
}
