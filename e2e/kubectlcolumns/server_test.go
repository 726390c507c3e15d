package kubectlcolumns

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/apiserver/openapi"
	"github.com/svcnet/svcnet/apiserver/tables"
	"github.com/svcnet/svcnet/internal/version"
)

// shortNames are the discovery short names kube-apiserver advertises.
var shortNames = map[string][]string{
	"namespaces": {"ns"}, "services": {"svc"}, "endpoints": {"ep"}, "pods": {"po"}, "nodes": {"no"},
	"events": {"ev"}, "configmaps": {"cm"}, "deployments": {"deploy"}, "replicasets": {"rs"},
}

// fakeAPI is a minimal, read-only Kubernetes API: discovery, /version,
// OpenAPI v3 (and 404 for v2), lists answered as Tables from fixed objects,
// and 404 NotFound for every single object.
type fakeAPI struct {
	t       *testing.T
	openapi http.Handler
	now     time.Time

	mu      sync.Mutex
	objects map[schema.GroupResource][]runtime.Object
	paths   []string // every path requested, for assertions
}

func newFakeAPI(t *testing.T, oapi http.Handler) (*fakeAPI, string) {
	f := &fakeAPI{t: t, openapi: oapi, now: time.Now(), objects: map[schema.GroupResource][]runtime.Object{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeAPI) set(gr schema.GroupResource, objs ...runtime.Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[gr] = objs
}

func (f *fakeAPI) requested(prefix string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.paths {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/version":
		writeJSON(w, 200, map[string]string{"major": version.KubernetesMajor, "minor": version.KubernetesMinor,
			"gitVersion": version.KubernetesGitVersion, "platform": "linux/amd64"})
		return
	case p == "/openapi/v2":
		http.NotFound(w, r)
		return
	case strings.HasPrefix(p, "/openapi/v3"):
		f.openapi.ServeHTTP(w, r)
		return
	case p == "/api":
		writeJSON(w, 200, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
		return
	case p == "/apis":
		list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		seen := map[string]bool{}
		for _, res := range openapi.DefaultResources() {
			g := res.GVK.Group
			if g == "" || seen[g] {
				continue
			}
			seen[g] = true
			gv := metav1.GroupVersionForDiscovery{GroupVersion: res.GVK.GroupVersion().String(), Version: res.GVK.Version}
			list.Groups = append(list.Groups, metav1.APIGroup{Name: g, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
		}
		writeJSON(w, 200, list)
		return
	}
	gvs := []schema.GroupVersion{}
	for _, res := range openapi.DefaultResources() {
		if gv := res.GVK.GroupVersion(); !slices.Contains(gvs, gv) {
			gvs = append(gvs, gv)
		}
	}
	for _, gv := range gvs {
		base := "/" + openapi.DocPath(gv)
		if p == base {
			writeJSON(w, 200, resourceList(gv))
			return
		}
		if strings.HasPrefix(p, base+"/") {
			f.serveResource(w, r, gv, strings.Split(strings.TrimPrefix(p, base+"/"), "/"))
			return
		}
	}
	http.NotFound(w, r)
}

func resourceList(gv schema.GroupVersion) metav1.APIResourceList {
	l := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, res := range openapi.DefaultResources() {
		if res.GVK.GroupVersion() != gv {
			continue
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{
			Name: res.Resource, SingularName: strings.ToLower(res.GVK.Kind), Namespaced: res.Namespaced, Kind: res.GVK.Kind,
			Verbs:      metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
			ShortNames: shortNames[res.Resource],
		})
		for _, sub := range res.Subresources {
			kind, group, ver := res.GVK.Kind, "", ""
			if sub == "scale" {
				kind, group, ver = "Scale", "autoscaling", "v1"
			}
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: res.Resource + "/" + sub, Namespaced: res.Namespaced,
				Kind: kind, Group: group, Version: ver, Verbs: metav1.Verbs{"get", "patch", "update"}})
		}
	}
	return l
}

func (f *fakeAPI) serveResource(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, parts []string) {
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:] // drop namespaces/<ns>; the fake has one pool per resource
	}
	gr := schema.GroupResource{Group: gv.Group, Resource: parts[0]}
	if len(parts) > 1 {
		writeJSON(w, 404, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Message: gr.String() + " \"" + parts[1] + "\" not found", Reason: metav1.StatusReasonNotFound,
			Details: &metav1.StatusDetails{Name: parts[1], Group: gr.Group, Kind: gr.Resource}, Code: 404})
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), "as=Table") {
		writeJSON(w, 406, metav1.Status{Status: metav1.StatusFailure, Code: 406, Message: "the fake answers lists only as Table"})
		return
	}
	f.mu.Lock()
	objs := f.objects[gr]
	f.mu.Unlock()
	tbl, err := tables.Convert(gr, objs, tables.Options{
		Now:           func() time.Time { return f.now },
		IncludeObject: metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject")),
		ListMeta:      &metav1.ListMeta{ResourceVersion: "1"},
	})
	if err != nil {
		writeJSON(w, 400, metav1.Status{Status: metav1.StatusFailure, Code: 400, Message: err.Error(), Reason: metav1.StatusReasonBadRequest})
		return
	}
	writeJSON(w, 200, tbl)
}

// kubectl runs /usr/bin/kubectl against server with a throwaway kubeconfig
// and cache directory, and returns stdout; stderr is reported on failure.
func kubectl(t *testing.T, server string, args ...string) (string, error) {
	t.Helper()
	requireKubectl(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: " + server +
		"\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\nusers:\n- name: fake\n  user:\n    token: test\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubectlWith(t, kubeconfig, args...)
}

// kubectlBin is the kubectl on PATH: a packaged one, or the one built into
// svcnet that scripts/install.sh links as kubectl on a machine without one.
var kubectlBin, _ = exec.LookPath("kubectl")

func requireKubectl(t *testing.T) {
	t.Helper()
	if kubectlBin == "" {
		t.Skip("kubectl not installed")
	}
}

// kubectlWith runs kubectl with the given kubeconfig and a throwaway cache
// directory and HOME.
func kubectlWith(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	requireKubectl(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig=" + kubeconfig, "--cache-dir=" + filepath.Join(dir, "cache")}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "KUBECTL_KUBERC=false")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Logf("kubectl %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}
