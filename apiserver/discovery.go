package apiserver

import (
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/apiserver/openapi"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	mainVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	subVerbs  = metav1.Verbs{"get", "patch", "update"}
)

func (s *Server) serverAddresses() []metav1.ServerAddressByClientCIDR {
	port := "6443"
	if _, p, err := net.SplitHostPort(s.url[len("https://"):]); err == nil {
		port = p
	}
	return []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: net.JoinHostPort(s.cfg.AdvertiseAddress, port)}}
}

func discoveryOut(r *http.Request) output {
	info, _ := serializerFor("application/json")
	return output{info: info}
}

func (s *Server) serveAPIVersions(w http.ResponseWriter, r *http.Request) {
	writeObject(w, discoveryOut(r), http.StatusOK, &metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: []string{"v1"}, ServerAddressByClientCIDRs: s.serverAddresses(),
	}, schema.GroupVersion{Version: "v1"})
}

// groups returns the served API groups (not the core group) in order.
func (s *Server) groups() []metav1.APIGroup {
	var out []metav1.APIGroup
	seen := map[string]int{}
	gvs := []schema.GroupVersion{}
	for _, st := range s.order {
		gvs = append(gvs, st.Info.GVR.GroupVersion())
	}
	gvs = append(gvs, authenticationv1.SchemeGroupVersion, authorizationv1.SchemeGroupVersion)
	for _, gv := range gvs {
		if gv.Group == "" {
			continue
		}
		gvd := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		if i, ok := seen[gv.Group]; ok {
			found := false
			for _, v := range out[i].Versions {
				found = found || v == gvd
			}
			if !found {
				out[i].Versions = append(out[i].Versions, gvd)
			}
			continue
		}
		seen[gv.Group] = len(out)
		out = append(out, metav1.APIGroup{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
			Name:     gv.Group, Versions: []metav1.GroupVersionForDiscovery{gvd}, PreferredVersion: gvd,
		})
	}
	return out
}

func (s *Server) serveAPIGroupList(w http.ResponseWriter, r *http.Request) {
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, g := range s.groups() {
		g.TypeMeta = metav1.TypeMeta{}
		list.Groups = append(list.Groups, g)
	}
	writeObject(w, discoveryOut(r), http.StatusOK, list, schema.GroupVersion{Version: "v1"})
}

func (s *Server) serveAPIGroup(w http.ResponseWriter, r *http.Request, group string) {
	for _, g := range s.groups() {
		if g.Name == group {
			writeObject(w, discoveryOut(r), http.StatusOK, &g, schema.GroupVersion{Version: "v1"})
			return
		}
	}
	writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
}

func (s *Server) serveResourceList(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion) {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, st := range s.order {
		info := st.Info
		if info.GVR.GroupVersion() != gv {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: info.GVR.Resource, SingularName: info.Singular, Namespaced: info.Namespaced, Kind: info.Kind,
			Verbs: mainVerbs, ShortNames: info.ShortNames, Categories: info.Categories,
			StorageVersionHash: storageVersionHash(gv, info.Kind),
		})
		if info.Status {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: info.GVR.Resource + "/status", Namespaced: info.Namespaced, Kind: info.Kind, Verbs: subVerbs})
		}
		if st.HasSubresource("finalize") {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: info.GVR.Resource + "/finalize", Namespaced: info.Namespaced, Kind: info.Kind, Verbs: metav1.Verbs{"update"}})
		}
		if info.GroupResource() == podsGR {
			list.APIResources = append(list.APIResources,
				metav1.APIResource{Name: "pods/attach", Namespaced: true, Kind: "PodAttachOptions", Verbs: metav1.Verbs{"create", "get"}},
				metav1.APIResource{Name: "pods/binding", Namespaced: true, Kind: "Binding", Verbs: metav1.Verbs{"create"}},
				metav1.APIResource{Name: "pods/exec", Namespaced: true, Kind: "PodExecOptions", Verbs: metav1.Verbs{"create", "get"}},
				metav1.APIResource{Name: "pods/log", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get"}},
				metav1.APIResource{Name: "pods/portforward", Namespaced: true, Kind: "PodPortForwardOptions", Verbs: metav1.Verbs{"create", "get"}})
		}
		if info.GroupResource() == serviceAccountsGR {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: "serviceaccounts/token", Group: "authentication.k8s.io", Version: "v1", Namespaced: true, Kind: "TokenRequest", Verbs: metav1.Verbs{"create"}})
		}
		if info.Scale {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: info.GVR.Resource + "/scale", Group: "autoscaling", Version: "v1", Namespaced: info.Namespaced, Kind: "Scale", Verbs: subVerbs})
		}
	}
	list.APIResources = append(list.APIResources, reviewResources[gv]...)
	if len(list.APIResources) == 0 {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
		return
	}
	sort.SliceStable(list.APIResources, func(i, j int) bool { return list.APIResources[i].Name < list.APIResources[j].Name })
	writeObject(w, discoveryOut(r), http.StatusOK, list, schema.GroupVersion{Version: "v1"})
}

// storageVersionHash is a stable opaque hash of the storage version, as
// discovery clients only compare it for equality.
func storageVersionHash(gv schema.GroupVersion, kind string) string {
	var h uint64 = 1469598103934665603
	for _, c := range []byte(gv.String() + "/" + kind) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return strconv.FormatUint(h, 36)
}

// serveOpenAPI serves /openapi/v3 from apiserver/openapi and a schema-less
// /openapi/v2 (see serveOpenAPIV2).
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	s.openapiOnce.Do(func() {
		s.openapiHandler, s.openapiErr = openapi.DefaultHandler()
	})
	if s.openapiErr != nil {
		writeError(w, apierrors.NewInternalError(s.openapiErr))
		return
	}
	if r.URL.Path == "/openapi/v2" {
		serveOpenAPIV2(w, r)
		return
	}
	if r.URL.Path == "/openapi/v3" || strings.HasPrefix(r.URL.Path, "/openapi/v3/") {
		s.openapiHandler.ServeHTTP(w, r)
		return
	}
	writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
}
