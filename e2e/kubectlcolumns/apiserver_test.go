package kubectlcolumns

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestWithAPIServer runs kubectl against svcnet's real API server (embedded
// etcd, TLS, the kubeconfig it writes): the seed manifests apply with strict
// validation, and get/explain print what a real cluster prints.
func TestWithAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an apiserver")
	}
	srv := apiservertest.Start(t)
	kubeconfig := filepath.Join(srv.DataDir, "kubeconfig")
	run := func(args ...string) string {
		t.Helper()
		out, err := kubectlWith(t, kubeconfig, args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return out
	}
	out := run("apply", "--validate=strict", "-f", "testdata/myapp.yaml")
	if out != "deployment.apps/myapp created\nservice/myapp created\n" {
		t.Errorf("apply: %q", out)
	}

	client := kubernetes.NewForConfigOrDie(srv.Config)
	_, err := client.CoreV1().Services("default").Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "np"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "myapp"},
			Ports: []corev1.ServicePort{{Port: 38080, TargetPort: intstr.FromInt32(8080), NodePort: 30000}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	out = run("get", "svc", "myapp", "np", "-o", "wide")
	want := regexp.MustCompile(`^NAME    TYPE        CLUSTER-IP +EXTERNAL-IP   PORT\(S\) +AGE   SELECTOR
myapp   ClusterIP   10\.96\.\d+\.\d+ +<none>        38080/TCP +\d+s +app=myapp
np      NodePort    10\.96\.\d+\.\d+ +<none>        38080:30000/TCP +\d+s +app=myapp
$`)
	if !want.MatchString(out) {
		t.Errorf("get svc -o wide:\n%s", out)
	}
	out = run("get", "deploy", "-o", "wide")
	if !regexp.MustCompile(`^NAME    READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES                             SELECTOR
myapp   0/3     0            0           \d+s +myapp        jocatalin/kubernetes-bootcamp:v1   app=myapp,version=v1
$`).MatchString(out) {
		t.Errorf("get deploy -o wide:\n%s", out)
	}
	out = run("get", "ns")
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !regexp.MustCompile(`(?m)^` + ns + ` +Active +\d+s$`).MatchString(out) {
			t.Errorf("get ns lacks %s:\n%s", ns, out)
		}
	}
	// --sort-by asks for includeObject=Object, --show-labels reads the
	// PartialObjectMetadata rows.
	out = run("get", "svc", "--sort-by=.spec.ports[0].nodePort", "--show-labels")
	if !regexp.MustCompile(`(?m)^NAME +TYPE +CLUSTER-IP +EXTERNAL-IP +PORT\(S\) +AGE +LABELS\n`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^myapp +ClusterIP .* app=myapp$`).MatchString(out) {
		t.Errorf("get svc --sort-by --show-labels:\n%s", out)
	}
	mustContain(t, run("explain", "service.spec.ports"), "FIELD: ports <[]ServicePort>", "port\t<integer> -required-")
}
