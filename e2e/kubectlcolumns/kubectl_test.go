package kubectlcolumns

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/svcnet/svcnet/apiserver/openapi"
)

func defaultServer(t *testing.T) (*fakeAPI, string) {
	t.Helper()
	h, err := openapi.DefaultHandler()
	if err != nil {
		t.Fatal(err)
	}
	return newFakeAPI(t, h)
}

func mustContain(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestExplainServicePorts(t *testing.T) {
	_, url := defaultServer(t)
	out, err := kubectl(t, url, "explain", "service.spec.ports")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, out,
		"KIND:       Service\nVERSION:    v1\n",
		"FIELD: ports <[]ServicePort>",
		"The list of ports that are exposed by this service.",
		"port\t<integer> -required-\n    The port that will be exposed by this service.",
		"targetPort\t<IntOrString>",
		"nodePort\t<integer>",
		"protocol\t<string>",
	)
}

func TestExplainServiceType(t *testing.T) {
	_, url := defaultServer(t)
	out, err := kubectl(t, url, "explain", "svc.spec.type")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, out, "FIELD: type <string>\nENUM:\n    ClusterIP\n    ExternalName\n    LoadBalancer\n    NodePort\n",
		"    Possible enum values:\n     - `\"ClusterIP\"` means a service will only be accessible inside the cluster,\n    via the cluster IP.\n")
}

func TestExplainDeployment(t *testing.T) {
	_, url := defaultServer(t)
	out, err := kubectl(t, url, "explain", "deploy.spec")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, out, "GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n", "FIELD: spec <DeploymentSpec>",
		"selector\t<LabelSelector> -required-", "template\t<PodTemplateSpec> -required-", "replicas\t<integer>")
	out, err = kubectl(t, url, "explain", "endpointslices.endpoints.conditions.ready")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, out, "GROUP:      discovery.k8s.io", "FIELD: ready <boolean>")
}

// TestApplyDryRunStrict: with fieldValidation on every PATCH operation,
// kubectl leaves validation to the server and never asks for /openapi/v2.
func TestApplyDryRunStrict(t *testing.T) {
	f, url := defaultServer(t)
	out, err := kubectl(t, url, "apply", "--dry-run=client", "--validate=strict", "-f", "testdata/myapp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := "deployment.apps/myapp created (dry run)\nservice/myapp created (dry run)\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
	if f.requested("GET /openapi/v2") {
		t.Error("kubectl fetched /openapi/v2")
	}
	if !f.requested("GET /openapi/v3/apis/apps/v1") || !f.requested("GET /openapi/v3/api/v1") {
		t.Errorf("kubectl did not read the v3 documents: %v", f.paths)
	}
}

// TestApplyWithoutFieldValidation is the control: the same documents minus
// the fieldValidation parameter make kubectl fall back to client-side
// validation with OpenAPI v2, which svcnet does not serve.
func TestApplyWithoutFieldValidation(t *testing.T) {
	docs, err := openapi.Build(openapi.DefaultResources())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		for _, p := range d.Paths.Paths {
			if p.Patch == nil {
				continue
			}
			var keep []*spec3.Parameter
			for _, q := range p.Patch.Parameters {
				if q.Name != "fieldValidation" {
					keep = append(keep, q)
				}
			}
			p.Patch.Parameters = keep
		}
	}
	f, url := newFakeAPI(t, openapi.Handler(docs))
	out, err := kubectl(t, url, "apply", "--dry-run=client", "--validate=strict", "-f", "testdata/myapp.yaml")
	if err == nil {
		t.Fatalf("apply succeeded without fieldValidation in the documents: %s", out)
	}
	mustContain(t, out, "error validating")
	if !f.requested("GET /openapi/v2") {
		t.Error("kubectl did not fall back to /openapi/v2")
	}
}

func TestGetServicesWide(t *testing.T) {
	f, url := defaultServer(t)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(f.now.Add(-d)) }
	f.set(schema.GroupResource{Resource: "services"},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", CreationTimestamp: at(65 * time.Hour)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"10.96.0.1"},
				Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(6443)}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment-service", Namespace: "default", CreationTimestamp: at(33 * time.Minute)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"10.98.182.100"},
				Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}, Selector: map[string]string{"app": "nginx-deployment"}}},
	)
	// Seed 001: kubectl get service -o wide
	out, err := kubectl(t, url, "get", "service", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	want := `NAME                       TYPE        CLUSTER-IP      EXTERNAL-IP   PORT(S)   AGE     SELECTOR
kubernetes                 ClusterIP   10.96.0.1       <none>        443/TCP   2d17h   <none>
nginx-deployment-service   ClusterIP   10.98.182.100   <none>        80/TCP    33m     app=nginx-deployment
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}

	f.set(schema.GroupResource{Resource: "services"},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "myapp", Namespace: "default", CreationTimestamp: at(3 * time.Second)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIPs: []string{"10.96.0.95"},
				Ports: []corev1.ServicePort{{Port: 38080, NodePort: 30000, Protocol: corev1.ProtocolTCP}}, Selector: map[string]string{"app": "myapp"}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc-external-name", Namespace: "default", CreationTimestamp: at(40 * time.Minute)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "www.aneasystone.com"}},
	)
	out, err = kubectl(t, url, "get", "svc")
	if err != nil {
		t.Fatal(err)
	}
	want = `NAME                TYPE           CLUSTER-IP   EXTERNAL-IP           PORT(S)           AGE
myapp               NodePort       10.96.0.95   <none>                38080:30000/TCP   3s
svc-external-name   ExternalName   <none>       www.aneasystone.com   <none>            40m
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestGetWorkloads(t *testing.T) {
	f, url := defaultServer(t)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(f.now.Add(-d)) }
	f.set(schema.GroupResource{Group: "apps", Resource: "deployments"}, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "myapp", Namespace: "default", CreationTimestamp: at(13 * time.Minute)},
		Spec: appsv1.DeploymentSpec{Replicas: func() *int32 { r := int32(3); return &r }(),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "myapp"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "myapp", Image: "jocatalin/kubernetes-bootcamp:v1"}}}}},
		Status: appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
	})
	f.set(schema.GroupResource{Resource: "endpoints"}, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "myapp", Namespace: "default", CreationTimestamp: at(22 * time.Minute)},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "100.121.213.101"}, {IP: "100.121.213.103"}, {IP: "100.84.80.80"}},
			Ports:     []corev1.EndpointPort{{Port: 8080, Protocol: corev1.ProtocolTCP}},
		}},
	})
	running := func(name, ip, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: at(32 * time.Minute)},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "nginx", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	}
	f.set(schema.GroupResource{Resource: "pods"},
		running("nginx-deployment-9957b6647-5v2nl", "10.244.140.69", "node02"),
		running("nginx-deployment-9957b6647-j5c45", "10.244.196.130", "node01"))

	for _, c := range []struct {
		args []string
		want string
	}{
		// Seed 000: kubectl get deploy myapp -o wide
		{[]string{"get", "deploy", "-o", "wide"}, `NAME    READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES                             SELECTOR
myapp   3/3     3            3           13m   myapp        jocatalin/kubernetes-bootcamp:v1   app=myapp
`},
		// Seed 000: kubectl get endpoints myapp (as a list here)
		{[]string{"get", "endpoints"}, `NAME    ENDPOINTS                                                     AGE
myapp   100.121.213.101:8080,100.121.213.103:8080,100.84.80.80:8080   22m
`},
		// Seed 001: kubectl get pods -o wide
		{[]string{"get", "pods", "-o", "wide"}, `NAME                               READY   STATUS    RESTARTS   AGE   IP               NODE     NOMINATED NODE   READINESS GATES
nginx-deployment-9957b6647-5v2nl   1/1     Running   0          32m   10.244.140.69    node02   <none>           <none>
nginx-deployment-9957b6647-j5c45   1/1     Running   0          32m   10.244.196.130   node01   <none>           <none>
`},
		{[]string{"get", "po"}, `NAME                               READY   STATUS    RESTARTS   AGE
nginx-deployment-9957b6647-5v2nl   1/1     Running   0          32m
nginx-deployment-9957b6647-j5c45   1/1     Running   0          32m
`},
	} {
		out, err := kubectl(t, url, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if out != c.want {
			t.Errorf("kubectl %v:\ngot:\n%s\nwant:\n%s", c.args, out, c.want)
		}
	}
}

// TestExplainEveryKind: every served kind resolves in its group version's
// document.
func TestExplainEveryKind(t *testing.T) {
	_, url := defaultServer(t)
	for _, r := range openapi.DefaultResources() {
		out, err := kubectl(t, url, "explain", r.Resource, "--api-version", r.GVK.GroupVersion().String())
		if err != nil {
			t.Errorf("explain %s: %v", r.Resource, err)
			continue
		}
		mustContain(t, out, "KIND:       "+r.GVK.Kind+"\nVERSION:    v1\n", "FIELDS:\n", "\n  apiVersion\t<string>\n", "\n  metadata\t<ObjectMeta>")
	}
}
