package apiserver_e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestKubectlNetworkPolicy applies the seed's two NetworkPolicies with the
// real kubectl and checks what a 1.37 cluster shows: defaulted policyTypes,
// the NAME/POD-SELECTOR/AGE table, kubectl describe (kubectl's own
// describer, fed by the served object), the netpol short name, and 422s for
// bad input that leave nothing stored.
func TestKubectlNetworkPolicy(t *testing.T) {
	k := newKubectl(t)
	k.ok("create", "namespace", "b")
	k.ok("apply", "-f", "testdata/netpol-seed.yaml")

	mustMatch(t, k.ok("get", "networkpolicy", "-A"),
		`(?m)^NAMESPACE\s+NAME\s+POD-SELECTOR\s+AGE$`,
		`(?m)^b\s+allow-from-namespace-a\s+app=target-service\s+\d+s$`,
		`(?m)^default\s+db-from-frontend\s+role=db\s+\d+s$`)
	if got := k.ok("get", "netpol", "db-from-frontend", "-o", "jsonpath={.spec.policyTypes}"); got != `["Ingress"]` {
		t.Errorf("policyTypes defaulted to %s, want [\"Ingress\"]", got)
	}
	if got := k.ok("get", "netpol", "db-from-frontend", "-o", "jsonpath={.metadata.generation}"); got != "1" {
		t.Errorf("generation %s, want 1", got)
	}

	out := k.ok("describe", "networkpolicy", "db-from-frontend")
	mustMatch(t, out,
		`(?m)^Name:\s+db-from-frontend$`,
		`(?m)^Namespace:\s+default$`,
		`(?m)^Created on:\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0000 UTC$`,
		`(?m)^Labels:\s+<none>$`,
		`(?m)^Spec:\n  PodSelector:     role=db\n  Allowing ingress traffic:\n    To Port: <any> \(traffic allowed to all ports\)\n    From:\n      PodSelector: role=frontend\n  Not affecting egress traffic\n  Policy Types: Ingress\n?$`)
	mustMatch(t, k.ok("describe", "netpol", "-n", "b", "allow-from-namespace-a"),
		`(?m)^      NamespaceSelector: name=A$`,
		`(?m)^  Policy Types: Ingress$`)

	// Egress rules default policyTypes to Ingress, Egress; ports to TCP.
	eg := `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: dns-only}
spec:
  podSelector: {}
  egress:
  - ports:
    - port: 53
      protocol: UDP
    - port: 53
    - port: 30000
      endPort: 32767
`
	k.ok("apply", "-f", writeTemp(t, eg))
	if got := k.ok("get", "netpol", "dns-only", "-o", "jsonpath={.spec.policyTypes} {.spec.egress[0].ports[1].protocol}"); got != `["Ingress","Egress"] TCP` {
		t.Errorf("defaults: %s", got)
	}
	mustMatch(t, k.ok("describe", "netpol", "dns-only"),
		`(?m)^  PodSelector:     <none> \(Allowing the specific traffic to all pods in this namespace\)$`,
		`(?m)^  Allowing ingress traffic:\n    <none> \(Selected pods are isolated for ingress connectivity\)$`,
		`(?m)^    To Port: 53/UDP$`,
		`(?m)^    To Port Range: 30000-32767/TCP$`,
		`(?m)^    To: <any> \(traffic not restricted by destination\)$`,
		`(?m)^  Policy Types: Ingress, Egress$`)

	bad := []struct{ name, spec, want string }{
		{"bad-cidr", `ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/33}}]}]`,
			`spec.ingress[0].from[0].ipBlock.cidr: Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`},
		{"bad-except", `ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.1.0.0/24]}}]}]`,
			"spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`"},
		{"bad-endport", `ingress: [{ports: [{port: 90, endPort: 80}]}]`,
			"spec.ingress[0].ports[0].endPort: Invalid value: 80: must be greater than or equal to `port`"},
		{"named-endport", `egress: [{ports: [{port: http, endPort: 81}]}]`,
			"spec.egress[0].ports[0].endPort: Invalid value: 81: may not be specified when `port` is non-numeric"},
		{"bad-type", `policyTypes: [Ingress, Sideways]`,
			`spec.policyTypes[1]: Unsupported value: "Sideways": supported values: "Ingress", "Egress"`},
		{"bad-selector", `podSelector: {matchLabels: {"a b": c}}`,
			`spec.podSelector.matchLabels: Invalid value: "a b": name part must consist of alphanumeric characters`},
	}
	for _, b := range bad {
		y := "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: " + b.name + "}\nspec:\n  " + b.spec + "\n"
		if !strings.Contains(b.spec, "podSelector: {match") {
			y = strings.Replace(y, "spec:\n", "spec:\n  podSelector: {}\n", 1)
		}
		out := k.run(true, "apply", "-f", writeTemp(t, y))
		if !strings.Contains(out, "is invalid") || !strings.Contains(out, b.want) {
			t.Errorf("%s: kubectl apply said\n%s\nwant it to contain %q", b.name, out, b.want)
		}
		if out := k.run(true, "get", "netpol", b.name); !strings.Contains(out, "NotFound") {
			t.Errorf("%s was stored: %s", b.name, out)
		}
	}

	// The errors in kube-apiserver 1.37's order: an ipBlock's cidr is
	// required by a declarative rule, reported after the handwritten errors.
	y := "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: two-errors}\nspec:\n  podSelector: {}\n  ingress: [{from: [{ipBlock: {cidr: \"\"}}, {}]}]\n"
	out = k.run(true, "apply", "-f", writeTemp(t, y))
	if want := "* spec.ingress[0].from[1]: Required value: must specify a peer\n* spec.ingress[0].from[0].ipBlock.cidr: Required value"; !strings.Contains(out, want) {
		t.Errorf("two errors: kubectl apply said\n%s\nwant\n%s", out, want)
	}
}

func writeTemp(t *testing.T, s string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "obj.yaml")
	if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestClientGoNetworkPolicy drives the NetworkPolicy API with client-go:
// create, get, list, watch, update (generation moves on spec change),
// delete, and a 422 with field causes for an invalid object.
func TestClientGoNetworkPolicy(t *testing.T) {
	srv := apiservertest.Start(t)
	cs := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	api := cs.NetworkingV1().NetworkPolicies("default")

	w, err := api.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "db"}},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(53))}}}},
		},
	}
	got, err := api.Create(ctx, np, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.PolicyTypes) != 2 || *got.Spec.Egress[0].Ports[0].Protocol != corev1.ProtocolTCP || got.Generation != 1 {
		t.Errorf("created: policyTypes %v, generation %d", got.Spec.PolicyTypes, got.Generation)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object.(*networkingv1.NetworkPolicy).Name != "p" {
			t.Errorf("watch event %v %T", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	got.Spec.PodSelector = metav1.LabelSelector{}
	if got, err = api.Update(ctx, got, metav1.UpdateOptions{}); err != nil || got.Generation != 2 {
		t.Fatalf("update: %v, generation %d", err, got.Generation)
	}
	if l, err := cs.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("list: %v %v", err, l)
	}

	bad := np.DeepCopy()
	bad.Name = "bad"
	bad.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "300.0.0.0/8"}}}}}
	_, err = api.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("invalid CIDR: %v, want 422", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Code != 422 || st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.ingress[0].from[0].ipBlock.cidr" {
		t.Errorf("status %+v", st)
	}
	if _, err := api.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("invalid object stored: %v", err)
	}
	if err := api.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
