package ingress

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// seed is the seeds' Ingress: host example.com, path / Prefix to
// my-service port 80, ingress-nginx session-affinity annotations.
func seed() *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "my-ingress", Namespace: "default", Annotations: map[string]string{
			"nginx.ingress.kubernetes.io/affinity":               "cookie",
			"nginx.ingress.kubernetes.io/session-cookie-name":    "INGRESSCOOKIE",
			"nginx.ingress.kubernetes.io/session-cookie-expires": "172800",
		}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: "example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: svcBackend("my-service", 80, ""),
			}}}},
		}}},
	}
}

func svcBackend(name string, number int32, port string) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: number, Name: port}}}
}

func ctx() context.Context { return context.Background() }

func lines(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func checkErrs(t *testing.T, name string, got field.ErrorList, want []string) {
	t.Helper()
	g := lines(got)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot  %q\nwant %q", name, g, want)
	}
}

// TestValidate: field paths, messages and order as kube-apiserver 1.37's
// ValidateIngressCreate (through the store's path, with the generic
// ObjectMeta checks and declarative validation).
func TestValidate(t *testing.T) {
	path := func(p string, pt *networkingv1.PathType, b networkingv1.IngressBackend) func(*networkingv1.Ingress) {
		return func(ing *networkingv1.Ingress) {
			ing.Spec.Rules[0].HTTP.Paths[0] = networkingv1.HTTPIngressPath{Path: p, PathType: pt, Backend: b}
		}
	}
	ok := svcBackend("my-service", 80, "")
	prefix, exact, impl := ptr.To(networkingv1.PathTypePrefix), ptr.To(networkingv1.PathTypeExact), ptr.To(networkingv1.PathTypeImplementationSpecific)
	const p0 = "spec.rules[0].http.paths[0]"
	cases := []struct {
		name   string
		modify func(*networkingv1.Ingress)
		want   []string
	}{
		{"seed", func(*networkingv1.Ingress) {}, nil},
		{"wildcard host", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "*.example.com" }, nil},
		{"no host, class and TLS", func(ing *networkingv1.Ingress) {
			ing.Spec.Rules[0].Host = ""
			ing.Spec.IngressClassName = ptr.To("nginx")
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"*.example.com", "example.com"}, SecretName: "tls"}}
		}, nil},
		{"default backend only", func(ing *networkingv1.Ingress) {
			ing.Spec.Rules = nil
			ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{APIGroup: ptr.To("k8s.example.com"), Kind: "StorageBucket", Name: "icon-assets"}}
		}, nil},
		{"nothing", func(ing *networkingv1.Ingress) { ing.Spec.Rules = nil },
			[]string{"spec: Invalid value: null: either `defaultBackend` or `rules` must be specified"}},
		{"empty rules", func(ing *networkingv1.Ingress) { ing.Spec.Rules = []networkingv1.IngressRule{} },
			[]string{"spec: Invalid value: []: either `defaultBackend` or `rules` must be specified"}},
		{"IP host", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "1.2.3.4" },
			[]string{`spec.rules[0].host: Invalid value: "1.2.3.4": must be a DNS name, not an IP address`}},
		{"bad wildcard", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "*.foo.*.com" },
			[]string{`spec.rules[0].host: Invalid value: "*.foo.*.com": a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{"upper-case host", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "Example.com" },
			[]string{`spec.rules[0].host: Invalid value: "Example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{"no paths", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths = nil },
			[]string{"spec.rules[0].http.paths: Required value"}},
		{"no pathType", path("/", nil, networkingv1.IngressBackend{}),
			[]string{p0 + ".pathType: Required value: pathType must be specified"}},
		{"bad pathType", path("/", ptr.To(networkingv1.PathType("Regex")), ok),
			[]string{p0 + `.pathType: Unsupported value: "Regex": supported values: "Exact", "ImplementationSpecific", "Prefix"`}},
		{"relative Prefix path", path("api", prefix, ok),
			[]string{p0 + `.path: Invalid value: "api": must be an absolute path`}},
		{"empty Exact path", path("", exact, ok),
			[]string{p0 + `.path: Invalid value: "": must be an absolute path`}},
		{"Prefix path sequences", path("/a//b/./c/%2f/..", prefix, ok),
			[]string{p0 + `.path: Invalid value: "/a//b/./c/%2f/..": must not contain '//'`,
				p0 + `.path: Invalid value: "/a//b/./c/%2f/..": must not contain '/./'`,
				p0 + `.path: Invalid value: "/a//b/./c/%2f/..": must not contain '%2f'`,
				p0 + `.path: Invalid value: "/a//b/./c/%2f/..": cannot end with '/..'`}},
		{"ImplementationSpecific allows what Prefix does not", path("/a//b/%2F/.", impl, ok), nil},
		{"ImplementationSpecific empty path", path("", impl, ok), nil},
		{"ImplementationSpecific relative path", path("a", impl, ok),
			[]string{p0 + `.path: Invalid value: "a": must be an absolute path`}},
		{"no backend", path("/", prefix, networkingv1.IngressBackend{}),
			[]string{p0 + `.backend: Invalid value: "": resource or service backend is required`}},
		{"both backends", path("/", prefix, networkingv1.IngressBackend{Service: ok.Service, Resource: &corev1.TypedLocalObjectReference{}}),
			[]string{p0 + `.backend: Invalid value: "": cannot set both resource and service backends`}},
		{"resource backend", path("/", prefix, networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{APIGroup: ptr.To("Bad_Group"), Name: "a/b"}}),
			[]string{p0 + `.backend.resource.apiGroup: Invalid value: "Bad_Group": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
				p0 + ".backend.resource.kind: Required value",
				p0 + `.backend.resource.name: Invalid value: "a/b": may not contain '/'`}},
		{"service without name or port", path("/", prefix, svcBackend("", 0, "")),
			[]string{p0 + ".backend.service.name: Required value", p0 + ".backend: Required value: port name or number is required"}},
		{"service name a DNS label (not only DNS-1035)", path("/", prefix, svcBackend("1svc", 80, "")), nil},
		{"service name with a dot", path("/", prefix, svcBackend("my.svc", 80, "")),
			[]string{p0 + `.backend.service.name: Invalid value: "my.svc": must not contain dots`}},
		{"port name and number", path("/", prefix, svcBackend("my-service", 80, "http")),
			[]string{p0 + `.backend: Invalid value: "": cannot set both port name & port number`}},
		{"bad port number", path("/", prefix, svcBackend("my-service", 65536, "")),
			[]string{p0 + ".backend.service.port.number: Invalid value: 65536: must be between 1 and 65535, inclusive"}},
		{"bad port name", path("/", prefix, svcBackend("my-service", 0, "http_1")),
			[]string{p0 + `.backend.service.port.name: Invalid value: "http_1": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`}},
		{"TLS", func(ing *networkingv1.Ingress) {
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"*.foo.*.com", "Bad"}, SecretName: "Bad_Secret"}}
		}, []string{
			`spec.tls[0].hosts[0]: Invalid value: "*.foo.*.com": a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`spec.tls[0].hosts[1]: Invalid value: "Bad": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`spec.tls[0].secretName: Invalid value: "Bad_Secret": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{"bad class name", func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To("Nginx") },
			[]string{`spec.ingressClassName: Invalid value: "Nginx": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{"annotation and class agree", func(ing *networkingv1.Ingress) {
			ing.Spec.IngressClassName = ptr.To("nginx")
			ing.Annotations[AnnotationIngressClass] = "nginx"
		}, nil},
		{"annotation and class differ", func(ing *networkingv1.Ingress) {
			ing.Spec.IngressClassName = ptr.To("nginx")
			ing.Annotations[AnnotationIngressClass] = "traefik"
		}, []string{"annotations.kubernetes.io/ingress.class: Invalid value: \"traefik\": must match `ingressClassName` when both are specified"}},
		{"finalizer", func(ing *networkingv1.Ingress) { ing.Finalizers = []string{"custom"} },
			[]string{`metadata.finalizers[0]: Invalid value: "custom": name is neither a standard finalizer name nor is it fully qualified`}},
		{"errors in kube-apiserver's order", func(ing *networkingv1.Ingress) {
			ing.Spec.DefaultBackend = &networkingv1.IngressBackend{}
			ing.Spec.Rules[0].Host = "::1"
			ing.Spec.IngressClassName = ptr.To("")
		}, []string{
			`spec.defaultBackend: Invalid value: "": resource or service backend is required`,
			`spec.rules[0].host: Invalid value: "::1": must be a DNS name, not an IP address`,
			`spec.rules[0].host: Invalid value: "::1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`spec.ingressClassName: Invalid value: "": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
	}
	st := NewStrategy()
	for _, tc := range cases {
		ing := seed()
		tc.modify(ing)
		st.Default(ing)
		st.PrepareForCreate(ctx(), ing)
		checkErrs(t, tc.name, registry.ValidateCreate(ctx(), st, true, ing), tc.want)
	}
}

// TestUpdate: the strategy keeps status and bumps generation on spec
// changes; validation is relaxed for what the stored object already had
// (an invalid TLS secret name, an invalid rule under a wildcard host) and
// the annotation rule is a create rule.
func TestUpdate(t *testing.T) {
	st := NewStrategy()
	old := seed()
	old.Generation, old.UID, old.ResourceVersion = 4, "u1", "7"
	old.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.168.1.20"}}

	in := old.DeepCopy()
	in.Status = networkingv1.IngressStatus{}
	in.Labels = map[string]string{"a": "b"}
	st.PrepareForUpdate(ctx(), in, old)
	if in.Generation != 4 || len(in.Status.LoadBalancer.Ingress) != 1 {
		t.Errorf("metadata-only update: generation %d, status %+v", in.Generation, in.Status)
	}
	in.Spec.Rules[0].Host = "foo.example.com"
	st.PrepareForUpdate(ctx(), in, old)
	if in.Generation != 5 {
		t.Errorf("spec update: generation %d, want 5", in.Generation)
	}

	// Stored under older rules.
	legacy := old.DeepCopy()
	legacy.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "Bad_Secret"}}
	legacy.Spec.Rules = append(legacy.Spec.Rules, networkingv1.IngressRule{Host: "*.example.com",
		IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
			Path: "relative", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: svcBackend("my-service", 80, "")}}}}})
	in = legacy.DeepCopy()
	in.Annotations[AnnotationIngressClass] = "traefik"
	in.Spec.IngressClassName = ptr.To("nginx")
	checkErrs(t, "legacy values kept", registry.ValidateUpdate(ctx(), st, true, in, legacy), nil)
	// The relaxation covers wildcard rules only.
	in.Spec.Rules[0].HTTP.Paths[0].Path = "relative"
	checkErrs(t, "non-wildcard rule", registry.ValidateUpdate(ctx(), st, true, in, legacy),
		[]string{`spec.rules[0].http.paths[0].path: Invalid value: "relative": must be an absolute path`})
	// A valid stored object gets the full checks.
	in = old.DeepCopy()
	in.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "Bad_Secret"}}
	in.Name = "other"
	checkErrs(t, "new invalid secret, renamed", registry.ValidateUpdate(ctx(), st, true, in, old), []string{
		`metadata.name: Invalid value: "other": field is immutable`,
		`spec.tls[0].secretName: Invalid value: "Bad_Secret": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`})
	// kube-apiserver checks the metadata twice on update; its declarative
	// step reports a repeated error once.
	in = old.DeepCopy()
	in.Finalizers = []string{"custom"}
	checkErrs(t, "finalizer", registry.ValidateUpdate(ctx(), st, true, in, old),
		[]string{`metadata.finalizers[0]: Invalid value: "custom": name is neither a standard finalizer name nor is it fully qualified`})
}

// TestStatus: /status keeps the spec and checks the load balancer status.
func TestStatus(t *testing.T) {
	st := NewStrategy().(interface{ StatusStrategy() registry.Strategy }).StatusStrategy()
	old := seed()
	old.Generation, old.UID, old.ResourceVersion = 2, "u1", "7"
	old.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "010.0.0.5"}}
	in := old.DeepCopy()
	in.Spec.Rules = nil
	in.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{
		{IP: "010.0.0.5"}, {IP: "010.0.0.6"}, {IP: "::ffff:10.0.0.5"}, {Hostname: "lb.example.com"}, {Hostname: "1.2.3.4"}, {IP: "bad", Hostname: "Bad"},
	}
	st.PrepareForUpdate(ctx(), in, old)
	if len(in.Spec.Rules) != 1 || in.Generation != 2 {
		t.Errorf("status write changed the spec: %+v generation %d", in.Spec, in.Generation)
	}
	const sub = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
	checkErrs(t, "status", registry.ValidateUpdate(ctx(), st, true, in, old), []string{
		`status.loadBalancer.ingress[1].ip: Invalid value: "010.0.0.6": must not have leading 0s`,
		`status.loadBalancer.ingress[2].ip: Invalid value: "::ffff:10.0.0.5": must not be an IPv4-mapped IPv6 address`,
		`status.loadBalancer.ingress[4].hostname: Invalid value: "1.2.3.4": must be a DNS name, not an IP address`,
		`status.loadBalancer.ingress[5].ip: Invalid value: "bad": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
		`status.loadBalancer.ingress[5].hostname: Invalid value: "Bad": ` + sub,
	})
}

func TestCreateClearsStatus(t *testing.T) {
	st := NewStrategy()
	ing := seed()
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.168.1.20"}}
	ing.Generation = 7
	st.PrepareForCreate(ctx(), ing)
	if len(ing.Status.LoadBalancer.Ingress) != 0 || ing.Generation != 1 {
		t.Errorf("created: status %+v generation %d", ing.Status, ing.Generation)
	}
}

func ingressClass(name, controller string, params *networkingv1.IngressClassParametersReference) *networkingv1.IngressClass {
	return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller, Parameters: params}}
}

// TestIngressClass: defaulting of parameters.scope and ValidateIngressClass
// / ValidateIngressClassUpdate with the declarative kind/name rules.
func TestIngressClass(t *testing.T) {
	st := NewClassStrategy()
	c := context.Background()
	ic := ingressClass("nginx", "k8s.io/ingress-nginx", &networkingv1.IngressClassParametersReference{Kind: "IngressParameters", Name: "external-lb"})
	st.Default(ic)
	if s := ic.Spec.Parameters.Scope; s == nil || *s != networkingv1.IngressClassParametersReferenceScopeCluster {
		t.Errorf("scope defaulted to %v", s)
	}
	st.PrepareForCreate(c, ic)
	if ic.Generation != 1 {
		t.Errorf("generation %d", ic.Generation)
	}
	checkErrs(t, "valid", registry.ValidateCreate(c, st, false, ic), nil)

	params := func(scope string, ns *string, kind, name string) *networkingv1.IngressClassParametersReference {
		return &networkingv1.IngressClassParametersReference{Kind: kind, Name: name, Scope: &scope, Namespace: ns}
	}
	cases := []struct {
		name string
		ic   *networkingv1.IngressClass
		want []string
	}{
		{"namespaced parameters", ingressClass("a", "example.com/x", params("Namespace", ptr.To("external-configuration"), "ConfigMap", "cfg")), nil},
		{"no controller", ingressClass("a", "", nil), []string{"spec.controller: Required value"}},
		{"not domain-prefixed", ingressClass("a", "nginx", nil), []string{`spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")`}},
		{"too long", ingressClass("a", "example.com/"+strings.Repeat("p", 240), nil), []string{"spec.controller: Too long: may not be more than 250 bytes"}},
		{"namespace missing", ingressClass("a", "example.com/x", params("Namespace", nil, "ConfigMap", "cfg")),
			[]string{"spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'"}},
		{"namespace with Cluster scope", ingressClass("a", "example.com/x", params("Cluster", ptr.To("default"), "ConfigMap", "cfg")),
			[]string{"spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'"}},
		{"bad scope", ingressClass("a", "example.com/x", params("Global", nil, "ConfigMap", "cfg")),
			[]string{`spec.parameters.scope: Unsupported value: "Global": supported values: "Cluster", "Namespace"`}},
		// kind and name are required by declarative rules, reported after
		// the handwritten errors.
		{"kind and name missing", ingressClass("a", "example.com/x", &networkingv1.IngressClassParametersReference{APIGroup: ptr.To("Bad")}), []string{
			`spec.parameters.apiGroup: Invalid value: "Bad": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			"spec.parameters.kind: Required value",
			"spec.parameters.name: Required value"}},
		{"kind and name bad", ingressClass("a", "example.com/x", params("Cluster", nil, "a/b", "..")),
			[]string{`spec.parameters.kind: Invalid value: "a/b": may not contain '/'`, `spec.parameters.name: Invalid value: "..": may not be '..'`}},
	}
	for _, tc := range cases {
		st.Default(tc.ic)
		checkErrs(t, tc.name, registry.ValidateCreate(c, st, false, tc.ic), tc.want)
	}

	old := ingressClass("nginx", "k8s.io/ingress-nginx", nil)
	old.Generation, old.UID, old.ResourceVersion = 3, "u", "5"
	in := old.DeepCopy()
	in.Spec.Controller = "example.com/other"
	st.PrepareForUpdate(c, in, old)
	if in.Generation != 4 {
		t.Errorf("generation after a spec change %d", in.Generation)
	}
	checkErrs(t, "controller immutable", registry.ValidateUpdate(c, st, false, in, old),
		[]string{`spec.controller: Invalid value: "example.com/other": field is immutable`})
	// Stored without a kind (older rules): the unchanged kind is only
	// reported by the handwritten check.
	old.Spec.Parameters = &networkingv1.IngressClassParametersReference{Name: "x", Scope: ptr.To("Cluster")}
	in = old.DeepCopy()
	in.Spec.Parameters.Name = ""
	checkErrs(t, "unchanged empty kind", registry.ValidateUpdate(c, st, false, in, old),
		[]string{"spec.parameters.kind: Required value", "spec.parameters.name: Required value"})
}

// TestDefaultClassAdmission: kube-apiserver's DefaultIngressClass plugin.
func TestDefaultClassAdmission(t *testing.T) {
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	class := func(name string, age time.Duration, def string) networkingv1.IngressClass {
		ic := networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))}}
		if def != "" {
			ic.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: def}
		}
		return ic
	}
	cases := []struct {
		name    string
		classes []networkingv1.IngressClass
		modify  func(*networkingv1.Ingress)
		update  bool
		want    *string
	}{
		{"no classes", nil, nil, false, nil},
		{"no default", []networkingv1.IngressClass{class("nginx", 0, ""), class("alb", 0, "false"), class("x", 0, "True")}, nil, false, nil},
		{"the default", []networkingv1.IngressClass{class("traefik", 0, ""), class("nginx", time.Hour, "true")}, nil, false, ptr.To("nginx")},
		{"the newest default", []networkingv1.IngressClass{class("old", 2*time.Hour, "true"), class("new", time.Hour, "true"), class("newest", 0, "")}, nil, false, ptr.To("new")},
		{"equally new: first name", []networkingv1.IngressClass{class("b", time.Hour, "true"), class("c", time.Hour, "true"), class("a", time.Hour, "true")}, nil, false, ptr.To("a")},
		{"class given", []networkingv1.IngressClass{class("nginx", 0, "true")}, func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To("") }, false, ptr.To("")},
		{"annotation given", []networkingv1.IngressClass{class("nginx", 0, "true")}, func(ing *networkingv1.Ingress) { ing.Annotations[AnnotationIngressClass] = "" }, false, nil},
		{"update", []networkingv1.IngressClass{class("nginx", 0, "true")}, nil, true, nil},
	}
	for _, tc := range cases {
		st := NewStrategy()
		core.BasicOf(st).Admit = (&DefaultClassAdmission{Classes: func(context.Context) ([]networkingv1.IngressClass, error) { return tc.classes, nil }}).Admit
		ing := seed()
		if tc.modify != nil {
			tc.modify(ing)
		}
		var err error
		if tc.update {
			_, err = st.(registry.UpdateAllocator).BeginUpdate(ctx(), ing, seed(), false)
		} else {
			_, err = st.(registry.CreateAllocator).BeginCreate(ctx(), ing, false)
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if got := ing.Spec.IngressClassName; (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: ingressClassName %v, want %v", tc.name, ptr.Deref(got, "<nil>"), ptr.Deref(tc.want, "<nil>"))
		}
	}

	// A failed list is Forbidden, as the plugin's admission error.
	adm := &DefaultClassAdmission{Classes: func(context.Context) ([]networkingv1.IngressClass, error) { return nil, errors.New("etcd is down") }}
	err := adm.Admit(ctx(), seed(), nil)
	if !apierrors.IsForbidden(err) || err.Error() != `ingresses.networking.k8s.io "my-ingress" is forbidden: etcd is down` {
		t.Errorf("list error: %v", err)
	}
	// The strategy's own hook (no lister) leaves the class alone.
	ing := seed()
	if _, err := NewStrategy().(registry.CreateAllocator).BeginCreate(ctx(), ing, false); err != nil || ing.Spec.IngressClassName != nil {
		t.Errorf("default hook: %v %v", err, ing.Spec.IngressClassName)
	}
	var _ runtime.Object = ing
}

func TestWarningsOnCreate(t *testing.T) {
	cw := NewStrategy().(registry.CreateWarner)
	ing := seed()
	if w := cw.WarningsOnCreate(ctx(), ing); len(w) != 0 {
		t.Errorf("seed: %q", w)
	}
	ing.Annotations[AnnotationIngressClass] = "nginx"
	if w := cw.WarningsOnCreate(ctx(), ing); len(w) != 1 || w[0] != `annotation "kubernetes.io/ingress.class" is deprecated, please use 'spec.ingressClassName' instead` {
		t.Errorf("annotation: %q", w)
	}
	ing.Spec.IngressClassName = ptr.To("nginx")
	if w := cw.WarningsOnCreate(ctx(), ing); len(w) != 0 {
		t.Errorf("annotation and class: %q", w)
	}
}
