package deployment

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/controller/internal/fakeapi"
	"github.com/svcnet/svcnet/controller/replicaset"
)

// cluster runs the Deployment and ReplicaSet controllers plus a fake
// kubelet that makes every new pod Running and Ready with an IP.
func cluster(t *testing.T) (*fake.Clientset, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fakeapi.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	dc := New(client, factory, nil, nil)
	rc := replicaset.New(client, factory, nil, nil)
	factory.Start(ctx.Done())
	done := make(chan struct{}, 3)
	go func() { dc.Run(ctx, 2); done <- struct{}{} }()
	go func() { rc.Run(ctx, 2); done <- struct{}{} }()
	var ip atomic.Int32
	go func() {
		defer func() { done <- struct{}{} }()
		for ctx.Err() == nil {
			l, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			for _, p := range l.Items {
				if p.Status.PodIP != "" || p.DeletionTimestamp != nil {
					continue
				}
				p.Spec.NodeName = "node-1"
				p.Status.Phase = corev1.PodRunning
				p.Status.PodIP = fmt.Sprintf("10.244.1.%d", ip.Add(1))
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
				client.CoreV1().Pods("default").Update(ctx, &p, metav1.UpdateOptions{})
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; <-done; <-done; factory.Shutdown() })
	return client, ctx
}

func deployment(name string, n int32, version string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	lbls := map[string]string{"app": name, "version": version}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:" + version}}}},
		},
	}
}

// state renders "rs=<name>:<spec>/<ready> ... pods=<n> status=<ready>/<replicas> updated=<u> available=<a>".
func state(client *fake.Clientset, ctx context.Context, name string) string {
	rsl, _ := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
	var parts []string
	for _, rs := range rsl.Items {
		if *rs.Spec.Replicas == 0 && rs.Status.Replicas == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s:%d/%d", rs.Spec.Template.Labels["version"], *rs.Spec.Replicas, rs.Status.ReadyReplicas))
	}
	pl, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	n := 0
	for _, p := range pl.Items {
		if p.DeletionTimestamp == nil {
			n++
		}
	}
	d, _ := client.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
	return fmt.Sprintf("rs=%s pods=%d ready=%d/%d updated=%d available=%d", strings.Join(parts, ","), n,
		d.Status.ReadyReplicas, *d.Spec.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas)
}

func waitState(t *testing.T, client *fake.Clientset, ctx context.Context, name, step, want string) {
	t.Helper()
	var got string
	// Generous: under a loaded CI machine the informers and rate-limited
	// requeues can take seconds; the state is what is checked, not the time.
	for i := 0; i < 3000; i++ {
		if got = state(client, ctx, name); got == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("step %q:\n got: %s\nwant: %s", step, got, want)
}

func update(t *testing.T, client *fake.Clientset, ctx context.Context, name string, f func(*appsv1.Deployment)) {
	t.Helper()
	for i := 0; i < 20; i++ {
		d, err := client.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f(d)
		d.Generation++
		if _, err = client.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{}); err == nil {
			return
		}
	}
	t.Fatal("could not update deployment")
}

func TestDeploymentStates(t *testing.T) {
	client, ctx := cluster(t)
	if _, err := client.AppsV1().Deployments("default").Create(ctx, deployment("myapp", 3, "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitState(t, client, ctx, "myapp", "create 3", "rs=v1:3/3 pods=3 ready=3/3 updated=3 available=3")

	rsl, _ := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
	rs := rsl.Items[0]
	hash := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	if hash == "" || rs.Name != "myapp-"+hash || rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != hash {
		t.Errorf("replicaset %s labels %v selector %v", rs.Name, rs.Labels, rs.Spec.Selector)
	}
	if rs.Annotations[RevisionAnnotation] != "1" {
		t.Errorf("revision = %q", rs.Annotations[RevisionAnnotation])
	}
	pl, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	for _, p := range pl.Items {
		if !strings.HasPrefix(p.Name, rs.Name+"-") || len(p.Name) != len(rs.Name)+6 {
			t.Errorf("pod name %s", p.Name)
		}
	}
	d, _ := client.AppsV1().Deployments("default").Get(ctx, "myapp", metav1.GetOptions{})
	conds := map[appsv1.DeploymentConditionType]string{}
	for _, c := range d.Status.Conditions {
		conds[c.Type] = string(c.Status) + " " + c.Reason
	}
	if conds[appsv1.DeploymentAvailable] != "True MinimumReplicasAvailable" || conds[appsv1.DeploymentProgressing] != "True NewReplicaSetAvailable" {
		t.Errorf("conditions = %v", conds)
	}
	if d.Status.ObservedGeneration != d.Generation {
		t.Errorf("observedGeneration %d != generation %d", d.Status.ObservedGeneration, d.Generation)
	}

	update(t, client, ctx, "myapp", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) })
	waitState(t, client, ctx, "myapp", "scale 5", "rs=v1:5/5 pods=5 ready=5/5 updated=5 available=5")
	update(t, client, ctx, "myapp", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](2) })
	waitState(t, client, ctx, "myapp", "scale 2", "rs=v1:2/2 pods=2 ready=2/2 updated=2 available=2")

	// Rolling update to v2: the old ReplicaSet ends at 0.
	update(t, client, ctx, "myapp", func(d *appsv1.Deployment) {
		d.Spec.Replicas = ptr.To[int32](4)
		d.Spec.Template.Labels["version"] = "v2"
		d.Spec.Template.Spec.Containers[0].Image = "nginx:v2"
	})
	waitState(t, client, ctx, "myapp", "rolled to v2", "rs=v2:4/4 pods=4 ready=4/4 updated=4 available=4")
	d, _ = client.AppsV1().Deployments("default").Get(ctx, "myapp", metav1.GetOptions{})
	if d.Annotations[RevisionAnnotation] != "2" {
		t.Errorf("deployment revision = %q, want 2", d.Annotations[RevisionAnnotation])
	}

	// Recreate to v3.
	update(t, client, ctx, "myapp", func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		d.Spec.Template.Labels["version"] = "v3"
	})
	waitState(t, client, ctx, "myapp", "recreated as v3", "rs=v3:4/4 pods=4 ready=4/4 updated=4 available=4")
}

func TestRollingUpdateBounds(t *testing.T) {
	// 4 replicas, 25%/25%: maxSurge 1, maxUnavailable 1.
	d := deployment("b", 4, "v2")
	olds := []*appsv1.ReplicaSet{{Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4)}}}
	if got := newRSReplicas(d, olds, 0); got != 1 {
		t.Errorf("new RS may start with %d, want 1 (surge)", got)
	}
	d.Spec.Replicas = ptr.To[int32](10)
	s, u := surgeAndUnavailable(d)
	if s != 3 || u != 2 {
		t.Errorf("10 replicas: surge=%d unavailable=%d, want 3/2", s, u)
	}
	zero := ptrIntStr(0)
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: zero, MaxUnavailable: zero}
	if s, u := surgeAndUnavailable(d); s != 0 || u != 1 {
		t.Errorf("0/0 -> %d/%d, want 0/1", s, u)
	}
}

func ptrIntStr(n int) *intstr.IntOrString { v := intstr.FromInt(n); return &v }
