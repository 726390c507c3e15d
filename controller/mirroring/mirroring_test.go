package mirroring

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func dump(slices []discoveryv1.EndpointSlice) string {
	var lines []string
	for _, s := range slices {
		var ports, eps []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d/%s", *p.Name, *p.Port, *p.Protocol))
		}
		for _, e := range s.Endpoints {
			eps = append(eps, fmt.Sprintf("%s:r=%t", strings.Join(e.Addresses, ","), *e.Conditions.Ready))
		}
		sort.Strings(eps)
		owner := ""
		if len(s.OwnerReferences) == 1 {
			owner = s.OwnerReferences[0].Kind + "/" + s.OwnerReferences[0].Name
		}
		lines = append(lines, fmt.Sprintf("%s %s by=%s owner=%s ports=[%s] eps=[%s]", s.AddressType, s.Labels[discoveryv1.LabelServiceName],
			s.Labels[discoveryv1.LabelManagedBy], owner, strings.Join(ports, ","), strings.Join(eps, " ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestMirroringStates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	n := 0
	client.PrependReactor("create", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
		if s.Name == "" {
			n++
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, n)
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, nil, nil)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 1); close(done) }()
	defer func() { cancel(); <-done; factory.Shutdown() }()

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc-no-selector", Namespace: "default"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-no-selector", Namespace: "default", Labels: map[string]string{"k": "v"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "47.93.22.98"}},
			Ports:     []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		}},
	}
	slices := func() string {
		l, _ := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{})
		return dump(l.Items)
	}
	expect := func(step, want string) {
		t.Helper()
		var got string
		for i := 0; i < 300; i++ {
			if got = slices(); got == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("step %q:\n got: %s\nwant: %s", step, got, want)
	}
	mustNil := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustNil(client.CoreV1().Endpoints("default").Create(ctx, ep, metav1.CreateOptions{}))
	expect("endpoints without a service are not mirrored", "")
	mustNil(client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}))
	by := " by=" + ControllerName + " owner=Endpoints/svc-no-selector"
	expect("service appears", "IPv4 svc-no-selector"+by+" ports=[:80/TCP] eps=[47.93.22.98:r=true]")

	ep2 := ep.DeepCopy()
	ep2.Subsets[0].NotReadyAddresses = []corev1.EndpointAddress{{IP: "47.93.22.99"}, {IP: "not-an-ip"}}
	ep2.Subsets = append(ep2.Subsets, corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "2001:db8::1"}},
		Ports: []corev1.EndpointPort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}})
	mustNil(client.CoreV1().Endpoints("default").Update(ctx, ep2, metav1.UpdateOptions{}))
	expect("second subset, IPv6 and not-ready", "IPv4 svc-no-selector"+by+" ports=[:80/TCP] eps=[47.93.22.98:r=true 47.93.22.99:r=false]\n"+
		"IPv6 svc-no-selector"+by+" ports=[https:443/TCP] eps=[2001:db8::1:r=true]")

	ep3 := ep.DeepCopy()
	ep3.Labels[discoveryv1.LabelSkipMirror] = "true"
	mustNil(client.CoreV1().Endpoints("default").Update(ctx, ep3, metav1.UpdateOptions{}))
	expect("skip-mirror removes the slices", "")

	mustNil(client.CoreV1().Endpoints("default").Update(ctx, ep, metav1.UpdateOptions{}))
	expect("mirrored again", "IPv4 svc-no-selector"+by+" ports=[:80/TCP] eps=[47.93.22.98:r=true]")
	s2 := svc.DeepCopy()
	s2.Spec.Selector = map[string]string{"app": "x"}
	mustNil(client.CoreV1().Services("default").Update(ctx, s2, metav1.UpdateOptions{}))
	expect("service gains a selector: mirror removed", "")
	mustNil(client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}))
	expect("selector removed again", "IPv4 svc-no-selector"+by+" ports=[:80/TCP] eps=[47.93.22.98:r=true]")
	if err := client.CoreV1().Endpoints("default").Delete(ctx, "svc-no-selector", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("endpoints deleted", "")
}
