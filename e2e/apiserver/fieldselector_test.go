package apiserver_e2e

import (
	"os"
	"path/filepath"
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

// TestKubectlServiceCIDRs: kubectl get servicecidrs / ipaddresses show the
// default range and one IPAddress per ClusterIP; a second ServiceCIDR gives
// a Service its ClusterIP.
func TestKubectlServiceCIDRs(t *testing.T) {
	k := newKubectl(t)
	mustMatch(t, k.ok("get", "servicecidrs"), `NAME\s+CIDRS\s+AGE`, `kubernetes\s+10\.96\.0\.0/16\s+\S+`)
	mustMatch(t, k.ok("get", "ipaddresses"), `NAME\s+PARENTREF`, `10\.96\.0\.1\s+services/default/kubernetes`)
	mustMatch(t, k.run(true, "create", "service", "clusterip", "other", "--clusterip=10.97.0.10", "--tcp=80:8080"),
		`failed to allocate IP 10\.97\.0\.10: the provided network does not match the current range`)
	cidr := filepath.Join(t.TempDir(), "cidr.yaml")
	if err := os.WriteFile(cidr, []byte("apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata:\n  name: second\nspec:\n  cidrs: [10.97.0.0/24]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustMatch(t, k.ok("apply", "-f", cidr), `servicecidr.networking.k8s.io/second created`)
	k.ok("create", "service", "clusterip", "other", "--clusterip=10.97.0.10", "--tcp=80:8080")
	mustMatch(t, k.ok("get", "ipaddresses"), `10\.97\.0\.10\s+services/default/other`)
	mustMatch(t, k.ok("get", "servicecidrs"), `second\s+10\.97\.0\.0/24`)
}
