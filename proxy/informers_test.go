package proxy

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/proxy/lb"
)

// A Service and a slice using every field the proxy's policy reads, plus
// the metadata real API objects carry.
func richObjects() (*v1.Service, *discovery.EndpointSlice) {
	meta := func(name string, ann, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "shop", Name: name, ResourceVersion: "42", UID: "u-" + types.UID(name),
			Annotations: ann, Labels: labels,
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Service", Name: "web", UID: "u-web"}}}
	}
	svc := &v1.Service{
		ObjectMeta: meta("web", map[string]string{AnnotationIPVSScheduler: "wrr", "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			map[string]string{"app": "web", "helm.sh/chart": "web-1.0"}),
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10", "fd00::10"},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, Selector: map[string]string{"app": "web"},
			Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web"), NodePort: 30080, AppProtocol: ptr.To("http")},
				{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353), NodePort: 30053},
			},
			ExternalIPs: []string{"192.0.2.7"}, LoadBalancerSourceRanges: []string{"198.51.100.0/24", " 203.0.113.0/24 "},
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: 31000,
			InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal),
			SessionAffinity:       v1.ServiceAffinityClientIP,
			SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(300))}},
		},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{
			{IP: "192.0.2.100"}, {IP: "192.0.2.101", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)}, {Hostname: "lb.example"}}}},
	}
	slice := &discovery.EndpointSlice{
		ObjectMeta: meta("web-abc", map[string]string{AnnotationLastChangeTriggerTime: time.Now().Format(time.RFC3339Nano),
			lb.EndpointWeightsAnnotation: "10.244.1.2=3,10.244.2.2=0", "other": "x"},
			map[string]string{discovery.LabelServiceName: "web", discovery.LabelManagedBy: "endpointslice-controller.k8s.io"}),
		AddressType: discovery.AddressTypeIPv4,
		Ports: []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(int32(8080))},
			{Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To(int32(5353))}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.1.2"}, NodeName: ptr.To("node-1"), Zone: ptr.To("z1"), Hostname: ptr.To("web-0"),
				Conditions: discovery.EndpointConditions{Ready: ptr.To(true)},
				Hints:      &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "z1"}}, ForNodes: []discovery.ForNode{{Name: "node-1"}}},
				TargetRef:  &v1.ObjectReference{Kind: "Pod", Name: "web-0", Namespace: "shop"}},
			{Addresses: []string{"10.244.2.2"}, NodeName: ptr.To("node-2"), Zone: ptr.To("z2"),
				Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)},
				TargetRef:  &v1.ObjectReference{Kind: "Pod", Name: "web-1", Namespace: "shop"}},
			{Addresses: []string{"10.244.2.3"}, NodeName: ptr.To("node-2"), Zone: ptr.To("z2"),
				Conditions:         discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(false)},
				DeprecatedTopology: map[string]string{"kubernetes.io/hostname": "node-2"}},
		},
	}
	return svc, slice
}

// SlimObject keeps everything the policy reads: the ServicePorts and the
// endpoints built from a slimmed Service and slice equal those built from
// the originals, and the trigger time survives; what it strips is gone.
func TestSlimObjectKeepsWhatThePolicyReads(t *testing.T) {
	svc, slice := richObjects()
	// A trigger time after the trackers below start (they ignore earlier
	// ones).
	slice.Annotations[AnnotationLastChangeTriggerTime] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	slimSvcAny, err := SlimObject(svc.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slimSliceAny, _ := SlimObject(slice.DeepCopy())
	slimSvc, slimSlice := slimSvcAny.(*v1.Service), slimSliceAny.(*discovery.EndpointSlice)

	if want, got := NewServicePorts(svc), NewServicePorts(slimSvc); len(want) != 2 || !reflect.DeepEqual(want, got) {
		t.Errorf("ServicePorts differ after SlimObject:\nwant %+v\ngot  %+v", want, got)
	}
	build := func(s *discovery.EndpointSlice) (EndpointsMap, EndpointsUpdateResult) {
		tr := NewEndpointsChangeTracker("node-1")
		if !tr.EndpointSliceUpdate(s, false) {
			t.Fatal("slice not tracked")
		}
		m := EndpointsMap{}
		return m, tr.Apply(m)
	}
	wantEps, wantRes := build(slice)
	gotEps, gotRes := build(slimSlice)
	if len(wantEps) != 2 || !reflect.DeepEqual(wantEps, gotEps) {
		t.Errorf("endpoints differ after SlimObject:\nwant %v\ngot  %v", wantEps, gotEps)
	}
	if !reflect.DeepEqual(wantRes.LastChangeTriggerTimes, gotRes.LastChangeTriggerTimes) || len(gotRes.LastChangeTriggerTimes[0]) != 1 {
		t.Errorf("trigger times: want %v, got %v", wantRes.LastChangeTriggerTimes, gotRes.LastChangeTriggerTimes)
	}

	if slimSvc.ManagedFields != nil || slimSvc.OwnerReferences != nil || slimSvc.Spec.Selector != nil ||
		!reflect.DeepEqual(slimSvc.Annotations, map[string]string{AnnotationIPVSScheduler: "wrr"}) || slimSvc.Labels != nil {
		t.Errorf("Service not slimmed: %+v", slimSvc.ObjectMeta)
	}
	if slimSlice.ManagedFields != nil || len(slimSlice.Annotations) != 2 ||
		!reflect.DeepEqual(slimSlice.Labels, map[string]string{discovery.LabelServiceName: "web"}) {
		t.Errorf("slice not slimmed: %+v", slimSlice.ObjectMeta)
	}
	for _, e := range slimSlice.Endpoints {
		if e.TargetRef != nil || e.Hostname != nil || e.DeprecatedTopology != nil {
			t.Errorf("endpoint not slimmed: %+v", e)
		}
	}
	if slimSvc.Name != "web" || slimSvc.ResourceVersion != "42" || slimSvc.UID != "u-web" {
		t.Errorf("identity lost: %+v", slimSvc.ObjectMeta)
	}
	// Objects of other types pass unchanged.
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{"a": "b"}}}
	if out, err := SlimObject(cm); err != nil || !reflect.DeepEqual(out, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{"a": "b"}}}) {
		t.Errorf("ConfigMap changed: %v %v", out, err)
	}
}
