package seeds

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// 22: a program in a pod talks to the API as its service account, the way
// every in-cluster client (client-go's rest.InClusterConfig, kubectl without a
// kubeconfig) does: the token, CA and namespace files the pod's token volume
// holds, and KUBERNETES_SERVICE_HOST/PORT leading through the kubernetes
// Service's ClusterIP. RBAC decides what it may do.
func serviceAccountPod(s *scenario) {
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount"
	s.kubectl("create", "serviceaccount", "reader")
	s.kubectl("create", "rolebinding", "reader-view", "--clusterrole", "view", "--serviceaccount", "default:reader")
	s.applyYAML("reader.yaml", `apiVersion: v1
kind: Pod
metadata: {name: reader, labels: {app: reader}}
spec:
  serviceAccountName: reader
  containers:
  - name: main
    image: busybox
    command: ["sleep", "3600"]
`)
	s.waitPods("app=reader", 1)
	if got := s.inPod("reader", "cat", dir+"/namespace"); got != "default" {
		s.errorf([]string{"kubectl exec reader -- cat " + dir + "/namespace"}, got, "want default")
	}
	if got, want := s.inPod("reader", "cat", dir+"/ca.crt"), s.kubectl("get", "cm", "kube-root-ca.crt", "-o", `jsonpath={.data.ca\.crt}`); got != want || !strings.Contains(got, "BEGIN CERTIFICATE") {
		s.errorf([]string{"kubectl exec reader -- cat " + dir + "/ca.crt"}, got, "want the cluster CA of kube-root-ca.crt")
	}
	tok := s.inPod("reader", "cat", dir+"/token")
	var claims struct {
		Sub string
		K8s struct {
			Pod struct{ Name string }
		} `json:"kubernetes.io"`
	}
	if parts := strings.Split(tok, "."); len(parts) != 3 {
		s.errorf([]string{"kubectl exec reader -- cat " + dir + "/token"}, tok, "not a JWT")
	} else if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err != nil || json.Unmarshal(b, &claims) != nil ||
		claims.Sub != "system:serviceaccount:default:reader" || claims.K8s.Pod.Name != "reader" {
		s.errorf([]string{"kubectl exec reader -- cat " + dir + "/token"}, string(b), "want a token of default/reader bound to pod reader")
	}
	// kubectl inside the pod, without a kubeconfig: in-cluster configuration.
	s.eventually(60*time.Second, "kubectl in the pod is the service account", func() ([]string, string, bool) {
		out, err := s.c.inPod("default", "reader", bin, "kubectl", "auth", "whoami")
		return []string{"kubectl exec reader -- svcnet kubectl auth whoami"}, out, err == nil && strings.Contains(out, "system:serviceaccount:default:reader")
	})
	if out := s.inPod("reader", bin, "kubectl", "get", "pods", "-o", "name"); !strings.Contains(out, "pod/reader\n") {
		s.errorf([]string{"kubectl exec reader -- svcnet kubectl get pods -o name"}, out, "want the pods (the view role)")
	}
	out, err := s.c.inPod("default", "reader", bin, "kubectl", "delete", "pod", "reader")
	if err == nil || !strings.Contains(out, `User "system:serviceaccount:default:reader" cannot delete resource "pods"`) {
		s.errorf([]string{"kubectl exec reader -- svcnet kubectl delete pod reader"}, out, "want Forbidden: view does not delete")
	}
	if out, err := s.c.inPod("default", "reader", "touch", dir+"/x"); err == nil {
		s.errorf([]string{"kubectl exec reader -- touch " + dir + "/x"}, out, "the token volume is writable; want it read-only")
	}
	s.kubectl("delete", "pod/reader", "rolebinding/reader-view", "serviceaccount/reader", "--wait=true")
}
