package ingress

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// path is one path of a test Ingress: "Prefix /foo svc".
type tpath struct {
	kind networkingv1.PathType
	path string
	svc  string
}

type trule struct {
	host  string
	paths []tpath
}

func testIngress(ns, name string, age int, ann map[string]string, rules ...trule) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Generation: 1, Annotations: ann,
		CreationTimestamp: metav1.NewTime(time.Date(2025, 1, 1, 0, 0, age, 0, time.UTC)),
	}}
	for _, r := range rules {
		rule := networkingv1.IngressRule{Host: r.host}
		if r.paths != nil {
			rule.HTTP = &networkingv1.HTTPIngressRuleValue{}
			for _, p := range r.paths {
				pt := p.kind
				rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{Path: p.path, PathType: &pt,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: p.svc,
						Port: networkingv1.ServiceBackendPort{Number: 80}}}})
			}
		}
		ing.Spec.Rules = append(ing.Spec.Rules, rule)
	}
	return ing
}

func withDefault(ing *networkingv1.Ingress, svc string) *networkingv1.Ingress {
	ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc,
		Port: networkingv1.ServiceBackendPort{Number: 80}}}
	return ing
}

func buildTest(ings ...*networkingv1.Ingress) *Table {
	return Build(BuildInput{Ingresses: ings, Service: noService, Slices: noSlices})
}

var (
	noService = func(string, string) *corev1.Service { return nil }
	noSlices  = func(string, string) []*discoveryv1.EndpointSlice { return nil }
)

// routed describes where a request went: "svc path" or "404".
func routed(t *Table, host, path string) string {
	m := t.Route(host, path)
	if m.route.upstream == nil && m.route.status == 404 && m.Service() == "" {
		return "404"
	}
	if m.Path() == "" {
		return m.Service() + " (default)"
	}
	return m.Service() + " " + m.Path()
}

const (
	exact    = networkingv1.PathTypeExact
	prefix   = networkingv1.PathTypePrefix
	implSpec = networkingv1.PathTypeImplementationSpecific
)

// TestSpecExamples is the "Examples" table of the Ingress concept
// documentation (kubernetes.io/docs/concepts/services-networking/ingress),
// row by row.
func TestSpecExamples(t *testing.T) {
	for _, tc := range []struct {
		paths   []tpath
		request string
		want    string // the matching path, or "" for no match
	}{
		{[]tpath{{prefix, "/", "s"}}, "/", "/"},
		{[]tpath{{prefix, "/", "s"}}, "/any/thing", "/"},
		{[]tpath{{exact, "/foo", "s"}}, "/foo", "/foo"},
		{[]tpath{{exact, "/foo", "s"}}, "/bar", ""},
		{[]tpath{{exact, "/foo", "s"}}, "/foo/", ""},
		{[]tpath{{exact, "/foo/", "s"}}, "/foo", ""},
		{[]tpath{{prefix, "/foo", "s"}}, "/foo", "/foo"},
		{[]tpath{{prefix, "/foo", "s"}}, "/foo/", "/foo"},
		{[]tpath{{prefix, "/foo/", "s"}}, "/foo", "/foo"},
		{[]tpath{{prefix, "/foo/", "s"}}, "/foo/", "/foo"},
		{[]tpath{{prefix, "/aaa/bb", "s"}}, "/aaa/bbb", ""},
		{[]tpath{{prefix, "/aaa/bbb", "s"}}, "/aaa/bbb", "/aaa/bbb"},
		{[]tpath{{prefix, "/aaa/bbb/", "s"}}, "/aaa/bbb", "/aaa/bbb"},
		{[]tpath{{prefix, "/aaa/bbb", "s"}}, "/aaa/bbb/", "/aaa/bbb"},
		{[]tpath{{prefix, "/aaa/bbb", "s"}}, "/aaa/bbb/ccc", "/aaa/bbb"},
		{[]tpath{{prefix, "/aaa/bbb", "s"}}, "/aaa/bbbxyz", ""},
		{[]tpath{{prefix, "/", "s"}, {prefix, "/aaa", "s"}}, "/aaa/ccc", "/aaa"},
		{[]tpath{{prefix, "/", "s"}, {prefix, "/aaa", "s"}, {prefix, "/aaa/bbb", "s"}}, "/aaa/bbb", "/aaa/bbb"},
		{[]tpath{{prefix, "/", "s"}, {prefix, "/aaa", "s"}, {prefix, "/aaa/bbb", "s"}}, "/ccc", "/"},
		{[]tpath{{prefix, "/aaa", "s"}}, "/ccc", ""},
		// ImplementationSpecific is Prefix in svcnet.
		{[]tpath{{implSpec, "/aaa", "s"}}, "/aaa/x", "/aaa"},
		{[]tpath{{implSpec, "/aaa", "s"}}, "/aaax", ""},
		// Case-sensitive paths.
		{[]tpath{{prefix, "/foo", "s"}}, "/FOO", ""},
		{[]tpath{{exact, "/foo", "s"}}, "/Foo", ""},
		// The request path is normalized as nginx's $uri.
		{[]tpath{{prefix, "/aaa", "s"}}, "//aaa//x", "/aaa"},
		{[]tpath{{prefix, "/aaa", "s"}}, "/bbb/../aaa/x", "/aaa"},
		{[]tpath{{exact, "/aaa", "s"}}, "/./aaa", "/aaa"},
	} {
		tab := buildTest(testIngress("ns", "ing", 0, nil, trule{"example.com", tc.paths}))
		m := tab.Route("example.com", tc.request)
		got := m.Path()
		if tc.want != "" && got != tc.want || tc.want == "" && m.loc != nil {
			t.Errorf("paths %v, request %s: matched %q, want %q", tc.paths, tc.request, got, tc.want)
		}
	}
}

// TestExactPreferredOverPrefix is the table's "Mixed" row: /foo (Prefix)
// and /foo (Exact) with a request for /foo prefer Exact; /foo/ still
// matches the Prefix one.
func TestExactPreferredOverPrefix(t *testing.T) {
	for _, order := range [][]tpath{
		{{prefix, "/foo", "pre"}, {exact, "/foo", "ex"}},
		{{exact, "/foo", "ex"}, {prefix, "/foo", "pre"}},
	} {
		tab := buildTest(testIngress("ns", "ing", 0, nil, trule{"", order}))
		if got := routed(tab, "x", "/foo"); got != "ex /foo" {
			t.Errorf("%v: /foo went to %s", order, got)
		}
		if got := routed(tab, "x", "/foo/"); got != "pre /foo" {
			t.Errorf("%v: /foo/ went to %s", order, got)
		}
	}
}

func TestHostMatching(t *testing.T) {
	tab := buildTest(
		testIngress("ns", "a", 0, nil,
			trule{"foo.bar.com", []tpath{{prefix, "/", "exact-host"}}},
			trule{"*.foo.com", []tpath{{prefix, "/", "wildcard"}}},
			trule{"*.bar.com", []tpath{{prefix, "/", "wild-bar"}}},
			trule{"", []tpath{{prefix, "/", "no-host"}}},
		),
	)
	for _, tc := range []struct{ host, want string }{
		// The concept doc's "Hostname wildcards" table.
		{"bar.foo.com", "wildcard /"},    // matches based on shared suffix
		{"baz.bar.foo.com", "no-host /"}, // a wildcard covers one label only
		{"foo.com", "no-host /"},         // a wildcard needs its label
		// Exact beats wildcard.
		{"foo.bar.com", "exact-host /"},
		{"other.bar.com", "wild-bar /"},
		// Case, port and a trailing dot do not matter.
		{"FOO.Bar.COM", "exact-host /"},
		{"foo.bar.com:8080", "exact-host /"},
		{"foo.bar.com.", "exact-host /"},
		{"Bar.Foo.Com:80", "wildcard /"},
		// Rules without host take every other host, and requests without one.
		{"unknown.example", "no-host /"},
		{"", "no-host /"},
		{"10.0.0.1:80", "no-host /"},
		{"[::1]:80", "no-host /"},
	} {
		if got := routed(tab, tc.host, "/x"); got != tc.want {
			t.Errorf("host %q: went to %s, want %s", tc.host, got, tc.want)
		}
	}
}

// TestHostFallback: a request for a host that has rules but no matching path
// goes to that host's default backend (the defaultBackend of the oldest
// Ingress with rules for it), not to rules without host, as ingress-nginx's
// server blocks do; hosts without rules use the catch-all server.
func TestHostFallback(t *testing.T) {
	tab := buildTest(
		withDefault(testIngress("ns", "a", 1, nil, trule{"a.com", []tpath{{prefix, "/api", "api"}}}), "a-default"),
		withDefault(testIngress("ns", "b", 2, nil, trule{"a.com", []tpath{{prefix, "/web", "web"}}}), "b-default"),
		testIngress("ns", "c", 3, nil, trule{"", []tpath{{prefix, "/", "catch"}}}),
		testIngress("ns", "d", 4, nil, trule{"b.com", []tpath{{exact, "/only", "only"}}}),
	)
	for _, tc := range []struct{ host, path, want string }{
		{"a.com", "/api/x", "api /api"},
		{"a.com", "/web", "web /web"}, // merged across Ingresses
		{"a.com", "/other", "a-default (default)"},
		{"b.com", "/other", "404"}, // no default backend for b.com
		{"c.com", "/other", "catch /"},
	} {
		if got := routed(tab, tc.host, tc.path); got != tc.want {
			t.Errorf("%s%s: went to %s, want %s", tc.host, tc.path, got, tc.want)
		}
	}
	// An Ingress without rules gives the catch-all server its default.
	tab = buildTest(withDefault(&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", UID: "d"}}, "everything"))
	if got := routed(tab, "any.host", "/x"); got != "everything (default)" {
		t.Errorf("defaultBackend only: went to %s", got)
	}
}

// TestMergeAndConflicts: Ingresses with the same host merge; the same path
// (and type) in two Ingresses goes to the oldest, the newer gets a
// PathConflict problem; equal ages are ordered by namespace and name.
func TestMergeAndConflicts(t *testing.T) {
	older := testIngress("ns", "older", 1, nil, trule{"h.com", []tpath{{prefix, "/app", "old-app"}, {exact, "/x", "old-x"}}})
	newer := testIngress("ns", "newer", 2, nil, trule{"h.com", []tpath{{prefix, "/app/", "new-app"}, {prefix, "/new", "new"}}})
	for _, in := range [][]*networkingv1.Ingress{{older, newer}, {newer, older}} {
		tab := buildTest(in...)
		for path, want := range map[string]string{"/app/1": "old-app /app", "/x": "old-x /x", "/new": "new /new"} {
			if got := routed(tab, "h.com", path); got != want {
				t.Errorf("%s went to %s, want %s", path, got, want)
			}
		}
		var conflicts []string
		for _, p := range tab.Problems {
			if p.Reason == ReasonPathConflict {
				conflicts = append(conflicts, p.Ingress.Name+": "+p.Message)
			}
		}
		if len(conflicts) != 1 || !strings.HasPrefix(conflicts[0], "newer: ") {
			t.Errorf("conflicts: %q", conflicts)
		}
	}
	// Same age: namespace, then name decide.
	a := testIngress("a", "z", 5, nil, trule{"h.com", []tpath{{prefix, "/", "from-a"}}})
	b := testIngress("b", "a", 5, nil, trule{"h.com", []tpath{{prefix, "/", "from-b"}}})
	for _, in := range [][]*networkingv1.Ingress{{a, b}, {b, a}} {
		if got := routed(buildTest(in...), "h.com", "/"); got != "from-a /" {
			t.Errorf("equal age: went to %s", got)
		}
	}
}

func TestRegexPaths(t *testing.T) {
	ann := map[string]string{"nginx.ingress.kubernetes.io/use-regex": "true"}
	tab := buildTest(testIngress("ns", "re", 0, ann, trule{"r.com", []tpath{
		{implSpec, "/api/v[0-9]+", "versioned"},
		{prefix, "/api", "api"},
		{exact, "/exact.html", "exact"},
	}}))
	for _, tc := range []struct{ path, want string }{
		{"/api/v2/users", "versioned /api/v[0-9]+"},
		{"/API/V2", "versioned /api/v[0-9]+"}, // case-insensitive as nginx's ~*
		{"/api/x", "api /api"},
		{"/apixyz", "api /api"}, // a regex path is a string prefix
		{"/x/api/v2", "404"},    // anchored
		{"/exact.html", "exact /exact.html"},
		{"/exactxhtml", "404"}, // Exact stays exact
	} {
		if got := routed(tab, "r.com", tc.path); got != tc.want {
			t.Errorf("%s went to %s, want %s", tc.path, got, tc.want)
		}
	}
	bad := buildTest(testIngress("ns", "bad", 0, ann, trule{"r.com", []tpath{{implSpec, "/(unclosed", "x"}}}))
	if len(bad.Problems) != 1 || bad.Problems[0].Reason != ReasonInvalidPath {
		t.Errorf("invalid regex: problems %+v", bad.Problems)
	}
}

func TestRewritePath(t *testing.T) {
	for _, tc := range []struct {
		path, target, reqPath, reqQuery, wantPath, wantQuery string
	}{
		{"/something(/|$)(.*)", "/$2", "/something/new", "", "/new", ""},
		{"/something(/|$)(.*)", "/$2", "/something", "a=1", "/", "a=1"},
		{"/something(/|$)(.*)", "/$2", "/something/a/b", "", "/a/b", ""},
		{"/api/(v[0-9])/(.*)", "/$2/$1", "/api/v1/users", "", "/users/v1", ""},
		{"/old", "/new", "/old/x", "q=1", "/new", "q=1"},
		{"/p(.*)", "/x?from=p$1", "/p/1", "q=1", "/x", "from=p/1&q=1"},
		{"/p(.*)", "/x?from=p$1?", "/p/1", "q=1", "/x", "from=p/1"},
		{"/p(.*)", "$1", "/p", "", "/", ""},
	} {
		re, err := compileRegexPath(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		ok, p, q := rewritePath(&route{rewrite: re, rewriteTarget: tc.target}, tc.reqPath, tc.reqQuery)
		if !ok || p != tc.wantPath || q != tc.wantQuery {
			t.Errorf("rewrite %s -> %s of %s?%s: got %v %s?%s, want %s?%s", tc.path, tc.target, tc.reqPath, tc.reqQuery, ok, p, q, tc.wantPath, tc.wantQuery)
		}
	}
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		"":              "/",
		"/":             "/",
		"/a/b":          "/a/b",
		"/a/b/":         "/a/b/",
		"//a///b//":     "/a/b/",
		"/a/./b/../c":   "/a/c",
		"/..":           "/",
		"/../../a":      "/a",
		"/a/..":         "/",
		"/a/.":          "/a",
		"a":             "/a",
		"/a/b/../../..": "/",
	} {
		if got := cleanPath(in); got != want {
			t.Errorf("cleanPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProblems(t *testing.T) {
	ing := testIngress("ns", "p", 0, map[string]string{"nginx.ingress.kubernetes.io/backend-protocol": "GRPC"},
		trule{"h", []tpath{{prefix, "/", "missing"}}})
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"h"}, SecretName: "s"}}
	ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, networkingv1.HTTPIngressPath{Path: "/res", PathType: ptr(prefix),
		Backend: networkingv1.IngressBackend{Resource: nil}})
	tab := buildTest(ing)
	var reasons []string
	for _, p := range tab.Problems {
		reasons = append(reasons, p.Reason)
	}
	want := fmt.Sprint([]string{ReasonBackendProtocol, ReasonInvalidBackend})
	if fmt.Sprint(reasons) != want {
		t.Errorf("problems %v, want %v", reasons, want)
	}
	if got := tab.Route("h", "/").route.status; got != 503 {
		t.Errorf("unsupported backend protocol: status %d, want 503", got)
	}
	// A missing Service is a problem too (with HTTP).
	tab = buildTest(testIngress("ns", "m", 0, nil, trule{"h", []tpath{{prefix, "/", "missing"}}}))
	if len(tab.Problems) != 1 || tab.Problems[0].Reason != ReasonServiceNotFound || !strings.Contains(tab.Problems[0].Message, "ns/missing") {
		t.Errorf("missing service: %+v", tab.Problems)
	}
}

func ptr[T any](v T) *T { return &v }
