package main

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/networking"
	k8singress "k8s.io/kubernetes/pkg/registry/networking/ingress"
	k8singressclass "k8s.io/kubernetes/pkg/registry/networking/ingressclass"
	"k8s.io/kubernetes/plugin/pkg/admission/network/defaultingressclass"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
	svcnetingress "github.com/svcnet/svcnet/registry/ingress"
)

// Ingresses and IngressClasses (networking.k8s.io/v1): the defaulted, the
// prepared objects and the create/update/status error lists through
// kube-apiserver's pkg/registry/networking/ingress and ingressclass
// strategies and svcnet's registry/ingress; and kube-apiserver's
// DefaultIngressClass admission plugin (with its informer's lister filled
// with the case's IngressClasses) against svcnet's DefaultClassAdmission
// installed as the strategy's Admit hook.

var (
	ingressHostPool = []string{"example.com", "example.com", "foo.bar.com", "*.example.com", "*.example.com", "*.foo.*.com", "*",
		"a.*.com", "*.com", "1.2.3.4", "::1", "Example.com", "a_b.com", "-bad.com", "foo..com", strings.Repeat("h", 64) + ".com",
		strings.Repeat("a.", 127) + "b", "**.example.com", "*example.com", "localhost", "10.0.0.1.nip.io"}
	ingressPathPool = []string{"/", "/", "/api", "/api/v1", "", "foo", "/foo//bar", "/./x", "/a/../b", "/a%2fb", "/a%2Fb", "/..",
		"/.", "/foo/..", "/foo/.", "//", "/a b", "/*", "/.well-known", "/..a", "api/"}
	ingressPathTypes = []*networkingv1.PathType{ptr(networkingv1.PathTypePrefix), ptr(networkingv1.PathTypePrefix), ptr(networkingv1.PathTypeExact),
		ptr(networkingv1.PathTypeImplementationSpecific), nil, ptr(networkingv1.PathType("Bad")), ptr(networkingv1.PathType(""))}
	ingressServicePool = []string{"my-service", "my-service", "web", "", "My-Service", "1svc", "a.b", "svc_1", strings.Repeat("s", 63),
		strings.Repeat("s", 64), "-svc"}
	ingressSecretPool = []string{"", "tls-secret", "tls-secret", "Bad_Secret", "a.b", strings.Repeat("x", 254), "-x"}
	ingressClassPool  = []string{"nginx", "nginx", "traefik", "", "Bad_Class", "a.b", strings.Repeat("c", 254)}
)

func randBackendPort(r *rand.Rand) networkingv1.ServiceBackendPort {
	var p networkingv1.ServiceBackendPort
	switch r.Intn(6) {
	case 0, 1:
		p.Number = pick[int32](r, 80, 80, 443, 8080, 0, 65535, 65536, -1)
	case 2, 3:
		p.Name = pick(r, "http", "https", "HTTP", "a_b", "web-metrics-port", "-x", "123", "")
	case 4:
		p.Number, p.Name = pick[int32](r, 80, 70000), pick(r, "http", "Bad!")
	}
	return p
}

func randIngressBackend(r *rand.Rand) networkingv1.IngressBackend {
	var b networkingv1.IngressBackend
	svc := func() *networkingv1.IngressServiceBackend {
		return &networkingv1.IngressServiceBackend{Name: pick(r, ingressServicePool...), Port: randBackendPort(r)}
	}
	res := func() *corev1.TypedLocalObjectReference {
		ref := &corev1.TypedLocalObjectReference{Kind: pick(r, "StorageBucket", "StorageBucket", "", "a/b", "..", "%x"),
			Name: pick(r, "icon-assets", "icon-assets", "", "a/b", ".", "Bad_Name")}
		if maybe(r, 0.6) {
			ref.APIGroup = pick(r, ptr("k8s.example.com"), ptr("k8s.example.com"), ptr(""), ptr("Bad_Group"), ptr("a..b"))
		}
		return ref
	}
	switch r.Intn(10) {
	case 0, 1, 2, 3, 4, 5:
		b.Service = svc()
	case 6, 7:
		b.Resource = res()
	case 8:
		b.Service, b.Resource = svc(), res()
	}
	return b
}

func randHTTPPath(r *rand.Rand) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: pick(r, ingressPathPool...), PathType: pick(r, ingressPathTypes...), Backend: randIngressBackend(r)}
}

func randIngressRule(r *rand.Rand) networkingv1.IngressRule {
	var rule networkingv1.IngressRule
	if maybe(r, 0.8) {
		rule.Host = pick(r, ingressHostPool...)
	}
	if maybe(r, 0.9) {
		rule.HTTP = &networkingv1.HTTPIngressRuleValue{}
		for i, n := 0, pick(r, 0, 1, 1, 1, 2, 3); i < n; i++ {
			rule.HTTP.Paths = append(rule.HTTP.Paths, randHTTPPath(r))
		}
	}
	return rule
}

func randIngressTLS(r *rand.Rand) networkingv1.IngressTLS {
	var t networkingv1.IngressTLS
	for i, n := 0, r.Intn(3); i < n; i++ {
		t.Hosts = append(t.Hosts, pick(r, ingressHostPool...))
	}
	t.SecretName = pick(r, ingressSecretPool...)
	return t
}

// seedIngress is the seeds' Ingress: host example.com, path / Prefix to
// my-service port 80, session-affinity annotations of ingress-nginx.
func seedIngress() *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "my-ingress", Namespace: namespace, Annotations: map[string]string{
			"nginx.ingress.kubernetes.io/affinity":               "cookie",
			"nginx.ingress.kubernetes.io/session-cookie-name":    "INGRESSCOOKIE",
			"nginx.ingress.kubernetes.io/session-cookie-expires": "172800",
		}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: "example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "my-service", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}},
		}}},
	}
}

// mutateIngress changes one to three things of a (valid) Ingress.
func mutateIngress(r *rand.Rand, ing *networkingv1.Ingress) {
	for i, n := 0, 1+r.Intn(3); i < n; i++ {
		switch r.Intn(14) {
		case 0:
			ing.Spec.Rules[0].Host = pick(r, ingressHostPool...)
		case 1:
			if h := ing.Spec.Rules[0].HTTP; h != nil && len(h.Paths) > 0 {
				h.Paths[0].Path = pick(r, ingressPathPool...)
			}
		case 2:
			if h := ing.Spec.Rules[0].HTTP; h != nil && len(h.Paths) > 0 {
				h.Paths[0].PathType = pick(r, ingressPathTypes...)
			}
		case 3:
			if h := ing.Spec.Rules[0].HTTP; h != nil && len(h.Paths) > 0 {
				h.Paths[0].Backend = randIngressBackend(r)
			}
		case 4:
			if h := ing.Spec.Rules[0].HTTP; h != nil && len(h.Paths) > 0 && h.Paths[0].Backend.Service != nil {
				h.Paths[0].Backend.Service.Port = randBackendPort(r)
			}
		case 5:
			ing.Spec.Rules = append(ing.Spec.Rules, randIngressRule(r))
		case 6:
			ing.Spec.TLS = append(ing.Spec.TLS, randIngressTLS(r))
		case 7:
			ing.Spec.IngressClassName = pick(r, ptr(pick(r, ingressClassPool...)), nil)
		case 8:
			if ing.Annotations == nil {
				ing.Annotations = map[string]string{}
			}
			ing.Annotations[svcnetingress.AnnotationIngressClass] = pick(r, ingressClassPool...)
		case 9:
			b := randIngressBackend(r)
			ing.Spec.DefaultBackend = &b
		case 10:
			ing.Spec.Rules[0].HTTP = pick(r, nil, &networkingv1.HTTPIngressRuleValue{})
		case 11:
			ing.Spec.Rules = pick(r, nil, []networkingv1.IngressRule{})
			if maybe(r, 0.5) {
				b := randIngressBackend(r)
				ing.Spec.DefaultBackend = &b
			}
			return
		case 12:
			if h := ing.Spec.Rules[0].HTTP; h != nil {
				h.Paths = append(h.Paths, randHTTPPath(r))
			}
		case 13:
			ing.Status.LoadBalancer = randIngressLBStatus(r) // wiped on create, kept on update
		}
	}
}

// randIngressObj is the seed's Ingress mutated, or one of random fields only.
func randIngressObj(r *rand.Rand) *networkingv1.Ingress {
	var ing *networkingv1.Ingress
	if maybe(r, 0.5) {
		ing = seedIngress()
		mutateIngress(r, ing)
	} else {
		ing = &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "my-ingress", Namespace: namespace}}
		for i, n := 0, pick(r, 0, 1, 1, 2, 3); i < n; i++ {
			ing.Spec.Rules = append(ing.Spec.Rules, randIngressRule(r))
		}
		if maybe(r, 0.3) {
			b := randIngressBackend(r)
			ing.Spec.DefaultBackend = &b
		}
		for i, n := 0, pick(r, 0, 0, 1, 2); i < n; i++ {
			ing.Spec.TLS = append(ing.Spec.TLS, randIngressTLS(r))
		}
		if maybe(r, 0.4) {
			ing.Spec.IngressClassName = ptr(pick(r, ingressClassPool...))
		}
		if maybe(r, 0.3) {
			ing.Annotations = map[string]string{svcnetingress.AnnotationIngressClass: pick(r, ingressClassPool...)}
		}
		if maybe(r, 0.2) {
			ing.Status.LoadBalancer = randIngressLBStatus(r)
		}
	}
	randIngressMeta(r, &ing.ObjectMeta)
	return ing
}

// randIngressMeta: other names, a bad label or annotation (at most one:
// they are checked in map order), finalizers, generateName.
func randIngressMeta(r *rand.Rand, m *metav1.ObjectMeta) {
	if maybe(r, 0.15) {
		m.Name = randObjectName(r)
	}
	if maybe(r, 0.05) {
		m.Name, m.GenerateName = "", pick(r, "ing-", "Bad_")
	}
	if maybe(r, 0.1) {
		m.Labels = map[string]string{pick(r, "bad key!", "app"): pick(r, "web", "bad value!")}
	}
	if maybe(r, 0.05) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations["bad key!"] = "x"
	}
	if maybe(r, 0.1) {
		for _, f := range randFinalizers(r) {
			m.Finalizers = append(m.Finalizers, string(f))
		}
	}
}

func randIngressLBStatus(r *rand.Rand) networkingv1.IngressLoadBalancerStatus {
	var st networkingv1.IngressLoadBalancerStatus
	for i, n := 0, pick(r, 0, 1, 1, 2, 3); i < n; i++ {
		var in networkingv1.IngressLoadBalancerIngress
		if maybe(r, 0.6) {
			in.IP = pick(r, "192.168.1.20", "192.168.1.20", "10.0.0.5", "fd00::5", "010.0.0.5", "::ffff:10.0.0.5", "300.1.1.1", "bad", "10.0.0.5/24")
		}
		if maybe(r, 0.5) {
			in.Hostname = pick(r, "lb.example.com", "lb.example.com", "1.2.3.4", "Bad_Host", "*.example.com", "::1", strings.Repeat("h", 254))
		}
		for j, m := 0, r.Intn(2); j < m; j++ {
			in.Ports = append(in.Ports, networkingv1.IngressPortStatus{Port: pick[int32](r, 80, 443, 0, -1),
				Protocol: pick(r, corev1.ProtocolTCP, corev1.ProtocolUDP, "ICMP", ""), Error: pick(r, nil, ptr("Bad"), ptr("bad error!"))})
		}
		st.Ingress = append(st.Ingress, in)
	}
	return st
}

// storedIngress is a valid Ingress as the store holds it, sometimes with
// values earlier rules let through (an invalid TLS secret name, an invalid
// wildcard-host rule) and a status.
func storedIngress(r *rand.Rand) *networkingv1.Ingress {
	ing := seedIngress()
	ing.UID, ing.ResourceVersion, ing.Generation = "uid-7", "21", 3
	ing.CreationTimestamp = metav1.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	if maybe(r, 0.3) {
		ing.Spec.IngressClassName = ptr("nginx")
	}
	if maybe(r, 0.3) {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"example.com"}, SecretName: pick(r, "tls-secret", "Bad_Secret")}}
	}
	if maybe(r, 0.3) {
		p := networkingv1.HTTPIngressPath{Path: pick(r, "foo", "/a//b"), PathType: ptr(networkingv1.PathTypePrefix),
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "my-service", Port: networkingv1.ServiceBackendPort{Number: 80}}}}
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: "*.example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{p}}}})
	}
	if maybe(r, 0.5) {
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: pick(r, "192.168.1.20", "010.0.0.5")}}
	}
	return ing
}

func newIngressInternals() (runtime.Object, runtime.Object) {
	return &networking.Ingress{}, &networking.Ingress{}
}
func newIngressV1() runtime.Object { return &networkingv1.Ingress{} }

func ingressCreateCase(r *rand.Rand) string {
	return compareCreate(randIngressObj(r), "networking.k8s.io", "ingresses", true, true, k8singress.Strategy, svcnetingress.NewStrategy(),
		func() runtime.Object { return &networking.Ingress{} }, newIngressV1)
}

func ingressUpdateCase(r *rand.Rand) string {
	old := storedIngress(r)
	in := old.DeepCopy()
	switch r.Intn(5) {
	case 0:
		in.Spec = randIngressObj(r).Spec
	case 1, 2, 3:
		mutateIngress(r, in)
	case 4:
		in.Status.LoadBalancer = randIngressLBStatus(r) // kept from the stored object
	}
	if maybe(r, 0.05) {
		in.Name = "other"
	}
	if maybe(r, 0.1) {
		randIngressMeta(r, &in.ObjectMeta)
	}
	return withInput(compareUpdate(in, old, "networking.k8s.io", "ingresses", "", true, k8singress.Strategy, svcnetingress.NewStrategy(),
		newIngressInternals, newIngressV1), in, old)
}

func ingressStatusCase(r *rand.Rand) string {
	old := storedIngress(r)
	in := old.DeepCopy()
	in.Status.LoadBalancer = randIngressLBStatus(r)
	if maybe(r, 0.2) {
		in.Spec = randIngressObj(r).Spec // discarded by the status strategy
	}
	if maybe(r, 0.1) {
		in.Labels = map[string]string{pick(r, "bad key!", "app"): "x"}
	}
	if maybe(r, 0.05) {
		in.Finalizers = []string{pick(r, "bad", "example.com/keep")}
	}
	st := svcnetingress.NewStrategy().(interface{ StatusStrategy() registry.Strategy }).StatusStrategy()
	return withInput(compareUpdate(in, old, "networking.k8s.io", "ingresses", "status", true, k8singress.StatusStrategy, st,
		newIngressInternals, newIngressV1), in, old)
}

// IngressClasses.

func randIngressClassParams(r *rand.Rand) *networkingv1.IngressClassParametersReference {
	if maybe(r, 0.3) {
		return nil
	}
	p := &networkingv1.IngressClassParametersReference{
		Kind: pick(r, "IngressParameters", "IngressParameters", "ConfigMap", "", "a/b", "..", "%x"),
		Name: pick(r, "external-lb", "external-lb", "", "a/b", ".", "Bad_Name"),
	}
	if maybe(r, 0.5) {
		p.APIGroup = pick(r, ptr("k8s.example.com"), ptr("k8s.example.com"), ptr(""), ptr("Bad_Group"))
	}
	if maybe(r, 0.6) {
		p.Scope = pick(r, ptr(networkingv1.IngressClassParametersReferenceScopeCluster), ptr(networkingv1.IngressClassParametersReferenceScopeNamespace),
			ptr(networkingv1.IngressClassParametersReferenceScopeNamespace), ptr("Bad"), ptr(""))
	}
	if maybe(r, 0.5) {
		p.Namespace = pick(r, ptr("external-configuration"), ptr("default"), ptr(""), ptr("Bad_NS"), ptr(strings.Repeat("n", 64)))
	}
	return p
}

var ingressControllerPool = []string{"k8s.io/ingress-nginx", "k8s.io/ingress-nginx", "example.com/ingress-controller", "", "nginx",
	"example.com/", "/path", "Example.com/x", "example.com/a b", "example.com/" + strings.Repeat("p", 250), "a_b.com/x", "example.com/x/y", "k8s.io/ingress-nginx/"}

func randIngressClass(r *rand.Rand) *networkingv1.IngressClass {
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
		Spec: networkingv1.IngressClassSpec{Controller: pick(r, ingressControllerPool...), Parameters: randIngressClassParams(r)}}
	if maybe(r, 0.3) {
		ic.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: pick(r, "true", "false", "True")}
	}
	if maybe(r, 0.1) {
		ic.Namespace = namespace // cluster-scoped: must be empty
	}
	randIngressMeta(r, &ic.ObjectMeta)
	return ic
}

func storedIngressClass(r *rand.Rand) *networkingv1.IngressClass {
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx", UID: "uid-8", ResourceVersion: "22", Generation: 2,
		CreationTimestamp: metav1.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)},
		Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}
	if maybe(r, 0.6) {
		ic.Spec.Parameters = &networkingv1.IngressClassParametersReference{APIGroup: ptr("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb",
			Scope: ptr(networkingv1.IngressClassParametersReferenceScopeCluster)}
		if maybe(r, 0.3) {
			// Stored under looser rules (no declarative kind/name rule).
			ic.Spec.Parameters.Kind = pick(r, "", "IngressParameters")
			ic.Spec.Parameters.Name = pick(r, "", "external-lb")
		}
	}
	return ic
}

func ingressClassCreateCase(r *rand.Rand) string {
	return compareCreate(randIngressClass(r), "networking.k8s.io", "ingressclasses", false, true, k8singressclass.Strategy, svcnetingress.NewClassStrategy(),
		func() runtime.Object { return &networking.IngressClass{} }, func() runtime.Object { return &networkingv1.IngressClass{} })
}

func ingressClassUpdateCase(r *rand.Rand) string {
	old := storedIngressClass(r)
	in := old.DeepCopy()
	switch r.Intn(6) {
	case 0:
		in.Spec.Controller = pick(r, ingressControllerPool...)
	case 1:
		in.Spec.Parameters = randIngressClassParams(r)
	case 2:
		if p := in.Spec.Parameters; p != nil {
			p.Kind = pick(r, "IngressParameters", "", "Other", "a/b")
		}
	case 3:
		if p := in.Spec.Parameters; p != nil {
			p.Name = pick(r, "external-lb", "", "other", "a/b")
			p.Scope = pick(r, p.Scope, nil, ptr("Namespace"))
		}
	case 4:
		in.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
	case 5:
		in.Spec = randIngressClass(r).Spec
	}
	if maybe(r, 0.1) {
		randIngressMeta(r, &in.ObjectMeta)
	}
	return withInput(compareClusterUpdate(in, old, "ingressclasses", "", k8singressclass.Strategy, svcnetingress.NewClassStrategy(),
		func() (runtime.Object, runtime.Object) { return &networking.IngressClass{}, &networking.IngressClass{} },
		func() runtime.Object { return &networkingv1.IngressClass{} }), in, old)
}

// DefaultIngressClass admission.

var kubeIngressAdmission struct {
	once    sync.Once
	plugin  admission.MutationInterface
	handles func(admission.Operation) bool
	classes cache.Indexer
}

type initFunc func(admission.Interface)

func (f initFunc) Initialize(p admission.Interface) { f(p) }

func kubeDefaultIngressClass() {
	kubeIngressAdmission.once.Do(func() {
		plugins := admission.NewPlugins()
		defaultingressclass.Register(plugins)
		f := informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
		p, err := plugins.InitPlugin(defaultingressclass.PluginName, nil, initFunc(func(p admission.Interface) {
			p.(interface {
				SetExternalKubeInformerFactory(informers.SharedInformerFactory)
			}).SetExternalKubeInformerFactory(f)
		}))
		if err != nil {
			panic(err)
		}
		kubeIngressAdmission.plugin = p.(admission.MutationInterface)
		kubeIngressAdmission.handles = p.Handles
		kubeIngressAdmission.classes = f.Networking().V1().IngressClasses().Informer().GetIndexer()
	})
}

func randClassWorld(r *rand.Rand) []networkingv1.IngressClass {
	var out []networkingv1.IngressClass
	names := []string{"nginx", "traefik", "alb", "b-class", "a-class"}
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	for i, n := 0, pick(r, 0, 1, 1, 2, 2, 3, 4); i < n; i++ {
		ic := networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: names[i],
			CreationTimestamp: metav1.NewTime(base.Add(time.Duration(r.Intn(3)) * time.Hour))},
			Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}
		if maybe(r, 0.7) {
			ic.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: pick(r, "true", "true", "true", "false", "True", "")}
		}
		out = append(out, ic)
	}
	return out
}

func ingressAdmissionCase(r *rand.Rand) string {
	kubeDefaultIngressClass()
	classes := randClassWorld(r)
	in := seedIngress()
	if maybe(r, 0.3) {
		mutateIngress(r, in)
	}
	if maybe(r, 0.3) {
		in.Spec.IngressClassName = pick(r, ptr("nginx"), ptr("other"), ptr(""))
	}
	if maybe(r, 0.25) {
		in.Annotations[svcnetingress.AnnotationIngressClass] = pick(r, "nginx", "", "other")
	}
	if maybe(r, 0.05) {
		in.Name, in.GenerateName = "", "ing-"
	}
	var old *networkingv1.Ingress
	if maybe(r, 0.2) {
		old = storedIngress(r)
		old.Spec.IngressClassName = nil
	}

	idx := kubeIngressAdmission.classes
	for _, o := range idx.List() {
		_ = idx.Delete(o)
	}
	for i := range classes {
		_ = idx.Add(classes[i].DeepCopy())
	}
	op := admission.Create
	var oldObj runtime.Object
	var opts runtime.Object = &metav1.CreateOptions{}
	ctx := requestCtx("create", "networking.k8s.io", "v1", "ingresses", "", in.Name)
	if old != nil {
		op, opts = admission.Update, &metav1.UpdateOptions{}
		ko := &networking.Ingress{}
		toInternal(old.DeepCopy(), ko)
		oldObj = ko
		ctx = requestCtx("update", "networking.k8s.io", "v1", "ingresses", "", in.Name)
	}
	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	ki := &networking.Ingress{}
	toInternal(kv, ki)
	attrs := admission.NewAttributesRecord(ki, oldObj, networking.Kind("Ingress").WithVersion("v1"), namespace, in.Name,
		networking.Resource("ingresses").WithVersion("v1"), "", op, opts, false, nil)
	var kErr error
	if kubeIngressAdmission.handles(op) {
		kErr = kubeIngressAdmission.plugin.Admit(context.Background(), attrs, nil)
	}
	kOut := &networkingv1.Ingress{}
	toInternal(ki, kOut)

	adm := &svcnetingress.DefaultClassAdmission{Classes: func(context.Context) ([]networkingv1.IngressClass, error) {
		out := make([]networkingv1.IngressClass, len(classes))
		for i := range classes {
			out[i] = *classes[i].DeepCopy()
		}
		// The list cache's order is the store's (by name); kube's lister
		// has none: the result may not depend on it.
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out, nil
	}}
	st := svcnetingress.NewStrategy()
	core.BasicOf(st).Admit = adm.Admit // as svcnet's API server installs it
	sv := in.DeepCopy()
	st.Default(sv)
	var sErr error
	if old != nil {
		_, sErr = st.(registry.UpdateAllocator).BeginUpdate(ctx, sv, old.DeepCopy(), false)
	} else {
		_, sErr = st.(registry.CreateAllocator).BeginCreate(ctx, sv, false)
	}
	d := compareObjs("admitted", kOut, sv)
	if a, b := errDesc(kErr), errDesc(sErr); a != b {
		d = joinDiffs(d, fmt.Sprintf("admission errors differ\n  kubernetes: %s\n  svcnet: %s", a, b))
	}
	return withInput(d, in, old, classes)
}
