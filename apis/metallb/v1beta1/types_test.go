package v1beta1

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The seed's MetalLB manifest, verbatim.
const seedPool = `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: first-pool
  namespace: metallb-system
spec:
  addresses:
    - 192.168.4.10-192.168.4.20
`

const seedL2 = `
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: example-advertisement
  namespace: metallb-system
spec:
  ipAddressPools:
    - first-pool
`

func TestSeedManifestsRoundTrip(t *testing.T) {
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(seedPool), &u.Object); err != nil {
		t.Fatal(err)
	}
	var p IPAddressPool
	if err := FromUnstructured(&u, &p); err != nil {
		t.Fatal(err)
	}
	if p.Name != "first-pool" || !reflect.DeepEqual(p.Spec.Addresses, []string{"192.168.4.10-192.168.4.20"}) || p.Spec.AutoAssign != nil {
		t.Errorf("pool = %+v", p)
	}
	var l unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(seedL2), &l.Object); err != nil {
		t.Fatal(err)
	}
	var a L2Advertisement
	if err := FromUnstructured(&l, &a); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Spec.IPAddressPools, []string{"first-pool"}) {
		t.Errorf("l2 = %+v", a)
	}
	back, err := ToUnstructured(&p, "IPAddressPool")
	if err != nil || back.GetKind() != "IPAddressPool" || back.GetAPIVersion() != "metallb.io/v1beta1" {
		t.Errorf("to unstructured: %v %v", back, err)
	}
}

func TestSchemeAndDeepCopy(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"IPAddressPool", "IPAddressPoolList", "L2Advertisement", "L2AdvertisementList"} {
		if !s.Recognizes(SchemeGroupVersion.WithKind(k)) {
			t.Errorf("scheme does not know %s", k)
		}
	}
	yes := true
	p := &IPAddressPool{Spec: IPAddressPoolSpec{Addresses: []string{"10.0.0.0/24"}, AutoAssign: &yes, AllocateTo: &ServiceAllocation{Namespaces: []string{"a"}}}}
	c := p.DeepCopy()
	*c.Spec.AutoAssign = false
	c.Spec.Addresses[0] = "x"
	c.Spec.AllocateTo.Namespaces[0] = "b"
	if !*p.Spec.AutoAssign || p.Spec.Addresses[0] != "10.0.0.0/24" || p.Spec.AllocateTo.Namespaces[0] != "a" {
		t.Error("DeepCopy shares memory with the original")
	}
}

// Every list kind copies its items deeply (selectors, pointers, slices), and
// nil copies to nil.
func TestListDeepCopy(t *testing.T) {
	seven := int32(7)
	l := &BGPAdvertisementList{Items: []BGPAdvertisement{{Spec: BGPAdvertisementSpec{AggregationLength: &seven,
		Peers: []string{"p"}, NodeSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}}}}}
	c := l.DeepCopyObject().(*BGPAdvertisementList)
	*c.Items[0].Spec.AggregationLength = 1
	c.Items[0].Spec.Peers[0] = "x"
	c.Items[0].Spec.NodeSelectors[0].MatchLabels["a"] = "x"
	if got := l.Items[0].Spec; *got.AggregationLength != 7 || got.Peers[0] != "p" || got.NodeSelectors[0].MatchLabels["a"] != "b" {
		t.Errorf("DeepCopy shares memory with the original: %+v", got)
	}
	if !reflect.DeepEqual(l.DeepCopy().Items, l.Items) {
		t.Error("a copy differs from the original")
	}
	if (*CommunityList)(nil).DeepCopy() != nil || (*ServiceL2Status)(nil).DeepCopy() != nil {
		t.Error("nil did not copy to nil")
	}
	if c := (&ServiceBGPStatusList{}).DeepCopy(); c == nil || c.Items != nil {
		t.Errorf("an empty list copied to %+v", c)
	}
}

// An L2Advertisement with MetalLB 0.16's serviceSelectors and
// preferredNodeSelectors decodes field for field and copies deeply.
func TestL2AdvertisementSelectors(t *testing.T) {
	const y = `
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: prefer-a, namespace: metallb-system}
spec:
  serviceSelectors:
  - matchLabels: {app: web}
  preferredNodeSelectors:
  - weight: 50
    preference:
      matchExpressions: [{key: zone, operator: In, values: [a]}]
  - weight: 1
    preference: {}
`
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	var a L2Advertisement
	if err := FromUnstructured(&u, &a); err != nil {
		t.Fatal(err)
	}
	want := L2AdvertisementSpec{
		ServiceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}},
		PreferredNodeSelectors: []PreferredNodeSelector{
			{Weight: 50, Preference: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a"}}}}},
			{Weight: 1},
		},
	}
	if !reflect.DeepEqual(a.Spec, want) {
		t.Fatalf("spec %+v, want %+v", a.Spec, want)
	}
	back, err := ToUnstructured(&a, "L2Advertisement")
	if err != nil {
		t.Fatal(err)
	}
	if w, _, _ := unstructured.NestedSlice(back.Object, "spec", "preferredNodeSelectors"); len(w) != 2 || w[1].(map[string]any)["weight"] != int64(1) {
		t.Errorf("preferredNodeSelectors back: %v", w)
	}
	c := a.DeepCopy()
	c.Spec.ServiceSelectors[0].MatchLabels["app"] = "x"
	c.Spec.PreferredNodeSelectors[0].Preference.MatchExpressions[0].Values[0] = "x"
	c.Spec.PreferredNodeSelectors[1].Weight = 9
	if !reflect.DeepEqual(a.Spec, want) {
		t.Errorf("DeepCopy shares memory with the original: %+v", a.Spec)
	}
}
