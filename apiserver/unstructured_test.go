package apiserver_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

func TestMetalLBResources(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	dc := dynamic.NewForConfigOrDie(srv.Config)
	pools := dc.Resource(schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}).Namespace("kube-system")
	w, err := pools.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
		"metadata": map[string]any{"name": "p"},
		"spec":     map[string]any{"addresses": []any{"172.18.255.200-172.18.255.250"}},
	}}
	got, err := pools.Create(ctx, pool, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetUID() == "" || got.GetResourceVersion() == "" || got.GetGeneration() != 1 {
		t.Errorf("server-owned metadata: %v", got.Object["metadata"])
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object.(*unstructured.Unstructured).GetName() != "p" {
			t.Errorf("watch: %s %v", ev.Type, ev.Object)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}
	got, err = pools.Patch(ctx, "p", types.MergePatchType, []byte(`{"spec":{"autoAssign":false}}`), metav1.PatchOptions{})
	if err != nil || got.GetGeneration() != 2 {
		t.Fatalf("merge patch: gen %d %v", got.GetGeneration(), err)
	}
	if _, err := pools.Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}); err == nil {
		t.Error("strategic merge patch accepted for a custom resource")
	}
	applied := []byte(`{"apiVersion":"metallb.io/v1beta1","kind":"IPAddressPool","metadata":{"name":"q","namespace":"kube-system"},"spec":{"addresses":["10.0.0.0/30"]}}`)
	if _, err := pools.Patch(ctx, "q", types.ApplyPatchType, applied, metav1.PatchOptions{FieldManager: "metallb"}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	l, err := pools.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 2 {
		t.Fatalf("list: %v %v", l, err)
	}
}
