package openapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
)

// doc decodes one of the default documents generically, the way a client
// that knows nothing of our Go types sees it.
func doc(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, ok := Documents()[path]
	if !ok {
		t.Fatalf("no document %q", path)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	return m
}

func dig(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("at %q: not an object: %v", k, v)
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("missing key %q (path %v)", k, keys)
		}
	}
	return v
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestDocumentSet(t *testing.T) {
	docs := Documents()
	var paths []string
	for p, raw := range docs {
		paths = append(paths, p)
		var o spec3.OpenAPI
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Errorf("%s does not decode as OpenAPI v3: %v", p, err)
		} else if o.Version != "3.0.0" || o.Info.Title != "Kubernetes" {
			t.Errorf("%s: openapi %q info %+v", p, o.Version, o.Info)
		}
	}
	sort.Strings(paths)
	want := []string{"api", "api/v1", "apis", "apis/apps", "apis/apps/v1", "apis/coordination.k8s.io", "apis/coordination.k8s.io/v1",
		"apis/discovery.k8s.io", "apis/discovery.k8s.io/v1", "apis/events.k8s.io", "apis/events.k8s.io/v1", "apis/networking.k8s.io", "apis/networking.k8s.io/v1",
		"apis/rbac.authorization.k8s.io", "apis/rbac.authorization.k8s.io/v1", "version"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("documents %v, want %v", paths, want)
	}
	if got := Documents(schema.GroupVersion{Group: "apps", Version: "v1"}, schema.GroupVersion{Group: "batch", Version: "v1"}); len(got) != 1 || got["apis/apps/v1"] == nil {
		t.Errorf("Documents(apps/v1, batch/v1) = %d docs", len(got))
	}
}

func TestSchemas(t *testing.T) {
	d := doc(t, "api/v1")
	schemas := dig(t, d, "components", "schemas").(map[string]any)

	svc := schemas["io.k8s.api.core.v1.Service"]
	if got := asJSON(dig(t, svc, "x-kubernetes-group-version-kind")); got != `[{"group":"","kind":"Service","version":"v1"}]` {
		t.Errorf("Service GVK = %s", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.ServiceList"], "x-kubernetes-group-version-kind")); got != `[{"group":"","kind":"ServiceList","version":"v1"}]` {
		t.Errorf("ServiceList GVK = %s", got)
	}
	if got := asJSON(dig(t, svc, "properties", "metadata")); !strings.Contains(got, `"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]`) || !strings.Contains(got, `"default":{}`) {
		t.Errorf("Service.metadata = %s", got)
	}
	if got := dig(t, svc, "properties", "spec", "description"); got != (corev1.Service{}).SwaggerDoc()["spec"] {
		t.Errorf("Service.spec description = %q", got)
	}
	if got := dig(t, svc, "properties", "apiVersion", "description").(string); !strings.HasPrefix(got, "APIVersion defines the versioned schema") {
		t.Errorf("apiVersion description (from inline TypeMeta) = %q", got)
	}

	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.ServicePort"], "required")); got != `["port"]` {
		t.Errorf("ServicePort required = %s", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.Container"], "required")); got != `["name"]` {
		t.Errorf("Container required = %s", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.ObjectReference"], "properties", "uid", "type")); got != `"string"` {
		t.Errorf("named string type = %s", got)
	}

	ports := asJSON(dig(t, schemas["io.k8s.api.core.v1.ServiceSpec"], "properties", "ports"))
	for _, want := range []string{`"x-kubernetes-patch-merge-key":"port"`, `"x-kubernetes-patch-strategy":"merge"`,
		`"x-kubernetes-list-type":"map"`, `"x-kubernetes-list-map-keys":["port","protocol"]`, `"type":"array"`,
		`"items":{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.ServicePort"}],"default":{}}`} {
		if !strings.Contains(ports, want) {
			t.Errorf("ServiceSpec.ports lacks %s: %s", want, ports)
		}
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.PodSpec"], "properties", "containers", "x-kubernetes-list-map-keys")); got != `["name"]` {
		t.Errorf("PodSpec.containers map keys = %s", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.PodSpec"], "properties", "volumes", "x-kubernetes-patch-strategy")); got != `"merge,retainKeys"` {
		t.Errorf("PodSpec.volumes strategy = %s", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.ServiceSpec"], "properties", "selector")); !strings.Contains(got, `"additionalProperties":{"default":"","type":"string"}`) {
		t.Errorf("selector = %s", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.ConfigMap"], "properties", "binaryData")); !strings.Contains(got, `"additionalProperties":{"format":"byte","type":"string"}`) {
		t.Errorf("binaryData = %s", got)
	}

	for name, want := range map[string]string{
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString": `"format":"int-or-string","oneOf":[{"type":"integer"},{"type":"string"}]`,
		"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       `"format":"date-time","type":"string"`,
		"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":  `"format":"date-time","type":"string"`,
		"io.k8s.apimachinery.pkg.api.resource.Quantity":   `"oneOf":[{"type":"string"},{"type":"number"}]`,
		"io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1":   `"type":"object"`,
	} {
		if got := asJSON(schemas[name]); !strings.Contains(got, want) {
			t.Errorf("%s = %s, want it to contain %s", name, got, want)
		}
	}
	if got := dig(t, schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"], "x-kubernetes-int-or-string"); got != true {
		t.Errorf("IntOrString x-kubernetes-int-or-string = %v", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.ServicePort"], "properties", "targetPort")); strings.Contains(got, `"default"`) || !strings.Contains(got, "intstr.IntOrString") {
		t.Errorf("targetPort = %s", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.SessionAffinityConfig"], "properties", "clientIP")); strings.Contains(got, `"default"`) {
		t.Errorf("pointer struct field has a default: %s", got)
	}

	apps := dig(t, doc(t, "apis/apps/v1"), "components", "schemas").(map[string]any)
	if got := asJSON(dig(t, apps["io.k8s.api.apps.v1.DeploymentSpec"], "required")); got != `["selector","template"]` {
		t.Errorf("DeploymentSpec required = %s", got)
	}
	if got := asJSON(dig(t, apps["io.k8s.api.autoscaling.v1.Scale"], "x-kubernetes-group-version-kind")); got != `[{"group":"autoscaling","kind":"Scale","version":"v1"}]` {
		t.Errorf("Scale GVK = %s", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.Event"], "required")); got != `["involvedObject","metadata"]` {
		t.Errorf("Event required = %s", got)
	}
	slices := dig(t, doc(t, "apis/discovery.k8s.io/v1"), "components", "schemas").(map[string]any)
	if got := asJSON(dig(t, slices["io.k8s.api.discovery.v1.EndpointSlice"], "required")); got != `["addressType"]` {
		t.Errorf("EndpointSlice required = %s", got)
	}
}

// TestRefsResolve walks every document: each $ref must name a component schema.
func TestRefsResolve(t *testing.T) {
	for path := range Documents() {
		d := doc(t, path)
		schemas := dig(t, d, "components", "schemas").(map[string]any)
		var walk func(v any)
		n := 0
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if ref, ok := v["$ref"].(string); ok {
					n++
					if _, ok := schemas[strings.TrimPrefix(ref, refPrefix)]; !ok || !strings.HasPrefix(ref, refPrefix) {
						t.Errorf("%s: dangling $ref %s", path, ref)
					}
				}
				for _, x := range v {
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(d)
		if min := map[bool]int{true: 10, false: 1}[strings.HasSuffix(path, "/v1")]; n < min {
			t.Errorf("%s: only %d refs", path, n)
		}
	}
}

func TestPaths(t *testing.T) {
	paths := dig(t, doc(t, "api/v1"), "paths").(map[string]any)
	item := "/api/v1/namespaces/{namespace}/services/{name}"
	patch := dig(t, paths, item, "patch")
	if got := asJSON(dig(t, patch, "x-kubernetes-group-version-kind")); got != `{"group":"","kind":"Service","version":"v1"}` {
		t.Errorf("patch GVK = %s", got)
	}
	if got := dig(t, patch, "x-kubernetes-action"); got != "patch" {
		t.Errorf("patch action = %v", got)
	}
	if got := dig(t, patch, "operationId"); got != "patchCoreV1NamespacedService" {
		t.Errorf("patch operationId = %v", got)
	}
	var names []string
	for _, p := range dig(t, patch, "parameters").([]any) {
		names = append(names, p.(map[string]any)["in"].(string)+":"+p.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "query:dryRun,query:fieldManager,query:fieldValidation,query:force" {
		t.Errorf("patch parameters = %v", names)
	}
	body := asJSON(dig(t, patch, "requestBody", "content"))
	for _, ct := range []string{"application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"} {
		if !strings.Contains(body, `"`+ct+`"`) {
			t.Errorf("patch body lacks %s", ct)
		}
	}
	for _, c := range []struct{ path, method, action, id string }{
		{"/api/v1/namespaces/{namespace}/services", "get", "list", "listCoreV1NamespacedService"},
		{"/api/v1/namespaces/{namespace}/services", "post", "post", "createCoreV1NamespacedService"},
		{"/api/v1/namespaces/{namespace}/services", "delete", "deletecollection", "deletecollectionCoreV1NamespacedService"},
		{item, "get", "get", "readCoreV1NamespacedService"},
		{item, "put", "put", "replaceCoreV1NamespacedService"},
		{item, "delete", "delete", "deleteCoreV1NamespacedService"},
		{item + "/status", "patch", "patch", "patchCoreV1NamespacedServiceStatus"},
		{"/api/v1/services", "get", "list", "listCoreV1ServiceForAllNamespaces"},
		{"/api/v1/nodes/{name}", "get", "get", "readCoreV1Node"},
		{"/api/v1/namespaces/{name}", "delete", "delete", "deleteCoreV1Namespace"},
	} {
		op := dig(t, paths, c.path, c.method)
		if dig(t, op, "x-kubernetes-action") != c.action || dig(t, op, "operationId") != c.id {
			t.Errorf("%s %s: action %v id %v", c.method, c.path, dig(t, op, "x-kubernetes-action"), dig(t, op, "operationId"))
		}
	}
	if got := asJSON(dig(t, paths, "/api/v1/namespaces/{namespace}/services", "get", "responses", "200", "content", "application/json", "schema")); got != `{"$ref":"#/components/schemas/io.k8s.api.core.v1.ServiceList"}` {
		t.Errorf("list response = %s", got)
	}

	apps := dig(t, doc(t, "apis/apps/v1"), "paths").(map[string]any)
	scale := dig(t, apps, "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", "patch")
	if got := asJSON(dig(t, scale, "x-kubernetes-group-version-kind")); got != `{"group":"autoscaling","kind":"Scale","version":"v1"}` {
		t.Errorf("scale GVK = %s", got)
	}
	if got := dig(t, scale, "operationId"); got != "patchAppsV1NamespacedDeploymentScale" {
		t.Errorf("scale operationId = %v", got)
	}
	if _, ok := dig(t, doc(t, "apis/discovery.k8s.io/v1"), "paths").(map[string]any)["/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/{name}"]; !ok {
		t.Error("no endpointslice item path")
	}
}

func TestIndexAndHandler(t *testing.T) {
	docs := Documents()
	var idx struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(Index(docs), &idx); err != nil {
		t.Fatal(err)
	}
	if got := idx.Paths["apis/apps/v1"].ServerRelativeURL; got != "/openapi/v3/apis/apps/v1?hash="+Hash(docs["apis/apps/v1"]) || len(Hash(nil)) != 128 {
		t.Errorf("index url = %q", got)
	}

	h, err := DefaultHandler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path, accept string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := get("/openapi/v3", "")
	if err := json.Unmarshal(b, &idx); err != nil || resp.StatusCode != 200 || len(idx.Paths) != 16 {
		t.Fatalf("index: %d %s %v", resp.StatusCode, b, err)
	}
	url := idx.Paths["api/v1"].ServerRelativeURL
	resp, b = get(url, "application/json")
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "public, immutable" || !strings.Contains(string(b), "io.k8s.api.core.v1.Service") {
		t.Errorf("GET %s: %d %v", url, resp.StatusCode, resp.Header)
	}
	if resp, _ = get("/openapi/v3/api/v1?hash=stale", "application/json"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != url {
		t.Errorf("stale hash: %d -> %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, b = get("/openapi/v3/api/v1", "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"); resp.StatusCode != 200 ||
		resp.Header.Get("Content-Type") != "application/com.github.proto-openapi.spec.v3.v1.0+protobuf" || len(b) == 0 || b[0] == '{' {
		t.Errorf("protobuf: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ = get("/openapi/v3/apis/batch/v1", ""); resp.StatusCode != 404 {
		t.Errorf("unknown group version: %d", resp.StatusCode)
	}
}

func TestDiscoveryDocuments(t *testing.T) {
	for path, want := range map[string]string{
		"api":                      `"/api/".get.operationId=getCoreAPIVersions`,
		"apis":                     `"/apis/".get.operationId=getAPIVersions`,
		"apis/apps":                `"/apis/apps/".get.operationId=getAppsAPIGroup`,
		"apis/discovery.k8s.io":    `"/apis/discovery.k8s.io/".get.operationId=getDiscoveryAPIGroup`,
		"apis/coordination.k8s.io": `"/apis/coordination.k8s.io/".get.operationId=getCoordinationAPIGroup`,
		"version":                  `"/version/".get.operationId=getCodeVersion`,
	} {
		d := doc(t, path)
		for p, item := range dig(t, d, "paths").(map[string]any) {
			if got := fmt.Sprintf("%q.get.operationId=%v", p, dig(t, item, "get", "operationId")); got != want {
				t.Errorf("%s: %s, want %s", path, got, want)
			}
		}
	}
	if got := dig(t, doc(t, "version"), "components", "schemas").(map[string]any); got["io.k8s.apimachinery.pkg.version.Info"] == nil {
		t.Errorf("version schemas = %v", got)
	}
}

func TestBuildRejectsIncompleteResource(t *testing.T) {
	if _, err := Build([]Resource{{Resource: "things"}}); err == nil {
		t.Error("want error for a resource without GVK and types")
	}
}

func TestModelName(t *testing.T) {
	type local struct{}
	if got := modelName(reflect.TypeOf(local{})); got != "com.github.svcnet.svcnet.apiserver.openapi.local" {
		t.Errorf("modelName = %q", got)
	}
}

func TestEnums(t *testing.T) {
	schemas := dig(t, doc(t, "api/v1"), "components", "schemas").(map[string]any)
	typ := dig(t, schemas["io.k8s.api.core.v1.ServiceSpec"], "properties", "type").(map[string]any)
	if got := asJSON(typ["enum"]); got != `["ClusterIP","ExternalName","LoadBalancer","NodePort"]` {
		t.Errorf("ServiceSpec.type enum = %s", got)
	}
	if d := typ["description"].(string); !strings.Contains(d, "ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types\n\nPossible enum values:\n - `\"ClusterIP\"` means a service will only be accessible inside the cluster, via the cluster IP.\n - `\"ExternalName\"` means") {
		t.Errorf("ServiceSpec.type description = %q", d)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.ServiceSpec"], "properties", "ipFamilies", "items", "enum")); got != `["","IPv4","IPv6"]` {
		t.Errorf("ipFamilies items enum = %s", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.ServiceSpec"], "properties", "ipFamilyPolicy", "enum")); got != `["PreferDualStack","RequireDualStack","SingleStack"]` {
		t.Errorf("ipFamilyPolicy enum = %s", got)
	}
	if got := asJSON(dig(t, schemas["io.k8s.api.core.v1.ServicePort"], "properties", "protocol", "enum")); got != `["SCTP","TCP","UDP"]` {
		t.Errorf("protocol enum = %s", got)
	}
	if _, ok := dig(t, schemas["io.k8s.api.core.v1.ServicePort"], "properties", "name").(map[string]any)["enum"]; ok {
		t.Error("plain string field has an enum")
	}
}

func TestMarkers(t *testing.T) {
	core := dig(t, doc(t, "api/v1"), "components", "schemas").(map[string]any)
	meta := core["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
	if got := asJSON(dig(t, meta, "properties", "ownerReferences")); !strings.Contains(got, `"x-kubernetes-list-map-keys":["uid"],"x-kubernetes-list-type":"map"`) {
		t.Errorf("ownerReferences = %s", got)
	}
	if got := asJSON(dig(t, meta, "properties", "finalizers", "x-kubernetes-list-type")); got != `"set"` {
		t.Errorf("finalizers list type = %s", got)
	}
	if got := dig(t, core["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"], "x-kubernetes-map-type"); got != "atomic" {
		t.Errorf("LabelSelector map type = %v", got)
	}
	if got := asJSON(dig(t, core["io.k8s.api.core.v1.ServiceSpec"], "properties", "clusterIPs", "x-kubernetes-list-type")); got != `"atomic"` {
		t.Errorf("clusterIPs list type = %s", got)
	}
	if got := asJSON(dig(t, core["io.k8s.api.core.v1.Event"], "required")); got != `["involvedObject","metadata"]` {
		t.Errorf("Event required (reportingComponent is +optional) = %s", got)
	}
}

func TestDefaults(t *testing.T) {
	core := dig(t, doc(t, "api/v1"), "components", "schemas").(map[string]any)
	port := core["io.k8s.api.core.v1.ServicePort"]
	for field, want := range map[string]string{"port": `0`, "protocol": `"TCP"`} {
		if got := asJSON(dig(t, port, "properties", field, "default")); got != want {
			t.Errorf("ServicePort.%s default = %s, want %s", field, got, want)
		}
	}
	if _, ok := dig(t, port, "properties", "nodePort").(map[string]any)["default"]; ok {
		t.Error("omitempty scalar nodePort has a default")
	}
	if got := asJSON(dig(t, core["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"], "properties", "finalizers", "items")); got != `{"default":"","type":"string"}` {
		t.Errorf("finalizers items = %s", got)
	}
	if got := asJSON(dig(t, core["io.k8s.api.core.v1.NodeCondition"], "properties", "type", "default")); got != `""` {
		t.Errorf("NodeCondition.type default = %s", got)
	}
}

func TestSpecialDescriptions(t *testing.T) {
	core := dig(t, doc(t, "api/v1"), "components", "schemas").(map[string]any)
	if d := dig(t, core["io.k8s.apimachinery.pkg.api.resource.Quantity"], "description").(string); !strings.HasSuffix(d, "that will cause implementors to also use a fixed point implementation.") {
		t.Errorf("Quantity description ends %q", d[len(d)-80:])
	}
	if d := dig(t, core["io.k8s.apimachinery.pkg.util.intstr.IntOrString"], "description"); d != "IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML marshalling and unmarshalling, it produces or consumes the inner type.  This allows you to have, for example, a JSON field that can accept a name or number." {
		t.Errorf("IntOrString description = %q", d)
	}
}
