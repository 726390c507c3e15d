package apiserver_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	metallbv1beta2 "github.com/svcnet/svcnet/apis/metallb/v1beta2"
	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestMetalLBBGPKinds drives BGPPeer, BGPAdvertisement, Community and the
// status kinds through client-go: discovery, schema defaults, MetalLB's
// webhook denials (with nothing stored), and the status subresource.
func TestMetalLBBGPKinds(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	dc := dynamic.NewForConfigOrDie(srv.Config)
	const ns = "metallb-system"
	if _, err := kubernetes.NewForConfigOrDie(srv.Config).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	disc := discovery.NewDiscoveryClientForConfigOrDie(srv.Config)
	groups, err := disc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.Name == "metallb.io" && (g.PreferredVersion.Version != "v1beta2" || len(g.Versions) != 2) {
			t.Errorf("metallb.io discovery: %+v", g)
		}
	}
	rl, err := disc.ServerResourcesForGroupVersion("metallb.io/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rl.APIResources {
		names = append(names, r.Name)
	}
	for _, want := range []string{"ipaddresspools", "l2advertisements", "bgpadvertisements", "communities", "servicel2statuses", "servicel2statuses/status", "servicebgpstatuses"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("metallb.io/v1beta1 lacks %s: %v", want, names)
		}
	}

	peers := dc.Resource(metallbv1beta2.BGPPeersResource).Namespace(ns)
	const peerPrefix = `admission webhook "bgppeersvalidationwebhook.metallb.io" denied the request: `
	for _, tc := range []struct {
		name, yaml string
		code       int32
		msg        string
	}{
		{"zero ASN", "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: bad}\nspec: {myASN: 0, peerASN: 64513, peerAddress: 172.18.0.100}",
			403, peerPrefix + "parsing peer bad missing local ASN"},
		{"ASN too large", "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: bad}\nspec: {myASN: 4294967296, peerASN: 64513, peerAddress: 172.18.0.100}",
			422, `BGPPeer.metallb.io "bad" is invalid: spec.myASN: Invalid value: 4294967296: spec.myASN in body should be less than or equal to 4294967295`},
		{"ASN not a number", "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: bad}\nspec: {myASN: \"64512\", peerASN: 64513, peerAddress: 172.18.0.100}",
			422, `BGPPeer.metallb.io "bad" is invalid: spec.myASN: Invalid value: "string": spec.myASN in body must be of type integer: "string"`},
		{"bad address", "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: bad}\nspec: {myASN: 64512, peerASN: 64513, peerAddress: router}",
			403, peerPrefix + `parsing peer bad invalid BGPPeer address "router"`},
	} {
		_, err := peers.Create(ctx, obj(t, tc.yaml), metav1.CreateOptions{})
		st, ok := err.(apierrors.APIStatus)
		if !ok || st.Status().Code != tc.code || st.Status().Message != tc.msg {
			t.Errorf("%s: %v, want %d %s", tc.name, err, tc.code, tc.msg)
		}
	}
	if l, err := peers.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("denied peers stored: %v %v", l, err)
	}
	got, err := peers.Create(ctx, obj(t, `
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata:
  name: router
spec:
  myASN: 64512
  peerASN: 64513
  peerAddress: 172.18.0.100
  holdTime: 9s
  password: secret
  ebgpMultiHop: true
`), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if port, _, _ := unstructured.NestedInt64(got.Object, "spec", "peerPort"); port != 179 {
		t.Errorf("peerPort default: %v", got.Object["spec"])
	}
	// An update is checked too.
	got.Object["spec"].(map[string]any)["holdTime"] = "1s"
	if _, err := peers.Update(ctx, got, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), `parsing peer router invalid BGPPeer timers: invalid hold time "1s": must be 0 or >=3s`) {
		t.Errorf("update to a bad hold time: %v", err)
	}

	comms := dc.Resource(metallbv1beta1.CommunitiesResource).Namespace(ns)
	if _, err := comms.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: Community\nmetadata: {name: c1}\nspec: {communities: [{name: no-advertise, value: '65535:65282'}]}"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = comms.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: Community\nmetadata: {name: c2}\nspec: {communities: [{name: no-advertise, value: '65535:65281'}]}"), metav1.CreateOptions{})
	if err == nil || err.Error() != `admission webhook "communityvalidationwebhook.metallb.io" denied the request: duplicate definition of community "no-advertise"` {
		t.Errorf("duplicate alias: %v", err)
	}

	pools := dc.Resource(metallbv1beta1.IPAddressPoolsResource).Namespace(ns)
	if _, err := pools.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: first-pool}\nspec: {addresses: [192.168.4.10-192.168.4.20]}"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	advs := dc.Resource(metallbv1beta1.BGPAdvertisementsResource).Namespace(ns)
	_, err = advs.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: a}\nspec: {ipAddressPools: [first-pool], aggregationLength: 24}"), metav1.CreateOptions{})
	if err == nil || err.Error() != `admission webhook "bgpadvertisementvalidationwebhook.metallb.io" denied the request: invalid aggregation length 24: prefix 30 in this pool is more specific than the aggregation length for addresses 192.168.4.10-192.168.4.20` {
		t.Errorf("aggregation: %v", err)
	}
	_, err = advs.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: a}\nspec: {aggregationLength: 0}"), metav1.CreateOptions{})
	if err == nil || err.Error() != `BGPAdvertisement.metallb.io "a" is invalid: spec.aggregationLength: Invalid value: 0: spec.aggregationLength in body should be greater than or equal to 1` {
		t.Errorf("aggregation 0: %v", err)
	}
	got, err = advs.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: a}\nspec: {ipAddressPools: [first-pool], communities: [no-advertise], localPref: 50}"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l, _, _ := unstructured.NestedInt64(got.Object, "spec", "aggregationLength"); l != 32 {
		t.Errorf("aggregationLength default: %v", got.Object["spec"])
	}

	l2ads := dc.Resource(metallbv1beta1.L2AdvertisementsResource).Namespace(ns)
	_, err = l2ads.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l2}\nspec: {ipAddressPools: [first-pool, first-pool]}"), metav1.CreateOptions{})
	if err == nil || err.Error() != `admission webhook "l2advertisementvalidationwebhook.metallb.io" denied the request: duplicate definition of ipAddressPools "first-pool"` {
		t.Errorf("duplicate pool in L2Advertisement: %v", err)
	}
	// The seed's L2Advertisement, verbatim.
	if _, err := l2ads.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata:\n  name: example-advertisement\n  namespace: metallb-system\nspec:\n  ipAddressPools:\n    - first-pool\n"), metav1.CreateOptions{}); err != nil {
		t.Errorf("seed L2Advertisement: %v", err)
	}
	// serviceSelectors and preferredNodeSelectors (MetalLB 0.16.2): the
	// schema refuses a weight outside 1-100 (422), the webhook a selector
	// that does not parse (403); nothing is stored.
	const l2Prefix = `admission webhook "l2advertisementvalidationwebhook.metallb.io" denied the request: `
	for _, tc := range []struct {
		name, yaml string
		code       int32
		msg        string
	}{
		{"weight 0", "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: bad}\nspec: {preferredNodeSelectors: [{weight: 0, preference: {matchLabels: {zone: a}}}]}",
			422, `L2Advertisement.metallb.io "bad" is invalid: spec.preferredNodeSelectors[0].weight: Invalid value: 0: spec.preferredNodeSelectors[0].weight in body should be greater than or equal to 1`},
		{"weight 101", "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: bad}\nspec: {preferredNodeSelectors: [{weight: 101, preference: {}}]}",
			422, `L2Advertisement.metallb.io "bad" is invalid: spec.preferredNodeSelectors[0].weight: Invalid value: 101: spec.preferredNodeSelectors[0].weight in body should be less than or equal to 100`},
		{"no preference", "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: bad}\nspec: {preferredNodeSelectors: [{weight: 10}]}",
			422, `L2Advertisement.metallb.io "bad" is invalid: spec.preferredNodeSelectors[0].preference: Required value`},
		{"bad preference", "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: bad}\nspec: {preferredNodeSelectors: [{weight: 10, preference: {matchExpressions: [{key: zone, operator: Near, values: [a]}]}}]}",
			403, l2Prefix + "\"Near\" is not a valid label selector operator\ninvalid preferred node selector {map[] [{zone Near [a]}]}\nfailed to parse preferred node selectors for bad"},
		{"bad service selector", "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: bad}\nspec: {serviceSelectors: [{matchExpressions: [{key: app, operator: In}]}]}",
			403, l2Prefix + "invalid service selector {map[] [{app In []}]}: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty\nfailed to parse service selector for bad"},
		{"duplicate service selector", "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: bad}\nspec: {serviceSelectors: [{matchLabels: {app: web}}, {matchLabels: {app: web}}]}",
			403, l2Prefix + `duplicate definition of serviceSelectors {map["app":"web"] []}`},
	} {
		_, err := l2ads.Create(ctx, obj(t, tc.yaml), metav1.CreateOptions{})
		st, ok := err.(apierrors.APIStatus)
		if !ok || st.Status().Code != tc.code || st.Status().Message != tc.msg {
			t.Errorf("L2Advertisement %s: %v, want %d %s", tc.name, err, tc.code, tc.msg)
		}
	}
	if _, err := l2ads.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused L2Advertisement was stored: %v", err)
	}
	prefer, err := l2ads.Create(ctx, obj(t, `
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: prefer-a
spec:
  ipAddressPools: [first-pool]
  serviceSelectors:
  - matchLabels: {app: web}
  preferredNodeSelectors:
  - weight: 100
    preference:
      matchLabels: {kubernetes.io/hostname: node-a}
`), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w, _, _ := unstructured.NestedSlice(prefer.Object, "spec", "preferredNodeSelectors"); len(w) != 1 {
		t.Errorf("preferredNodeSelectors not stored: %v", prefer.Object["spec"])
	}
	// An update is checked by the schema too.
	_ = unstructured.SetNestedSlice(prefer.Object, []any{map[string]any{"weight": int64(-3), "preference": map[string]any{}}}, "spec", "preferredNodeSelectors")
	if _, err := l2ads.Update(ctx, prefer, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.preferredNodeSelectors[0].weight in body should be greater than or equal to 1") {
		t.Errorf("update to weight -3: %v", err)
	}

	// Status kinds: create drops status, /status sets it, the node is
	// immutable once set.
	l2 := dc.Resource(metallbv1beta1.ServiceL2StatusesResource).Namespace(ns)
	st, err := l2.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: ServiceL2Status\nmetadata: {generateName: l2-, labels: {metallb.io/node: n1}}\nstatus: {node: n1}"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Object["status"]; ok || !strings.HasPrefix(st.GetName(), "l2-") {
		t.Errorf("create: %v", st.Object)
	}
	_ = unstructured.SetNestedField(st.Object, "n1", "status", "node")
	_ = unstructured.SetNestedField(st.Object, "web", "status", "serviceName")
	_ = unstructured.SetNestedField(st.Object, "default", "status", "serviceNamespace")
	_ = unstructured.SetNestedSlice(st.Object, []any{map[string]any{"name": "eth0"}}, "status", "interfaces")
	st, err = l2.UpdateStatus(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedString(st.Object, "status", "node"); n != "n1" {
		t.Errorf("status update: %v", st.Object)
	}
	_ = unstructured.SetNestedField(st.Object, "n2", "status", "node")
	if _, err := l2.UpdateStatus(ctx, st, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "status.node: Invalid value: \"n2\": Value is immutable") {
		t.Errorf("node change: %v", err)
	}
}
