package ingress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// End-to-end tests: the controller against a fake clientset, real HTTP
// backends on 127.0.0.1 ports answering their own name, and requests through
// the controller's handler served on 127.0.0.1.

// backend is one test endpoint.
type backend struct {
	name string
	srv  *httptest.Server
	port int32
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	b := &backend{name: name}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "echo" {
			conn, rw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			_ = rw.Flush()
			_, _ = io.Copy(conn, rw)
			return
		}
		if d := r.URL.Query().Get("sleep"); d != "" {
			ms, _ := strconv.Atoi(d)
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
		h := w.Header()
		h.Set("X-Backend", name)
		h.Set("X-Seen-Host", r.Host)
		h.Set("X-Seen-URI", r.RequestURI)
		for _, k := range []string{"X-Forwarded-For", "X-Real-IP", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "X-Request-ID", "X-Original-URI"} {
			h.Set("X-Seen-"+k, r.Header.Get(k))
		}
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(b.srv.Close)
	_, p, _ := net.SplitHostPort(b.srv.Listener.Addr().String())
	port, _ := strconv.Atoi(p)
	b.port = int32(port)
	return b
}

// deadPort is a 127.0.0.1 port nothing listens on.
func deadPort(t *testing.T) int32 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return int32(port)
}

type env struct {
	t       *testing.T
	client  *fake.Clientset
	ctrl    *Controller
	front   *httptest.Server
	rec     *record.FakeRecorder
	reg     *prometheus.Registry
	http    *http.Client
	cancel  context.CancelFunc
	done    chan struct{}
	created int
}

func newEnv(t *testing.T, tweak func(*Config), objs ...runtime.Object) *env {
	t.Helper()
	e := &env{t: t, client: fake.NewClientset(objs...), rec: record.NewFakeRecorder(1000), reg: prometheus.NewRegistry(), done: make(chan struct{})}
	cfg := Config{
		Client:        e.client,
		Class:         ClassSelector{ControllerClass: DefaultControllerClass, IngressClass: DefaultIngressClass},
		UpdateStatus:  true,
		MinSyncPeriod: 0,
		SyncPeriod:    time.Hour,
		Recorder:      e.rec,
		Logger:        slog.New(slog.DiscardHandler),
		Metrics:       NewMetrics(e.reg),
		Proxy:         ProxyConfig{ConnectTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second},
		TLS:           true,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	e.ctrl = New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		defer close(e.done)
		if err := e.ctrl.Run(ctx); err != nil {
			t.Errorf("controller: %v", err)
		}
	}()
	e.front = httptest.NewServer(e.ctrl.Handler())
	e.http = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(func() {
		e.front.Close()
		cancel()
		<-e.done
	})
	e.waitFor("controller synced", e.ctrl.Synced)
	return e
}

func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type result struct {
	status  int
	backend string
	header  http.Header
	cookies []*http.Cookie
	body    string
}

func (e *env) get(host, path string, cookies ...*http.Cookie) result {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.front.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = host
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		e.t.Fatalf("GET %s%s: %v", host, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, backend: resp.Header.Get("X-Backend"), header: resp.Header, cookies: resp.Cookies(), body: string(body)}
}

// backendOf is where host+path goes now ("404", "503", ... when no backend
// answered).
func (e *env) backendOf(host, path string) string {
	r := e.get(host, path)
	if r.backend == "" {
		return strconv.Itoa(r.status)
	}
	return r.backend
}

func (e *env) waitRoute(host, path, want string) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%s%s to reach %s", host, path, want), func() bool { return e.backendOf(host, path) == want })
}

func (e *env) create(obj runtime.Object) {
	e.t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		_, err = e.client.NetworkingV1().Ingresses(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Service:
		_, err = e.client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		_, err = e.client.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		e.t.Fatalf("create %T", obj)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) deleteSlice(ns, name string) {
	e.t.Helper()
	if err := e.client.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) updateSlice(sl *discoveryv1.EndpointSlice) {
	e.t.Helper()
	if _, err := e.client.DiscoveryV1().EndpointSlices(sl.Namespace).Update(context.Background(), sl, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) ingress(ns, name string) *networkingv1.Ingress {
	e.t.Helper()
	ing, err := e.client.NetworkingV1().Ingresses(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return ing
}

// statusUpdates counts the Ingress status writes the fake clientset saw.
func (e *env) statusUpdates() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "ingresses" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// Object helpers.

func ingressClass(name, controller string) *networkingv1.IngressClass {
	return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
}

func service(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.50", ClusterIPs: []string{"10.96.0.50"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
	}}
}

// slice is an EndpointSlice of Service svc with one endpoint per backend
// (all backends on 127.0.0.1, so one slice per port).
func slice(ns, svc, name string, ready bool, port int32) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready)}}},
	}
}

// servedIngress is testIngress of class svcnet.
func servedIngress(ns, name string, age int, ann map[string]string, rules ...trule) *networkingv1.Ingress {
	ing := testIngress(ns, name, age, ann, rules...)
	ing.UID = ""
	ing.Spec.IngressClassName = ptr(DefaultIngressClass)
	return ing
}

func backendObjects(ns, svc string, bs ...*backend) []runtime.Object {
	out := []runtime.Object{service(ns, svc)}
	for _, b := range bs {
		out = append(out, slice(ns, svc, svc+"-"+b.name, true, b.port))
	}
	return out
}

func TestRouting(t *testing.T) {
	web, api, exactB, wild, catch := startBackend(t, "web"), startBackend(t, "api"), startBackend(t, "exact"), startBackend(t, "wild"), startBackend(t, "catch")
	objs := []runtime.Object{ingressClass("svcnet", DefaultControllerClass), ingressClass("nginx", "k8s.io/ingress-nginx")}
	objs = append(objs, backendObjects("default", "web", web)...)
	objs = append(objs, backendObjects("default", "api", api)...)
	objs = append(objs, backendObjects("default", "exact", exactB)...)
	objs = append(objs, backendObjects("default", "wild", wild)...)
	objs = append(objs, backendObjects("default", "catch", catch)...)
	other := testIngress("default", "other-class", 0, nil, trule{"other.test", []tpath{{prefix, "/", "web"}}})
	other.UID = ""
	other.Spec.IngressClassName = ptr("nginx")
	annotated := testIngress("default", "annotated", 0, map[string]string{IngressClassAnnotation: "svcnet"},
		trule{"annotated.test", []tpath{{prefix, "/", "web"}}})
	annotated.UID = ""
	noClass := testIngress("default", "no-class", 0, nil, trule{"noclass.test", []tpath{{prefix, "/", "web"}}})
	noClass.UID = ""
	objs = append(objs,
		servedIngress("default", "main", 1, nil,
			trule{"example.com", []tpath{{prefix, "/", "web"}, {prefix, "/api", "api"}, {exact, "/api/exact", "exact"}}},
			trule{"*.wild.test", []tpath{{prefix, "/", "wild"}}}),
		servedIngress("default", "catch", 2, nil, trule{"", []tpath{{prefix, "/", "catch"}}}),
		servedIngress("default", "broken", 3, nil, trule{"missing.test", []tpath{{prefix, "/", "nope"}}}),
		other, annotated, noClass,
	)
	e := newEnv(t, nil, objs...)
	for _, tc := range []struct{ host, path, want string }{
		{"example.com", "/", "web"},
		{"example.com", "/index.html", "web"},
		{"example.com", "/api", "api"},
		{"example.com", "/api/v1/users", "api"},
		{"example.com", "/apix", "web"},
		{"example.com", "/api/exact", "exact"},
		{"example.com", "/api/exact/", "api"},
		{"EXAMPLE.com:8080", "/api", "api"},
		{"foo.wild.test", "/", "wild"},
		{"a.b.wild.test", "/", "catch"},
		{"unknown.test", "/x", "catch"},
		{"missing.test", "/", "503"},
		{"other.test", "/", "catch"},   // another controller's class
		{"annotated.test", "/", "web"}, // kubernetes.io/ingress.class: svcnet
		{"noclass.test", "/", "catch"}, // no class: not served by default
	} {
		if got := e.backendOf(tc.host, tc.path); got != tc.want {
			t.Errorf("%s%s went to %s, want %s", tc.host, tc.path, got, tc.want)
		}
	}

	// The headers ingress-nginx sets; the Host header is kept; a client's
	// X-Forwarded-For is not trusted.
	req, _ := http.NewRequest(http.MethodGet, e.front.URL+"/api/x?q=1", nil)
	req.Host = "example.com"
	req.Header.Set("X-Forwarded-For", "192.0.2.99")
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, frontPort, _ := net.SplitHostPort(e.front.Listener.Addr().String())
	for k, want := range map[string]string{
		"X-Seen-Host": "example.com", "X-Seen-URI": "/api/x?q=1", "X-Seen-X-Forwarded-For": "127.0.0.1",
		"X-Seen-X-Real-IP": "127.0.0.1", "X-Seen-X-Forwarded-Host": "example.com", "X-Seen-X-Forwarded-Proto": "http",
		"X-Seen-X-Forwarded-Port": frontPort, "X-Seen-X-Original-URI": "/api/x?q=1",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("backend saw %s %q, want %q", strings.TrimPrefix(k, "X-Seen-"), got, want)
		}
	}
	if id := resp.Header.Get("X-Seen-X-Request-ID"); len(id) != 32 {
		t.Errorf("X-Request-ID %q", id)
	}

	// Without the catch-all Ingress, unknown hosts get the built-in 404.
	if err := e.client.NetworkingV1().Ingresses("default").Delete(context.Background(), "catch", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRoute("unknown.test", "/", "404")
	if r := e.get("unknown.test", "/"); r.body != defaultBackendBody {
		t.Errorf("default backend body %q", r.body)
	}
	// A new path is picked up live.
	ing := e.ingress("default", "main")
	ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, networkingv1.HTTPIngressPath{Path: "/wild", PathType: ptr(prefix),
		Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "wild", Port: networkingv1.ServiceBackendPort{Name: "http"}}}})
	if _, err := e.client.NetworkingV1().Ingresses("default").Update(context.Background(), ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRoute("example.com", "/wild/1", "wild")
}

func TestClassSelector(t *testing.T) {
	classes := map[string]*networkingv1.IngressClass{
		"svcnet": ingressClass("svcnet", DefaultControllerClass),
		"mine":   ingressClass("mine", DefaultControllerClass),
		"nginx":  ingressClass("nginx", "k8s.io/ingress-nginx"),
	}
	lookup := func(n string) *networkingv1.IngressClass { return classes[n] }
	mk := func(className, annotation string) *networkingv1.Ingress {
		ing := &networkingv1.Ingress{}
		if className != "" {
			ing.Spec.IngressClassName = ptr(className)
		}
		if annotation != "" {
			ing.Annotations = map[string]string{IngressClassAnnotation: annotation}
		}
		return ing
	}
	sel := ClassSelector{ControllerClass: DefaultControllerClass, IngressClass: DefaultIngressClass}
	for _, tc := range []struct {
		ing                *networkingv1.Ingress
		def, noClass, name bool
	}{
		{mk("svcnet", ""), true, true, true},
		{mk("mine", ""), true, true, true},        // any class of our controller
		{mk("nginx", ""), false, false, false},    // another controller
		{mk("absent", ""), false, false, false},   // a class that does not exist
		{mk("", "svcnet"), true, true, true},      // the annotation
		{mk("", "nginx"), false, false, false},    // another annotation
		{mk("nginx", "svcnet"), true, true, true}, // the annotation wins
		{mk("", ""), false, true, false},          // no class
		{&networkingv1.Ingress{Spec: networkingv1.IngressSpec{IngressClassName: ptr("svcnet")}}, true, true, true},
	} {
		got := sel.Serves(tc.ing, lookup)
		sel2 := sel
		sel2.WatchWithoutClass = true
		got2 := sel2.Serves(tc.ing, lookup)
		if got != tc.def || got2 != tc.noClass {
			t.Errorf("%v %v: served %v / with --watch-ingress-without-class %v, want %v / %v", tc.ing.Spec.IngressClassName, tc.ing.Annotations, got, got2, tc.def, tc.noClass)
		}
	}
	// --ingress-class-by-name serves spec.ingressClassName svcnet without an IngressClass.
	byName := ClassSelector{ControllerClass: DefaultControllerClass, IngressClass: "svcnet", IngressClassByName: true}
	if !byName.Serves(mk("svcnet", ""), func(string) *networkingv1.IngressClass { return nil }) {
		t.Error("--ingress-class-by-name did not serve by name")
	}
}

func TestRoundRobinAndEndpointChanges(t *testing.T) {
	b1, b2, b3, b4 := startBackend(t, "b1"), startBackend(t, "b2"), startBackend(t, "b3"), startBackend(t, "b4")
	objs := append(backendObjects("default", "rr", b1, b2, b3), ingressClass("svcnet", DefaultControllerClass),
		servedIngress("default", "rr", 0, nil, trule{"rr.test", []tpath{{prefix, "/", "rr"}}}))
	e := newEnv(t, nil, objs...)
	spread := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			got[e.backendOf("rr.test", "/")]++
		}
		return got
	}
	if got := spread(30); len(got) != 3 || got["b1"] != 10 || got["b2"] != 10 || got["b3"] != 10 {
		t.Errorf("30 requests over 3 endpoints: %v", got)
	}
	// A fourth endpoint joins the rotation.
	e.create(slice("default", "rr", "rr-b4", true, b4.port))
	e.waitFor("b4 in rotation", func() bool { return spread(4)["b4"] > 0 })
	if got := spread(40); len(got) != 4 || got["b1"] != 10 || got["b4"] != 10 {
		t.Errorf("40 requests over 4 endpoints: %v", got)
	}
	// An endpoint that is not ready leaves it.
	e.updateSlice(slice("default", "rr", "rr-b1", false, b1.port))
	e.waitFor("b1 out of rotation", func() bool { return spread(4)["b1"] == 0 })
	if got := spread(30); got["b1"] != 0 || got["b2"] != 10 {
		t.Errorf("after b1 not ready: %v", got)
	}
	// No ready endpoint at all: 503.
	for _, n := range []string{"rr-b1", "rr-b2", "rr-b3", "rr-b4"} {
		e.deleteSlice("default", n)
	}
	e.waitRoute("rr.test", "/", "503")
	e.create(slice("default", "rr", "rr-b2", true, b2.port))
	e.waitRoute("rr.test", "/", "b2")
}

// seedIngress is the seed documents' cookie-affinity example.
func seedIngress(extra map[string]string) *networkingv1.Ingress {
	ann := map[string]string{
		"nginx.ingress.kubernetes.io/affinity":               "cookie",
		"nginx.ingress.kubernetes.io/session-cookie-name":    "INGRESSCOOKIE",
		"nginx.ingress.kubernetes.io/session-cookie-expires": "172800",
	}
	for k, v := range extra {
		ann[k] = v
	}
	return servedIngress("default", "my-ingress", 0, ann, trule{"example.com", []tpath{{prefix, "/", "my-service"}}})
}

func cookieNamed(cs []*http.Cookie, name string) *http.Cookie {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestCookieAffinity(t *testing.T) {
	bs := []*backend{startBackend(t, "pod-a"), startBackend(t, "pod-b"), startBackend(t, "pod-c")}
	objs := append(backendObjects("default", "my-service", bs...), ingressClass("svcnet", DefaultControllerClass), seedIngress(nil))
	e := newEnv(t, nil, objs...)

	first := e.get("example.com", "/")
	c := cookieNamed(first.cookies, "INGRESSCOOKIE")
	if first.status != 200 || c == nil {
		t.Fatalf("first response: %d, cookies %v", first.status, first.header["Set-Cookie"])
	}
	if want := time.Now().Add(172800 * time.Second); c.Expires.Before(want.Add(-time.Minute)) || c.Expires.After(want.Add(time.Minute)) {
		t.Errorf("cookie expires %v, want about %v (session-cookie-expires 172800)", c.Expires, want)
	}
	if !c.HttpOnly || c.Path != "/" || strings.Contains(c.Value, "127.0.0.1") {
		t.Errorf("cookie %s", c.String())
	}
	sticky := first.backend
	for i := range 20 {
		r := e.get("example.com", "/", &http.Cookie{Name: c.Name, Value: c.Value})
		if r.backend != sticky {
			t.Fatalf("request %d with the cookie went to %s, not %s", i, r.backend, sticky)
		}
		if len(r.cookies) != 0 {
			t.Fatalf("request %d with a valid cookie got Set-Cookie %v", i, r.header["Set-Cookie"])
		}
	}
	// New sessions are balanced.
	seen := map[string]bool{}
	for range 60 {
		seen[e.get("example.com", "/").backend] = true
	}
	if len(seen) != 3 {
		t.Errorf("60 new sessions reached %v", seen)
	}
	// A malformed cookie starts a new session.
	if r := e.get("example.com", "/", &http.Cookie{Name: "INGRESSCOOKIE", Value: "10.244.1.5:8080"}); cookieNamed(r.cookies, "INGRESSCOOKIE") == nil {
		t.Error("malformed cookie: no new cookie")
	}
	// The session's endpoint goes: the request is rebalanced and gets a new
	// cookie naming its new endpoint, which then sticks.
	e.deleteSlice("default", "my-service-"+sticky)
	var moved result
	e.waitFor("the session to move", func() bool {
		moved = e.get("example.com", "/", &http.Cookie{Name: c.Name, Value: c.Value})
		return moved.backend != sticky
	})
	nc := cookieNamed(moved.cookies, "INGRESSCOOKIE")
	if moved.status != 200 || nc == nil || nc.Value == c.Value {
		t.Fatalf("rebalanced response: %d, Set-Cookie %v", moved.status, moved.header["Set-Cookie"])
	}
	for i := range 20 {
		r := e.get("example.com", "/", &http.Cookie{Name: nc.Name, Value: nc.Value})
		if r.backend != moved.backend || len(r.cookies) != 0 {
			t.Fatalf("request %d with the new cookie went to %s (Set-Cookie %v), want %s", i, r.backend, r.header["Set-Cookie"], moved.backend)
		}
	}
}

func TestCookieAffinityPersistent(t *testing.T) {
	bs := []*backend{startBackend(t, "pod-a"), startBackend(t, "pod-b"), startBackend(t, "pod-c")}
	extra := startBackend(t, "pod-d")
	ing := seedIngress(map[string]string{
		"nginx.ingress.kubernetes.io/affinity-mode":           "persistent",
		"nginx.ingress.kubernetes.io/session-cookie-name":     "route",
		"nginx.ingress.kubernetes.io/session-cookie-max-age":  "600",
		"nginx.ingress.kubernetes.io/session-cookie-path":     "/app",
		"nginx.ingress.kubernetes.io/session-cookie-samesite": "Lax",
		"nginx.ingress.kubernetes.io/session-cookie-secure":   "true",
		"nginx.ingress.kubernetes.io/session-cookie-expires":  "",
	})
	objs := append(backendObjects("default", "my-service", bs...), ingressClass("svcnet", DefaultControllerClass), ing)
	e := newEnv(t, nil, objs...)
	// New sessions are round-robin.
	seen := map[string]bool{}
	var c *http.Cookie
	var sticky string
	for range 3 {
		r := e.get("example.com", "/app")
		seen[r.backend] = true
		c, sticky = cookieNamed(r.cookies, "route"), r.backend
	}
	if len(seen) != 3 || c == nil {
		t.Fatalf("3 new sessions reached %v, cookie %v", seen, c)
	}
	if c.Path != "/app" || c.MaxAge != 600 || c.SameSite != http.SameSiteLaxMode || !c.Secure || !c.HttpOnly || !c.Expires.IsZero() {
		t.Errorf("cookie %s", c.String())
	}
	// Scaling up does not move a persistent session.
	e.create(slice("default", "my-service", "my-service-pod-d", true, extra.port))
	e.waitFor("pod-d in rotation", func() bool {
		for range 4 {
			if e.backendOf("example.com", "/") == "pod-d" {
				return true
			}
		}
		return false
	})
	for i := range 20 {
		if r := e.get("example.com", "/app", &http.Cookie{Name: "route", Value: c.Value}); r.backend != sticky || len(r.cookies) != 0 {
			t.Fatalf("request %d went to %s (Set-Cookie %v), want %s", i, r.backend, r.header["Set-Cookie"], sticky)
		}
	}
	e.deleteSlice("default", "my-service-"+sticky)
	var moved result
	e.waitFor("the session to move", func() bool {
		moved = e.get("example.com", "/app", &http.Cookie{Name: "route", Value: c.Value})
		return moved.backend != sticky
	})
	if nc := cookieNamed(moved.cookies, "route"); nc == nil || nc.Value == c.Value {
		t.Errorf("rebalanced without a new cookie: %v", moved.header["Set-Cookie"])
	}
}

// TestConnectFailures: a connection error sends the request to another
// endpoint (502 when none is left); with change-on-failure the session
// moves there.
func TestConnectFailures(t *testing.T) {
	live := startBackend(t, "live")
	dead := deadPort(t)
	objs := []runtime.Object{ingressClass("svcnet", DefaultControllerClass),
		service("default", "svc"), slice("default", "svc", "svc-live", true, live.port), slice("default", "svc", "svc-dead", true, dead),
		service("default", "gone"), slice("default", "gone", "gone-dead", true, dead),
		servedIngress("default", "plain", 0, nil, trule{"plain.test", []tpath{{prefix, "/", "svc"}}}, trule{"gone.test", []tpath{{prefix, "/", "gone"}}}),
		servedIngress("default", "sticky", 1, map[string]string{
			"nginx.ingress.kubernetes.io/affinity": "cookie", "nginx.ingress.kubernetes.io/affinity-mode": "persistent",
		}, trule{"sticky.test", []tpath{{prefix, "/", "svc"}}}),
		servedIngress("default", "change", 2, map[string]string{
			"nginx.ingress.kubernetes.io/affinity": "cookie", "nginx.ingress.kubernetes.io/session-cookie-change-on-failure": "true",
		}, trule{"change.test", []tpath{{prefix, "/", "svc"}}}),
	}
	e := newEnv(t, nil, objs...)
	for i := range 10 {
		if r := e.get("plain.test", "/"); r.backend != "live" {
			t.Fatalf("request %d: %d %s", i, r.status, r.backend)
		}
	}
	if n := metricValue(t, e.ctrl.cfg.Metrics.UpstreamRetries); n < 4 {
		t.Errorf("retries %v, want about 5", n)
	}
	if r := e.get("gone.test", "/"); r.status != http.StatusBadGateway {
		t.Errorf("only a dead endpoint: %d, want 502", r.status)
	}
	deadCookie := &http.Cookie{Name: DefaultCookieName, Value: formatSessionCookie(7, endpointHash("127.0.0.1:"+strconv.Itoa(int(dead))))}
	// Without change-on-failure the request is served elsewhere and the
	// cookie stays.
	if r := e.get("sticky.test", "/", deadCookie); r.backend != "live" || len(r.cookies) != 0 {
		t.Errorf("sticky to a dead endpoint: %s, Set-Cookie %v", r.backend, r.header["Set-Cookie"])
	}
	// With it, the session moves: a cookie naming the live endpoint.
	r := e.get("change.test", "/", deadCookie)
	c := cookieNamed(r.cookies, DefaultCookieName)
	if r.backend != "live" || c == nil {
		t.Fatalf("change-on-failure: %s, Set-Cookie %v", r.backend, r.header["Set-Cookie"])
	}
	if _, h, _ := parseSessionCookie(c.Value); h != endpointHash("127.0.0.1:"+strconv.Itoa(int(live.port))) {
		t.Errorf("new cookie %s does not name the live endpoint", c.Value)
	}
}

func TestRewriteAndVhost(t *testing.T) {
	b := startBackend(t, "b")
	objs := append(backendObjects("default", "svc", b), ingressClass("svcnet", DefaultControllerClass),
		servedIngress("default", "rw", 0, map[string]string{
			"nginx.ingress.kubernetes.io/rewrite-target": "/$2",
			"nginx.ingress.kubernetes.io/upstream-vhost": "internal.example",
		}, trule{"rw.test", []tpath{{implSpec, "/something(/|$)(.*)", "svc"}}}))
	e := newEnv(t, nil, objs...)
	for path, want := range map[string]string{
		"/something":           "/",
		"/something/":          "/",
		"/something/new":       "/new",
		"/something/new?x=1":   "/new?x=1",
		"/SOMETHING/a%20b/c":   "/a%20b/c",
		"/something/else/path": "/else/path",
		"/something//x/../y":   "/y",
	} {
		r := e.get("rw.test", path)
		if got := r.header.Get("X-Seen-URI"); r.status != 200 || got != want {
			t.Errorf("%s reached the backend as %q (%d), want %q", path, got, r.status, want)
		}
		if h := r.header.Get("X-Seen-Host"); h != "internal.example" {
			t.Errorf("upstream-vhost: backend saw Host %q", h)
		}
	}
	if r := e.get("rw.test", "/other"); r.status != 404 {
		t.Errorf("/other: %d", r.status)
	}
}

func TestUnsupportedBackendsAndEvents(t *testing.T) {
	b := startBackend(t, "b")
	res := servedIngress("default", "res", 0, nil, trule{"res.test", []tpath{{prefix, "/", "svc"}}})
	res.Spec.Rules[0].HTTP.Paths[0].Backend = networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{
		APIGroup: ptr("k8s.example.com"), Kind: "StorageBucket", Name: "static-assets"}}
	tls := servedIngress("default", "tls", 1, nil, trule{"tls.test", []tpath{{prefix, "/", "svc"}}})
	tls.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"tls.test"}, SecretName: "cert"}}
	objs := append(backendObjects("default", "svc", b), ingressClass("svcnet", DefaultControllerClass), res, tls,
		servedIngress("default", "missing", 2, nil, trule{"missing.test", []tpath{{prefix, "/", "nope"}}}),
		servedIngress("default", "badport", 3, nil, trule{"badport.test", []tpath{{prefix, "/", "svc"}}}))
	objs[len(objs)-1].(*networkingv1.Ingress).Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port = networkingv1.ServiceBackendPort{Name: "grpc"}
	e := newEnv(t, nil, objs...)
	// tls.test's Secret is missing: its host is served over HTTPS with the
	// default certificate, so plain HTTP is redirected.
	for host, want := range map[string]string{"res.test": "503", "tls.test": "308", "missing.test": "503", "badport.test": "503"} {
		if got := e.backendOf(host, "/"); got != want {
			t.Errorf("%s: %s, want %s", host, got, want)
		}
	}
	want := []string{"ResourceBackendNotSupported", "TLSSecretInvalid", "ServiceNotFound", "ServicePortNotFound"}
	var got []string
	e.waitFor("events", func() bool {
		for {
			select {
			case ev := <-e.rec.Events:
				got = append(got, strings.Fields(ev)[1])
				continue
			default:
			}
			break
		}
		return len(got) >= len(want)
	})
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	// Events are recorded once, not on every rebuild.
	e.updateSlice(slice("default", "svc", "svc-b", true, b.port))
	time.Sleep(100 * time.Millisecond)
	if n := len(e.rec.Events); n != 0 {
		t.Errorf("%d more events after a rebuild", n)
	}
}

func TestExternalNameAndDefaultBackendService(t *testing.T) {
	ext, def := startBackend(t, "external"), startBackend(t, "default-backend")
	extSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ext"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1", Ports: []corev1.ServicePort{{Name: "http", Port: ext.port}}}}
	defObjs := backendObjects("infra", "fallback", def)
	objs := append(defObjs, extSvc, ingressClass("svcnet", DefaultControllerClass),
		servedIngress("default", "ext", 0, nil, trule{"ext.test", []tpath{{prefix, "/", "ext"}}}))
	objs[len(objs)-1].(*networkingv1.Ingress).Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Number = ext.port
	e := newEnv(t, func(c *Config) { c.DefaultBackend = &types.NamespacedName{Namespace: "infra", Name: "fallback"} }, objs...)
	if got := e.backendOf("ext.test", "/"); got != "external" {
		t.Errorf("ExternalName: %s", got)
	}
	if got := e.backendOf("nothing.test", "/"); got != "default-backend" {
		t.Errorf("--default-backend-service: %s", got)
	}
	// Without endpoints the default backend service falls back to the 404.
	e.deleteSlice("infra", "fallback-default-backend")
	e.waitRoute("nothing.test", "/", "404")
}

func TestStatusFromPublishStatusAddress(t *testing.T) {
	b := startBackend(t, "b")
	other := testIngress("default", "other", 5, nil, trule{"o.test", []tpath{{prefix, "/", "svc"}}})
	other.UID = ""
	other.Spec.IngressClassName = ptr("nginx")
	objs := append(backendObjects("default", "svc", b), ingressClass("svcnet", DefaultControllerClass), ingressClass("nginx", "k8s.io/ingress-nginx"),
		servedIngress("default", "a", 0, nil, trule{"a.test", []tpath{{prefix, "/", "svc"}}}),
		servedIngress("default", "b", 1, nil, trule{"b.test", []tpath{{prefix, "/", "svc"}}}), other)
	e := newEnv(t, func(c *Config) { c.PublishStatusAddresses = []string{"lb.example.com", "192.0.2.10"} }, objs...)
	want := []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}, {Hostname: "lb.example.com"}}
	for _, n := range []string{"a", "b"} {
		e.waitFor("status of "+n, func() bool { return lbEqual(e.ingress("default", n).Status.LoadBalancer.Ingress, want) })
	}
	if got := e.ingress("default", "other").Status.LoadBalancer.Ingress; len(got) != 0 {
		t.Errorf("another class's Ingress got status %v", got)
	}
	// Minimal writes: rebuilds that change nothing write nothing.
	writes := e.statusUpdates()
	if writes != 2 {
		t.Errorf("%d status writes for 2 Ingresses", writes)
	}
	for i := range 5 {
		e.updateSlice(slice("default", "svc", "svc-b", i%2 == 0, b.port))
	}
	ing := e.ingress("default", "a")
	ing.Annotations = map[string]string{"touched": "yes"}
	if _, err := e.client.NetworkingV1().Ingresses("default").Update(context.Background(), ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := e.statusUpdates(); n != writes {
		t.Errorf("%d status writes after rebuilds that changed nothing", n-writes)
	}
	// An Ingress no longer served loses the status this controller wrote.
	ing = e.ingress("default", "b")
	ing.Spec.IngressClassName = ptr("nginx")
	if _, err := e.client.NetworkingV1().Ingresses("default").Update(context.Background(), ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("status of b cleared", func() bool { return len(e.ingress("default", "b").Status.LoadBalancer.Ingress) == 0 })
	if got := e.ingress("default", "a").Status.LoadBalancer.Ingress; !lbEqual(got, want) {
		t.Errorf("status of a: %v", got)
	}
}

func TestStatusFromPublishServiceWithLeaderElection(t *testing.T) {
	b := startBackend(t, "b")
	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "lb"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.9", Ports: []corev1.ServicePort{{Port: 80}}}}
	objs := append(backendObjects("default", "svc", b), ingressClass("svcnet", DefaultControllerClass), lb,
		servedIngress("default", "a", 0, nil, trule{"a.test", []tpath{{prefix, "/", "svc"}}}))
	e := newEnv(t, func(c *Config) {
		c.PublishService = &types.NamespacedName{Namespace: "ingress", Name: "lb"}
		c.LeaderElection = &LeaderElection{Namespace: "ingress", Name: "svcnet-ingress-leader", Identity: "test-1",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	}, objs...)
	e.waitFor("leadership", e.ctrl.Leader)
	if _, err := e.client.CoordinationV1().Leases("ingress").Get(context.Background(), "svcnet-ingress-leader", metav1.GetOptions{}); err != nil {
		t.Errorf("lease: %v", err)
	}
	// No load-balancer address yet: the ClusterIP.
	status := func() []networkingv1.IngressLoadBalancerIngress {
		return e.ingress("default", "a").Status.LoadBalancer.Ingress
	}
	e.waitFor("ClusterIP status", func() bool { return lbEqual(status(), StatusAddresses([]string{"10.96.0.9"})) })
	lb = lb.DeepCopy()
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.5"}, {Hostname: "lb.example.net"}}
	if _, err := e.client.CoreV1().Services("ingress").UpdateStatus(context.Background(), lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("load-balancer status", func() bool {
		return lbEqual(status(), StatusAddresses([]string{"203.0.113.5", "lb.example.net"}))
	})
}

func TestServiceStatusAddresses(t *testing.T) {
	for _, tc := range []struct {
		svc  corev1.Service
		want []string
	}{
		{corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1", "fd00::1"}}},
			[]string{"10.96.0.1", "fd00::1"}},
		{corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.1", ExternalIPs: []string{"198.51.100.1"}}},
			[]string{"198.51.100.1"}},
		{corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1"},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "172.18.255.200"}}}}},
			[]string{"172.18.255.200"}},
		{corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "lb.example.org"}}, []string{"lb.example.org"}},
		{corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone}}, nil},
	} {
		if got := ServiceStatusAddresses(&tc.svc); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.svc.Spec.Type, got, tc.want)
		}
	}
}

// TestReloadKeepsConnections: a request in flight finishes when the table
// changes (even when its Ingress is deleted), and a kept-alive client
// connection keeps working across changes.
func TestReloadKeepsConnections(t *testing.T) {
	b := startBackend(t, "b")
	objs := append(backendObjects("default", "svc", b), ingressClass("svcnet", DefaultControllerClass),
		servedIngress("default", "a", 0, nil, trule{"a.test", []tpath{{prefix, "/", "svc"}}}),
		servedIngress("default", "slow", 1, nil, trule{"slow.test", []tpath{{prefix, "/", "svc"}}}))
	e := newEnv(t, nil, objs...)
	var wg sync.WaitGroup
	var slow result
	wg.Go(func() { slow = e.get("slow.test", "/?sleep=400") })
	time.Sleep(100 * time.Millisecond)
	if err := e.client.NetworkingV1().Ingresses("default").Delete(context.Background(), "slow", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRoute("slow.test", "/", "404")
	wg.Wait()
	if slow.status != 200 || slow.backend != "b" {
		t.Errorf("request in flight during the change: %d %q", slow.status, slow.backend)
	}
	// One client connection across several table changes.
	conn, err := net.Dial("tcp", e.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i := range 3 {
		if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on the kept-alive connection: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
		e.updateSlice(slice("default", "svc", "svc-b", true, b.port))
		ing := e.ingress("default", "a")
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: fmt.Sprintf("h%d.test", i)})
		if _, err := e.client.NetworkingV1().Ingresses("default").Update(context.Background(), ing, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the change", func() bool { return e.ctrl.Proxy().Table().exact[fmt.Sprintf("h%d.test", i)] != nil })
	}
}

func TestUpgradePassesThrough(t *testing.T) {
	b := startBackend(t, "b")
	objs := append(backendObjects("default", "svc", b), ingressClass("svcnet", DefaultControllerClass),
		servedIngress("default", "ws", 0, nil, trule{"ws.test", []tpath{{prefix, "/", "svc"}}}))
	e := newEnv(t, nil, objs...)
	conn, err := net.Dial("tcp", e.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET /chat HTTP/1.1\r\nHost: ws.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, msg := range []string{"ping\n", "pong\n"} {
		fmt.Fprint(conn, msg)
		got, err := br.ReadString('\n')
		if err != nil || got != msg {
			t.Fatalf("echo %q: %q %v", msg, got, err)
		}
	}
}

func TestMetricsAndWatchNamespace(t *testing.T) {
	b := startBackend(t, "b")
	objs := append(backendObjects("team", "svc", b), ingressClass("svcnet", DefaultControllerClass),
		servedIngress("team", "web", 0, nil, trule{"team.test", []tpath{{prefix, "/", "svc"}}}))
	objs = append(objs, backendObjects("elsewhere", "svc", b)...)
	objs = append(objs, servedIngress("elsewhere", "web", 0, nil, trule{"elsewhere.test", []tpath{{prefix, "/", "svc"}}}))
	e := newEnv(t, func(c *Config) { c.WatchNamespace = "team" }, objs...)
	if got := e.backendOf("elsewhere.test", "/"); got != "404" {
		t.Errorf("Ingress outside --watch-namespace: %s", got)
	}
	for range 5 {
		e.get("team.test", "/")
	}
	m := e.ctrl.cfg.Metrics
	if n := metricValue(t, m.Requests.WithLabelValues("team", "web", "svc", "200")); n != 5 {
		t.Errorf("requests_total{team/web,svc,200} = %v", n)
	}
	if n := metricValue(t, m.Requests.WithLabelValues("", "", "", "404")); n != 1 {
		t.Errorf("requests_total{404} = %v", n)
	}
	if n := metricSeries(t, m.UpstreamLatency); n != 1 {
		t.Errorf("%d upstream latency series", n)
	}
	if err := e.client.NetworkingV1().Ingresses("team").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRoute("team.test", "/", "404")
	// The new table is served before the controller forgets the gone
	// Ingress's series (a CI run looked in between).
	e.waitFor("the gone Ingress's metric series forgotten", func() bool {
		return metricSeries(t, m.UpstreamLatency) == 0 && metricValue(t, m.ServedIngresses) == 0
	})
}

// metricValue is the value of a counter or gauge (the sum over its series).
func metricValue(t *testing.T, c prometheus.Collector) float64 {
	v, _ := collect(t, c)
	return v
}

// metricSeries is the number of series of a collector.
func metricSeries(t *testing.T, c prometheus.Collector) int {
	_, n := collect(t, c)
	return n
}

func collect(t *testing.T, c prometheus.Collector) (float64, int) {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	sum, n := 0.0, 0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		n++
		switch {
		case d.Counter != nil:
			sum += d.Counter.GetValue()
		case d.Gauge != nil:
			sum += d.Gauge.GetValue()
		}
	}
	return sum, n
}
