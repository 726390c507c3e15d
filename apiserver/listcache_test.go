package apiserver_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestListCacheUnchangedByReaders: whole LISTs, in every output form, and the
// initial events of a watch are answered from the API server's list cache,
// whose objects every reader shares. Afterwards a whole LIST (the cache) must
// still equal one at its exact revision (read from etcd) item for item, and a
// LIST right after a write must show it.
func TestListCacheUnchangedByReaders(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	for i := range 5 {
		p := testPod(fmt.Sprintf("p%d", i))
		p.Annotations = map[string]string{"a": "b"}
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Labels: map[string]string{"app": "web"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Read your write: the cache waits for etcd's current revision.
		l, err := c.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != i+2 { // and the "kubernetes" Service
			t.Fatalf("LIST after creating s%d: %d items, %v", i, len(l.Items), err)
		}
	}
	hc := rawClient(t, srv.Config, true)
	get := func(path, accept string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.Config.Host+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s as %s: %d %s", path, accept, resp.StatusCode, body)
		}
	}
	for _, res := range []string{"/api/v1/pods", "/api/v1/namespaces/default/services", "/api/v1/services?labelSelector=app%3Dweb"} {
		for _, accept := range []string{
			"application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
			"application/json;as=Table;v=v1;g=meta.k8s.io",
			"application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
			"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
		} {
			get(res, accept)
		}
	}
	// Each watch lasts its one-second timeout.
	for _, accept := range []string{"application/json", "application/json;as=Table;v=v1;g=meta.k8s.io", "application/vnd.kubernetes.protobuf"} {
		get("/api/v1/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1", accept)
	}
	for _, r := range []struct {
		name string
		list func(metav1.ListOptions) (any, int, string, error)
		want int
	}{
		{"pods", func(o metav1.ListOptions) (any, int, string, error) {
			l, err := c.CoreV1().Pods("").List(ctx, o)
			if err != nil {
				return nil, 0, "", err
			}
			return l.Items, len(l.Items), l.ResourceVersion, nil
		}, 5},
		{"services", func(o metav1.ListOptions) (any, int, string, error) {
			l, err := c.CoreV1().Services("").List(ctx, o)
			if err != nil {
				return nil, 0, "", err
			}
			return l.Items, len(l.Items), l.ResourceVersion, nil
		}, 6},
	} {
		whole, n, rv, err := r.list(metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// An exact-revision LIST reads etcd.
		exact, _, _, err := r.list(metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if err != nil {
			t.Fatal(err)
		}
		if n != r.want || !apiequality.Semantic.DeepEqual(whole, exact) {
			t.Errorf("%s: the cached LIST differs from etcd's:\n%v\n%v", r.name, whole, exact)
		}
	}
}
