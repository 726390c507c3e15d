package iptables

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
)

// TestInformersToKernel wires what `svcnet proxy` wires — informers on a
// (fake) API, the Proxier's bounded-frequency loop, the iptables mode and
// the real iptables-restore inside a namespace — and checks that API changes
// reach the kernel: a new Service, then an endpoint change (partial sync),
// then the Service's deletion.
func TestInformersToKernel(t *testing.T) {
	t.Parallel()
	testbed.RequireCommand(t, "iptables-restore")
	ns := testbed.NewNetNS(t, "ipt-wiring")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ex := proxy.OSExecutor{NetNS: ns.Name}
	client := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "172.18.0.2"}}}})
	prov := New(proxy.ModeConfig{Exec: ex, IPv4: true, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}, &Runner{Exec: ex})
	metrics := proxy.NewMetrics(nil)
	p := proxy.NewProxier(proxy.Config{Provider: prov, Node: proxy.NodeInfo{Name: "n1"}, MinSyncPeriod: 100 * time.Millisecond,
		SyncPeriod: time.Hour, Metrics: metrics})
	if err := proxy.StartInformers(ctx, client, p, "n1", 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; _ = prov.Cleanup(context.Background()) }()

	natHas := func(s string) func() bool {
		return func() bool { return strings.Contains(ns.MustRun("iptables-save", "-t", "nat"), s) }
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; nat table:\n%s", what, ns.MustRun("iptables-save", "-t", "nat"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}}}
	slice := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discovery.LabelServiceName: "web"},
			Annotations: map[string]string{proxy.AnnotationLastChangeTriggerTime: time.Now().Format(time.RFC3339Nano)}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.1.5"}, NodeName: ptr.To("n1"), Conditions: discovery.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.244.2.5"}, NodeName: ptr.To("n2"), Conditions: discovery.EndpointConditions{Ready: ptr.To(true)}},
		},
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("both endpoints", func() bool {
		out := ns.MustRun("iptables-save", "-t", "nat")
		return strings.Contains(out, "10.244.1.5:8080") && strings.Contains(out, "10.244.2.5:8080") && strings.Contains(out, "default/web:http cluster IP")
	})

	slice = slice.DeepCopy()
	slice.Endpoints = slice.Endpoints[1:]
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("the removed endpoint's chain to go", func() bool { return !natHas("10.244.1.5:8080")() && natHas("10.244.2.5:8080")() })

	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("the Service's rules to go", func() bool { return !natHas("default/web")() })
	if h, _ := p.Health().Healthy(); !h {
		t.Error("proxy reports unhealthy after successful syncs")
	}
}

// TestFullSyncDue: a full sync once per proxy.DefaultFullSyncPeriod, never
// periodically once the last plan was in large-cluster mode (kube-proxy
// 1.37's iptables schedule).
func TestFullSyncDue(t *testing.T) {
	p := New(proxy.ModeConfig{IPv4: true}, nil)
	if p.FullSyncDue(59*time.Minute, 30*time.Second) || !p.FullSyncDue(61*time.Minute, 30*time.Second) {
		t.Error("small cluster: want a full sync after an hour, not before")
	}
	p.LastPlan[false] = &Plan{LargeClusterMode: true}
	if p.FullSyncDue(5*time.Hour, 30*time.Second) {
		t.Error("large cluster: periodic full sync scheduled")
	}
}
