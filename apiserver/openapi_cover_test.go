package apiserver

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcnet/svcnet/apiserver/openapi"
)

// TestOpenAPICoversServedKinds: every built-in kind the server serves has a
// schema in its OpenAPI documents (kubectl explain, kubectl's schema-driven
// apply), as kube-apiserver publishes one for each. The MetalLB kinds are
// custom resources, stored unstructured, and are not covered.
func TestOpenAPICoversServedKinds(t *testing.T) {
	have := map[string]bool{}
	for _, r := range openapi.DefaultResources() {
		have[r.GVK.GroupVersion().WithResource(r.Resource).String()] = true
	}
	for _, d := range builtinResources() {
		if _, ok := d.info.New().(*unstructured.Unstructured); ok {
			continue
		}
		if !have[d.info.GVR.String()] {
			t.Errorf("%s (%s) is served but has no OpenAPI schema (apiserver/openapi.DefaultResources)", d.info.GVR, d.info.Kind)
		}
	}
}
