package apiserver_e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/apiserver"
	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestKubectlIngress drives Ingresses and IngressClasses with the real
// kubectl as a 1.37 cluster answers it: the seeds' Ingress applied and
// listed (NAME/CLASS/HOSTS/ADDRESS/PORTS/AGE, short name ing), kubectl's
// own generator (kubectl create ingress), kube-apiserver's field errors
// for invalid Ingresses (nothing stored), IngressClasses listed
// (NAME/CONTROLLER/PARAMETERS/AGE, "(default)" on the default one), the
// DefaultIngressClass admission plugin filling spec.ingressClassName, the
// deprecated-annotation warning, discovery, explain and RBAC's view/edit.
func TestKubectlIngress(t *testing.T) {
	k := newKubectl(t)
	mustMatch(t, k.ok("apply", "-f", "testdata/ingress.yaml"), `^ingress.networking.k8s.io/my-ingress created\n$`)
	mustMatch(t, k.ok("apply", "-f", "testdata/ingress.yaml"), `ingress.networking.k8s.io/my-ingress unchanged`)
	mustMatch(t, k.ok("get", "ingress"),
		`(?m)^NAME\s+CLASS\s+HOSTS\s+ADDRESS\s+PORTS\s+AGE$`,
		`(?m)^my-ingress\s+<none>\s+example.com\s+80\s+\d+s$`)
	if got := k.ok("get", "ing", "my-ingress", "-o", "jsonpath={.metadata.generation} {.metadata.annotations.nginx\\.ingress\\.kubernetes\\.io/affinity} {.spec.rules[0].http.paths[0].pathType}"); got != "1 cookie Prefix" {
		t.Errorf("stored Ingress: %q", got)
	}
	mustMatch(t, k.ok("describe", "ingress", "my-ingress"),
		`(?m)^Name:\s+my-ingress$`, `(?m)^Ingress Class:\s+<none>$`, `(?m)^\s+example.com\s*$`, `(?m)^\s+/\s+my-service:80 `)

	// kubectl's generator: --rule host/path=service:port[,tls=secret]; a
	// path ending in * is Prefix, else Exact.
	mustMatch(t, k.ok("create", "ingress", "simple", "--rule=foo.com/bar=svc1:8080,tls=my-cert", "--rule=bar.com/*=svc2:http"),
		`ingress.networking.k8s.io/simple created`)
	if got := k.ok("get", "ing", "simple", "-o", "jsonpath={.spec.rules[0].http.paths[0].pathType} {.spec.rules[1].http.paths[0].pathType} {.spec.rules[1].http.paths[0].backend.service.port.name} {.spec.tls[0].secretName}"); got != "Exact Prefix http my-cert" {
		t.Errorf("kubectl create ingress: %q", got)
	}
	mustMatch(t, k.ok("get", "ing", "simple"), `(?m)^simple\s+<none>\s+foo.com,bar.com\s+80, 443\s+\d+s$`)

	// Invalid Ingresses: kube-apiserver's field errors, nothing stored.
	bad := []struct{ name, rule, want string }{
		{"relative", `{host: example.com, http: {paths: [{path: api, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}`,
			`spec.rules[0].http.paths[0].path: Invalid value: "api": must be an absolute path`},
		{"ip-host", `{host: 10.0.0.1, http: {paths: [{path: /, pathType: Exact, backend: {service: {name: s, port: {number: 80}}}}]}}`,
			`spec.rules[0].host: Invalid value: "10.0.0.1": must be a DNS name, not an IP address`},
		{"no-pathtype", `{http: {paths: [{path: /, backend: {service: {name: s, port: {number: 80}}}}]}}`,
			`spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified`},
		{"two-ports", `{http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80, name: http}}}}]}}`,
			`spec.rules[0].http.paths[0].backend: Invalid value: "": cannot set both port name & port number`},
		{"bad-path", `{http: {paths: [{path: /a//b, pathType: Exact, backend: {service: {name: s, port: {number: 80}}}}]}}`,
			`spec.rules[0].http.paths[0].path: Invalid value: "/a//b": must not contain '//'`},
	}
	for _, b := range bad {
		y := "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: " + b.name + "}\nspec:\n  rules: [" + b.rule + "]\n"
		out := k.run(true, "apply", "-f", writeTemp(t, y))
		if !strings.Contains(out, `The Ingress "`+b.name+`" is invalid`) || !strings.Contains(out, b.want) {
			t.Errorf("%s: kubectl apply said\n%s\nwant it to contain %q", b.name, out, b.want)
		}
		if out := k.run(true, "get", "ing", b.name); !strings.Contains(out, "NotFound") {
			t.Errorf("%s was stored: %s", b.name, out)
		}
	}
	// Class annotation and ingressClassName must agree on create.
	y := "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: mismatch, annotations: {kubernetes.io/ingress.class: traefik}}\nspec:\n  ingressClassName: nginx\n  defaultBackend: {service: {name: s, port: {number: 80}}}\n"
	mustMatch(t, k.run(true, "create", "-f", writeTemp(t, y)),
		"annotations.kubernetes.io/ingress.class: Invalid value: \"traefik\": must match `ingressClassName` when both are specified")

	// IngressClasses, one of them the default.
	classes := `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: nginx
  annotations: {ingressclass.kubernetes.io/is-default-class: "true"}
spec:
  controller: k8s.io/ingress-nginx
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: external-lb}
spec:
  controller: example.com/ingress-controller
  parameters: {apiGroup: k8s.example.com, kind: IngressParameters, name: external-lb}
`
	mustMatch(t, k.ok("apply", "-f", writeTemp(t, classes)), `ingressclass.networking.k8s.io/nginx created`, `ingressclass.networking.k8s.io/external-lb created`)
	mustMatch(t, k.ok("get", "ingressclass"),
		`(?m)^NAME\s+CONTROLLER\s+PARAMETERS\s+AGE$`,
		`(?m)^external-lb\s+example.com/ingress-controller\s+IngressParameters.k8s.example.com/external-lb\s+\d+s$`,
		`(?m)^nginx \(default\)\s+k8s.io/ingress-nginx\s+<none>\s+\d+s$`)
	if got := k.ok("get", "ingressclass", "external-lb", "-o", "jsonpath={.spec.parameters.scope} {.metadata.generation}"); got != "Cluster 1" {
		t.Errorf("IngressClass defaults: %q", got)
	}
	mustMatch(t, k.run(true, "patch", "ingressclass", "nginx", "--type=merge", "-p", `{"spec":{"controller":"example.com/other"}}`),
		`spec.controller: Invalid value: "example.com/other": field is immutable`)
	y = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: bad}\nspec: {controller: nginx, parameters: {kind: ConfigMap, name: cfg, scope: Namespace}}\n"
	mustMatch(t, k.run(true, "apply", "-f", writeTemp(t, y)),
		`spec.controller: Invalid value: "nginx": must be a domain-prefixed path \(such as "acme.io/foo"\)`,
		"spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'")

	// DefaultIngressClass: a new Ingress without a class gets the default
	// one; one with the annotation does not (and is warned about it); the
	// Ingresses made before are left alone.
	k.ok("create", "ingress", "defaulted", "--rule=web.example.com/=web:80")
	if got := k.ok("get", "ing", "defaulted", "-o", "jsonpath={.spec.ingressClassName}"); got != "nginx" {
		t.Errorf("defaulted ingressClassName %q, want nginx", got)
	}
	mustMatch(t, k.ok("get", "ing", "defaulted"), `(?m)^defaulted\s+nginx\s+web.example.com\s+80\s+\d+s$`)
	y = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: annotated, annotations: {kubernetes.io/ingress.class: traefik}}\nspec:\n  defaultBackend: {service: {name: s, port: {number: 80}}}\n"
	mustMatch(t, k.ok("apply", "-f", writeTemp(t, y)),
		`Warning: annotation "kubernetes.io/ingress.class" is deprecated, please use 'spec.ingressClassName' instead`, `ingress.networking.k8s.io/annotated created`)
	if got := k.ok("get", "ing", "annotated", "my-ingress", "-o", "jsonpath={.items[*].spec.ingressClassName}"); got != "" {
		t.Errorf("ingressClassName set on %q", got)
	}

	// Discovery, explain, RBAC's aggregated roles.
	mustMatch(t, k.ok("api-resources", "--api-group=networking.k8s.io"),
		`(?m)^ingressclasses\s+networking.k8s.io/v1\s+false\s+IngressClass$`,
		`(?m)^ingresses\s+ing\s+networking.k8s.io/v1\s+true\s+Ingress$`)
	mustMatch(t, k.ok("explain", "ingress.spec.rules.http.paths"), `(?m)^  pathType\s+<string> -required-$`, `(?m)^  backend\s+<IngressBackend> -required-$`)
	k.ok("create", "serviceaccount", "viewer")
	k.ok("create", "serviceaccount", "editor")
	k.ok("create", "rolebinding", "viewer", "--clusterrole=view", "--serviceaccount=default:viewer")
	k.ok("create", "rolebinding", "editor", "--clusterrole=edit", "--serviceaccount=default:editor")
	for _, c := range []struct{ as, verb, res, sub, want string }{
		{"viewer", "get", "ingresses", "", "yes"}, {"viewer", "get", "ingresses", "status", "yes"}, {"viewer", "create", "ingresses", "", "no"},
		{"editor", "create", "ingresses", "", "yes"}, {"editor", "update", "ingresses", "status", "no"}, {"editor", "list", "ingressclasses", "", "no"},
	} {
		out := k.run(c.want == "no", "auth", "can-i", c.verb, c.res+".networking.k8s.io", "--subresource="+c.sub, "--as=system:serviceaccount:default:"+c.as)
		// (ingressclasses: kubectl first warns that it is cluster-scoped.)
		if l := strings.Split(strings.TrimSpace(out), "\n"); l[len(l)-1] != c.want {
			t.Errorf("can %s %s %s/%s: %q, want %s", c.as, c.verb, c.res, c.sub, out, c.want)
		}
	}
	mustMatch(t, k.ok("get", "ing", "--as=system:serviceaccount:default:viewer"), `(?m)^my-ingress\s`)
}

// TestKubectlIngressAdmissionDisabled: --disable-admission-plugins
// DefaultIngressClass leaves new Ingresses without a class.
func TestKubectlIngressAdmissionDisabled(t *testing.T) {
	k := newKubectl(t, apiservertest.WithConfig(func(c *apiserver.Config) {
		c.DisableAdmissionPlugins = append(c.DisableAdmissionPlugins, "DefaultIngressClass")
	}))
	k.ok("apply", "-f", writeTemp(t, "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx, annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}}\nspec: {controller: k8s.io/ingress-nginx}\n"))
	k.ok("apply", "-f", "testdata/ingress.yaml")
	if got := k.ok("get", "ing", "my-ingress", "-o", "jsonpath={.spec.ingressClassName}"); got != "" {
		t.Errorf("ingressClassName %q with the plugin disabled", got)
	}
}

// TestClientGoIngress: create, watch, the status subresource (ADDRESS in
// kubectl's table), generation on spec changes, a 422 with field causes.
func TestClientGoIngress(t *testing.T) {
	k, srv := newKubectlServer(t)
	cs := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	api := cs.NetworkingV1().Ingresses("default")
	w, err := api.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: networkingv1.IngressSpec{
		DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
		TLS:            []networkingv1.IngressTLS{{Hosts: []string{"web.example.com"}, SecretName: "web-tls"}},
	}}
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.168.1.99"}}
	got, err := api.Create(ctx, ing, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 1 || len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("created: generation %d, status %+v", got.Generation, got.Status)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object.(*networkingv1.Ingress).Name != "web" {
			t.Errorf("watch event %v %T", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	got.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.168.1.20"}, {Hostname: "lb.example.com"}}
	got.Spec.DefaultBackend.Service.Name = "ignored-by-status"
	if got, err = api.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil || got.Spec.DefaultBackend.Service.Name != "web" || got.Generation != 1 {
		t.Fatalf("status: %v %+v", err, got)
	}
	mustMatch(t, k.ok("get", "ing", "web"), `(?m)^web\s+<none>\s+\*\s+192.168.1.20,lb.example.com\s+80, 443\s+\d+s$`)
	got.Spec.IngressClassName = ptr.To("nginx")
	if got, err = api.Update(ctx, got, metav1.UpdateOptions{}); err != nil || got.Generation != 2 || len(got.Status.LoadBalancer.Ingress) != 2 {
		t.Fatalf("update: %v %+v", err, got)
	}
	got.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "010.0.0.1"}}
	_, err = api.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if st, ok := err.(apierrors.APIStatus); !ok || st.Status().Code != 422 || len(st.Status().Details.Causes) != 1 ||
		st.Status().Details.Causes[0].Field != "status.loadBalancer.ingress[0].ip" || st.Status().Details.Causes[0].Message != `Invalid value: "010.0.0.1": must not have leading 0s` {
		t.Errorf("bad status IP: %v", err)
	}
	bad := ing.DeepCopy()
	bad.Name = "bad"
	bad.Spec.DefaultBackend.Service.Port = networkingv1.ServiceBackendPort{}
	_, err = api.Create(ctx, bad, metav1.CreateOptions{})
	if st, ok := err.(apierrors.APIStatus); !ok || st.Status().Code != 422 || len(st.Status().Details.Causes) != 1 ||
		st.Status().Details.Causes[0].Field != "spec.defaultBackend" || st.Status().Details.Causes[0].Message != "Required value: port name or number is required" {
		t.Errorf("invalid Ingress: %v", err)
	}
	if err := api.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
