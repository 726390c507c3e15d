package apiserver_e2e

import (
	"regexp"
	"strings"
	"testing"
)

// TestKubectlWarnings: the Warning headers kube-apiserver 1.37 returns for
// writes that work but hold something deprecated, ignored or written in a
// non-standard form, as the real kubectl prints them: on create (apply),
// on update (apply of a changed object, edit-style patch), on server-side
// apply and dry runs, and not for an update that keeps a ServiceAccount's
// deprecated annotation.
func TestKubectlWarnings(t *testing.T) {
	k := newKubectl(t)
	// The seed's externalIPs Service (seed 001): deprecated field.
	y := "apiVersion: v1\nkind: Service\nmetadata: {name: ext}\nspec:\n  selector: {app: ext}\n  ports: [{port: 80}]\n  externalIPs: [203.0.113.10]\n"
	mustMatch(t, k.ok("apply", "-f", writeTemp(t, y)),
		`Warning: spec.externalIPs is deprecated and may no longer be implemented in some clusters`, `service/ext created`)
	// An update with the old topology annotation, and a PreferClose
	// distribution: both warnings, in kube-apiserver's order, with the
	// externalIPs one between them.
	y = "apiVersion: v1\nkind: Service\nmetadata: {name: ext, annotations: {service.kubernetes.io/topology-aware-hints: auto}}\nspec:\n  selector: {app: ext}\n  ports: [{port: 80}]\n  externalIPs: [203.0.113.10]\n  trafficDistribution: PreferClose\n"
	mustMatch(t, k.ok("apply", "-f", writeTemp(t, y)),
		`(?s)Warning: annotation service.kubernetes.io/topology-aware-hints is deprecated, please use service.kubernetes.io/topology-mode instead\n`+
			`Warning: spec.externalIPs is deprecated and may no longer be implemented in some clusters\n`+
			`Warning: spec.trafficDistribution: "PreferClose" is deprecated; use "PreferSameZone"\n`, `service/ext configured`)
	// A patch and a server-side apply of the same Service warn too.
	mustMatch(t, k.ok("patch", "svc", "ext", "--type=merge", "-p", `{"spec":{"externalIPs":["203.0.113.11"]}}`),
		`Warning: spec.externalIPs is deprecated`, `service/ext patched`)
	mustMatch(t, k.ok("apply", "--server-side", "--force-conflicts", "-f", writeTemp(t, y)),
		`Warning: spec.externalIPs is deprecated`, `service/ext serverside-applied`)
	// A headless Service ignores affinity: warned, and dry runs warn as well.
	y = "apiVersion: v1\nkind: Service\nmetadata: {name: hl}\nspec:\n  clusterIP: None\n  selector: {app: hl}\n  ports: [{port: 80}]\n  sessionAffinity: ClientIP\n"
	mustMatch(t, k.ok("apply", "--dry-run=server", "-f", writeTemp(t, y)),
		`Warning: spec.SessionAffinity is ignored for headless services`, `service/hl created \(server dry run\)`)
	// A status write with a non-standard load-balancer address.
	k.ok("create", "service", "loadbalancer", "lb", "--tcp=80:80")
	mustMatch(t, k.ok("patch", "svc", "lb", "--subresource=status", "--type=merge", "-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"2001:DB8::1"}]}}}`),
		`Warning: status.loadBalancer.ingress\[0\]: IPv6 address "2001:DB8::1" should be in RFC 5952 canonical format \("2001:db8::1"\)`)
	// ServiceAccounts: setting the deprecated annotation warns, keeping it
	// does not.
	mustMatch(t, k.ok("create", "serviceaccount", "builder"), `serviceaccount/builder created`)
	mustMatch(t, k.ok("annotate", "serviceaccount", "builder", "kubernetes.io/enforce-mountable-secrets=true"),
		`Warning: metadata.annotations\[kubernetes.io/enforce-mountable-secrets\]: deprecated in v1.32\+; prefer separate namespaces to isolate access to mounted secrets`)
	out := k.ok("label", "serviceaccount", "builder", "team=ci")
	mustNotMatch(t, out, `Warning`)
	// Pods and pod templates: a name with dots, an env var defined twice, a
	// deprecated node label.
	y = "apiVersion: v1\nkind: Pod\nmetadata: {name: web.v1}\nspec:\n  containers:\n  - name: c\n    image: nginx\n    env: [{name: MODE, value: a}, {name: MODE, value: b}]\n"
	mustMatch(t, k.ok("apply", "-f", writeTemp(t, y)),
		`Warning: metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: \[must not contain dots\]`,
		`Warning: spec.containers\[0\].env\[1\]: hides previous definition of "MODE", which may be dropped when using apply`, `pod/web.v1 created`)
	y = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: arch}\nspec:\n  selector: {matchLabels: {app: arch}}\n  template:\n    metadata: {labels: {app: arch}}\n    spec:\n      nodeSelector: {beta.kubernetes.io/arch: amd64}\n      containers: [{name: c, image: nginx}]\n"
	mustMatch(t, k.ok("apply", "-f", writeTemp(t, y)),
		`Warning: spec.template.spec.nodeSelector\[beta.kubernetes.io/arch\]: deprecated since v1.14; use "kubernetes.io/arch" instead`, `deployment.apps/arch created`)
	// A deprecated AppArmor annotation: warned once (kube-apiserver's
	// recorder drops repeated texts), and copied into the container's field.
	y = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: aa\n  annotations: {container.apparmor.security.beta.kubernetes.io/c: runtime/default}\nspec:\n  containers: [{name: c, image: nginx}]\n"
	out = k.ok("apply", "-f", writeTemp(t, y))
	mustMatch(t, out, `Warning: metadata.annotations\[container.apparmor.security.beta.kubernetes.io/c\]: deprecated since v1.30; use the "appArmorProfile" field instead`, `pod/aa created`)
	if n := strings.Count(out, "appArmorProfile"); n != 1 {
		t.Errorf("the AppArmor warning came %d times:\n%s", n, out)
	}
	if got := k.ok("get", "pod", "aa", "-o", "jsonpath={.spec.containers[0].securityContext.appArmorProfile.type}"); got != "RuntimeDefault" {
		t.Errorf("container appArmorProfile.type = %q, want RuntimeDefault", got)
	}
	// A Service without anything to warn about: no warning.
	mustNotMatch(t, k.ok("create", "service", "clusterip", "plain", "--tcp=80:8080"), `Warning`)
}

func mustNotMatch(t *testing.T, out, pattern string) {
	t.Helper()
	if regexp.MustCompile(pattern).MatchString(out) {
		t.Errorf("output matches %q:\n%s", pattern, out)
	}
}
