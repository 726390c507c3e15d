package tables

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var now = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func ptr[T any](v T) *T { return &v }

// render prints a table the way kubectl does (upper-case headers, wide
// columns only with -o wide, kubectl's tabwriter settings), so expected
// output can be pasted from a real cluster or from the seeds.
func render(t *testing.T, tbl *metav1.Table, wide bool) string {
	t.Helper()
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 6, 4, 3, ' ', 0)
	var cols []int
	var headers []string
	for i, c := range tbl.ColumnDefinitions {
		if c.Priority == 0 || wide {
			cols = append(cols, i)
			headers = append(headers, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(w, strings.Join(headers, "\t"))
	for _, r := range tbl.Rows {
		if len(r.Cells) != len(tbl.ColumnDefinitions) {
			t.Fatalf("row has %d cells, table has %d columns: %v", len(r.Cells), len(tbl.ColumnDefinitions), r.Cells)
		}
		var cells []string
		for _, i := range cols {
			cells = append(cells, fmt.Sprint(r.Cells[i]))
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	w.Flush()
	return buf.String()
}

func check(t *testing.T, gr schema.GroupResource, wide bool, want string, objs ...runtime.Object) {
	t.Helper()
	tbl, err := Convert(gr, objs, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	got := render(t, tbl, wide)
	want = strings.TrimPrefix(want, "\n")
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

var (
	grServices   = schema.GroupResource{Resource: "services"}
	grEndpoints  = schema.GroupResource{Resource: "endpoints"}
	grSlices     = schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}
	grPods       = schema.GroupResource{Resource: "pods"}
	grNodes      = schema.GroupResource{Resource: "nodes"}
	grNamespaces = schema.GroupResource{Resource: "namespaces"}
	grEvents     = schema.GroupResource{Resource: "events"}
	grConfigMaps = schema.GroupResource{Resource: "configmaps"}
	grDeploy     = schema.GroupResource{Group: "apps", Resource: "deployments"}
	grRS         = schema.GroupResource{Group: "apps", Resource: "replicasets"}
	grLeases     = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
)

func svc(name string, created time.Duration, spec corev1.ServiceSpec) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: ago(created)}, Spec: spec}
}

func TestServices(t *testing.T) {
	myapp := svc("myapp", 7*time.Minute+22*time.Second, corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.3.215", ClusterIPs: []string{"10.96.3.215"},
		Ports:    []corev1.ServicePort{{Port: 38080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		Selector: map[string]string{"app": "myapp"},
	})
	// Seed 000: kubectl get svc myapp -o wide
	check(t, grServices, true, `
NAME    TYPE        CLUSTER-IP    EXTERNAL-IP   PORT(S)     AGE     SELECTOR
myapp   ClusterIP   10.96.3.215   <none>        38080/TCP   7m22s   app=myapp
`, myapp)

	nodePort := svc("myapp", 3*time.Second, corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIPs: []string{"10.96.0.95"},
		Ports:    []corev1.ServicePort{{Port: 38080, NodePort: 30000, Protocol: corev1.ProtocolTCP}},
		Selector: map[string]string{"app": "myapp"},
	})
	check(t, grServices, false, `
NAME    TYPE       CLUSTER-IP   EXTERNAL-IP   PORT(S)           AGE
myapp   NodePort   10.96.0.95   <none>        38080:30000/TCP   3s
`, nodePort)

	external := svc("svc-external-name", 40*time.Minute, corev1.ServiceSpec{
		Type: corev1.ServiceTypeExternalName, ExternalName: "www.aneasystone.com",
	})
	check(t, grServices, false, `
NAME                TYPE           CLUSTER-IP   EXTERNAL-IP           PORT(S)   AGE
svc-external-name   ExternalName   <none>       www.aneasystone.com   <none>    40m
`, external)

	// Seed 001: kubectl get service -o wide (a selector-less Service shows <none>).
	kubernetes := svc("kubernetes", 65*time.Hour, corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"10.96.0.1"},
		Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}},
	})
	nginx := svc("nginx-deployment-service", 33*time.Minute, corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"10.98.182.100"},
		Ports:    []corev1.ServicePort{{Port: 80}}, // protocol not yet defaulted
		Selector: map[string]string{"app": "nginx-deployment"},
	})
	check(t, grServices, true, `
NAME                       TYPE        CLUSTER-IP      EXTERNAL-IP   PORT(S)   AGE     SELECTOR
kubernetes                 ClusterIP   10.96.0.1       <none>        443/TCP   2d17h   <none>
nginx-deployment-service   ClusterIP   10.98.182.100   <none>        80/TCP    33m     app=nginx-deployment
`, kubernetes, nginx)

	headless := svc("db", time.Hour, corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: "None", ClusterIPs: []string{"None"},
		Ports: []corev1.ServicePort{{Name: "a", Port: 5432, Protocol: corev1.ProtocolTCP}, {Name: "b", Port: 53, Protocol: corev1.ProtocolUDP}},
	})
	pending := svc("lb", 90*time.Second, corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"10.96.7.7"},
		Ports: []corev1.ServicePort{{Port: 80, NodePort: 31000, Protocol: corev1.ProtocolTCP}, {Port: 443, NodePort: 31001, Protocol: corev1.ProtocolTCP}},
	})
	assigned := pending.DeepCopy()
	assigned.Name = "lb2"
	assigned.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.201"}, {Hostname: "lb.example.com"}, {IP: "172.18.0.200"}}
	withExternal := svc("ext", 25*time.Hour, corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"10.96.0.20", "fd00::20"},
		ExternalIPs: []string{"192.0.2.1", "192.0.2.2"},
		Ports:       []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolSCTP}},
	})
	lbExternal := assigned.DeepCopy()
	lbExternal.Name = "lb3"
	lbExternal.Spec.ExternalIPs = []string{"192.0.2.9"}
	checkCells(t, grServices, headless, "db", "ClusterIP", "None", "<none>", "5432/TCP,53/UDP", "60m", "<none>")
	checkCells(t, grServices, pending, "lb", "LoadBalancer", "10.96.7.7", "<pending>", "80:31000/TCP,443:31001/TCP", "90s", "<none>")
	checkCells(t, grServices, assigned, "lb2", "LoadBalancer", "10.96.7.7", "172.18.0.200,172.18.0.201,lb.example.com", "80:31000/TCP,443:31001/TCP", "90s", "<none>")
	checkCells(t, grServices, lbExternal, "lb3", "LoadBalancer", "10.96.7.7", "172.18.0.200,172.18.0.201,lb.example.com,192.0.2.9", "80:31000/TCP,443:31001/TCP", "90s", "<none>")
	checkCells(t, grServices, withExternal, "ext", "ClusterIP", "10.96.0.20", "192.0.2.1,192.0.2.2", "8080/SCTP", "25h", "<none>")
	noType := svc("untyped", time.Minute, corev1.ServiceSpec{ClusterIP: "10.96.0.30"})
	checkCells(t, grServices, noType, "untyped", "", "10.96.0.30", "<unknown>", "<none>", "60s", "<none>")
}

// checkCells converts one object and compares all its cells (wide included).
func checkCells(t *testing.T, gr schema.GroupResource, obj runtime.Object, want ...any) {
	t.Helper()
	tbl, err := Convert(gr, []runtime.Object{obj}, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(tbl.Rows))
	}
	got := tbl.Rows[0].Cells
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Errorf("cells:\n got %#v\nwant %#v", got, want)
	}
}

func TestEndpoints(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: ago(22 * time.Minute)}
	}
	seed := &corev1.Endpoints{ObjectMeta: meta("myapp"), Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "100.121.213.101"}, {IP: "100.121.213.103"}, {IP: "100.84.80.80"}},
		Ports:     []corev1.EndpointPort{{Port: 8080, Protocol: corev1.ProtocolTCP}},
	}}}
	// Seed 000: kubectl get endpoints myapp
	check(t, grEndpoints, false, `
NAME    ENDPOINTS                                                     AGE
myapp   100.121.213.101:8080,100.121.213.103:8080,100.84.80.80:8080   22m
`, seed)

	many := &corev1.Endpoints{ObjectMeta: meta("many"), Subsets: []corev1.EndpointSubset{
		{
			Addresses: []corev1.EndpointAddress{{IP: "10.244.1.5"}, {IP: "10.244.2.3"}},
			Ports:     []corev1.EndpointPort{{Name: "http", Port: 8080}, {Name: "metrics", Port: 9090}},
		},
		{Addresses: []corev1.EndpointAddress{{IP: "fd00::5"}}, Ports: []corev1.EndpointPort{{Port: 8080}}},
	}}
	checkCells(t, grEndpoints, many, "many", "10.244.1.5:8080,10.244.2.3:8080,10.244.1.5:9090 + 2 more...", "22m")
	headless := &corev1.Endpoints{ObjectMeta: meta("headless"), Subsets: []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{{IP: "10.244.1.5"}, {IP: "fd00::7"}}},
	}}
	checkCells(t, grEndpoints, headless, "headless", "10.244.1.5,fd00::7", "22m")
	notReadyOnly := &corev1.Endpoints{ObjectMeta: meta("nr"), Subsets: []corev1.EndpointSubset{
		{NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.244.1.5"}}, Ports: []corev1.EndpointPort{{Port: 80}}},
	}}
	checkCells(t, grEndpoints, notReadyOnly, "nr", "", "22m")
	checkCells(t, grEndpoints, &corev1.Endpoints{ObjectMeta: meta("empty")}, "empty", "<none>", "22m")
}

func TestEndpointSlices(t *testing.T) {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "myapp-abcde", Namespace: "default", CreationTimestamp: ago(5 * time.Minute)},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}}, {Addresses: []string{"10.244.2.3"}},
		},
	}
	check(t, grSlices, false, `
NAME          ADDRESSTYPE   PORTS   ENDPOINTS               AGE
myapp-abcde   IPv4          8080    10.244.1.5,10.244.2.3   5m
`, s)
	big := s.DeepCopy()
	big.Ports = []discoveryv1.EndpointPort{{Port: ptr[int32](1)}, {Name: ptr("named")}, {}, {Port: ptr[int32](4)}}
	big.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"a", "b", "c", "d", "e"}}}
	checkCells(t, grSlices, big, "myapp-abcde", "IPv4", "1,named,* + 1 more...", "a,b,c + 2 more...", "5m")
	empty := s.DeepCopy()
	empty.Ports, empty.Endpoints = nil, nil
	checkCells(t, grSlices, empty, "myapp-abcde", "IPv4", "<unset>", "<unset>", "5m")
}

func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
}

func TestPods(t *testing.T) {
	base := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: ago(32 * time.Minute)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
		}
	}
	// Seed 001: kubectl get pods -o wide
	run := base("nginx-deployment-9957b6647-5v2nl")
	run.Spec.NodeName = "node02"
	run.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.140.69", PodIPs: []corev1.PodIP{{IP: "10.244.140.69"}},
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "nginx", Ready: true, State: running()}}}
	run2 := run.DeepCopy()
	run2.Name = "nginx-deployment-9957b6647-j5c45"
	run2.Spec.NodeName = "node01"
	run2.Status.PodIPs = []corev1.PodIP{{IP: "10.244.196.130"}}
	check(t, grPods, true, `
NAME                               READY   STATUS    RESTARTS   AGE   IP               NODE     NOMINATED NODE   READINESS GATES
nginx-deployment-9957b6647-5v2nl   1/1     Running   0          32m   10.244.140.69    node02   <none>           <none>
nginx-deployment-9957b6647-j5c45   1/1     Running   0          32m   10.244.196.130   node01   <none>           <none>
`, run, run2)

	pending := base("pending")
	pending.Status.Phase = corev1.PodPending

	creating := base("creating")
	creating.Spec.NodeName = "node01"
	creating.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "nginx", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}

	crash := base("crash")
	crash.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "nginx", RestartCount: 5,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: ago(5 * time.Minute)}},
	}}}

	restartedRunning := run.DeepCopy()
	restartedRunning.Name = "restarted"
	restartedRunning.Status.ContainerStatuses[0].RestartCount = 2
	restartedRunning.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, FinishedAt: ago(90 * time.Second)}}

	completed := base("job")
	completed.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "nginx", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}}

	signal := base("signal")
	signal.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "nginx", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Signal: 9}}}}}
	exitCode := base("exitcode")
	exitCode.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "nginx", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}}}}

	initWaiting := base("init")
	initWaiting.Spec.InitContainers = []corev1.Container{{Name: "a"}, {Name: "b"}}
	initWaiting.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
		{Name: "a", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
		{Name: "b", State: running()},
	}, ContainerStatuses: []corev1.ContainerStatus{{Name: "nginx", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}

	initFailed := base("initfail")
	initFailed.Spec.InitContainers = []corev1.Container{{Name: "a"}}
	initFailed.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
		{Name: "a", RestartCount: 3, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}},
	}}
	initBackoff := base("initbackoff")
	initBackoff.Spec.InitContainers = []corev1.Container{{Name: "a"}}
	initBackoff.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
		{Name: "a", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
	}}

	sidecar := run.DeepCopy()
	sidecar.Name = "sidecar"
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways)}}
	sidecar.Status.Conditions = append(sidecar.Status.Conditions, corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue})
	sidecar.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", Ready: true, Started: ptr(true), State: running(), RestartCount: 1,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: ago(3 * time.Hour)}}}}

	terminating := run.DeepCopy()
	terminating.Name = "terminating"
	terminating.DeletionTimestamp = ptr(ago(time.Second))
	lost := terminating.DeepCopy()
	lost.Name = "lost"
	lost.Status.Reason = "NodeLost"

	notReady := base("notready")
	notReady.Spec.Containers = append(notReady.Spec.Containers, corev1.Container{Name: "side"})
	notReady.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "nginx", Ready: true, State: running()},
		{Name: "side", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}},
	}}

	gated := base("gated")
	gated.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/a"}, {ConditionType: "example.com/b"}}
	gated.Status = corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: "node03", Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated},
		{Type: "example.com/a", Status: corev1.ConditionTrue},
	}}

	for _, tc := range []struct {
		pod  *corev1.Pod
		want []any
	}{
		{pending, []any{"pending", "0/1", "Pending", "0", "32m", "<none>", "<none>", "<none>", "<none>"}},
		{creating, []any{"creating", "0/1", "ContainerCreating", "0", "32m", "<none>", "node01", "<none>", "<none>"}},
		{crash, []any{"crash", "0/1", "CrashLoopBackOff", "5 (5m ago)", "32m", "<none>", "<none>", "<none>", "<none>"}},
		{restartedRunning, []any{"restarted", "1/1", "Running", "2 (90s ago)", "32m", "10.244.140.69", "node02", "<none>", "<none>"}},
		{completed, []any{"job", "0/1", "Completed", "0", "32m", "<none>", "<none>", "<none>", "<none>"}},
		{signal, []any{"signal", "0/1", "Signal:9", "0", "32m", "<none>", "<none>", "<none>", "<none>"}},
		{exitCode, []any{"exitcode", "0/1", "ExitCode:3", "0", "32m", "<none>", "<none>", "<none>", "<none>"}},
		{initWaiting, []any{"init", "0/1", "Init:1/2", "0", "32m", "<none>", "<none>", "<none>", "<none>"}},
		{initFailed, []any{"initfail", "0/1", "Init:Error", "3", "32m", "<none>", "<none>", "<none>", "<none>"}},
		{initBackoff, []any{"initbackoff", "0/1", "Init:CrashLoopBackOff", "0", "32m", "<none>", "<none>", "<none>", "<none>"}},
		{sidecar, []any{"sidecar", "2/2", "Running", "1 (3h ago)", "32m", "10.244.140.69", "node02", "<none>", "<none>"}},
		{terminating, []any{"terminating", "1/1", "Terminating", "0", "32m", "10.244.140.69", "node02", "<none>", "<none>"}},
		{lost, []any{"lost", "1/1", "Unknown", "0", "32m", "10.244.140.69", "node02", "<none>", "<none>"}},
		{notReady, []any{"notready", "1/2", "NotReady", "0", "32m", "<none>", "<none>", "<none>", "<none>"}},
		{gated, []any{"gated", "0/1", "SchedulingGated", "0", "32m", "<none>", "<none>", "node03", "1/2"}},
	} {
		t.Run(tc.pod.Name, func(t *testing.T) { checkCells(t, grPods, tc.pod, tc.want...) })
	}

	// Finished pods carry the Completed row condition.
	tbl, err := Convert(grPods, []runtime.Object{completed, signal, run}, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if c := tbl.Rows[0].Conditions; len(c) != 1 || c[0].Type != metav1.RowCompleted || c[0].Reason != "Succeeded" {
		t.Errorf("succeeded pod conditions = %+v", c)
	}
	if c := tbl.Rows[1].Conditions; len(c) != 1 || c[0].Reason != "Failed" || c[0].Message != "The pod failed." {
		t.Errorf("failed pod conditions = %+v", c)
	}
	if c := tbl.Rows[2].Conditions; c != nil {
		t.Errorf("running pod conditions = %+v, want none", c)
	}
}

func TestNodes(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node01", CreationTimestamp: ago(4*24*time.Hour + time.Hour),
			Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "master", "node-role.kubernetes.io/": "x"}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node01"}, {Type: corev1.NodeInternalIP, Address: "172.18.0.2"}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.36.0", OSImage: "Debian GNU/Linux 13 (trixie)", KernelVersion: "6.12.0", ContainerRuntimeVersion: "svcnet://0.1"},
		},
	}
	check(t, grNodes, true, `
NAME     STATUS   ROLES                  AGE    VERSION   INTERNAL-IP   EXTERNAL-IP   OS-IMAGE                       KERNEL-VERSION   CONTAINER-RUNTIME
node01   Ready    control-plane,master   4d1h   v1.36.0   172.18.0.2    <none>        Debian GNU/Linux 13 (trixie)   6.12.0           svcnet://0.1
`, n)
	cordoned := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node02", CreationTimestamp: ago(time.Minute)},
		Spec: corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.4"}}}}
	checkCells(t, grNodes, cordoned, "node02", "NotReady,SchedulingDisabled", "<none>", "60s", "", "<none>", "203.0.113.4", "<unknown>", "<unknown>", "<unknown>")
	fresh := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node03", CreationTimestamp: ago(time.Minute)}}
	checkCells(t, grNodes, fresh, "node03", "Unknown", "<none>", "60s", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>")
}

func TestNamespacesConfigMapsLeases(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", CreationTimestamp: ago(343 * 24 * time.Hour)},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	term := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone", CreationTimestamp: ago(10 * time.Second)},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	check(t, grNamespaces, false, `
NAME          STATUS        AGE
kube-system   Active        343d
gone          Terminating   10s
`, ns, term)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system", CreationTimestamp: ago(2 * time.Hour)},
		Data: map[string]string{"config.conf": "x", "kubeconfig.conf": "y"}, BinaryData: map[string][]byte{"b": nil}}
	check(t, grConfigMaps, false, `
NAME         DATA   AGE
kube-proxy   3      120m
`, cm)

	held := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node01", Namespace: "kube-node-lease", CreationTimestamp: ago(3 * time.Hour)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("node01")}}
	free := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "free", Namespace: "kube-node-lease", CreationTimestamp: ago(3 * time.Hour)}}
	check(t, grLeases, false, `
NAME     HOLDER   AGE
node01   node01   3h
free              3h
`, held, free)
}

func TestDeploymentsReplicaSets(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "myapp", Image: "jocatalin/kubernetes-bootcamp:v1"}}}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "myapp", Namespace: "default", CreationTimestamp: ago(13 * time.Minute)},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "myapp"}}, Template: tmpl},
		Status:     appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
	}
	// Seed 000: kubectl get deploy myapp -o wide
	check(t, grDeploy, true, `
NAME    READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES                             SELECTOR
myapp   3/3     3            3           13m   myapp        jocatalin/kubernetes-bootcamp:v1   app=myapp
`, d)
	two := d.DeepCopy()
	two.Name = "two"
	two.Spec.Replicas = nil
	two.Spec.Selector.MatchLabels["version"] = "v1"
	two.Spec.Template.Spec.Containers = append(two.Spec.Template.Spec.Containers, corev1.Container{Name: "side", Image: "busybox"})
	two.Status = appsv1.DeploymentStatus{}
	checkCells(t, grDeploy, two, "two", "0/1", int64(0), int64(0), "13m", "myapp,side", "jocatalin/kubernetes-bootcamp:v1,busybox", "app=myapp,version=v1")
	bad := d.DeepCopy()
	bad.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
	checkCells(t, grDeploy, bad, "myapp", "3/3", int64(3), int64(3), "13m", "myapp", "jocatalin/kubernetes-bootcamp:v1", "<invalid>")

	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "myapp-fdb95659d", Namespace: "default", CreationTimestamp: ago(13 * time.Minute)},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](3), Template: tmpl, Selector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{"app": "myapp", "pod-template-hash": "fdb95659d"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}},
		}},
		Status: appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2},
	}
	check(t, grRS, true, `
NAME              DESIRED   CURRENT   READY   AGE   CONTAINERS   IMAGES                             SELECTOR
myapp-fdb95659d   3         3         2       13m   myapp        jocatalin/kubernetes-bootcamp:v1   app=myapp,pod-template-hash=fdb95659d,tier in (web)
`, rs)

	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "myapp", Namespace: "default", CreationTimestamp: ago(13 * time.Minute)},
		Spec: autoscalingv1.ScaleSpec{Replicas: 5}, Status: autoscalingv1.ScaleStatus{Replicas: 3}}
	tbl, err := Convert(schema.GroupResource{Group: "apps", Resource: "deployments/scale"}, []runtime.Object{scale}, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if got := render(t, tbl, false); got != "NAME    DESIRED   AVAILABLE   AGE\nmyapp   5         3           13m\n" {
		t.Errorf("scale table:\n%s", got)
	}
	if tbl2, err := Convert(grDeploy, []runtime.Object{scale}, Options{Now: func() time.Time { return now }}); err != nil || render(t, tbl2, false) != render(t, tbl, false) {
		t.Errorf("scale under deployments: %v", err)
	}
	if tbl.ColumnDefinitions[0].Format != "" {
		t.Errorf("scale Name column format = %q, want empty as kube-apiserver", tbl.ColumnDefinitions[0].Format)
	}
}

func TestEvents(t *testing.T) {
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "myapp.1879a", Namespace: "default", CreationTimestamp: ago(time.Hour)},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Name: "myapp", FieldPath: "spec"},
		Reason:         "ClusterIPNotAllocated", Type: corev1.EventTypeWarning,
		Message:        "Cluster IP [IPv4]:10.96.3.215 is not allocated; repairing\n",
		Source:         corev1.EventSource{Component: "ipallocator-repair-controller"},
		FirstTimestamp: ago(10 * time.Minute), LastTimestamp: ago(2 * time.Minute), Count: 4,
	}
	check(t, grEvents, false, `
LAST SEEN   TYPE      REASON                  OBJECT          MESSAGE
2m          Warning   ClusterIPNotAllocated   service/myapp   Cluster IP [IPv4]:10.96.3.215 is not allocated; repairing
`, e)
	checkCells(t, grEvents, e, "2m", "Warning", "ClusterIPNotAllocated", "service/myapp", "spec", "ipallocator-repair-controller",
		"Cluster IP [IPv4]:10.96.3.215 is not allocated; repairing", "10m", int64(4), "myapp.1879a")

	newAPI := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "n", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node"},
		Reason:         "Starting", Type: corev1.EventTypeNormal,
		EventTime:           metav1.NewMicroTime(now.Add(-30 * time.Second)),
		ReportingController: "svcnet-proxy", ReportingInstance: "node01",
	}
	checkCells(t, grEvents, newAPI, "30s", "Normal", "Starting", "node", "", "svcnet-proxy, node01", "", "30s", int64(1), "n")
	series := newAPI.DeepCopy()
	series.Series = &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(now.Add(-3 * time.Second))}
	checkCells(t, grEvents, series, "3s", "Normal", "Starting", "node", "", "svcnet-proxy, node01", "", "30s", int64(7), "n")
	never := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "z"}}
	checkCells(t, grEvents, never, "<unknown>", "", "", "", "", "", "", "<unknown>", int64(1), "z")
}

func TestColumnDefinitions(t *testing.T) {
	for gr, p := range printers {
		for _, c := range p.columns {
			if c.Description == "" {
				t.Errorf("%s column %q has no description", gr, c.Name)
			}
			switch c.Type {
			case "string", "integer":
			default:
				t.Errorf("%s column %q has type %q", gr, c.Name, c.Type)
			}
		}
	}
	cols := Columns(grServices)
	want := []string{"Name/name/0", "Type//0", "Cluster-IP//0", "External-IP//0", "Port(s)//0", "Age//0", "Selector//1"}
	for i, c := range cols {
		if got := fmt.Sprintf("%s/%s/%d", c.Name, c.Format, c.Priority); i >= len(want) || got != want[i] {
			t.Errorf("service column %d = %s", i, got)
		}
	}
	if cols[0].Description != objectMetaDoc["name"] {
		t.Errorf("name column description = %q", cols[0].Description)
	}
	if !strings.HasPrefix(cols[2].Description, "clusterIP is the IP address of the service") {
		t.Errorf("Cluster-IP description = %q", cols[2].Description)
	}
	pods := Columns(grPods)
	if pods[3].Type != "string" || pods[8].Name != "Readiness Gates" || pods[8].Priority != 1 {
		t.Errorf("pod columns = %+v", pods)
	}
}

func TestOptions(t *testing.T) {
	s := svc("myapp", time.Minute, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"10.96.3.215"}})
	s.ResourceVersion = "42"
	s.UID = "u-1"
	s.Labels = map[string]string{"app": "myapp"}
	s.Kind, s.APIVersion = "Service", "v1"
	nowFn := func() time.Time { return now }

	// Default: PartialObjectMetadata rows, table RV from the single object.
	tbl, err := Convert(grServices, []runtime.Object{s}, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1" || tbl.ResourceVersion != "42" {
		t.Errorf("table meta = %+v %+v", tbl.TypeMeta, tbl.ListMeta)
	}
	pom, ok := tbl.Rows[0].Object.Object.(*metav1.PartialObjectMetadata)
	if !ok {
		t.Fatalf("row object = %T, want PartialObjectMetadata", tbl.Rows[0].Object.Object)
	}
	if pom.Name != "myapp" || pom.UID != "u-1" || pom.Labels["app"] != "myapp" || pom.APIVersion != "meta.k8s.io/v1" || pom.Kind != "PartialObjectMetadata" {
		t.Errorf("partial = %+v", pom)
	}

	// v1beta1 tables and IncludeObject=Object.
	tbl, err = Convert(grServices, []runtime.Object{s}, Options{Now: nowFn, IncludeObject: metav1.IncludeObject,
		GroupVersion: schema.GroupVersion{Group: "meta.k8s.io", Version: "v1beta1"}})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.APIVersion != "meta.k8s.io/v1beta1" || tbl.Rows[0].Object.Object != runtime.Object(s) {
		t.Errorf("IncludeObject: apiVersion %q object %T", tbl.APIVersion, tbl.Rows[0].Object.Object)
	}

	// ObjectKind fills an empty kind on a copy.
	bare := s.DeepCopy()
	bare.TypeMeta = metav1.TypeMeta{}
	tbl, err = Convert(grServices, []runtime.Object{bare}, Options{Now: nowFn, IncludeObject: metav1.IncludeObject,
		ObjectKind: corev1.SchemeGroupVersion.WithKind("Service")})
	if err != nil {
		t.Fatal(err)
	}
	if got := tbl.Rows[0].Object.Object.(*corev1.Service); got.Kind != "Service" || got.APIVersion != "v1" || bare.Kind != "" {
		t.Errorf("ObjectKind: row %v/%v, original kind %q", got.APIVersion, got.Kind, bare.Kind)
	}

	// None + NoHeaders + list meta.
	rc := int64(7)
	tbl, err = Convert(grServices, []runtime.Object{s, s}, Options{Now: nowFn, IncludeObject: metav1.IncludeNone, NoHeaders: true,
		ListMeta: &metav1.ListMeta{ResourceVersion: "99", Continue: "tok", RemainingItemCount: &rc}})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.ColumnDefinitions != nil || tbl.Rows[0].Object.Object != nil || len(tbl.Rows) != 2 ||
		tbl.ResourceVersion != "99" || tbl.Continue != "tok" || *tbl.RemainingItemCount != 7 {
		t.Errorf("table = %+v", tbl)
	}

	if _, err := Convert(grServices, []runtime.Object{s}, Options{IncludeObject: "Everything"}); !errors.Is(err, ErrBadIncludeObject) {
		t.Errorf("bad includeObject: err = %v", err)
	}
	if _, err := Convert(grServices, []runtime.Object{&corev1.Pod{}}, Options{}); err == nil {
		t.Error("a Pod printed as a Service: want error")
	}
	if _, err := Convert(grServices, []runtime.Object{nil}, Options{}); err == nil {
		t.Error("nil object: want error")
	}

	// Empty list: headers, "rows": [] (never null).
	tbl, err = Convert(grServices, nil, Options{})
	if err != nil || tbl.Rows == nil || len(tbl.ColumnDefinitions) != 7 {
		t.Errorf("empty: %+v, %v", tbl, err)
	}

	// ConvertList takes items and list meta from a typed list.
	list := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "123", Continue: "c"}, Items: []corev1.Service{*s, *s}}
	tbl, err = ConvertList(grServices, list, Options{Now: nowFn})
	if err != nil || len(tbl.Rows) != 2 || tbl.ResourceVersion != "123" || tbl.Continue != "c" {
		t.Errorf("ConvertList: %+v, %v", tbl, err)
	}
}

func TestDefaultTable(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)))
	sa := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "default", CreationTimestamp: created}}
	gr := schema.GroupResource{Resource: "limitranges"}
	tbl, err := Convert(gr, []runtime.Object{sa}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := tbl.ColumnDefinitions; len(c) != 2 || c[1].Name != "Created At" || c[1].Type != "date" || c[0].Format != "name" {
		t.Errorf("columns = %+v", c)
	}
	if got := fmt.Sprint(tbl.Rows[0].Cells); got != "[default 2026-01-02T02:04:05Z]" {
		t.Errorf("cells = %s", got)
	}
}

// TestSecrets: kubectl get secrets' columns, as kube-apiserver prints them.
func TestSecrets(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", CreationTimestamp: ago(3 * time.Minute)},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"user": []byte("a"), "password": []byte("b")}}
	tbl, err := Convert(schema.GroupResource{Resource: "secrets"}, []runtime.Object{s}, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range tbl.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "Name,Type,Data,Age" {
		t.Errorf("columns = %s", got)
	}
	if got := fmt.Sprint(tbl.Rows[0].Cells); got != "[db Opaque 2 3m]" {
		t.Errorf("cells = %s", got)
	}
}

func TestIngresses(t *testing.T) {
	gr := schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}
	rule := func(host string) networkingv1.IngressRule { return networkingv1.IngressRule{Host: host} }
	seed := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "my-ingress", Namespace: "default", CreationTimestamp: ago(5 * time.Minute)},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("example.com")}}}
	tls := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "default", CreationTimestamp: ago(2 * time.Hour)},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr("nginx"), Rules: []networkingv1.IngressRule{rule("a.example.com"), rule(""), rule("b.example.com")},
			TLS: []networkingv1.IngressTLS{{Hosts: []string{"a.example.com"}, SecretName: "tls"}}},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{
			{IP: "192.168.1.20"}, {Hostname: "lb.example.com"}, {IP: "10.0.0.5", Hostname: "ignored.example.com"}, {IP: "192.168.1.20"}}}}}
	many := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "many", Namespace: "default", CreationTimestamp: ago(3 * 24 * time.Hour)},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("a"), rule("b"), rule(""), rule("c"), rule("d"), rule("e")}}}
	none := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "default-only", Namespace: "default", CreationTimestamp: ago(10 * time.Second)},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{}, Rules: []networkingv1.IngressRule{rule("")}}}
	check(t, gr, false, `
NAME           CLASS    HOSTS                         ADDRESS                                PORTS     AGE
my-ingress     <none>   example.com                                                          80        5m
tls            nginx    a.example.com,b.example.com   10.0.0.5,192.168.1.20,lb.example.com   80, 443   120m
many           <none>   a,b,c + 3 more...                                                    80        3d
default-only   <none>   *                                                                    80        10s
`, seed, tls, many, none)
}

func TestIngressClasses(t *testing.T) {
	gr := schema.GroupResource{Group: "networking.k8s.io", Resource: "ingressclasses"}
	def := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx", CreationTimestamp: ago(time.Hour),
		Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}
	params := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "external-lb", CreationTimestamp: ago(2 * time.Minute),
		Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "True"}},
		Spec: networkingv1.IngressClassSpec{Controller: "example.com/ingress-controller",
			Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"}}}
	core := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "core", CreationTimestamp: ago(30 * time.Second)},
		Spec: networkingv1.IngressClassSpec{Controller: "example.com/core", Parameters: &networkingv1.IngressClassParametersReference{Kind: "ConfigMap", Name: "cfg"}}}
	check(t, gr, false, `
NAME              CONTROLLER                       PARAMETERS                                      AGE
nginx (default)   k8s.io/ingress-nginx             <none>                                          60m
external-lb       example.com/ingress-controller   IngressParameters.k8s.example.com/external-lb   2m
core              example.com/core                 ConfigMap/cfg                                   30s
`, def, params, core)
}
