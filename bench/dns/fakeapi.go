package main

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// fakeAPI is a read-only Kubernetes API serving a fixed cluster state: just
// enough (version, discovery, list, and watches that never fire) for
// client-go informers in svcnet dns and CoreDNS's kubernetes plugin. Both
// servers read the identical state from it.
type fakeAPI struct {
	lists map[string]runtime.Object // path → list
	srv   *http.Server
	addr  string
}

func newFakeAPI(namespaces []corev1.Namespace, services []corev1.Service, slices []discoveryv1.EndpointSlice, pods ...corev1.Pod) *fakeAPI {
	rv := metav1.ListMeta{ResourceVersion: "1"}
	f := &fakeAPI{lists: map[string]runtime.Object{
		"/api/v1/namespaces":                       &corev1.NamespaceList{TypeMeta: metav1.TypeMeta{Kind: "NamespaceList", APIVersion: "v1"}, ListMeta: rv, Items: namespaces},
		"/api/v1/services":                         &corev1.ServiceList{TypeMeta: metav1.TypeMeta{Kind: "ServiceList", APIVersion: "v1"}, ListMeta: rv, Items: services},
		"/apis/discovery.k8s.io/v1/endpointslices": &discoveryv1.EndpointSliceList{TypeMeta: metav1.TypeMeta{Kind: "EndpointSliceList", APIVersion: "discovery.k8s.io/v1"}, ListMeta: rv, Items: slices},
		"/api/v1/pods":                             &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: rv, Items: pods},
	}}
	return f
}

func (f *fakeAPI) start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	f.addr = ln.Addr().String()
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve)}
	go func() { _ = f.srv.Serve(ln) }()
	return nil
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	proto := strings.Contains(r.Header.Get("Accept"), "protobuf")
	switch r.URL.Path {
	case "/version":
		writeJSON(w, `{"major":"1","minor":"36","gitVersion":"v1.36.6","platform":"linux/amd64"}`)
		return
	case "/api":
		writeJSON(w, `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"`+f.addr+`"}]}`)
		return
	case "/apis":
		writeJSON(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"discovery.k8s.io","versions":[{"groupVersion":"discovery.k8s.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"discovery.k8s.io/v1","version":"v1"}}]}`)
		return
	case "/apis/discovery.k8s.io/v1":
		writeJSON(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"discovery.k8s.io/v1","resources":[{"name":"endpointslices","singularName":"endpointslice","namespaced":true,"kind":"EndpointSlice","verbs":["get","list","watch"]}]}`)
		return
	case "/api/v1":
		writeJSON(w, `{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"services","namespaced":true,"kind":"Service","verbs":["get","list","watch"]},{"name":"namespaces","namespaced":false,"kind":"Namespace","verbs":["get","list","watch"]},{"name":"pods","namespaced":true,"kind":"Pod","verbs":["get","list","watch"]}]}`)
		return
	}
	list, ok := f.lists[r.URL.Path]
	if !ok {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		if q.Get("sendInitialEvents") == "true" {
			// Not supported: client-go falls back to list + watch.
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400}`, http.StatusBadRequest)
			return
		}
		ct := "application/json"
		if proto {
			ct = "application/vnd.kubernetes.protobuf;stream=watch"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(http.StatusOK)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		<-r.Context().Done() // a quiet cluster: no events
		return
	}
	media := "application/json"
	if proto {
		media = "application/vnd.kubernetes.protobuf"
	}
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), media)
	if !ok {
		http.Error(w, "no serializer", http.StatusInternalServerError)
		return
	}
	gv := schema.GroupVersion{Version: "v1"}
	if strings.HasPrefix(r.URL.Path, "/apis/discovery.k8s.io/") {
		gv = discoveryv1.SchemeGroupVersion
	}
	b, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, gv), list)
	if err != nil {
		http.Error(w, fmt.Sprint(err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", media)
	_, _ = w.Write(b)
}

func writeJSON(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(s))
}

func (f *fakeAPI) kubeconfig() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster:
    server: http://%s
contexts:
- name: bench
  context:
    cluster: bench
    user: bench
users:
- name: bench
  user: {}
current-context: bench
`, f.addr)
}
