package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/testbed"
)

// kcmControllers are kube-controller-manager v1.37.2's names
// (cmd/kube-controller-manager/names) of the controllers compared here.
var kcmControllers = []string{
	"endpointslice-controller", "endpointslice-mirroring-controller",
	"deployment-controller", "replicaset-controller",
	// The pods' default service account (the ServiceAccount admission
	// plugin refuses pods without it).
	"serviceaccount-controller",
}

// svcnetControllers are the same five in `svcnet controllers` (controller.All).
var svcnetControllers = []string{"endpointslice", "endpointslicemirroring", "deployment", "replicaset", "serviceaccount"}

// buildKubeControllerManager builds the real kube-controller-manager from
// k8s.io/kubernetes (the version go.mod pins), stamped as kube-proxy is.
func buildKubeControllerManager(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "kube-controller-manager")
	start := time.Now()
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", out,
		"-ldflags", "-X k8s.io/component-base/version.gitVersion="+kubeProxyVersion,
		"k8s.io/kubernetes/cmd/kube-controller-manager")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build kube-controller-manager: %v\n%s", err, b)
	}
	t.Logf("go build k8s.io/kubernetes/cmd/kube-controller-manager took %s", time.Since(start).Round(time.Second))
	return out
}

// TestRealKubeControllerManager runs the real kube-controller-manager
// v1.37.2 (EndpointSlice, EndpointSlice mirroring, Deployment and
// ReplicaSet controllers only) against `svcnet apiserver`, then the same
// inputs against a fresh `svcnet apiserver` with svcnet's own four
// controllers, and compares what each wrote.
func TestRealKubeControllerManager(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("interop: TestRealKubeControllerManager needs root (network namespaces)")
	}
	testbed.RequireCommand(t, "ip")
	svcnet := os.Getenv("SVCNET_BIN") // a prebuilt svcnet, to skip its build
	if svcnet == "" {
		svcnet = buildSvcnet(t)
	}

	var real, ours map[string]any
	t.Run("kube-controller-manager", func(t *testing.T) {
		kcm := os.Getenv("SVCNET_KCM")
		if kcm == "" {
			kcm = buildKubeControllerManager(t)
		}
		real = runControllerScenario(t, svcnet, "kube-controller-manager", func(t *testing.T, ns *testbed.NetNS, data, logPath string) {
			args := []string{kcm,
				"--kubeconfig", componentKubeconfig(t, svcnet, data, "system:kube-controller-manager"),
				"--controllers", strings.Join(kcmControllers, ","),
				"--leader-elect=true",
				"--bind-address", "127.0.0.1",
				"--cert-dir", filepath.Join(data, "kcm-certs"),
				"--v", "2",
			}
			startLogged(t, ns, logPath, args...)
		})
	})
	t.Run("svcnet-controllers", func(t *testing.T) {
		ours = runControllerScenario(t, svcnet, "kube-controller-manager", func(t *testing.T, ns *testbed.NetNS, data, logPath string) {
			startLogged(t, ns, logPath, svcnet, "controllers",
				"--kubeconfig", componentKubeconfig(t, svcnet, data, "system:kube-controller-manager"),
				"--controllers", strings.Join(svcnetControllers, ","))
		})
	})
	if real == nil || ours == nil {
		t.Fatal("a scenario did not complete")
	}
	compareWritten(t, "kube-controller-manager", real, ours)
}

// compareWritten reports every object that differs between the run of
// the real component peer and svcnet's.
func compareWritten(t *testing.T, peer string, real, ours map[string]any) {
	keys := map[string]bool{}
	for k := range real {
		keys[k] = true
	}
	for k := range ours {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	same := 0
	for _, k := range sorted {
		r, rok := real[k]
		o, ook := ours[k]
		switch {
		case !rok:
			t.Errorf("%s: written by svcnet only:\n%s", k, pretty(o))
		case !ook:
			t.Errorf("%s: written by %s only:\n%s", k, peer, pretty(r))
		default:
			if d := cmp.Diff(r, o); d != "" {
				t.Errorf("%s differs (-%s +svcnet):\n%s", k, peer, d)
			} else {
				same++
			}
		}
	}
	t.Logf("%d of %d objects identical after normalization", same, len(sorted))
}

func pretty(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// startLogged starts a program inside ns with its output in logPath; it is
// killed when the test ends.
func startLogged(t *testing.T, ns *testbed.NetNS, logPath string, args ...string) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
}

// runControllerScenario starts `svcnet apiserver` (dual-stack Service
// range, default RBAC,Node authorization, no controllers) in a fresh test
// network namespace, lets start run the controllers under test, writes the
// inputs, plays the kubelet for the Deployment's pods, and returns the
// normalized objects the controllers wrote once they are stable.
//
// A non-empty lease names the kube-system Lease the controllers must hold
// (leader election).
func runControllerScenario(t *testing.T, svcnet, lease string, start func(t *testing.T, ns *testbed.NetNS, data, logPath string)) map[string]any {
	began := time.Now()
	ns := testbed.NewNetNS(t, "kcm")
	data := t.TempDir()
	ctx, _, cs, _ := startAPIServer(t, ns, svcnet, data, "--service-cluster-ip-range", "10.96.0.0/16,fd00:96::/112")

	logPath := filepath.Join(data, "controllers.log")
	start(t, ns, data, logPath)
	t.Cleanup(func() {
		b, _ := os.ReadFile(logPath)
		if t.Failed() {
			t.Logf("controllers' log:\n%s", tail(string(b), 120))
		}
	})

	if lease != "" {
		waitFor(t, 120*time.Second, "leader election Lease kube-system/"+lease, func() error {
			l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
				return fmt.Errorf("lease %s has no holder", lease)
			}
			t.Logf("Lease kube-system/%s held by %s", lease, *l.Spec.HolderIdentity)
			return nil
		})
	}
	waitControllersWorking(t, ctx, cs)
	writeInputs(t, ctx, cs)
	go playKubelet(ctx, cs, "apps")
	driveDeployment(t, ctx, cs)

	// Converged: the same dump three times in a row, a second apart, once
	// every Service has the slices it must have.
	var prev map[string]any
	stable := 0
	waitFor(t, 180*time.Second, "controllers' output stable", func() error {
		time.Sleep(time.Second)
		cur, err := dumpWritten(ctx, cs)
		if err != nil {
			return err
		}
		for _, want := range []string{"svc/web/IPv4", "svc/web/IPv6", "svc/db/IPv4", "svc/ext/IPv4", "svc/web-close/IPv4"} {
			if !hasPrefixKey(cur, "EndpointSlice "+want) {
				stable = 0
				prev = cur
				return fmt.Errorf("no EndpointSlice for %s yet", want)
			}
		}
		if cmp.Equal(prev, cur) {
			stable++
		} else {
			stable = 0
		}
		prev = cur
		if stable < 2 {
			return fmt.Errorf("still changing")
		}
		return nil
	})

	// The controllers' informers must have listed and watched without
	// failure.
	b, _ := os.ReadFile(logPath)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "Failed to watch") || strings.Contains(line, "failed to list") {
			t.Errorf("controllers: %s", line)
		} else if strings.HasPrefix(line, "E") || strings.HasPrefix(line, "W") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			t.Logf("controllers: %s", line[:min(len(line), 300)])
		}
	}
	t.Logf("scenario took %s", time.Since(began).Round(time.Second))
	if dir := os.Getenv("SVCNET_KCM_DUMP"); dir != "" {
		// The normalized objects, for reading (one JSON file per run).
		_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".json"), []byte(pretty(prev)), 0o644)
	}
	return prev
}

// probeNamespace holds the objects that show the controllers are working;
// the comparison leaves it out.
const probeNamespace = "probe"

// waitControllersWorking makes a probe Service and pod and waits for their
// EndpointSlice: the controllers under test have synced their caches and
// sync Services, so both runs see the inputs in the same steps (a
// controller still listing at start would see several steps as one).
func waitControllersWorking(t *testing.T, ctx context.Context, cs kubernetes.Interface) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", probeNamespace, err)
	}
	pod, err := cs.CoreV1().Pods(probeNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{"app": "probe"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/probe:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create probe pod: %v", err)
	}
	pod.Status = podStatus(corev1.PodRunning, true, "10.244.9.9", "")
	if _, err := cs.CoreV1().Pods(probeNamespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("probe pod status: %v", err)
	}
	// publishNotReadyAddresses: the pod has no node, and is published anyway.
	if _, err := cs.CoreV1().Services(probeNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "probe"}, PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create probe service: %v", err)
	}
	waitSliceHas(t, ctx, cs, probeNamespace, "probe", "10.244.9.9")
}

// waitSliceHas waits until an EndpointSlice of the Service lists addr.
func waitSliceHas(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, svc, addr string) {
	t.Helper()
	waitFor(t, 60*time.Second, "EndpointSlice of "+ns+"/"+svc+" with "+addr, func() error {
		l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc})
		if err != nil {
			return err
		}
		for _, s := range l.Items {
			for _, ep := range s.Endpoints {
				for _, a := range ep.Addresses {
					if a == addr {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("not yet")
	})
}

func hasPrefixKey(m map[string]any, p string) bool {
	for k := range m {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// writeInputs creates the Nodes, Pods, Services and hand-written Endpoints,
// in the same order on every run.
func writeInputs(t *testing.T, ctx context.Context, cs kubernetes.Interface) {
	t.Helper()
	for _, name := range []string{"svc", "apps"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", name, err)
		}
	}
	for i, zone := range []string{"zone-a", "zone-b", "zone-c"} {
		name := fmt.Sprintf("node-%c", 'a'+i)
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname":        name,
			"topology.kubernetes.io/zone":   zone,
			"topology.kubernetes.io/region": "region-1",
		}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create node %s: %v", name, err)
		}
		n.Status = corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.1.0.%d", i+1)}},
		}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("node %s status: %v", name, err)
		}
	}

	type podIn struct {
		name, app, node, v4, v6, hostname, subdomain string
		phase                                        corev1.PodPhase
		ready                                        bool
		httpPort                                     int32
	}
	pods := []podIn{
		{name: "web-a1", app: "web", node: "node-a", v4: "10.244.1.10", v6: "fd00:244:1::10", phase: corev1.PodRunning, ready: true, httpPort: 8080},
		{name: "web-b1", app: "web", node: "node-b", v4: "10.244.2.10", v6: "fd00:244:2::10", phase: corev1.PodRunning, ready: true, httpPort: 8081},
		{name: "web-c1", app: "web", node: "node-c", v4: "10.244.3.10", v6: "fd00:244:3::10", phase: corev1.PodRunning, ready: false, httpPort: 8080},
		{name: "web-a2", app: "web", node: "node-a", v4: "10.244.1.11", v6: "fd00:244:1::11", phase: corev1.PodRunning, ready: true, httpPort: 8080}, // deleted below: terminating
		{name: "web-pending", app: "web", phase: corev1.PodPending, httpPort: 8080},
		{name: "web-done", app: "web", node: "node-b", v4: "10.244.2.11", v6: "fd00:244:2::11", phase: corev1.PodSucceeded, httpPort: 8080},
		{name: "db-0", app: "db", node: "node-a", v4: "10.244.1.20", hostname: "db-0", subdomain: "db", phase: corev1.PodRunning, ready: false, httpPort: 8080},
		{name: "db-1", app: "db", node: "node-b", v4: "10.244.2.20", hostname: "db-1", subdomain: "db", phase: corev1.PodRunning, ready: true, httpPort: 8080},
		{name: "db-x", app: "db", node: "node-c", v4: "10.244.3.20", hostname: "db-x", subdomain: "other", phase: corev1.PodRunning, ready: true, httpPort: 8080},
	}
	grace := int64(3600)
	for _, p := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "svc", Labels: map[string]string{"app": p.app}},
			Spec: corev1.PodSpec{
				NodeName: p.node, Hostname: p.hostname, Subdomain: p.subdomain,
				TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "c", Image: "registry.example/web:1", Ports: []corev1.ContainerPort{
					{Name: "http", ContainerPort: p.httpPort, Protocol: corev1.ProtocolTCP},
					{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP},
				}}},
			},
		}
		created, err := cs.CoreV1().Pods("svc").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", p.name, err)
		}
		if p.v4 == "" {
			continue
		}
		created.Status = podStatus(p.phase, p.ready, p.v4, p.v6)
		if _, err := cs.CoreV1().Pods("svc").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("pod %s status: %v", p.name, err)
		}
	}

	dual := corev1.IPFamilyPolicyRequireDualStack
	webPorts := []corev1.ServicePort{
		{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
		{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolTCP},
		{Name: "dns", Port: 53, TargetPort: intstr.FromString("dns"), Protocol: corev1.ProtocolUDP},
	}
	preferClose, preferNode := "PreferClose", "PreferSameNode"
	services := []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"tier": "front"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, IPFamilyPolicy: &dual, Ports: webPorts}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"}, ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
				Ports: []corev1.ServicePort{{Name: "pg", Port: 5432, TargetPort: intstr.FromInt32(5432)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db-noports"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"}, ClusterIP: corev1.ClusterIPNone}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-close"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, TrafficDistribution: &preferClose,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-node"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, TrafficDistribution: &preferNode,
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-auto", Annotations: map[string]string{"service.kubernetes.io/topology-mode": "Auto"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ext"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}}},
	}
	for _, s := range services {
		if _, err := cs.CoreV1().Services("svc").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create service %s: %v", s.Name, err)
		}
	}
	node, host := "node-a", "ext-0"
	if _, err := cs.CoreV1().Endpoints("svc").Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "ext", Labels: map[string]string{"team": "edge"},
			Annotations: map[string]string{"example.org/note": "hand-written"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{
				{IP: "10.0.5.1", NodeName: &node, Hostname: host},
				{IP: "10.0.5.2"},
			},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.5.3"}},
			Ports:             []corev1.EndpointPort{{Name: "https", Port: 8443, Protocol: corev1.ProtocolTCP}},
		}, {
			Addresses: []corev1.EndpointAddress{{IP: "fd00:5::1"}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: 8443, Protocol: corev1.ProtocolTCP}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Endpoints ext: %v", err)
	}
	// Every Service has seen every pod before web-a2 goes away, in both runs.
	for _, svc := range []string{"web", "web-close", "web-node", "web-auto"} {
		waitSliceHas(t, ctx, cs, "svc", svc, "10.244.1.11")
	}
	// web-a2 is deleted while its node still runs it: graceful deletion
	// leaves it terminating (deletionTimestamp set) for its grace period.
	if err := cs.CoreV1().Pods("svc").Delete(ctx, "web-a2", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod web-a2: %v", err)
	}
}

func podStatus(phase corev1.PodPhase, ready bool, v4, v6 string) corev1.PodStatus {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	st := corev1.PodStatus{
		Phase: phase, PodIP: v4, PodIPs: []corev1.PodIP{{IP: v4}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: cond},
			{Type: corev1.PodReady, Status: cond},
		},
	}
	if v6 != "" {
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: v6})
	}
	return st
}

// playKubelet marks every pod of ns that has no address yet as running and
// ready with an address, as a kubelet would once its containers start.
func playKubelet(ctx context.Context, cs kubernetes.Interface, ns string) {
	next := 1
	for ctx.Err() == nil {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Status.PodIP != "" || p.DeletionTimestamp != nil {
					continue
				}
				p.Status = podStatus(corev1.PodRunning, true, fmt.Sprintf("10.244.%d.%d", 100+next/250, next%250+1), "")
				if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err == nil {
					next++
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// driveDeployment creates apps/app with 2 replicas, scales it to 4, then
// changes its pod template, each step once the previous one is complete.
func driveDeployment(t *testing.T, ctx context.Context, cs kubernetes.Interface) {
	t.Helper()
	two := int32(2)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"app": "dep"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "dep"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "dep"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments("apps").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	waitRolledOut(t, ctx, cs, 2)
	update := func(what string, f func(d *appsv1.Deployment)) {
		waitFor(t, 30*time.Second, what, func() error {
			cur, err := cs.AppsV1().Deployments("apps").Get(ctx, "app", metav1.GetOptions{})
			if err != nil {
				return err
			}
			f(cur)
			_, err = cs.AppsV1().Deployments("apps").Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	update("scale to 4", func(d *appsv1.Deployment) { four := int32(4); d.Spec.Replicas = &four })
	waitRolledOut(t, ctx, cs, 4)
	update("roll the template", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/app:2"
		d.Spec.Template.Annotations = map[string]string{"example.org/rev": "2"}
	})
	waitRolledOut(t, ctx, cs, 4)
}

// waitRolledOut waits until the Deployment's latest generation is fully
// rolled out with n available replicas and no other pods remain.
func waitRolledOut(t *testing.T, ctx context.Context, cs kubernetes.Interface, n int32) {
	t.Helper()
	waitFor(t, 180*time.Second, fmt.Sprintf("deployment rolled out with %d replicas", n), func() error {
		d, err := cs.AppsV1().Deployments("apps").Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s := d.Status
		if s.ObservedGeneration != d.Generation || s.Replicas != n || s.UpdatedReplicas != n || s.AvailableReplicas != n || s.ReadyReplicas != n {
			return fmt.Errorf("generation %d, status %+v", d.Generation, s)
		}
		pods, err := cs.CoreV1().Pods("apps").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != int(n) {
			return fmt.Errorf("%d pods, want %d", len(pods.Items), n)
		}
		return nil
	})
}

// dumpWritten returns, normalized, what the four controllers write:
// EndpointSlices (all namespaces), ReplicaSets, the Deployment, the
// Deployment's pods and the Events the controllers recorded.
func dumpWritten(ctx context.Context, cs kubernetes.Interface) (map[string]any, error) {
	out := map[string]any{}
	slicesList, err := cs.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	groups := map[string][]any{}
	for i := range slicesList.Items {
		s := &slicesList.Items[i]
		if s.Namespace == probeNamespace {
			continue
		}
		m := toMap(s)
		normalizeMeta(m)
		normalizeSlice(m)
		key := fmt.Sprintf("EndpointSlice %s/%s/%s", s.Namespace, s.Labels["kubernetes.io/service-name"], s.AddressType)
		groups[key] = append(groups[key], m)
	}
	addSorted(out, groups)

	rsList, err := cs.AppsV1().ReplicaSets("apps").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range rsList.Items {
		m := toMap(&rsList.Items[i])
		normalizeMeta(m)
		md := m["metadata"].(map[string]any)
		st, _ := m["status"].(map[string]any)
		// How many spec writes a rollout takes depends on when the pods
		// became ready; whether the status caught up does not.
		if st != nil {
			if st["observedGeneration"] == md["generation"] {
				st["observedGeneration"] = "<generation>"
			}
		}
		md["generation"] = "<n>"
		out["ReplicaSet apps/"+rsList.Items[i].Name] = m
	}
	d, err := cs.AppsV1().Deployments("apps").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	dm := toMap(d)
	normalizeMeta(dm)
	normalizeConditions(dm)
	out["Deployment apps/app"] = dm

	pods, err := cs.CoreV1().Pods("apps").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	podGroups := map[string][]any{}
	for i := range pods.Items {
		m := toMap(maskTokenVolume(&pods.Items[i]))
		normalizeMeta(m)
		delete(m, "status") // written by the test's kubelet
		md := m["metadata"].(map[string]any)
		if g, ok := md["generateName"].(string); ok && strings.HasPrefix(md["name"].(string), g) {
			md["name"] = g + "<random>"
		}
		podGroups["Pod apps/"+md["name"].(string)] = append(podGroups["Pod apps/"+md["name"].(string)], m)
	}
	addSorted(out, podGroups)

	// Events: which controller recorded which reason about which kind of
	// object (how many of each depends on timing).
	evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, e := range evs.Items {
		if e.Namespace == probeNamespace {
			continue
		}
		seen[fmt.Sprintf("%s %s %s %s/%s", e.Source.Component, e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Namespace)] = true
	}
	var reasons []any
	for k := range seen {
		reasons = append(reasons, k)
	}
	sort.Slice(reasons, func(i, j int) bool { return reasons[i].(string) < reasons[j].(string) })
	out["Events"] = reasons
	return out, nil
}

// maskTokenVolume replaces the random suffix of the service account token
// volume the ServiceAccount admission plugin names (kube-api-access-XXXXX).
func maskTokenVolume(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	mask := func(n *string) {
		if strings.HasPrefix(*n, "kube-api-access-") {
			*n = "kube-api-access-<random>"
		}
	}
	for i := range p.Spec.Volumes {
		mask(&p.Spec.Volumes[i].Name)
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			for j := range cs[i].VolumeMounts {
				mask(&cs[i].VolumeMounts[j].Name)
			}
		}
	}
	return p
}

// addSorted stores each group's objects under key#i, in the order of their
// JSON, so that objects told apart only by generated names still pair up.
func addSorted(out map[string]any, groups map[string][]any) {
	for key, objs := range groups {
		sort.Slice(objs, func(i, j int) bool {
			a, _ := json.Marshal(objs[i])
			b, _ := json.Marshal(objs[j])
			return string(a) < string(b)
		})
		for i, o := range objs {
			out[fmt.Sprintf("%s#%d", key, i)] = o
		}
	}
}

func toMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return m
}

// normalizeMeta removes or masks what differs between any two runs: UIDs,
// resourceVersions, creation and deletion times, managedFields (their
// manager names are the clients' user agents) and generated name suffixes.
func normalizeMeta(m map[string]any) {
	md := m["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields"} {
		delete(md, k)
	}
	if _, ok := md["deletionTimestamp"]; ok {
		md["deletionTimestamp"] = "<set>"
	}
	if g, ok := md["generateName"].(string); ok && strings.HasPrefix(md["name"].(string), g) {
		md["name"] = g + "<random>"
	}
	if refs, ok := md["ownerReferences"].([]any); ok {
		for _, r := range refs {
			r.(map[string]any)["uid"] = "<uid>"
		}
	}
	if ann, ok := md["annotations"].(map[string]any); ok {
		if _, ok := ann["endpoints.kubernetes.io/last-change-trigger-time"]; ok {
			ann["endpoints.kubernetes.io/last-change-trigger-time"] = "<time>"
		}
	}
}

// normalizeSlice masks the pods' UIDs and orders the endpoints by address
// (kube-controller-manager writes them in map order).
func normalizeSlice(m map[string]any) {
	eps, _ := m["endpoints"].([]any)
	for _, e := range eps {
		if ref, ok := e.(map[string]any)["targetRef"].(map[string]any); ok {
			if _, ok := ref["uid"]; ok {
				ref["uid"] = "<uid>"
			}
		}
	}
	slices.SortFunc(eps, func(a, b any) int {
		return strings.Compare(fmt.Sprint(a.(map[string]any)["addresses"]), fmt.Sprint(b.(map[string]any)["addresses"]))
	})
}

// normalizeConditions masks the condition timestamps of a status.
func normalizeConditions(m map[string]any) {
	st, _ := m["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		cm := c.(map[string]any)
		for _, k := range []string{"lastUpdateTime", "lastTransitionTime"} {
			if _, ok := cm[k]; ok {
				cm[k] = "<time>"
			}
		}
	}
}
