package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/testbed"
)

var poolsGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}

// TestRealMetalLBController runs MetalLB's own controller (v0.15.2, built
// by e2e/interop/metallbbuild) against `svcnet apiserver`, then the same
// inputs against a fresh `svcnet apiserver` with svcnet's lbipam
// controller, and compares what each wrote: every Service's
// status.loadBalancer, its metallb.io annotations and the Events recorded
// for it, and every IPAddressPool's status. The inputs cover automatic
// assignment in pool order, pools chosen by annotation, requested
// addresses, shared addresses (same key and disjoint ports, and a port
// clash), an address in no pool, namespace and label allocation with
// priorities, avoidBuggyIPs, dual stack, a foreign loadBalancerClass, an
// exhausted pool, a pool added while a Service waits, a deleted Service's
// address reused, and a Service that stops being a LoadBalancer.
//
// SVCNET_METALLB_CONTROLLER is the path of MetalLB's controller binary;
// without it the test is skipped.
func TestRealMetalLBController(t *testing.T) {
	mlb := os.Getenv("SVCNET_METALLB_CONTROLLER")
	if mlb == "" {
		t.Skip("SVCNET_METALLB_CONTROLLER is not set (MetalLB's controller: cd e2e/interop/metallbbuild && go build -o DIR go.universe.tf/metallb/controller)")
	}
	if os.Geteuid() != 0 {
		t.Skip("interop: TestRealMetalLBController needs root (network namespaces)")
	}
	testbed.RequireCommand(t, "ip")
	svcnet := os.Getenv("SVCNET_BIN")
	if svcnet == "" {
		svcnet = buildSvcnet(t)
	}
	var real, ours map[string]any
	t.Run("metallb-controller", func(t *testing.T) {
		real = runMetalLBScenario(t, svcnet, func(t *testing.T, ns *testbed.NetNS, data, logPath string) {
			startLoggedEnv(t, ns, logPath, []string{"KUBECONFIG=" + filepath.Join(data, "kubeconfig")},
				mlb, "--namespace", "metallb-system", "--disable-cert-rotation", "--webhook-mode", "disabled",
				"--port", "17472", "--log-level", "info")
		})
	})
	t.Run("svcnet-lbipam", func(t *testing.T) {
		ours = runMetalLBScenario(t, svcnet, func(t *testing.T, ns *testbed.NetNS, data, logPath string) {
			startLogged(t, ns, logPath, svcnet, "controllers", "--kubeconfig", filepath.Join(data, "kubeconfig"),
				"--controllers", "lbipam", "--leader-elect=false")
		})
	})
	if real == nil || ours == nil {
		t.Fatal("a scenario did not complete")
	}
	compareWritten(t, "metallb-controller", real, ours)
}

// startLoggedEnv is startLogged with environment variables (as
// `env K=V ... program`).
func startLoggedEnv(t *testing.T, ns *testbed.NetNS, logPath string, env []string, args ...string) {
	t.Helper()
	startLogged(t, ns, logPath, append(append([]string{"env"}, env...), args...)...)
}

// metallbPools are the IPAddressPools of metallb-system, in creation
// order.
const metallbPools = `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: a-first, namespace: metallb-system}
spec: {addresses: [10.99.0.0/30]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: b-manual, namespace: metallb-system}
spec: {addresses: [10.99.1.10-10.99.1.12], autoAssign: false}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: c-team, namespace: metallb-system}
spec:
  addresses: [10.99.2.0/24]
  avoidBuggyIPs: true
  serviceAllocation: {priority: 10, namespaces: [team-a]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: d-gold, namespace: metallb-system}
spec:
  addresses: [10.99.3.0/30]
  serviceAllocation:
    priority: 5
    serviceSelectors: [{matchLabels: {tier: gold}}]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: e-dual, namespace: metallb-system}
spec: {addresses: [10.99.4.0/31, "fd00:99:4::/127"], autoAssign: false}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: f-labelled-ns, namespace: metallb-system}
spec:
  addresses: [10.99.5.1-10.99.5.2]
  serviceAllocation:
    priority: 20
    namespaceSelectors: [{matchLabels: {team: b}}]
`

// metallbStep is one input: a Service to create (or, with del or
// toClusterIP, to change), or a manifest to apply.
type metallbStep struct {
	ns, name    string
	labels      map[string]string
	annotations map[string]string
	ports       []int32
	lbClass     string
	dual        bool
	del         bool
	toClusterIP bool
	manifest    string
	// noWait: nothing is expected to happen (the controller ignores it).
	noWait bool
}

var metallbSteps = []metallbStep{
	{ns: "default", name: "auto-1", ports: []int32{80}},
	{ns: "default", name: "by-pool", ports: []int32{80}, annotations: map[string]string{"metallb.io/address-pool": "b-manual"}},
	{ns: "default", name: "requested", ports: []int32{80}, annotations: map[string]string{"metallb.io/loadBalancerIPs": "10.99.1.12"}},
	{ns: "default", name: "shared-http", ports: []int32{80}, annotations: map[string]string{"metallb.io/loadBalancerIPs": "10.99.0.3", "metallb.io/allow-shared-ip": "k1"}},
	{ns: "default", name: "shared-https", ports: []int32{443}, annotations: map[string]string{"metallb.io/loadBalancerIPs": "10.99.0.3", "metallb.io/allow-shared-ip": "k1"}},
	{ns: "default", name: "shared-clash", ports: []int32{80}, annotations: map[string]string{"metallb.io/loadBalancerIPs": "10.99.0.3", "metallb.io/allow-shared-ip": "k1"}},
	{ns: "default", name: "other-key", ports: []int32{8080}, annotations: map[string]string{"metallb.io/loadBalancerIPs": "10.99.0.3", "metallb.io/allow-shared-ip": "k2"}},
	{ns: "default", name: "outside", ports: []int32{80}, annotations: map[string]string{"metallb.io/loadBalancerIPs": "192.0.2.7"}},
	{ns: "default", name: "legacy-annotation", ports: []int32{80}, annotations: map[string]string{"metallb.universe.tf/address-pool": "b-manual"}},
	{ns: "team-a", name: "team", ports: []int32{80}},
	{ns: "team-a", name: "team-2", ports: []int32{80}},
	{ns: "team-b", name: "labelled-ns", ports: []int32{80}},
	{ns: "default", name: "gold", ports: []int32{80}, labels: map[string]string{"tier": "gold"}},
	{ns: "default", name: "dual", ports: []int32{80}, dual: true, annotations: map[string]string{"metallb.io/address-pool": "e-dual"}},
	{ns: "default", name: "foreign-class", ports: []int32{80}, lbClass: "example.com/other", noWait: true},
	{ns: "default", name: "auto-2", ports: []int32{80}},
	{ns: "default", name: "auto-3", ports: []int32{80}},
	{ns: "default", name: "auto-4", ports: []int32{80}},
	{manifest: `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: g-late, namespace: metallb-system}
spec: {addresses: [10.99.6.0/32]}
`},
	{ns: "default", name: "auto-1", del: true},
	{ns: "default", name: "auto-5", ports: []int32{80}},
	{ns: "default", name: "by-pool", toClusterIP: true},
}

// runMetalLBScenario starts `svcnet apiserver` in a fresh test network
// namespace, lets start run the controller under test, writes the inputs
// one step at a time (each step waits until the controller has acted on
// it, so both runs see the same sequence) and returns the normalized
// results once they are stable.
func runMetalLBScenario(t *testing.T, svcnet string, start func(t *testing.T, ns *testbed.NetNS, data, logPath string)) map[string]any {
	began := time.Now()
	ns := testbed.NewNetNS(t, "mlb")
	data := t.TempDir()
	ctx, _, cs, dc := startAPIServer(t, ns, svcnet, data, "--service-cluster-ip-range", "10.96.0.0/16,fd00:96::/112")
	for _, n := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "metallb-system"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"team": "b"}}},
	} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	applyPools(t, ctx, dc, metallbPools)

	logPath := filepath.Join(data, "controller.log")
	start(t, ns, data, logPath)
	t.Cleanup(func() {
		b, _ := os.ReadFile(logPath)
		if t.Failed() {
			t.Logf("controller's log:\n%s", tail(string(b), 80))
		}
		if dir := os.Getenv("SVCNET_METALLB_DUMP"); dir != "" {
			_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".log"), b, 0o644)
		}
	})
	// The controller works once a first Service gets its address.
	for _, st := range metallbSteps {
		runMetalLBStep(t, ctx, cs, dc, st)
	}

	return stableDump(t, began, 60*time.Second, time.Second, "controller's output", func() (map[string]any, error) { return dumpMetalLB(ctx, cs, dc) })
}

func applyPools(t *testing.T, ctx context.Context, dc dynamic.Interface, manifest string) {
	t.Helper()
	for _, doc := range strings.Split(manifest, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := dc.Resource(poolsGVR).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pool %s: %v", u.GetName(), err)
		}
	}
}

func runMetalLBStep(t *testing.T, ctx context.Context, cs kubernetes.Interface, dc dynamic.Interface, st metallbStep) {
	t.Helper()
	if st.manifest != "" {
		applyPools(t, ctx, dc, st.manifest)
		time.Sleep(2 * time.Second) // the controller reprocesses every Service
		return
	}
	svcs := cs.CoreV1().Services(st.ns)
	switch {
	case st.del:
		if err := svcs.Delete(ctx, st.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		return
	case st.toClusterIP:
		s, err := svcs.Get(ctx, st.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.AllocateLoadBalancerNodePorts = nil
		s.Spec.ExternalTrafficPolicy = ""
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
		if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "ingress of "+st.name+" cleared", func() error {
			s, err := svcs.Get(ctx, st.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				return fmt.Errorf("still %v", s.Status.LoadBalancer.Ingress)
			}
			return nil
		})
		return
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: st.name, Labels: st.labels, Annotations: st.annotations},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": st.name}},
	}
	for _, p := range st.ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint("p", p), Port: p, Protocol: corev1.ProtocolTCP})
	}
	if st.lbClass != "" {
		svc.Spec.LoadBalancerClass = &st.lbClass
	}
	if st.dual {
		p := corev1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy = &p
	}
	if _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service %s/%s: %v", st.ns, st.name, err)
	}
	if st.noWait {
		time.Sleep(2 * time.Second)
		return
	}
	waitFor(t, 60*time.Second, "the controller acting on "+st.ns+"/"+st.name, func() error {
		s, err := svcs.Get(ctx, st.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			return nil
		}
		evs, err := cs.CoreV1().Events(st.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + st.name})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no address and no warning yet")
	})
}

// dumpMetalLB is what the controller wrote, normalized: per Service its
// load balancer status, metallb.io annotations and the distinct events
// (type, reason, message; not counts, times or the reporting
// component), per pool its status.
func dumpMetalLB(ctx context.Context, cs kubernetes.Interface, dc dynamic.Interface) (map[string]any, error) {
	out := map[string]any{}
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Service"})
	if err != nil {
		return nil, err
	}
	events := map[string][]string{}
	for _, e := range evs.Items {
		k := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		line := e.Type + " " + e.Reason + ": " + sortInUseBy(e.Message)
		if !containsString(events[k], line) {
			events[k] = append(events[k], line)
		}
	}
	for _, s := range svcs.Items {
		if s.Namespace == "default" && s.Name == "kubernetes" {
			continue
		}
		k := s.Namespace + "/" + s.Name
		ann := map[string]string{}
		for a, v := range s.Annotations {
			if strings.HasPrefix(a, "metallb.") {
				ann[a] = v
			}
		}
		ev := events[k]
		sort.Strings(ev)
		var ingress []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			mode := ""
			if in.IPMode != nil {
				mode = string(*in.IPMode)
			}
			ingress = append(ingress, in.IP+" "+in.Hostname+" "+mode)
		}
		out["Service "+k] = map[string]any{"ingress": ingress, "annotations": ann, "events": ev}
	}
	pools, err := dc.Resource(poolsGVR).Namespace("metallb-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range pools.Items {
		st, _, _ := unstructured.NestedMap(p.Object, "status")
		out["IPAddressPool "+p.GetName()] = st
	}
	return out, nil
}

// sortInUseBy sorts the Services a sharing refusal lists: MetalLB lists
// them in map order.
func sortInUseBy(msg string) string {
	const mark = "address also in use by "
	i := strings.Index(msg, mark)
	if i < 0 {
		return msg
	}
	l := strings.Split(msg[i+len(mark):], ",")
	sort.Strings(l)
	return msg[:i+len(mark)] + strings.Join(l, ",")
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
