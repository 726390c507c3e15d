package endpoints

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

type harness struct {
	t       *testing.T
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	c       *Controller
	ctx     context.Context
}

func newHarness(t *testing.T) *harness {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, nil, nil)
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	return &harness{t: t, client: client, factory: factory, c: c, ctx: ctx}
}

// apply creates or updates obj through the fake API and waits until the
// informer cache has it.
func (h *harness) apply(obj any) {
	h.t.Helper()
	ctx := h.ctx
	var err error
	switch o := obj.(type) {
	case *corev1.Pod:
		if _, err = h.client.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			o.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
			_, err = h.client.CoreV1().Pods(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
		}
	case *corev1.Service:
		if _, err = h.client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			_, err = h.client.CoreV1().Services(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
		}
	case *corev1.Endpoints:
		_, err = h.client.CoreV1().Endpoints(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	}
	if err != nil {
		h.t.Fatal(err)
	}
	h.waitCache(obj)
}

func (h *harness) waitCache(obj any) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		switch o := obj.(type) {
		case *corev1.Pod:
			p, err := h.c.pods.Pods(o.Namespace).Get(o.Name)
			if err == nil && equalJSON(p, o) {
				return
			}
		case *corev1.Service:
			s, err := h.c.services.Services(o.Namespace).Get(o.Name)
			if err == nil && equalJSON(s.Spec, o.Spec) && equalJSON(s.Labels, o.Labels) {
				return
			}
		case *corev1.Endpoints:
			if _, err := h.c.endpoints.Endpoints(o.Namespace).Get(o.Name); err == nil {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	h.t.Fatalf("informer cache never caught up with %T", obj)
}

func equalJSON(a, b any) bool { return fmt.Sprintf("%v", a) == fmt.Sprintf("%v", b) || sameSpec(a, b) }

func sameSpec(a, b any) bool {
	pa, ok1 := a.(*corev1.Pod)
	pb, ok2 := b.(*corev1.Pod)
	if ok1 && ok2 {
		return fmt.Sprint(pa.Labels, pa.Status, pa.DeletionTimestamp, pa.Spec.NodeName) == fmt.Sprint(pb.Labels, pb.Status, pb.DeletionTimestamp, pb.Spec.NodeName)
	}
	return false
}

func (h *harness) deletePod(ns, name string) {
	h.t.Helper()
	if err := h.client.CoreV1().Pods(ns).Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i < 2500; i++ {
		if _, err := h.c.pods.Pods(ns).Get(name); err != nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	h.t.Fatal("pod never left the cache")
}

func (h *harness) sync(key string) {
	h.t.Helper()
	if err := h.c.syncService(h.ctx, key); err != nil {
		h.t.Fatalf("sync %s: %v", key, err)
	}
	// Let the endpoints informer see our own write before the next step.
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	ep, err := h.client.CoreV1().Endpoints(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	for i := 0; i < 2500; i++ {
		c, err := h.c.endpoints.Endpoints(ns).Get(name)
		if err == nil && c.ResourceVersion == ep.ResourceVersion {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// dump renders Endpoints as one line per subset:
// "ready=[ip@pod,...] notready=[...] ports=[name:port/proto,...]".
func dump(ep *corev1.Endpoints) string {
	if ep == nil {
		return "<none>"
	}
	var lines []string
	for _, s := range ep.Subsets {
		addr := func(list []corev1.EndpointAddress) string {
			var out []string
			for _, a := range list {
				x := a.IP
				if a.TargetRef != nil {
					x += "@" + a.TargetRef.Name
				}
				if a.Hostname != "" {
					x += "(h=" + a.Hostname + ")"
				}
				if a.NodeName != nil {
					x += "[" + *a.NodeName + "]"
				}
				out = append(out, x)
			}
			return strings.Join(out, ",")
		}
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d/%s", p.Name, p.Port, p.Protocol))
		}
		lines = append(lines, fmt.Sprintf("ready=[%s] notready=[%s] ports=[%s]", addr(s.Addresses), addr(s.NotReadyAddresses), strings.Join(ports, ",")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (h *harness) endpoints(ns, name string) *corev1.Endpoints {
	ep, err := h.client.CoreV1().Endpoints(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return ep
}

func service(name string, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: ports, ClusterIP: "10.96.0.20", IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}
}

func tcpPort(name string, port int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP}
}

var clock = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func pod(name, ip string, ready bool, lbls map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	clock = clock.Add(time.Second)
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: lbls, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      ip,
			PodIPs:     []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(clock)}},
		},
	}
	if ip == "" {
		p.Status.PodIPs = nil
	}
	return p
}

func TestEndpointsStates(t *testing.T) {
	h := newHarness(t)
	app := map[string]string{"app": "myapp"}
	http := corev1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}
	svc := service("myapp", app, tcpPort("", 80, intstr.FromInt32(8080)))
	h.apply(svc)
	key := "default/myapp"

	type step struct {
		name string
		do   func()
		want string
	}
	steps := []step{
		{"service alone: empty endpoints", func() {}, ""},
		{"pod without IP is left out", func() { h.apply(pod("a", "", false, app, http)) }, ""},
		{"pod gets an IP but is not ready", func() { h.apply(pod("a", "10.244.1.2", false, app, http)) },
			"ready=[] notready=[10.244.1.2@a[node-1]] ports=[:8080/TCP]"},
		{"pod becomes ready", func() { h.apply(pod("a", "10.244.1.2", true, app, http)) },
			"ready=[10.244.1.2@a[node-1]] notready=[] ports=[:8080/TCP]"},
		{"two more ready pods", func() {
			h.apply(pod("b", "10.244.2.2", true, app, http))
			h.apply(pod("c", "10.244.1.3", true, app, http))
		}, "ready=[10.244.1.2@a[node-1],10.244.1.3@c[node-1],10.244.2.2@b[node-1]] notready=[] ports=[:8080/TCP]"},
		{"pod with other labels is ignored", func() { h.apply(pod("x", "10.244.3.3", true, map[string]string{"app": "other"}, http)) },
			"ready=[10.244.1.2@a[node-1],10.244.1.3@c[node-1],10.244.2.2@b[node-1]] notready=[] ports=[:8080/TCP]"},
		{"readiness lost moves b to notReadyAddresses", func() { h.apply(pod("b", "10.244.2.2", false, app, http)) },
			"ready=[10.244.1.2@a[node-1],10.244.1.3@c[node-1]] notready=[10.244.2.2@b[node-1]] ports=[:8080/TCP]"},
		{"terminating pod c is dropped", func() {
			p := pod("c", "10.244.1.3", true, app, http)
			now := metav1.Now()
			p.DeletionTimestamp = &now
			h.apply(p)
		}, "ready=[10.244.1.2@a[node-1]] notready=[10.244.2.2@b[node-1]] ports=[:8080/TCP]"},
		{"succeeded pod is dropped", func() {
			p := pod("b", "10.244.2.2", false, app, http)
			p.Status.Phase = corev1.PodSucceeded
			h.apply(p)
		}, "ready=[10.244.1.2@a[node-1]] notready=[] ports=[:8080/TCP]"},
		{"publishNotReadyAddresses publishes unready and terminating pods as ready", func() {
			h.apply(pod("b", "10.244.2.2", false, app, http))
			s := svc.DeepCopy()
			s.Spec.PublishNotReadyAddresses = true
			h.apply(s)
		}, "ready=[10.244.1.2@a[node-1],10.244.1.3@c[node-1],10.244.2.2@b[node-1]] notready=[] ports=[:8080/TCP]"},
		{"named targetPort resolves per pod; pod without the name is left out", func() {
			h.apply(pod("c", "10.244.1.3", true, app, corev1.ContainerPort{Name: "http", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}))
			h.apply(pod("b", "10.244.2.2", true, app)) // no named port
			s := svc.DeepCopy()
			s.Spec.Ports = []corev1.ServicePort{tcpPort("web", 80, intstr.FromString("http"))}
			h.apply(s)
		}, "ready=[10.244.1.2@a[node-1]] notready=[] ports=[web:8080/TCP]\nready=[10.244.1.3@c[node-1]] notready=[] ports=[web:9090/TCP]"},
		{"port renamed", func() {
			s := svc.DeepCopy()
			s.Spec.Ports = []corev1.ServicePort{tcpPort("www", 80, intstr.FromString("http"))}
			h.apply(s)
		}, "ready=[10.244.1.2@a[node-1]] notready=[] ports=[www:8080/TCP]\nready=[10.244.1.3@c[node-1]] notready=[] ports=[www:9090/TCP]"},
		{"selector change picks other pods", func() {
			s := svc.DeepCopy()
			s.Spec.Selector = map[string]string{"app": "other"}
			h.apply(s)
		}, "ready=[10.244.3.3@x[node-1]] notready=[] ports=[:8080/TCP]"},
		{"pod deleted", func() { h.deletePod("default", "x") }, ""},
	}
	for _, st := range steps {
		st.do()
		h.sync(key)
		got := dump(h.endpoints("default", "myapp"))
		if got != st.want {
			t.Fatalf("step %q:\n got: %s\nwant: %s", st.name, got, st.want)
		}
	}
	ep := h.endpoints("default", "myapp")
	if ep.Labels[LabelManagedBy] != ControllerName || ep.Labels["app"] != "myapp" {
		t.Errorf("labels = %v", ep.Labels)
	}
}

func TestHeadlessHostnameAndLabels(t *testing.T) {
	h := newHarness(t)
	sel := map[string]string{"app": "db"}
	svc := service("db", sel)
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	h.apply(svc)
	p := pod("db-0", "10.244.1.9", true, sel)
	p.Spec.Hostname, p.Spec.Subdomain = "db-0", "db"
	h.apply(p)
	q := pod("db-1", "10.244.1.10", true, sel)
	q.Spec.Hostname, q.Spec.Subdomain = "db-1", "elsewhere"
	h.apply(q)
	h.sync("default/db")
	ep := h.endpoints("default", "db")
	if got, want := dump(ep), "ready=[10.244.1.10@db-1[node-1],10.244.1.9@db-0(h=db-0)[node-1]] notready=[] ports=[]"; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	if _, ok := ep.Labels[corev1.IsHeadlessService]; !ok {
		t.Errorf("headless label missing: %v", ep.Labels)
	}
	if ep.Subsets[0].Addresses[0].TargetRef.Kind != "Pod" || ep.Subsets[0].Addresses[0].TargetRef.UID == "" {
		t.Errorf("targetRef = %+v", ep.Subsets[0].Addresses[0].TargetRef)
	}
}

func TestSelectorlessServiceUntouchedAndDeleteWithService(t *testing.T) {
	h := newHarness(t)
	svc := service("svc-no-selector", nil, tcpPort("", 80, intstr.FromInt32(80)))
	h.apply(svc)
	hand := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-no-selector", Namespace: "default"},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "47.93.22.98"}}, Ports: []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}},
	}
	h.apply(hand)
	before := len(h.client.Actions())
	h.sync("default/svc-no-selector")
	if got := dump(h.endpoints("default", "svc-no-selector")); got != "ready=[47.93.22.98] notready=[] ports=[:80/TCP]" {
		t.Fatalf("hand-written endpoints changed: %s", got)
	}
	for _, a := range h.client.Actions()[before:] {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("unexpected write %v", a)
		}
	}
	// Service deleted: its hand-written Endpoints stay (not ours)...
	if err := h.client.CoreV1().Services("default").Delete(h.ctx, "svc-no-selector", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, func() bool { _, err := h.c.services.Services("default").Get("svc-no-selector"); return err != nil })
	h.sync("default/svc-no-selector")
	if h.endpoints("default", "svc-no-selector") == nil {
		t.Fatal("hand-written Endpoints deleted")
	}
	// ...while controller-written ones go with their Service.
	sel := map[string]string{"app": "web"}
	h.apply(service("web", sel, tcpPort("", 80, intstr.FromInt32(80))))
	h.sync("default/web")
	if h.endpoints("default", "web") == nil {
		t.Fatal("no endpoints for web")
	}
	if err := h.client.CoreV1().Services("default").Delete(h.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, func() bool { _, err := h.c.services.Services("default").Get("web"); return err != nil })
	h.sync("default/web")
	if h.endpoints("default", "web") != nil {
		t.Fatal("endpoints survived their service")
	}
}

func waitGone(t *testing.T, gone func() bool) {
	t.Helper()
	for i := 0; i < 2500; i++ {
		if gone() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("object never left the cache")
}

func TestNoWriteWhenUnchangedAndTriggerTime(t *testing.T) {
	h := newHarness(t)
	sel := map[string]string{"app": "a"}
	h.apply(service("a", sel, tcpPort("", 80, intstr.FromInt32(80))))
	p := pod("a-1", "10.244.1.2", true, sel)
	h.apply(p)
	h.sync("default/a")
	ep := h.endpoints("default", "a")
	want := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339Nano) // service creation is earliest
	if got := ep.Annotations[corev1.EndpointsLastChangeTriggerTime]; got != want {
		t.Errorf("trigger time = %q, want %q", got, want)
	}
	writes := countWrites(h)
	h.sync("default/a")
	if countWrites(h) != writes {
		t.Errorf("resync with no change wrote to the API")
	}
	q := pod("a-1", "10.244.1.2", false, sel)
	h.apply(q)
	h.sync("default/a")
	ep = h.endpoints("default", "a")
	if got, want := ep.Annotations[corev1.EndpointsLastChangeTriggerTime], q.Status.Conditions[0].LastTransitionTime.UTC().Format(time.RFC3339Nano); got != want {
		t.Errorf("trigger time after readiness change = %q, want %q", got, want)
	}
}

func countWrites(h *harness) int {
	n := 0
	for _, a := range h.client.Actions() {
		switch a.GetVerb() {
		case "create", "update", "delete", "patch":
			n++
		}
	}
	return n
}

func TestTruncation(t *testing.T) {
	svc := service("big", map[string]string{"app": "big"}, tcpPort("", 80, intstr.FromInt32(80)))
	var pods []*corev1.Pod
	for i := 0; i < 1100; i++ {
		pods = append(pods, pod(fmt.Sprintf("p%d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), i%2 == 0, svc.Spec.Selector))
	}
	ep := Desired(svc, pods, nil, time.Time{})
	ready, notReady := 0, 0
	for _, s := range ep.Subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	if ready != 550 || notReady != 450 {
		t.Errorf("ready=%d notReady=%d, want 550/450", ready, notReady)
	}
	if ep.Annotations[corev1.EndpointsOverCapacity] != Truncated {
		t.Errorf("annotations = %v", ep.Annotations)
	}
	if Desired(svc, pods, ep, time.Time{}) != nil {
		t.Errorf("truncated endpoints are rewritten on every sync")
	}
	small := Desired(svc, pods[:10], ep, time.Time{})
	if _, ok := small.Annotations[corev1.EndpointsOverCapacity]; ok {
		t.Errorf("over-capacity annotation kept after shrinking")
	}
}

func TestRunEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, nil, nil)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	sel := map[string]string{"app": "e2e"}
	client.CoreV1().Services("default").Create(ctx, service("e2e", sel, tcpPort("", 80, intstr.FromInt32(8080))), metav1.CreateOptions{})
	for i := 0; i < 3; i++ {
		client.CoreV1().Pods("default").Create(ctx, pod(fmt.Sprintf("e2e-%d", i), fmt.Sprintf("10.244.0.%d", i+2), true, sel), metav1.CreateOptions{})
	}
	want := "ready=[10.244.0.2@e2e-0[node-1],10.244.0.3@e2e-1[node-1],10.244.0.4@e2e-2[node-1]] notready=[] ports=[:8080/TCP]"
	var got string
	for i := 0; i < 500; i++ {
		ep, err := client.CoreV1().Endpoints("default").Get(ctx, "e2e", metav1.GetOptions{})
		if err == nil {
			if got = dump(ep); got == want {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	cancel()
	<-done
}
