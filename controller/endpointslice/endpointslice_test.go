package endpointslice

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/proxy/lb"
)

type harness struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	c      *Controller
	gen    int
}

func newHarness(t *testing.T, max int) *harness {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	// The fake API does not generate names; emulate generateName.
	n := 0
	client.PrependReactor("create", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
		if s.Name == "" && s.GenerateName != "" {
			n++
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, n)
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, nil, max, nil)
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	h := &harness{t: t, ctx: ctx, client: client, c: c}
	for _, n := range []struct{ name, zone string }{{"node-1", "zone-a"}, {"node-2", "zone-b"}} {
		h.node(n.name, n.zone)
	}
	return h
}

func (h *harness) node(name, zone string) {
	nd := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	if _, err := h.client.CoreV1().Nodes().Create(h.ctx, nd, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.eventually(func() bool { _, err := h.c.nodes.Get(name); return err == nil })
}

func (h *harness) eventually(f func() bool) {
	h.t.Helper()
	for i := 0; i < 2500; i++ {
		if f() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	h.t.Fatal("condition never became true")
}

func (h *harness) pod(p *corev1.Pod) {
	h.t.Helper()
	h.gen++
	p.ResourceVersion = ""
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations["gen"] = fmt.Sprint(h.gen)
	if _, err := h.client.CoreV1().Pods(p.Namespace).Create(h.ctx, p, metav1.CreateOptions{}); err != nil {
		if _, err = h.client.CoreV1().Pods(p.Namespace).Update(h.ctx, p, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
	want := fmt.Sprint(h.gen)
	h.eventually(func() bool {
		got, err := h.c.pods.Pods(p.Namespace).Get(p.Name)
		return err == nil && got.Annotations["gen"] == want
	})
}

func (h *harness) deletePod(name string) {
	h.t.Helper()
	if err := h.client.CoreV1().Pods("default").Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.eventually(func() bool { _, err := h.c.pods.Pods("default").Get(name); return err != nil })
}

func (h *harness) service(s *corev1.Service) {
	h.t.Helper()
	h.gen++
	s.Annotations = map[string]string{"gen": fmt.Sprint(h.gen)}
	if _, err := h.client.CoreV1().Services(s.Namespace).Create(h.ctx, s, metav1.CreateOptions{}); err != nil {
		if _, err = h.client.CoreV1().Services(s.Namespace).Update(h.ctx, s, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
	want := fmt.Sprint(h.gen)
	h.eventually(func() bool {
		got, err := h.c.services.Services(s.Namespace).Get(s.Name)
		return err == nil && got.Annotations["gen"] == want
	})
}

// sync runs one sync and waits until the slice cache matches the API.
func (h *harness) sync(key string) {
	h.t.Helper()
	var err error
	for i := 0; i < 50; i++ {
		if err = h.c.syncService(h.ctx, key); err == nil || strings.Contains(err.Error(), "Not Found") {
			err = nil
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		h.t.Fatalf("sync %s: %v", key, err)
	}
	h.eventually(func() bool {
		api := h.apiSlices()
		cached, _ := h.c.slices.List(labels.Everything())
		var c []discoveryv1.EndpointSlice
		for _, s := range cached {
			c = append(c, *s)
		}
		return dump(api) == dump(c)
	})
}

func (h *harness) apiSlices() []discoveryv1.EndpointSlice {
	l, err := h.client.DiscoveryV1().EndpointSlices("default").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return l.Items
}

// dump renders all slices, one per line, sorted:
// "<type> ports=[name:port/proto] eps=[ip@pod:r=..s=..t=..@node/zone ...]".
func dump(slices []discoveryv1.EndpointSlice) string {
	var lines []string
	for _, s := range slices {
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d/%s", *p.Name, *p.Port, *p.Protocol))
		}
		sort.Strings(ports)
		var eps []string
		for _, e := range s.Endpoints {
			x := strings.Join(e.Addresses, ",")
			if e.TargetRef != nil {
				x += "@" + e.TargetRef.Name
			}
			x += fmt.Sprintf(":r=%t,s=%t,t=%t", *e.Conditions.Ready, *e.Conditions.Serving, *e.Conditions.Terminating)
			if e.NodeName != nil {
				x += "@" + *e.NodeName
			}
			if e.Zone != nil {
				x += "/" + *e.Zone
			}
			if e.Hostname != nil {
				x += "(h=" + *e.Hostname + ")"
			}
			eps = append(eps, x)
		}
		sort.Strings(eps)
		lines = append(lines, fmt.Sprintf("%s ports=[%s] eps=[%s]", s.AddressType, strings.Join(ports, ","), strings.Join(eps, " ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

var clock = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func mkpod(name, ip, node string, ready bool, lbls map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	clock = clock.Add(time.Second)
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: lbls, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(clock)}}},
	}
}

func mksvc(name string, sel map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("svc-" + name), Labels: map[string]string{"team": "a"}},
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: ports, ClusterIP: "10.96.0.30", IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}
}

func TestSliceStates(t *testing.T) {
	h := newHarness(t, 0)
	app := map[string]string{"app": "myapp"}
	http := corev1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}
	svc := mksvc("myapp", app, corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP})
	key := "default/myapp"
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"service alone: placeholder", func() { h.service(svc) }, "IPv4 ports=[] eps=[]"},
		{"unready pod", func() { h.pod(mkpod("a", "10.244.1.2", "node-1", false, app, http)) },
			"IPv4 ports=[:8080/TCP] eps=[10.244.1.2@a:r=false,s=false,t=false@node-1/zone-a]"},
		{"ready pods on two nodes", func() {
			h.pod(mkpod("a", "10.244.1.2", "node-1", true, app, http))
			h.pod(mkpod("b", "10.244.2.2", "node-2", true, app, http))
		}, "IPv4 ports=[:8080/TCP] eps=[10.244.1.2@a:r=true,s=true,t=false@node-1/zone-a 10.244.2.2@b:r=true,s=true,t=false@node-2/zone-b]"},
		{"pod on a missing node is skipped", func() { h.pod(mkpod("c", "10.244.9.2", "node-9", true, app, http)) },
			"IPv4 ports=[:8080/TCP] eps=[10.244.1.2@a:r=true,s=true,t=false@node-1/zone-a 10.244.2.2@b:r=true,s=true,t=false@node-2/zone-b]"},
		{"terminating pod stays with ready=false", func() {
			h.deletePod("c")
			p := mkpod("b", "10.244.2.2", "node-2", true, app, http)
			now := metav1.Now()
			p.DeletionTimestamp = &now
			h.pod(p)
		}, "IPv4 ports=[:8080/TCP] eps=[10.244.1.2@a:r=true,s=true,t=false@node-1/zone-a 10.244.2.2@b:r=false,s=true,t=true@node-2/zone-b]"},
		{"named port resolved per pod splits slices", func() {
			h.deletePod("b")
			h.pod(mkpod("d", "10.244.2.3", "node-2", true, app, corev1.ContainerPort{Name: "http", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}))
			s := svc.DeepCopy()
			s.Spec.Ports = []corev1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}
			h.service(s)
		}, "IPv4 ports=[web:8080/TCP] eps=[10.244.1.2@a:r=true,s=true,t=false@node-1/zone-a]\nIPv4 ports=[web:9090/TCP] eps=[10.244.2.3@d:r=true,s=true,t=false@node-2/zone-b]"},
		{"all pods gone: back to one placeholder", func() {
			h.deletePod("a")
			h.deletePod("d")
		}, "IPv4 ports=[] eps=[]"},
	}
	for _, st := range steps {
		st.do()
		h.sync(key)
		if got := dump(h.apiSlices()); got != st.want {
			t.Fatalf("step %q:\n got: %s\nwant: %s", st.name, got, st.want)
		}
	}
	s := h.apiSlices()[0]
	if s.Labels[discoveryv1.LabelServiceName] != "myapp" || s.Labels[discoveryv1.LabelManagedBy] != ControllerName || s.Labels["team"] != "a" {
		t.Errorf("labels = %v", s.Labels)
	}
	if s.GenerateName != "myapp-" || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Service" || *s.OwnerReferences[0].Controller != true {
		t.Errorf("meta = %+v", s.ObjectMeta)
	}
}

func TestMaxPerSliceAndMinimalChurn(t *testing.T) {
	h := newHarness(t, 10)
	app := map[string]string{"app": "big"}
	svc := mksvc("big", app, corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP})
	h.service(svc)
	for i := 0; i < 25; i++ {
		h.pod(mkpod(fmt.Sprintf("p%02d", i), fmt.Sprintf("10.244.1.%d", i+2), "node-1", true, app))
	}
	h.sync("default/big")
	sizes := func() []int {
		var out []int
		for _, s := range h.apiSlices() {
			out = append(out, len(s.Endpoints))
		}
		sort.Ints(out)
		return out
	}
	if got := fmt.Sprint(sizes()); got != "[5 10 10]" {
		t.Fatalf("slice sizes = %s, want [5 10 10]", got)
	}
	// One pod changes readiness: exactly one slice is updated.
	before := len(h.client.Actions())
	h.pod(mkpod("p03", "10.244.1.5", "node-1", false, app))
	from := len(h.client.Actions())
	h.sync("default/big")
	writes := 0
	for _, a := range h.client.Actions()[from:] {
		if a.GetVerb() == "create" || a.GetVerb() == "update" || a.GetVerb() == "delete" {
			if a.GetResource().Resource == "endpointslices" {
				writes++
			}
		}
	}
	_ = before
	if writes != 1 {
		t.Errorf("readiness change made %d slice writes, want 1", writes)
	}
	// Resync without change writes nothing.
	from = len(h.client.Actions())
	h.sync("default/big")
	for _, a := range h.client.Actions()[from:] {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
			t.Errorf("unexpected write on no-op sync: %v", a)
		}
	}
}

func TestHeadlessDualStackTypesAndHostname(t *testing.T) {
	h := newHarness(t, 0)
	sel := map[string]string{"app": "db"}
	svc := mksvc("db", sel)
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	svc.Spec.IPFamilies = nil
	h.service(svc)
	p := mkpod("db-0", "10.244.1.9", "node-1", true, sel)
	p.Spec.Hostname, p.Spec.Subdomain = "db-0", "db"
	h.pod(p)
	h.sync("default/db")
	got := dump(h.apiSlices())
	want := "IPv4 ports=[] eps=[10.244.1.9@db-0:r=true,s=true,t=false@node-1/zone-a(h=db-0)]"
	if got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	if _, ok := h.apiSlices()[0].Labels[corev1.IsHeadlessService]; !ok {
		t.Errorf("headless label missing")
	}
}

func TestSelectorlessServiceGetsNoSlices(t *testing.T) {
	h := newHarness(t, 0)
	h.service(mksvc("svc-no-selector", nil, corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP}))
	h.sync("default/svc-no-selector")
	if n := len(h.apiSlices()); n != 0 {
		t.Fatalf("%d slices for a selector-less service", n)
	}
}

func TestTrafficDistributionHints(t *testing.T) {
	sel := map[string]string{"app": "h"}
	svc := mksvc("h", sel, corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP})
	pods := []*corev1.Pod{mkpod("a", "10.244.1.2", "node-1", true, sel)}
	zone := "zone-a"
	for _, c := range []struct{ td, want string }{
		{"PreferClose", "zones=[zone-a] nodes=[]"},
		{"PreferSameZone", "zones=[zone-a] nodes=[]"},
		{"PreferSameNode", "zones=[zone-a] nodes=[node-1]"},
	} {
		td := c.td
		svc.Spec.TrafficDistribution = &td
		d, _ := DesiredForService(svc, pods, nil)
		ep := d[0].Endpoints[0]
		ep.Zone = &zone
		setHints(&ep, &td)
		var zs, ns []string
		for _, z := range ep.Hints.ForZones {
			zs = append(zs, z.Name)
		}
		for _, n := range ep.Hints.ForNodes {
			ns = append(ns, n.Name)
		}
		if got := fmt.Sprintf("zones=%v nodes=%v", zs, ns); got != c.want {
			t.Errorf("%s: %s, want %s", c.td, got, c.want)
		}
	}
	svc.Spec.TrafficDistribution = nil
	if d, _ := DesiredForService(svc, pods, nil); d[0].Endpoints[0].Hints != nil {
		t.Errorf("hints without trafficDistribution")
	}
}

// TestNoHintsForNotReadyEndpoints: as kube-controller-manager 1.37's
// trafficDistribution heuristic, only ready endpoints get hints (a
// terminating or not-ready pod's endpoint gets none).
func TestNoHintsForNotReadyEndpoints(t *testing.T) {
	sel := map[string]string{"app": "h"}
	svc := mksvc("h", sel, corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP})
	td := corev1.ServiceTrafficDistributionPreferSameNode
	svc.Spec.TrafficDistribution = &td
	pods := []*corev1.Pod{mkpod("ready", "10.244.1.2", "node-1", true, sel), mkpod("unready", "10.244.1.3", "node-1", false, sel)}
	d, _ := DesiredForService(svc, pods, nil)
	for _, ep := range d[0].Endpoints {
		ready := *ep.Conditions.Ready
		if (ep.Hints != nil) != ready {
			t.Errorf("endpoint %v ready=%v hints=%+v", ep.Addresses, ready, ep.Hints)
		}
	}
}

// TestPortOrderAsKCM: the ports of a slice come in kube-controller-manager's
// order (by the hash of each port), not the Service's. The expected order is
// what the real kube-controller-manager v1.37.2 wrote for these ports in
// e2e/interop's TestRealKubeControllerManager.
func TestPortOrderAsKCM(t *testing.T) {
	sel := map[string]string{"app": "w"}
	svc := mksvc("w", sel,
		corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(5353), Protocol: corev1.ProtocolUDP})
	d, _ := DesiredForService(svc, []*corev1.Pod{mkpod("a", "10.244.1.2", "node-1", true, sel)}, nil)
	var got []string
	for _, p := range d[0].Ports {
		got = append(got, *p.Name)
	}
	if want := "[http dns metrics]"; fmt.Sprint(got) != want {
		t.Errorf("ports %v, want %s", got, want)
	}
}

// TestPodWeights checks that pod weights (annotation svcnet.io/weight) reach
// the slices as svcnet.io/endpoint-weights, that a weight change alone
// rewrites the slice, and that an invalid weight is ignored with a Warning
// Event on the pod.
func TestPodWeights(t *testing.T) {
	h := newHarness(t, 0)
	rec := record.NewFakeRecorder(10)
	h.c.recorder = rec
	sel := map[string]string{"app": "w"}
	h.service(mksvc("w", sel, corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}))
	heavy := mkpod("heavy", "10.244.1.2", "node-1", true, sel)
	heavy.Annotations = map[string]string{lb.WeightAnnotation: "7"}
	h.pod(heavy)
	quiet := mkpod("quiet", "10.244.1.3", "node-1", true, sel)
	quiet.Annotations = map[string]string{lb.WeightAnnotation: "0"}
	h.pod(quiet)
	h.pod(mkpod("plain", "10.244.2.2", "node-2", true, sel))
	h.sync("default/w")
	weights := func() string {
		var out []string
		for _, s := range h.apiSlices() {
			out = append(out, s.Annotations[lb.EndpointWeightsAnnotation])
		}
		return strings.Join(out, ";")
	}
	if got := weights(); got != "10.244.1.2=7,10.244.1.3=0" {
		t.Fatalf("weights annotation %q", got)
	}
	heavy.Annotations = map[string]string{lb.WeightAnnotation: "3"}
	h.pod(heavy)
	h.sync("default/w")
	if got := weights(); got != "10.244.1.2=3,10.244.1.3=0" {
		t.Fatalf("after a weight change: %q", got)
	}
	heavy.Annotations = map[string]string{lb.WeightAnnotation: "heavy"}
	h.pod(heavy)
	h.sync("default/w")
	if got := weights(); got != "10.244.1.3=0" {
		t.Fatalf("invalid weight not ignored: %q", got)
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, "Warning InvalidWeight") || !strings.Contains(ev, `"heavy" is not an integer`) {
			t.Errorf("event %q", ev)
		}
	default:
		t.Errorf("no Warning Event for the invalid weight")
	}
}
