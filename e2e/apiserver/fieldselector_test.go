package apiserver_e2e

import (
	"regexp"
	"testing"
)

// TestKubectlFieldSelector: kubectl get --field-selector filters by the
// labels Kubernetes supports and reports its error for the others.
func TestKubectlFieldSelector(t *testing.T) {
	k := newKubectl(t)
	k.ok("create", "service", "nodeport", "np", "--tcp=80:8080")
	k.ok("create", "service", "clusterip", "cip", "--tcp=80:8080")
	k.ok("create", "service", "clusterip", "hl", "--clusterip=None", "--tcp=80:8080")
	out := k.ok("get", "svc", "--field-selector", "spec.type=NodePort")
	mustMatch(t, out, `np\s+NodePort\s+10\.96\.`)
	if regexp.MustCompile(`(?m)^(cip|hl|kubernetes)\s`).MatchString(out) {
		t.Errorf("spec.type=NodePort lists other Services:\n%s", out)
	}
	out = k.ok("get", "svc", "--field-selector", "spec.clusterIP!=None,spec.type!=NodePort", "-o", "name")
	mustMatch(t, out, `service/cip`, `service/kubernetes`)
	if regexp.MustCompile(`service/(np|hl)\b`).MatchString(out) {
		t.Errorf("spec.clusterIP!=None,spec.type!=NodePort:\n%s", out)
	}
	mustMatch(t, k.run(true, "get", "svc", "--field-selector", "spec.foo=1"),
		`Error from server \(BadRequest\): .*: field label not supported: spec\.foo`)
}
