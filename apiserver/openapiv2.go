package apiserver

import (
	"net/http"
	"sync"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"

	svcversion "github.com/svcnet/svcnet/internal/version"
)

var (
	openapiV2Once sync.Once
	openapiV2Doc  []byte
	openapiV2Err  error
)

// serveOpenAPIV2 answers /openapi/v2 with an OpenAPI v2 document in
// protobuf (kubectl asks for protobuf whatever it gets) that defines no
// schemas. kubectl validates against /openapi/v3 for every group version
// svcnet serves; it only reaches v2 for kinds the server does not serve, and
// there an empty v2 document means "no schema", so kubectl reports its
// normal "no matches for kind" mapping error rather than a failed download.
func serveOpenAPIV2(w http.ResponseWriter, r *http.Request) {
	openapiV2Once.Do(func() {
		doc := &openapiv2.Document{
			Swagger:     "2.0",
			Info:        &openapiv2.Info{Title: "Kubernetes", Version: svcversion.KubernetesGitVersion},
			Paths:       &openapiv2.Paths{},
			Definitions: &openapiv2.Definitions{},
		}
		openapiV2Doc, openapiV2Err = proto.Marshal(doc)
	})
	if openapiV2Err != nil {
		http.Error(w, openapiV2Err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
	_, _ = w.Write(openapiV2Doc)
}
