package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	svcversion "github.com/svcnet/svcnet/internal/version"
	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/storage"

	"github.com/svcnet/svcnet/apiserver/authz"
)

func restConfigFromKubeconfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// unstructuredCodec stores unstructured objects as JSON.
type unstructuredCodec struct{}

func (unstructuredCodec) Encode(obj runtime.Object, w io.Writer) error {
	return unstructured.UnstructuredJSONScheme.Encode(obj, w)
}

func (unstructuredCodec) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	return unstructured.UnstructuredJSONScheme.Decode(data, gvk, into)
}

func (unstructuredCodec) Identifier() runtime.Identifier { return "svcnet-unstructured-json" }

// Handler is the server's HTTP handler (authentication included).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/readyz") || strings.HasPrefix(r.URL.Path, "/healthz") {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if _, err := s.order[0].Storage.CurrentRevision(ctx); err != nil {
				http.Error(w, "[-]etcd failed: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprintf(w, "[+]ping ok\n[+]etcd ok\n%s check passed\n", strings.Trim(strings.SplitN(r.URL.Path[1:], "/", 2)[0], "/"))
			return
		}
		fmt.Fprint(w, "ok")
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		mux.HandleFunc(p, health)
		mux.HandleFunc(p+"/", health)
	}
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(version.Info{
			Major: svcversion.KubernetesMajor, Minor: svcversion.KubernetesMinor,
			GitVersion: svcversion.KubernetesGitVersion, GitCommit: "svcnet-" + svcversion.Version, GitTreeState: "clean",
			BuildDate: "2026-01-01T00:00:00Z", GoVersion: goVersion(), Compiler: "gc", Platform: platform(),
		})
	})
	mux.HandleFunc("/.well-known/openid-configuration", s.serveOIDCDiscovery)
	mux.HandleFunc("/openid/v1/jwks", s.serveJWKS)
	api := http.HandlerFunc(s.serveAPI)
	mux.Handle("/api", api)
	mux.Handle("/api/", api)
	mux.Handle("/apis", api)
	mux.Handle("/apis/", api)
	mux.HandleFunc("/openapi/", s.serveOpenAPI)
	mux.HandleFunc("/openapi/v2", s.serveOpenAPI)
	mux.HandleFunc("/openapi/v3", s.serveOpenAPI)
	return s.logRequests(s.authenticate(s.authorizeRequests(s.inflight.wrap(mux))))
}

// statusRecorder remembers the response code for the request log and passes
// Flush through (watches need it).
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequests logs every request at debug level (errors at info), with the
// keys method, uri, code, duration and userAgent.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			// A bug must not take the server down: answer 500 and log it.
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic serving request", "method", r.Method, "uri", r.URL.RequestURI(), "panic", p, "stack", string(debug.Stack()))
				writeError(rec, apierrors.NewInternalError(fmt.Errorf("panic: %v", p)))
			}
		}()
		next.ServeHTTP(rec, r)
		lvl := slog.LevelDebug
		if rec.code >= 500 {
			lvl = slog.LevelInfo
		}
		s.log.Log(r.Context(), lvl, "request", "method", r.Method, "uri", r.URL.RequestURI(), "code", rec.code,
			"duration", time.Since(start), "userAgent", r.UserAgent())
	})
}

// authenticate identifies the client, as kube-apiserver's authenticators
// in turn: a client certificate signed by the cluster CA, else a service
// account token (Authorization: Bearer). A request with neither gets 401,
// as does one with a token that is not valid, except the health and version
// endpoints which, as in kube-apiserver's default RBAC, any client may read.
// The user travels in the request context (authenticatedUser).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		public := p == "/version" || p == "/healthz" || p == "/livez" || p == "/readyz" ||
			strings.HasPrefix(p, "/healthz/") || strings.HasPrefix(p, "/livez/") || strings.HasPrefix(p, "/readyz/")
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authnKey{}, certUser(r))))
			return
		}
		if tok, ok := bearerToken(r); ok && s.saTokens != nil {
			u, err := s.authenticateToken(r.Context(), tok)
			if err != nil {
				s.log.Debug("bearer token rejected", "err", err, "uri", r.URL.RequestURI())
				writeError(w, apierrors.NewUnauthorized("Unauthorized"))
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authnKey{}, u)))
			return
		}
		if !public {
			writeError(w, apierrors.NewUnauthorized("Unauthorized"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

type authnKey struct{}

// authenticatedUser is the user authenticate found (before impersonation).
func authenticatedUser(r *http.Request) (authz.User, bool) {
	u, ok := r.Context().Value(authnKey{}).(authz.User)
	return u, ok
}

// request is a parsed resource request.
type request struct {
	gv        schema.GroupVersion
	res       *served
	namespace string
	name      string
	sub       string
	watch     bool
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	parts := splitPath(r.URL.Path)
	var gv schema.GroupVersion
	var rest []string
	switch {
	case parts[0] == "api":
		if len(parts) == 1 {
			s.serveAPIVersions(w, r)
			return
		}
		if parts[1] != "v1" {
			writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
			return
		}
		gv, rest = schema.GroupVersion{Version: "v1"}, parts[2:]
	case parts[0] == "apis":
		if len(parts) == 1 {
			s.serveAPIGroupList(w, r)
			return
		}
		if len(parts) == 2 {
			s.serveAPIGroup(w, r, parts[1])
			return
		}
		gv, rest = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
		return
	}
	if len(rest) == 0 {
		s.serveResourceList(w, r, gv)
		return
	}
	if s.serveReview(w, r, gv, rest) {
		return
	}
	req := request{gv: gv}
	legacyWatch := false
	if rest[0] == "watch" {
		req.watch = true
		legacyWatch = true
		rest = rest[1:]
	}
	if len(rest) >= 3 && rest[0] == "namespaces" && rest[2] != "status" && rest[2] != "finalize" {
		req.namespace = rest[1]
		rest = rest[2:]
	}
	if len(rest) == 0 || len(rest) > 3 {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
		return
	}
	res, ok := s.stores[gv.WithResource(rest[0])]
	if !ok {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group, Resource: rest[0]}, ""))
		return
	}
	req.res = res
	if len(rest) > 1 {
		req.name = rest[1]
	}
	if len(rest) > 2 {
		req.sub = rest[2]
		if res.Info.GroupResource() == podsGR && podProxySubresources[req.sub] {
			if err := s.handlePodProxy(w, r, req); err != nil {
				writeError(w, err)
			}
			return
		}
		if req.sub == "token" && res.Info.GroupResource() == serviceAccountsGR && r.Method == http.MethodPost {
			if err := s.handleTokenRequest(w, r, req); err != nil {
				writeError(w, err)
			}
			return
		}
		binding := req.sub == "binding" && res.Info.GroupResource() == podsGR
		if binding && r.Method == http.MethodPost {
			if err := s.handleBinding(w, r, req); err != nil {
				writeError(w, err)
			}
			return
		}
		if !(req.sub == "scale" && res.Info.Scale) && !res.HasSubresource(req.sub) {
			writeError(w, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group, Resource: rest[0] + "/" + req.sub}, req.name))
			return
		}
		// A namespace's finalize subresource is written with PUT only.
		if req.sub == "finalize" && r.Method != http.MethodPut {
			writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{Group: gv.Group, Resource: rest[0] + "/" + req.sub}, strings.ToLower(r.Method)))
			return
		}
	}
	if !res.Info.Namespaced && req.namespace != "" {
		writeError(w, apierrors.NewNotFound(res.Info.GroupResource(), req.name))
		return
	}
	q := r.URL.Query()
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		req.watch = true
	}
	// kube-apiserver warns on every verb of a deprecated kind except the
	// legacy /watch/ paths.
	if msg := deprecationWarning(res.Info.New(), res.Info.GVK()); msg != "" && !legacyWatch {
		addWarning(w, msg)
	}
	// What strategies warn about while they prepare a written object goes
	// out as it comes, ahead of the kind's create or update warnings.
	r = r.WithContext(registry.WithWarningSink(r.Context(), func(text string) { addWarning(w, text) }))
	var err error
	switch r.Method {
	case http.MethodGet:
		switch {
		case req.watch:
			err = s.handleWatch(w, r, req)
		case req.name == "":
			err = s.handleList(w, r, req)
		default:
			err = s.handleGet(w, r, req)
		}
	case http.MethodPost:
		if req.name != "" {
			err = apierrors.NewMethodNotSupported(res.Info.GroupResource(), "create")
		} else {
			err = s.handleCreate(w, r, req)
		}
	case http.MethodPut:
		if req.name == "" {
			err = apierrors.NewMethodNotSupported(res.Info.GroupResource(), "update")
		} else {
			err = s.handleUpdate(w, r, req)
		}
	case http.MethodPatch:
		if req.name == "" {
			err = apierrors.NewMethodNotSupported(res.Info.GroupResource(), "patch")
		} else {
			err = s.handlePatch(w, r, req)
		}
	case http.MethodDelete:
		if req.name == "" {
			err = s.handleDeleteCollection(w, r, req)
		} else if req.sub != "" {
			err = apierrors.NewMethodNotSupported(res.Info.GroupResource(), "delete")
		} else {
			err = s.handleDelete(w, r, req)
		}
	default:
		err = apierrors.NewMethodNotSupported(res.Info.GroupResource(), r.Method)
	}
	if err != nil {
		writeError(w, err)
	}
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return []string{""}
	}
	return out
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, req request) error {
	out, err := negotiate(r, req.res.isUnstructured())
	if err != nil {
		return err
	}
	obj, err := req.res.Get(r.Context(), req.namespace, req.name)
	if err != nil {
		return err
	}
	if req.sub == "scale" {
		sc, err := scaleOf(obj)
		if err != nil {
			return err
		}
		writeObject(w, out, http.StatusOK, sc, autoscalingV1)
		return nil
	}
	return s.respond(w, r, out, http.StatusOK, req, obj)
}

// respond writes an object, converted to a Table or metadata if asked.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, out output, code int, req request, obj runtime.Object) error {
	switch out.as {
	case "Table":
		t, err := s.toTable(r, req.res, []runtime.Object{obj}, true)
		if err != nil {
			return err
		}
		if acc, err := meta.Accessor(obj); err == nil {
			t.ResourceVersion = acc.GetResourceVersion()
		}
		writeObject(w, out, code, t, metav1.SchemeGroupVersion)
	case "PartialObjectMetadata":
		writeObject(w, out, code, partialMeta(obj), metav1.SchemeGroupVersion)
	default:
		writeObject(w, out, code, obj, req.gv)
	}
	return nil
}

func (r *served) isUnstructured() bool {
	_, ok := r.Info.New().(*unstructured.Unstructured)
	return ok
}

func partialMeta(obj runtime.Object) *metav1.PartialObjectMetadata {
	acc, _ := meta.Accessor(obj)
	pm := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}}
	if om, ok := acc.(*metav1.ObjectMeta); ok {
		pm.ObjectMeta = *om.DeepCopy()
	} else if acc != nil {
		pm.ObjectMeta = metav1.ObjectMeta{Name: acc.GetName(), Namespace: acc.GetNamespace(), UID: acc.GetUID(),
			ResourceVersion: acc.GetResourceVersion(), Generation: acc.GetGeneration(), CreationTimestamp: acc.GetCreationTimestamp(),
			DeletionTimestamp: acc.GetDeletionTimestamp(), Labels: acc.GetLabels(), Annotations: acc.GetAnnotations(),
			OwnerReferences: acc.GetOwnerReferences(), Finalizers: acc.GetFinalizers(), GenerateName: acc.GetGenerateName(),
			ManagedFields: acc.GetManagedFields()}
	}
	return pm
}

// selectors parses labelSelector and fieldSelector into a storage filter.
func (s *Server) selectors(r *http.Request, res *served) (storage.Filter, error) {
	q := r.URL.Query()
	ls := labels.Everything()
	if v := q.Get("labelSelector"); v != "" {
		var err error
		if ls, err = labels.Parse(v); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
	}
	fs := fields.Everything()
	if v := q.Get("fieldSelector"); v != "" {
		var err error
		if fs, err = fields.ParseSelector(v); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
		// Every label must be one the kind's field-label conversion accepts
		// (kube-apiserver answers 400 with the conversion's error).
		if fs, err = fs.Transform(res.ConvertFieldLabel); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	if ls.Empty() && fs.Empty() {
		return nil, nil
	}
	return func(obj runtime.Object) bool {
		acc, err := meta.Accessor(obj)
		if err != nil {
			return false
		}
		if !ls.Matches(labels.Set(acc.GetLabels())) {
			return false
		}
		return fs.Empty() || fs.Matches(fields.Set(res.FieldsSet(obj)))
	}, nil
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, req request) error {
	out, err := negotiate(r, req.res.isUnstructured())
	if err != nil {
		return err
	}
	filter, err := s.selectors(r, req.res)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var limit int64
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.ParseInt(v, 10, 64); err != nil || limit < 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid limit %q", v))
		}
	}
	// The resourceVersion, resourceVersionMatch, continue and
	// sendInitialEvents rules are apimachinery's, as kube-apiserver applies them.
	lo := &metainternalversion.ListOptions{ResourceVersion: q.Get("resourceVersion"),
		ResourceVersionMatch: metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")), Continue: q.Get("continue")}
	if v := q.Get("sendInitialEvents"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid sendInitialEvents %q", v))
		}
		lo.SendInitialEvents = &b
	}
	if errs := metainternalversionvalidation.ValidateListOptions(lo, true); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	lr, err := req.res.ListItems(r.Context(), req.namespace, registry.ListOptions{
		Filter: filter, Limit: limit, Continue: q.Get("continue"),
		ResourceVersion: q.Get("resourceVersion"), ResourceVersionMatch: metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")),
		ReadOnly: true,
	})
	if err != nil {
		return err
	}
	if writeListEncoded(w, out, req.res.Info, req.gv, lr) {
		return nil
	}
	list, err := req.res.ListObject(lr)
	if err != nil {
		return err
	}
	switch out.as {
	case "Table":
		items, _ := meta.ExtractList(list)
		t, err := s.toTable(r, req.res, items, true)
		if err != nil {
			return err
		}
		lm, _ := meta.ListAccessor(list)
		t.ResourceVersion, t.Continue = lm.GetResourceVersion(), lm.GetContinue()
		writeObject(w, out, http.StatusOK, t, metav1.SchemeGroupVersion)
	case "PartialObjectMetadataList", "PartialObjectMetadata":
		items, _ := meta.ExtractList(list)
		lm, _ := meta.ListAccessor(list)
		pl := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}}
		pl.ResourceVersion, pl.Continue = lm.GetResourceVersion(), lm.GetContinue()
		for _, it := range items {
			pl.Items = append(pl.Items, *partialMeta(it))
		}
		writeObject(w, out, http.StatusOK, pl, metav1.SchemeGroupVersion)
	default:
		writeObject(w, out, http.StatusOK, list, req.gv)
	}
	return nil
}

func goVersion() string { return goruntime.Version() }

func platform() string { return goruntime.GOOS + "/" + goruntime.GOARCH }

var _ = debug.Stack
