package openapi

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Query and path parameters, described as kube-apiserver describes them.
// They are written inline in every operation (not as $refs into
// components.parameters) so that every client, old or new, finds them.
var paramDocs = map[string]string{
	"pretty":               "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
	"namespace":            "object name and auth scope, such as for teams and projects",
	"dryRun":               "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed",
	"fieldManager":         "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.",
	"fieldManagerApply":    "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint. This field is required for apply requests (application/apply-patch) but optional for non-apply patch types (JsonPatch, MergePatch, StrategicMergePatch).",
	"fieldValidation":      "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.",
	"force":                "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
	"allowWatchBookmarks":  "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session. If this is not a watch, this field is ignored.",
	"continue":             "The continue option should be set when retrieving more results from the server. Since this value is server defined, clients may only use the continue value from a previous query result with identical query parameters (except for the value of continue) and the server may reject a continue value it does not recognize. If the specified continue value is no longer valid whether due to expiration (generally five to fifteen minutes) or a configuration change on the server, the server will respond with a 410 ResourceExpired error together with a continue token.",
	"fieldSelector":        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
	"labelSelector":        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
	"limit":                "limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results.",
	"resourceVersion":      "resourceVersion sets a constraint on what resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset",
	"resourceVersionMatch": "resourceVersionMatch determines how resourceVersion is applied to list calls. It is highly recommended that resourceVersionMatch be set for list calls where resourceVersion is set See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset",
	"sendInitialEvents":    "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection. Once all such events have been sent, a synthetic \"Bookmark\" event  will be sent. The bookmark will report the ResourceVersion (RV) corresponding to the set of objects, and be marked with `\"k8s.io/initial-events-end\": \"true\"` annotation.",
	"timeoutSeconds":       "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.",
	"watch":                "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.",
	"gracePeriodSeconds":   "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately. If this value is nil, the default grace period for the specified type will be used. Defaults to a per object value if not specified. zero means delete immediately.",
	"orphanDependents":     "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned. If true/false, the \"orphan\" finalizer will be added to/removed from the object's finalizers list. Either this field or PropagationPolicy may be set, but not both.",
	"propagationPolicy":    "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. The default policy is decided by the existing finalizer set in the metadata.finalizers and the resource-specific default policy. Acceptable values are: 'Orphan' - orphan the dependents; 'Background' - allow the garbage collector to delete the dependents in the background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.",
	"ignoreStoreReadErrorWithClusterBreakingPotential": "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error. A resource is considered corrupt if it can not be retrieved from the underlying storage successfully because of a) its data can not be transformed e.g. decryption failure, or b) it fails to decode into an object. NOTE: unsafe deletion ignores finalizer constraints, skips precondition checks, and removes the object from the storage. WARNING: This may potentially break the cluster if the workload associated with the resource being unsafe-deleted relies on normal deletion flow. Use only if you REALLY know what you are doing. The default value is false, and the user must opt in to enable it",
}

var paramTypes = map[string]string{
	"allowWatchBookmarks": "boolean", "watch": "boolean", "force": "boolean", "orphanDependents": "boolean",
	"sendInitialEvents": "boolean", "ignoreStoreReadErrorWithClusterBreakingPotential": "boolean",
	"limit": "integer", "timeoutSeconds": "integer", "gracePeriodSeconds": "integer",
}

func query(name string) *spec3.Parameter {
	typ := paramTypes[name]
	if typ == "" {
		typ = "string"
	}
	doc := paramDocs[name]
	if name == "fieldManager" {
		doc = paramDocs["fieldManager"]
	}
	return &spec3.Parameter{ParameterProps: spec3.ParameterProps{
		Name: name, In: "query", Description: doc, Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, UniqueItems: true}},
	}}
}

func queries(names ...string) []*spec3.Parameter {
	out := make([]*spec3.Parameter, len(names))
	for i, n := range names {
		out[i] = query(n)
	}
	return out
}

func pathParam(name, doc string) *spec3.Parameter {
	return &spec3.Parameter{ParameterProps: spec3.ParameterProps{
		Name: name, In: "path", Required: true, Description: doc,
		Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}, UniqueItems: true}},
	}}
}

var (
	listParams             = []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"}
	writeParams            = []string{"dryRun", "fieldManager", "fieldValidation"}
	deleteParams           = []string{"dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential", "orphanDependents", "propagationPolicy"}
	deleteCollectionParams = []string{"continue", "dryRun", "fieldSelector", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential", "labelSelector", "limit", "orphanDependents", "propagationPolicy", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds"}
	objectContent          = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "application/cbor"}
	listContent            = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "application/cbor", "application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch", "application/cbor-seq"}
	patchContent           = []string{"application/apply-patch+yaml", "application/apply-patch+cbor", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"}
)

func refTo(model string) *spec.Schema { return spec.RefSchema(refPrefix + model) }

func content(types []string, model string) map[string]*spec3.MediaType {
	m := map[string]*spec3.MediaType{}
	for _, t := range types {
		m[t] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: refTo(model)}}
	}
	return m
}

func responses(types []string, model string, codes ...int) *spec3.Responses {
	r := &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{}}}
	for _, c := range codes {
		desc := map[int]string{200: "OK", 201: "Created", 202: "Accepted"}[c]
		r.StatusCodeResponses[c] = &spec3.Response{ResponseProps: spec3.ResponseProps{Description: desc, Content: content(types, model)}}
	}
	r.StatusCodeResponses[401] = &spec3.Response{ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}}
	return r
}

func body(types []string, model string) *spec3.RequestBody {
	return &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Content: content(types, model), Required: true}}
}

// opNames turns a group version into kube-apiserver's operationId infix and
// tag: core/v1 → CoreV1 / core_v1, discovery.k8s.io/v1 → DiscoveryV1 /
// discovery_v1, apps/v1 → AppsV1 / apps_v1.
func opNames(gv schema.GroupVersion) (infix, tag string) {
	group := gv.Group
	if group == "" {
		group = "core"
	}
	group, _, _ = strings.Cut(group, ".")
	parts := []string{group, gv.Version}
	for i, p := range parts {
		parts[i] = strings.ToUpper(p[:1]) + p[1:]
	}
	return strings.Join(parts, ""), group + "_" + gv.Version
}

func operation(tag, description, id, action string, gvk schema.GroupVersionKind, params []*spec3.Parameter) *spec3.Operation {
	op := &spec3.Operation{OperationProps: spec3.OperationProps{
		Tags: []string{tag}, Description: description, OperationId: id, Parameters: params,
	}}
	op.AddExtension(extAction, action)
	op.AddExtension(extGVK, map[string]any{"group": gvk.Group, "kind": gvk.Kind, "version": gvk.Version})
	return op
}

// addPaths adds the standard REST operations for r to paths.
func addPaths(paths map[string]*spec3.Path, r Resource, kindModel, listModel, scaleModel string) {
	gv := r.GVK.GroupVersion()
	infix, tag := opNames(gv)
	prefix := "/apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		prefix = "/api/" + gv.Version
	}
	kind := r.GVK.Kind
	scope := ""
	collection := prefix + "/" + r.Resource
	nsParam := []*spec3.Parameter{}
	if r.Namespaced {
		scope = "Namespaced"
		collection = prefix + "/namespaces/{namespace}/" + r.Resource
		nsParam = append(nsParam, pathParam("namespace", paramDocs["namespace"]))
	}
	item := collection + "/{name}"
	nameParam := pathParam("name", "name of the "+kind)
	const statusModel = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	const deleteOptions = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
	const patchModel = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"

	coll := &spec3.Path{PathProps: spec3.PathProps{Parameters: append(append([]*spec3.Parameter{}, nsParam...), query("pretty"))}}
	list := operation(tag, "list or watch objects of kind "+kind, "list"+infix+scope+kind, "list", r.GVK, queries(listParams...))
	list.Responses = responses(listContent, listModel, 200)
	coll.Get = list
	create := operation(tag, "create "+article(kind)+" "+kind, "create"+infix+scope+kind, "post", r.GVK, queries(writeParams...))
	create.RequestBody = body([]string{"*/*"}, kindModel)
	create.Responses = responses(objectContent, kindModel, 200, 201, 202)
	coll.Post = create
	delColl := operation(tag, "delete collection of "+kind, "deletecollection"+infix+scope+kind, "deletecollection", r.GVK, queries(deleteCollectionParams...))
	delColl.RequestBody = body([]string{"*/*"}, deleteOptions)
	delColl.RequestBody.Required = false
	delColl.Responses = responses(objectContent, statusModel, 200)
	coll.Delete = delColl
	paths[collection] = coll

	one := &spec3.Path{PathProps: spec3.PathProps{Parameters: append(append([]*spec3.Parameter{nameParam}, nsParam...), query("pretty"))}}
	read := operation(tag, "read the specified "+kind, "read"+infix+scope+kind, "get", r.GVK, nil)
	read.Responses = responses(objectContent, kindModel, 200)
	one.Get = read
	replace := operation(tag, "replace the specified "+kind, "replace"+infix+scope+kind, "put", r.GVK, queries(writeParams...))
	replace.RequestBody = body([]string{"*/*"}, kindModel)
	replace.Responses = responses(objectContent, kindModel, 200, 201)
	one.Put = replace
	one.Patch = patchOp(tag, "partially update the specified "+kind, "patch"+infix+scope+kind, r.GVK, kindModel, patchModel)
	del := operation(tag, "delete "+article(kind)+" "+kind, "delete"+infix+scope+kind, "delete", r.GVK, queries(deleteParams...))
	del.RequestBody = body([]string{"*/*"}, deleteOptions)
	del.RequestBody.Required = false
	del.Responses = responses(objectContent, statusModel, 200, 202)
	one.Delete = del
	paths[item] = one

	for _, sub := range r.Subresources {
		subKind, subModel, subGVK := kind+"Status", kindModel, r.GVK
		desc := "status of the specified " + kind
		if sub == "scale" {
			subKind, subModel = kind+"Scale", scaleModel
			subGVK = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
			desc = "scale of the specified " + kind
		}
		p := &spec3.Path{PathProps: spec3.PathProps{Parameters: append(append([]*spec3.Parameter{pathParam("name", "name of the "+scaleOrKind(sub, kind))}, nsParam...), query("pretty"))}}
		get := operation(tag, "read "+desc, "read"+infix+scope+subKind, "get", subGVK, nil)
		get.Responses = responses(objectContent, subModel, 200)
		p.Get = get
		put := operation(tag, "replace "+desc, "replace"+infix+scope+subKind, "put", subGVK, queries(writeParams...))
		put.RequestBody = body([]string{"*/*"}, subModel)
		put.Responses = responses(objectContent, subModel, 200, 201)
		p.Put = put
		p.Patch = patchOp(tag, "partially update "+desc, "patch"+infix+scope+subKind, subGVK, subModel, patchModel)
		paths[item+"/"+sub] = p
	}

	if r.Namespaced {
		all := &spec3.Path{PathProps: spec3.PathProps{Parameters: queries(listParams...)}}
		all.Parameters = append(all.Parameters, query("pretty"))
		op := operation(tag, "list or watch objects of kind "+kind, "list"+infix+kind+"ForAllNamespaces", "list", r.GVK, nil)
		op.Responses = responses(listContent, listModel, 200)
		all.Get = op
		paths[prefix+"/"+r.Resource] = all
	}
}

func patchOp(tag, desc, id string, gvk schema.GroupVersionKind, model, patchModel string) *spec3.Operation {
	params := queries("dryRun", "fieldManager", "fieldValidation", "force")
	params[1].Description = paramDocs["fieldManagerApply"]
	op := operation(tag, desc, id, "patch", gvk, params)
	op.RequestBody = body(patchContent, patchModel)
	op.Responses = responses(objectContent, model, 200, 201)
	return op
}

func scaleOrKind(sub, kind string) string {
	if sub == "scale" {
		return "Scale"
	}
	return kind
}

func article(kind string) string {
	switch kind[0] {
	case 'A', 'E', 'I', 'O', 'U':
		return "an"
	}
	return "a"
}
