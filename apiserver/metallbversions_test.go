package apiserver_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	metallbv1beta2 "github.com/svcnet/svcnet/apis/metallb/v1beta2"
	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestMetalLBPeerVersionsAndBFD drives what MetalLB's own controller and
// speaker need beyond svcnet's speaker: BGPPeer in v1beta1 as well as
// v1beta2 (the same stored objects, converted as MetalLB's conversion
// webhook does), BFDProfile with its schema, and ConfigurationState's status enum.
func TestMetalLBPeerVersionsAndBFD(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	dc := dynamic.NewForConfigOrDie(srv.Config)
	const ns = "metallb-system"
	if _, err := kubernetes.NewForConfigOrDie(srv.Config).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v1 := dc.Resource(metallbv1beta1.BGPPeersResource).Namespace(ns)
	v2 := dc.Resource(metallbv1beta2.BGPPeersResource).Namespace(ns)

	// Written as v1beta1, read as v1beta2: hold and keepalive times are
	// carried even when unset, the node selector becomes a label selector.
	if _, err := v1.Create(ctx, obj(t, `apiVersion: metallb.io/v1beta1
kind: BGPPeer
metadata: {name: old}
spec:
  myASN: 64512
  peerASN: 64500
  peerAddress: 172.18.0.1
  nodeSelectors:
  - matchLabels: {rack: a}
    matchExpressions: [{key: zone, operator: In, values: [z1]}]
`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := v2.Get(ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetAPIVersion() != "metallb.io/v1beta2" {
		t.Errorf("read as v1beta2: apiVersion %q", got.GetAPIVersion())
	}
	if h, _, _ := unstructured.NestedString(got.Object, "spec", "holdTime"); h != "0s" {
		t.Errorf("v1beta2 holdTime = %q, want 0s (MetalLB's conversion carries the zero value)", h)
	}
	if sels, _, _ := unstructured.NestedSlice(got.Object, "spec", "nodeSelectors"); len(sels) != 1 {
		t.Errorf("v1beta2 nodeSelectors = %v", sels)
	} else if op, _, _ := unstructured.NestedSlice(sels[0].(map[string]any), "matchExpressions"); len(op) != 1 {
		t.Errorf("v1beta2 matchExpressions = %v", op)
	}

	// Written as v1beta2 with v1beta2-only fields, read as v1beta1: those
	// are not in v1beta1; the times are always there.
	if _, err := v2.Create(ctx, obj(t, `apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: new}
spec: {myASN: 64512, peerASN: 64501, peerAddress: 172.18.0.2, connectTime: 5s}
`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old, err := v1.Get(ctx, "new", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(old.Object, "spec")
	if old.GetAPIVersion() != "metallb.io/v1beta1" || spec["connectTime"] != nil || spec["holdTime"] != "0s" || spec["peerAddress"] != "172.18.0.2" {
		t.Errorf("read as v1beta1: %s %v", old.GetAPIVersion(), spec)
	}
	list, err := v1.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("v1beta1 list: %v, %d items", err, len(list.Items))
	}
	// v1beta1's schema requires peerAddress; its webhook is v1beta2's.
	_, err = v1.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: BGPPeer\nmetadata: {name: bad}\nspec: {myASN: 64512, peerASN: 64500}"), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.peerAddress: Required value") {
		t.Errorf("v1beta1 peer without peerAddress: %v", err)
	}
	_, err = v1.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: BGPPeer\nmetadata: {name: bad}\nspec: {myASN: 64512, peerASN: 64500, peerAddress: nonsense}"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "bgppeersvalidationwebhook.metallb.io" denied the request`) {
		t.Errorf("v1beta1 peer with a bad address: %v", err)
	}

	// BFDProfile: the schema's ranges, and no deleting a profile in use.
	bfd := dc.Resource(metallbv1beta1.BFDProfilesResource).Namespace(ns)
	_, err = bfd.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: BFDProfile\nmetadata: {name: bad}\nspec: {receiveInterval: 5, detectMultiplier: 300, passiveMode: sometimes}"), metav1.CreateOptions{})
	for _, want := range []string{
		"spec.receiveInterval: Invalid value: 5: spec.receiveInterval in body should be greater than or equal to 10",
		"spec.detectMultiplier: Invalid value: 300: spec.detectMultiplier in body should be less than or equal to 255",
		`spec.passiveMode: Invalid value: "string": spec.passiveMode in body must be of type boolean: "string"`,
	} {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid BFDProfile: %v; want %q", err, want)
		}
	}
	if _, err := bfd.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: BFDProfile\nmetadata: {name: fast}\nspec: {receiveInterval: 300, transmitInterval: 300, detectMultiplier: 3, echoMode: false}"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// ConfigurationState: status.result is an enum, written through /status.
	cs := dc.Resource(metallbv1beta1.ConfigurationStatesResource).Namespace(ns)
	st, err := cs.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: ConfigurationState\nmetadata: {name: controller}"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(st.Object, "Broken", "status", "result")
	if _, err := cs.UpdateStatus(ctx, st, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `status.result: Unsupported value: "Broken"`) {
		t.Errorf("ConfigurationState with result Broken: %v", err)
	}
	_ = unstructured.SetNestedField(st.Object, "Valid", "status", "result")
	if _, err := cs.UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
		t.Errorf("ConfigurationState with result Valid: %v", err)
	}
}

// TestMetalLBDeleteOptionsInGroupVersion deletes a MetalLB object with a
// DeleteOptions body that names the resource's group version, as
// controller-runtime's client sends it (MetalLB's speaker deleting its
// ServiceBGPStatus got "no kind DeleteOptions is registered for version
// metallb.io/v1beta1").
func TestMetalLBDeleteOptionsInGroupVersion(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	const ns = "metallb-system"
	if _, err := kubernetes.NewForConfigOrDie(srv.Config).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dc := dynamic.NewForConfigOrDie(srv.Config)
	for _, c := range []struct {
		gvr      schema.GroupVersionResource
		manifest string
	}{
		{metallbv1beta1.ServiceBGPStatusesResource, "apiVersion: metallb.io/v1beta1\nkind: ServiceBGPStatus\nmetadata: {name: s}"},
		{metallbv1beta2.BGPPeersResource, "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: p}\nspec: {myASN: 64512, peerASN: 64500, peerAddress: 172.18.0.1}"},
	} {
		u := obj(t, c.manifest)
		if _, err := dc.Resource(c.gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"kind":"DeleteOptions","apiVersion":"` + c.gvr.GroupVersion().String() + `","propagationPolicy":"Background"}`)
		res := kubernetes.NewForConfigOrDie(srv.Config).CoreV1().RESTClient().Delete().
			AbsPath("/apis", c.gvr.Group, c.gvr.Version, "namespaces", ns, c.gvr.Resource, u.GetName()).
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx)
		if err := res.Error(); err != nil {
			t.Errorf("delete %s with DeleteOptions in %s: %v", c.gvr.Resource, c.gvr.GroupVersion(), err)
		}
		if _, err := dc.Resource(c.gvr).Namespace(ns).Get(ctx, u.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s still there: %v", c.gvr.Resource, err)
		}
	}
}
