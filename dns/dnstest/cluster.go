package dnstest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// Namespace is a Namespace object.
func Namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// Svc is a ClusterIP (or, with "None", headless) Service.
func Svc(ns, name string, ips []string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: ips, Ports: ports}}
	if len(ips) > 0 {
		s.Spec.ClusterIP = ips[0]
	}
	return s
}

// ExternalSvc is an ExternalName Service.
func ExternalSvc(ns, name, target string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: target}}
}

// Port is a Service port.
func Port(name string, proto corev1.Protocol, p int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: p}
}

// EP is an endpoint of Slice: IP, hostname (or ""), ready.
type EP struct {
	IP    string
	Host  string
	Ready bool
}

// Slice is an EndpointSlice of service.
func Slice(ns, name, service string, fam discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...EP) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: fam, Ports: ports,
	}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.IP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(e.Ready)}}
		if e.Host != "" {
			x.Hostname = ptr(e.Host)
		}
		es.Endpoints = append(es.Endpoints, x)
	}
	return es
}

// SlicePort is an EndpointSlice port.
func SlicePort(name string, proto corev1.Protocol, p int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr(name), Protocol: ptr(proto), Port: ptr(p)}
}

// Cluster is the fixed cluster state DNS tests answer from: the seeds'
// myapp (10.96.3.215, port http 38080), headless, ExternalName, dual-stack and
// kube-dns Services, with EndpointSlices mixing ready and not-ready endpoints.
func Cluster() []runtime.Object {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	v4, v6 := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	return []runtime.Object{
		Namespace("default"), Namespace("kube-system"), Namespace("prod"), Namespace("empty"),
		Svc("default", "myapp", []string{"10.96.3.215"}, Port("http", tcp, 38080)),
		Slice("default", "myapp-abc", "myapp", v4, []discoveryv1.EndpointPort{SlicePort("http", tcp, 8080)},
			EP{"10.244.1.5", "", true}, EP{"10.244.2.6", "", true}, EP{"10.244.3.7", "", false}),
		Svc("default", "multi", []string{"10.96.0.20"}, Port("http", tcp, 80), Port("dns", udp, 53), Port("", tcp, 9000)),
		Svc("default", "dual", []string{"10.96.0.30", "fd00:10:96::30"}, Port("http", tcp, 80)),
		Svc("default", "web", []string{"None"}, Port("http", tcp, 80)),
		Slice("default", "web-v4", "web", v4, []discoveryv1.EndpointPort{SlicePort("http", tcp, 80)},
			EP{"10.244.1.10", "web-0", true}, EP{"10.244.2.11", "", true}, EP{"10.244.3.12", "web-2", false}),
		Slice("default", "web-v6", "web", v6, []discoveryv1.EndpointPort{SlicePort("http", tcp, 80)},
			EP{"fd00:10:244::10", "web-0", true}),
		Svc("default", "nope", []string{"None"}, Port("http", tcp, 80)),
		Slice("default", "nope-1", "nope", v4, []discoveryv1.EndpointPort{SlicePort("http", tcp, 80)}, EP{"10.244.9.9", "", false}),
		Svc("default", "noports", []string{"None"}),
		Slice("default", "noports-1", "noports", v4, nil, EP{"10.244.8.8", "", true}),
		ExternalSvc("default", "svc-external-name", "www.example.com"),
		ExternalSvc("default", "alias", "api-service.prod.svc.cluster.local"),
		ExternalSvc("default", "dangling", "missing.prod.svc.cluster.local"),
		ExternalSvc("default", "ipext", "1.2.3.4"),
		Svc("prod", "api-service", []string{"10.96.5.5"}, Port("http", tcp, 8080)),
		Svc("kube-system", "kube-dns", []string{"10.96.0.10"}, Port("dns", udp, 53), Port("dns-tcp", tcp, 53), Port("metrics", tcp, 9153)),
		// The DNS server's own pod: tests give the server 10.244.0.53 as its
		// local address, so that NS answers name kube-dns.
		Slice("kube-system", "kube-dns-1", "kube-dns", v4, []discoveryv1.EndpointPort{SlicePort("dns", udp, 53)}, EP{"10.244.0.53", "", true}),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-a"}, Status: corev1.PodStatus{PodIP: "10.244.1.5", PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-dual"},
			Status: corev1.PodStatus{PodIP: "10.244.9.9", PodIPs: []corev1.PodIP{{IP: "10.244.9.9"}, {IP: "fd00:10:244::9"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-leaving", DeletionTimestamp: &metav1.Time{Time: time.Unix(1700000000, 0)}},
			Status: corev1.PodStatus{PodIP: "10.244.9.10", PodIPs: []corev1.PodIP{{IP: "10.244.9.10"}}}},
	}
}
