package main

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/dns/dnstest"
)

// question is one query of --compare, with how it is sent.
type question struct {
	name  string
	qtype uint16
	// edns: 0 for no OPT record, else the advertised buffer size (DO set
	// when do is).
	edns  uint16
	do    bool
	noRD  bool
	tcp   bool
	label string // why it is asked (printed with a difference)
	// mod changes the query before it is sent (class, opcode, EDNS
	// version and options, header bits); raw replaces it with these bytes
	// (malformed packets), sent over UDP.
	mod func(*dns.Msg)
	raw []byte
}

// fixedQuestions are asked of both servers about dnstest.Cluster: one per
// class of name the Kubernetes DNS specification and CoreDNS's kubernetes
// plugin distinguish.
var fixedQuestions = []question{
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "MyApp.Default.SVC.Cluster.Local.", qtype: dns.TypeA},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeAAAA},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeTXT},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeMX},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeCNAME},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeSOA},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeNS},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypePTR},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeANY},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeHINFO},
	{name: "http.tcp.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http._tcp.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_HTTP._TCP.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http._udp.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_https._tcp.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http._tcp.x.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http.x.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http._tcp.a.b.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "x.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http._tcp.nosuch.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http._tcp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "multi.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_dns._udp.multi.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "dual.default.svc.cluster.local.", qtype: dns.TypeAAAA},
	{name: "_http._tcp.dual.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "web.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "web.default.svc.cluster.local.", qtype: dns.TypeAAAA},
	{name: "_http._tcp.web.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "web-0.web.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "web-0.web.default.svc.cluster.local.", qtype: dns.TypeAAAA},
	{name: "web-0.web.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "WEB-0.web.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "10-244-2-11.web.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "10-244-1-5.myapp.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "web-2.web.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "nope.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "nope.default.svc.cluster.local.", qtype: dns.TypeTXT},
	{name: "noports.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "noports.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "alias.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "alias.default.svc.cluster.local.", qtype: dns.TypeAAAA},
	{name: "alias.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "dangling.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "svc-external-name.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "svc-external-name.default.svc.cluster.local.", qtype: dns.TypeCNAME},
	{name: "svc-external-name.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http._tcp.svc-external-name.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http._tcp.svc-external-name.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "svc-external-name.default.svc.cluster.local.", qtype: dns.TypeTXT},
	{name: "svc-external-name.default.svc.cluster.local.", qtype: dns.TypeMX},
	{name: "ipext.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "ipext.default.svc.cluster.local.", qtype: dns.TypeCNAME},
	{name: "x.svc-external-name.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "215.3.96.10.in-addr.arpa.", qtype: dns.TypePTR},
	{name: "215.3.96.10.IN-ADDR.ARPA.", qtype: dns.TypePTR},
	{name: "215.3.96.10.in-addr.arpa.", qtype: dns.TypeA},
	{name: "215.3.96.10.in-addr.arpa.", qtype: dns.TypeTXT},
	{name: "215.3.96.10.in-addr.arpa.", qtype: dns.TypeSOA},
	{name: "10.1.244.10.in-addr.arpa.", qtype: dns.TypePTR},
	{name: "11.2.244.10.in-addr.arpa.", qtype: dns.TypePTR},
	{name: "12.3.244.10.in-addr.arpa.", qtype: dns.TypePTR},
	{name: "1.1.1.1.in-addr.arpa.", qtype: dns.TypePTR},
	{name: "1.1.1.1.In-Addr.Arpa.", qtype: dns.TypePTR},
	{name: "10.in-addr.arpa.", qtype: dns.TypePTR},
	{name: "1.215.3.96.10.in-addr.arpa.", qtype: dns.TypePTR},
	{name: "in-addr.arpa.", qtype: dns.TypePTR},
	{name: "in-addr.arpa.", qtype: dns.TypeSOA},
	{name: "ip6.arpa.", qtype: dns.TypeSOA},
	{name: "0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypePTR},
	{name: "0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypePTR},
	{name: "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", qtype: dns.TypePTR},
	{name: "8.b.d.0.1.0.0.2.ip6.arpa.", qtype: dns.TypePTR},
	{name: "dns-version.cluster.local.", qtype: dns.TypeTXT},
	{name: "dns-version.in-addr.arpa.", qtype: dns.TypeTXT},
	{name: "dns-version.ip6.arpa.", qtype: dns.TypeTXT},
	{name: "dns-version.cluster.local.", qtype: dns.TypeANY},
	{name: "x.dns-version.cluster.local.", qtype: dns.TypeTXT},
	{name: "in-addr.arpa.", qtype: dns.TypeNS},
	{name: "in-addr.arpa.", qtype: dns.TypeA},
	{name: "ip6.arpa.", qtype: dns.TypeNS},
	{name: "ip6.arpa.", qtype: dns.TypeTXT},
	{name: "arpa.", qtype: dns.TypeSOA},
	{name: "ns.dns.in-addr.arpa.", qtype: dns.TypeA},
	{name: "svc.in-addr.arpa.", qtype: dns.TypeA},
	{name: "default.svc.in-addr.arpa.", qtype: dns.TypeA},
	{name: "myapp.default.svc.in-addr.arpa.", qtype: dns.TypeA},
	{name: "x.0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypePTR},
	{name: "x.y.z.0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypePTR},
	{name: "w.x.y.z.0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypePTR},
	{name: "3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypePTR},
	{name: "00.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypePTR},
	{name: "0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.D.F.IP6.ARPA.", qtype: dns.TypePTR},
	{name: "0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypeA},
	{name: "5.1.2.3.0.6.9.0.0.0.0.0.0.0.0.0.0.0.0.0.f.f.f.f.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa.", qtype: dns.TypePTR},
	{name: "x.215.3.96.10.in-addr.arpa.", qtype: dns.TypePTR},
	{name: "215.3.96.010.in-addr.arpa.", qtype: dns.TypePTR},
	{name: "kube-dns.kube-system.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_dns._tcp.kube-dns.kube-system.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_._tcp.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http._.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_._.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_tcp.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_tcp.web.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "any.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "myapp.any.svc.cluster.local.", qtype: dns.TypeA},
	{name: "myapp.*.svc.cluster.local.", qtype: dns.TypeA},
	{name: "*.*.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "*.web.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "_*._*.myapp.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "myapp.default.pod.cluster.local.", qtype: dns.TypeA},
	{name: "pod.cluster.local.", qtype: dns.TypeSRV},
	{name: "x.pod.cluster.local.", qtype: dns.TypeA},
	{name: "x.svc.cluster.local.", qtype: dns.TypeA},
	{name: "default.x.cluster.local.", qtype: dns.TypeA},
	{name: "dns.cluster.local.", qtype: dns.TypeA},
	{name: "ns.dns.cluster.local.", qtype: dns.TypeCNAME},
	{name: "NS.DNS.Cluster.Local.", qtype: dns.TypeA},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeDS},
	{name: "cluster.local.", qtype: dns.TypeDS},
	{name: "cluster.local.", qtype: dns.TypeDNSKEY},
	{name: "cluster.local.", qtype: dns.TypeCNAME},
	{name: "cluster.local.", qtype: dns.TypeAAAA},
	{name: "cluster.local.", qtype: dns.TypeSRV},
	{name: "cluster.local.", qtype: dns.TypeANY},
	{name: "cluster.local.", qtype: dns.TypeNS, edns: 1232, do: true},
	{name: "svc.cluster.local.", qtype: dns.TypeSOA},
	{name: "svc.cluster.local.", qtype: dns.TypeNS},
	{name: "default.svc.cluster.local.", qtype: dns.TypeSOA},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeAXFR},
	{name: "nosuch.default.svc.cluster.local.", qtype: dns.TypeIXFR},
	{name: "in-addr.arpa.", qtype: dns.TypeAXFR, tcp: true},
	{name: "www.example.com.", qtype: dns.TypeAXFR, tcp: true},
	{name: "DNS-Version.Cluster.Local.", qtype: dns.TypeTXT},
	{name: "dns-version.cluster.local.", qtype: dns.TypeA},
	{name: "nosuch.cluster.local.", qtype: dns.TypeTXT},
	{name: "10-244-7-7.default.pod.cluster.local.", qtype: dns.TypeA},
	{name: "10-244-7-7.default.pod.cluster.local.", qtype: dns.TypeAAAA},
	{name: "10-244-7-7.default.pod.cluster.local.", qtype: dns.TypeSRV},
	{name: "10-244-7-7.default.pod.cluster.local.", qtype: dns.TypeTXT},
	{name: "_http._tcp.10-244-7-7.default.pod.cluster.local.", qtype: dns.TypeSRV},
	{name: "10-244-1-5.default.pod.cluster.local.", qtype: dns.TypeA},
	{name: "10-244-9-9.default.pod.cluster.local.", qtype: dns.TypeA},
	{name: "fd00-10-244--9.default.pod.cluster.local.", qtype: dns.TypeAAAA},
	{name: "fd00-10-244-0-0-0-0-0-9.default.pod.cluster.local.", qtype: dns.TypeAAAA},
	{name: "10-244-9-10.default.pod.cluster.local.", qtype: dns.TypeA},
	{name: "10-244-1-5.prod.pod.cluster.local.", qtype: dns.TypeA},
	{name: "fd00-10-244--7.default.pod.cluster.local.", qtype: dns.TypeAAAA},
	{name: "10-244-7-7.nowhere.pod.cluster.local.", qtype: dns.TypeA},
	{name: "10-244-7.default.pod.cluster.local.", qtype: dns.TypeA},
	{name: "x.10-244-7-7.default.pod.cluster.local.", qtype: dns.TypeA},
	{name: "default.pod.cluster.local.", qtype: dns.TypeA},
	{name: "default.pod.cluster.local.", qtype: dns.TypeTXT},
	{name: "myapp.nowhere.svc.cluster.local.", qtype: dns.TypeA},
	{name: "nosuch.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "nosuch.default.svc.cluster.local.", qtype: dns.TypeSOA},
	{name: "nosuch.default.svc.cluster.local.", qtype: dns.TypeNS},
	{name: "nosuch.default.svc.cluster.local.", qtype: dns.TypeANY},
	{name: "*.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "_http._tcp.*.default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "myapp.default.svc.cluster.local.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "myapp.svc.cluster.local.", qtype: dns.TypeA},
	{name: "myapp.cluster.local.", qtype: dns.TypeA},
	{name: "a.b.c.myapp.default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "default.svc.cluster.local.", qtype: dns.TypeA},
	{name: "default.svc.cluster.local.", qtype: dns.TypeTXT},
	{name: "default.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "nowhere.svc.cluster.local.", qtype: dns.TypeA},
	{name: "svc.cluster.local.", qtype: dns.TypeA},
	{name: "svc.cluster.local.", qtype: dns.TypeTXT},
	{name: "pod.cluster.local.", qtype: dns.TypeA},
	{name: "cluster.local.", qtype: dns.TypeA},
	{name: "cluster.local.", qtype: dns.TypeTXT},
	{name: "cluster.local.", qtype: dns.TypeSOA},
	{name: "Cluster.Local.", qtype: dns.TypeSOA},
	{name: "cluster.local.", qtype: dns.TypeNS},
	{name: "ns.dns.cluster.local.", qtype: dns.TypeA},
	{name: "ns.dns.cluster.local.", qtype: dns.TypeAAAA},
	{name: "ns.dns.cluster.local.", qtype: dns.TypeTXT},
	{name: "ns.dns.cluster.local.", qtype: dns.TypeSRV},
	{name: "ns.dns.cluster.local.", qtype: dns.TypeNS},
	{name: "ns.dns.cluster.local.", qtype: dns.TypePTR},
	{name: "x.dns.cluster.local.", qtype: dns.TypeA},
	{name: "cluster.local.", qtype: dns.TypeAXFR, tcp: true},
	{name: "cluster.local.", qtype: dns.TypeIXFR},
	// Protocol: EDNS0 echo, DO, RD echo, TCP, truncation.
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeA, edns: 1232},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeA, edns: 4096, do: true},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeA, edns: 100},
	{name: "nosuch.default.svc.cluster.local.", qtype: dns.TypeA, edns: 1232, do: true},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeA, noRD: true},
	{name: "1.1.1.1.in-addr.arpa.", qtype: dns.TypePTR, noRD: true},
	{name: "myapp.default.svc.cluster.local.", qtype: dns.TypeA, tcp: true},
	{name: "big.gen-0.svc.cluster.local.", qtype: dns.TypeA},
	{name: "big.gen-0.svc.cluster.local.", qtype: dns.TypeA, edns: 1232},
	{name: "big.gen-0.svc.cluster.local.", qtype: dns.TypeA, edns: 4096},
	{name: "big.gen-0.svc.cluster.local.", qtype: dns.TypeA, tcp: true},
	{name: "_http._tcp.big.gen-0.svc.cluster.local.", qtype: dns.TypeSRV},
	{name: "_http._tcp.big.gen-0.svc.cluster.local.", qtype: dns.TypeSRV, edns: 1232},
	{name: "_http._tcp.big.gen-0.svc.cluster.local.", qtype: dns.TypeSRV, tcp: true},
}

const genNamespaces = 10

// genCluster is a generated cluster of about 1,200 objects: Services of
// every kind (ClusterIP with one or several ports, dual-stack, headless with
// and without endpoint hostnames — the names pods get from
// hostname/subdomain —, headless without ready endpoints, ExternalName to
// outside, in-zone and IP targets), their EndpointSlices with ready,
// not-ready and unknown-readiness endpoints, and a Pod for every endpoint.
// It also returns the questions to ask about it.
type genState struct {
	nss    []corev1.Namespace
	svcs   []corev1.Service
	slices []discoveryv1.EndpointSlice
	pods   []corev1.Pod
	qs     []question // every question
	podQs  []question // the questions about pod names
}

func genCluster(n int) genState {
	var g genState
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	r := rand.New(rand.NewPCG(7, 9))
	for i := 0; i < genNamespaces; i++ {
		g.nss = append(g.nss, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gen-%d", i), ResourceVersion: "1"}})
	}
	ptr := func(b bool) *bool { return &b }
	port := func(name string, p corev1.Protocol, n int32) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: &name, Protocol: &p, Port: &n}
	}
	ask := func(name string, qtypes ...uint16) {
		for _, t := range qtypes {
			g.qs = append(g.qs, question{name: name, qtype: t})
		}
	}
	rev4 := func(a netip.Addr) string {
		b := a.As4()
		return fmt.Sprintf("%d.%d.%d.%d.in-addr.arpa.", b[3], b[2], b[1], b[0])
	}
	rev6 := func(a netip.Addr) string {
		b := a.As16()
		var l []string
		for i := 15; i >= 0; i-- {
			l = append(l, fmt.Sprintf("%x", b[i]&0xf), fmt.Sprintf("%x", b[i]>>4))
		}
		return strings.Join(l, ".") + ".ip6.arpa."
	}
	randCase := func(s string) string {
		b := []byte(s)
		for i := range b {
			if b[i] >= 'a' && b[i] <= 'z' && r.IntN(2) == 0 {
				b[i] -= 'a' - 'A'
			}
		}
		return string(b)
	}
	addPod := func(ns, ip string) {
		g.pods = append(g.pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-" + strings.NewReplacer(".", "-", ":", "-").Replace(ip), ResourceVersion: "1"},
			Status: corev1.PodStatus{PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}})
	}
	for i := 0; i < n; i++ {
		ns, name := fmt.Sprintf("gen-%d", i%genNamespaces), fmt.Sprintf("s%d", i)
		fq := name + "." + ns + ".svc.cluster.local."
		cip := netip.AddrFrom4([4]byte{10, 97, byte(i / 250), byte(1 + i%250)})
		cip6 := netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0, 0x97, 14: byte(i >> 8), 15: byte(i)})
		epIP := func(e int) netip.Addr {
			return netip.AddrFrom4([4]byte{10, byte(200 + e), byte(i / 250), byte(1 + i%250)})
		}
		epIP6 := func(e int) netip.Addr {
			return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x2, 0x44, 12: byte(e), 14: byte(i >> 8), 15: byte(i)})
		}
		svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: cip.String(), ClusterIPs: []string{cip.String()},
				Ports: []corev1.ServicePort{{Name: "http", Protocol: tcp, Port: 80}}}}
		slice := discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-v4", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{port("http", tcp, 8080)},
		}
		var slice6 *discoveryv1.EndpointSlice
		kind := i % 7
		nEP := 2 + i%3
		hostnames := false
		switch kind {
		case 0: // ClusterIP, one port
		case 1: // ClusterIP, several ports, one of them unnamed
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: udp, Port: 53}, corev1.ServicePort{Protocol: tcp, Port: 9000})
			slice.Ports = append(slice.Ports, port("dns", udp, 5353), port("", tcp, 9000))
		case 2: // dual-stack ClusterIP with both families of endpoints
			svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, cip6.String())
			slice6 = &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-v6", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv6,
				Ports:       []discoveryv1.EndpointPort{port("http", tcp, 8080)},
			}
		case 3: // headless with hostnames (a StatefulSet's pods: hostname + subdomain)
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
			hostnames = true
		case 4: // headless without hostnames, dual-stack endpoints
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
			slice6 = &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-v6", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv6,
				Ports:       []discoveryv1.EndpointPort{port("http", tcp, 8080)},
			}
		case 5: // headless, no endpoint ready
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
		case 6: // ExternalName
			svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName}
			switch i % 3 {
			case 0:
				svc.Spec.ExternalName = "www.example.com"
			case 1:
				svc.Spec.ExternalName = fmt.Sprintf("s%d.gen-%d.svc.cluster.local", i-6, (i-6)%genNamespaces)
			default:
				svc.Spec.ExternalName = "10.1.2.3"
			}
		}
		g.svcs = append(g.svcs, svc)
		ask(fq, dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT, dns.TypeCNAME, dns.TypeMX, dns.TypeNS, dns.TypeANY)
		ask(randCase(fq), dns.TypeA)
		ask("_http._tcp."+fq, dns.TypeSRV, dns.TypeA)
		ask("http.tcp."+fq, dns.TypeSRV)
		ask("_dns._udp."+fq, dns.TypeSRV)
		ask("_http._udp."+fq, dns.TypeSRV)
		ask("_http._tcp.x."+fq, dns.TypeSRV)
		ask("x."+fq, dns.TypeA, dns.TypeSRV)
		ask(randCase("_HTTP._TCP."+fq), dns.TypeSRV)
		if kind != 6 && kind < 3 {
			ask(rev4(cip), dns.TypePTR)
			ask(rev4(cip.Next().Next().Next()), dns.TypePTR) // unknown unless another Service has it
		}
		if kind == 2 {
			ask(rev6(cip6), dns.TypePTR)
		}
		if kind == 6 {
			continue
		}
		for e := 0; e < nEP; e++ {
			ip := epIP(e)
			ep := discoveryv1.Endpoint{Addresses: []string{ip.String()}}
			switch {
			case kind == 5 || e == nEP-1 && nEP > 2:
				ep.Conditions.Ready = ptr(false)
			case e == 1:
				// readiness unknown: counts as ready
			default:
				ep.Conditions.Ready = ptr(true)
			}
			host := strings.ReplaceAll(ip.String(), ".", "-")
			if hostnames && e != 1 {
				h := fmt.Sprintf("%s-%d", name, e)
				ep.Hostname = &h
				host = h
			}
			slice.Endpoints = append(slice.Endpoints, ep)
			addPod(ns, ip.String())
			ask(host+"."+fq, dns.TypeA, dns.TypeAAAA, dns.TypeSRV)
			ask("_http._tcp."+host+"."+fq, dns.TypeSRV)
			ask(rev4(ip), dns.TypePTR)
			pod := strings.ReplaceAll(ip.String(), ".", "-") + "." + ns + ".pod.cluster.local."
			g.podQs = append(g.podQs, question{name: pod, qtype: dns.TypeA}, question{name: pod, qtype: dns.TypeSRV},
				question{name: pod, qtype: dns.TypeTXT}, question{name: randCase(pod), qtype: dns.TypeA},
				question{name: "x." + pod, qtype: dns.TypeA},
				// the right IP in the wrong namespace (verified: NXDOMAIN)
				question{name: strings.ReplaceAll(ip.String(), ".", "-") + fmt.Sprintf(".gen-%d.pod.cluster.local.", (i+1)%genNamespaces), qtype: dns.TypeA})
			if slice6 != nil {
				ip6 := epIP6(e)
				ep6 := discoveryv1.Endpoint{Addresses: []string{ip6.String()}, Conditions: ep.Conditions}
				slice6.Endpoints = append(slice6.Endpoints, ep6)
				addPod(ns, ip6.String())
				host6 := strings.ReplaceAll(ip6.String(), ":", "-")
				ask(host6+"."+fq, dns.TypeAAAA, dns.TypeA)
				ask(rev6(ip6), dns.TypePTR)
				pod6 := host6 + "." + ns + ".pod.cluster.local."
				g.podQs = append(g.podQs, question{name: pod6, qtype: dns.TypeAAAA}, question{name: pod6, qtype: dns.TypeA})
			}
		}
		g.slices = append(g.slices, slice)
		if slice6 != nil {
			g.slices = append(g.slices, *slice6)
		}
	}
	// A headless Service too big for 512 bytes, for truncation.
	big := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "gen-0", Name: "big", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: tcp, Port: 80}}}}
	bigSlice := discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "gen-0", Name: "big-1", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: "big"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{port("http", tcp, 80)},
	}
	for e := 0; e < 300; e++ {
		bigSlice.Endpoints = append(bigSlice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.250.%d.%d", e/200, 1+e%200)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	}
	g.svcs = append(g.svcs, big)
	g.slices = append(g.slices, bigSlice)
	g.special(n)
	return g
}

// special adds the Services, slices and pods of the rarer classes, with
// their questions: ExternalName chains, loops and odd targets, endpoints
// with several addresses or a shared hostname, terminating endpoints,
// slices without a Service label or with unset port fields, a port number
// served over TCP and UDP, SCTP, dual-stack pods.
func (g *genState) special(n int) {
	tcp, udp, sctp := corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	ptr := func(b bool) *bool { return &b }
	str := func(s string) *string { return &s }
	ns := "gen-0"
	zone := "." + ns + ".svc.cluster.local."
	ask := func(name string, qtypes ...uint16) {
		for _, t := range qtypes {
			g.qs = append(g.qs, question{name: name, qtype: t})
		}
	}
	every := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeSRV, dns.TypeTXT, dns.TypeANY, dns.TypeMX, dns.TypePTR}
	ext := func(name, target string) {
		g.svcs = append(g.svcs, corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: target}})
		ask(name+zone, every...)
		ask("_http._tcp."+name+zone, dns.TypeSRV)
	}
	ext("ext-loop-a", "ext-loop-b.gen-0.svc.cluster.local")
	ext("ext-loop-b", "ext-loop-a.gen-0.svc.cluster.local")
	ext("ext-self", "ext-self.gen-0.svc.cluster.local")
	ext("ext-below-self", "x.ext-below-self.gen-0.svc.cluster.local")
	for i := 0; i < 12; i++ {
		target := fmt.Sprintf("ext-chain-%d.gen-0.svc.cluster.local", i+1)
		if i == 11 {
			target = "s0.gen-0.svc.cluster.local"
		}
		ext(fmt.Sprintf("ext-chain-%d", i), target)
	}
	ext("ext-dot", "s0.gen-0.svc.cluster.local.")
	ext("ext-ip-dot", "10.1.2.3.")
	ext("ext-www-dot", "www.example.com.")
	ext("ext-missing", "www.nowhere.example.")
	ext("ext-headless", fmt.Sprintf("s3.gen-%d.svc.cluster.local", 3%genNamespaces))
	ext("ext-dual", fmt.Sprintf("s2.gen-%d.svc.cluster.local", 2%genNamespaces))
	ext("ext-endpoint", fmt.Sprintf("s3-0.s3.gen-%d.svc.cluster.local", 3%genNamespaces))
	ext("ext-in-zone-missing", "x.s0.gen-0.svc.cluster.local")
	ext("ext-pod", "10-200-0-1.gen-0.pod.cluster.local")
	ext("ext-apex", "cluster.local")
	ext("ext-ns", "ns.dns.cluster.local")
	ext("ext-version", "dns-version.cluster.local")
	ext("ext-ext", "ext-www-dot.gen-0.svc.cluster.local")
	ext("ext-reverse", "1.0.97.10.in-addr.arpa")

	// A headless Service whose endpoints have two addresses each, a
	// hostname two endpoints share, terminating endpoints, and a port
	// number over TCP, UDP and SCTP.
	port := func(name string, p corev1.Protocol, n int32) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: &name, Protocol: &p, Port: &n}
	}
	g.svcs = append(g.svcs, corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "odd", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone},
			Ports: []corev1.ServicePort{{Name: "dns", Protocol: udp, Port: 53}, {Name: "dns-tcp", Protocol: tcp, Port: 53}, {Name: "sig", Protocol: sctp, Port: 3868}}}})
	g.slices = append(g.slices, discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "odd-a", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: "odd"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{port("dns", udp, 53), port("dns-tcp", tcp, 53), port("sig", sctp, 3868)},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.230.0.1", "10.230.0.2"}, Hostname: str("twin"), Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
			{Addresses: []string{"10.230.0.3"}, Hostname: str("twin"), Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
			{Addresses: []string{"10.230.0.4", "10.230.0.5"}},
			{Addresses: []string{"10.230.0.6"}, Hostname: str("leaving"), Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}},
			{Addresses: []string{"10.230.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(true)}},
		},
	})
	// The same Service's second slice: the same port names with other
	// numbers, and an address the first slice has too.
	g.slices = append(g.slices, discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "odd-b", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: "odd"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{port("dns", udp, 5353)},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.230.0.3"}, Hostname: str("other")}, {Addresses: []string{"10.230.0.8"}}},
	})
	odd := "odd" + zone
	ask(odd, every...)
	for _, p := range []string{"_dns._udp.", "_dns-tcp._tcp.", "_dns._tcp.", "_sig._sctp.", "_._tcp.", "_dns._.", "_._.", "dns.udp.", "_DNS._UDP."} {
		ask(p+odd, dns.TypeSRV, dns.TypeA)
	}
	for _, h := range []string{"twin", "other", "leaving", "10-230-0-4", "10-230-0-5", "10-230-0-7", "10-230-0-8", "10-230-0-1"} {
		ask(h+"."+odd, dns.TypeA, dns.TypeSRV, dns.TypeAAAA)
		ask("_dns._udp."+h+"."+odd, dns.TypeSRV)
	}
	ask("_tcp."+odd, dns.TypeSRV, dns.TypeA)
	ask("_udp._dns."+odd, dns.TypeSRV)
	for _, ip := range []string{"1.0.230.10", "2.0.230.10", "3.0.230.10", "6.0.230.10", "7.0.230.10", "8.0.230.10"} {
		ask(ip+".in-addr.arpa.", dns.TypePTR)
	}

	// A ClusterIP Service whose slices: one without ports, one with port
	// fields unset, one with an endpoint hostname; and a slice that names
	// no Service.
	g.svcs = append(g.svcs, corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partial", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.99.0.1", ClusterIPs: []string{"10.99.0.1"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: tcp, Port: 80}, {Name: "", Protocol: udp, Port: 81}}}})
	g.slices = append(g.slices,
		discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "partial-a", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: "partial"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.231.0.1"}, Hostname: str("named")}},
		},
		discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "partial-b", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: "partial"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{}, {Name: str("http")}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.231.0.2"}}},
		},
		discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "orphan", ResourceVersion: "1"},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{port("http", tcp, 80)},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.231.0.9"}}},
		})
	partial := "partial" + zone
	ask(partial, every...)
	for _, p := range []string{"_http._tcp.", "_._udp.", "_._tcp.", "_http._.", "named.", "10-231-0-2.", "10-231-0-1.", "_http._tcp.named.", "_._.named.", "_._.10-231-0-2."} {
		ask(p+partial, dns.TypeSRV, dns.TypeA)
	}
	ask("1.0.99.10.in-addr.arpa.", dns.TypePTR)
	// External and load-balancer IPs have no PTR (CoreDNS indexes cluster
	// IPs only), nor do pod IPs that are no endpoint.
	g.svcs = append(g.svcs, corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.99.0.2", ClusterIPs: []string{"10.99.0.2"},
			ExternalIPs: []string{"192.0.2.7"}, Ports: []corev1.ServicePort{{Name: "http", Protocol: tcp, Port: 80, NodePort: 30080}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.8"}, {Hostname: "lb.example.com"}}}}})
	ask("lb"+zone, every...)
	ask("_http._tcp.lb"+zone, dns.TypeSRV)
	ask("2.0.99.10.in-addr.arpa.", dns.TypePTR)
	ask("7.2.0.192.in-addr.arpa.", dns.TypePTR)
	ask("8.2.0.192.in-addr.arpa.", dns.TypePTR)
	ask("1.0.232.10.in-addr.arpa.", dns.TypePTR)
	ask("9.9.244.10.in-addr.arpa.", dns.TypePTR)
	ask("1.0.231.10.in-addr.arpa.", dns.TypePTR)
	ask("2.0.231.10.in-addr.arpa.", dns.TypePTR)
	// Not asked: PTR of 10.231.0.9, the orphan slice's endpoint. CoreDNS
	// builds "10-231-0-9..gen-0.svc.cluster.local." (an empty Service
	// label), fails to pack it and sends nothing; svcnet answers NXDOMAIN.
	ask("10-231-0-9.orphan"+zone, dns.TypeA)

	// Dual-stack pods: both addresses are pod names (verified too).
	for i, ips := range [][2]string{{"10.232.0.1", "fd00:232::1"}, {"10.232.0.2", "fd00:232::2:0:0:0"}} {
		g.pods = append(g.pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("dual-%d", i), ResourceVersion: "1"},
			Status: corev1.PodStatus{PodIP: ips[0], PodIPs: []corev1.PodIP{{IP: ips[0]}, {IP: ips[1]}}}})
	}
	for _, l := range []string{"10-232-0-1", "fd00-232--1", "fd00-232-0-0-0-0-0-1", "fd00-0232--1", "FD00-232--1", "fd00-232--2-0-0-0", "fd00-232-0-0-2--",
		"fd00-232-0-0-2--0", "--ffff-10-232-0-1", "--ffff-a00-1", "10-232-0-2", "0-0-0-0", "--", "--0", "fe80--1", "10-232-0-1-"} {
		name := l + "." + ns + ".pod.cluster.local."
		g.podQs = append(g.podQs, question{name: name, qtype: dns.TypeA}, question{name: name, qtype: dns.TypeAAAA}, question{name: name, qtype: dns.TypeSRV})
	}
	_ = n
}

// compare serves dnstest.Cluster plus a generated cluster from the fake API
// to both servers, once per pods mode, and prints every question whose
// answers differ (SOA serials ignored). It returns the number of
// differences.
func compare(svcnetBin, corednsBin string, services int) (int, error) {
	if corednsBin == "" {
		return 0, fmt.Errorf("--compare needs --coredns")
	}
	g := genCluster(services)
	nss, svcs, slices, pods := g.nss, g.svcs, g.slices, g.pods
	for _, o := range dnstest.Cluster() {
		switch v := o.(type) {
		case *corev1.Namespace:
			nss = append(nss, *v)
		case *corev1.Service:
			svcs = append(svcs, *v)
		case *discoveryv1.EndpointSlice:
			slices = append(slices, *v)
		case *corev1.Pod:
			pods = append(pods, *v)
		}
	}
	// Both servers listen on 127.0.0.1 only, so neither has an address of
	// its own to find kube-dns by: NS and ns.dns.<zone> are NODATA on both
	// (the zone tests cover the cluster case, where kube-dns is found).
	objects := len(nss) + len(svcs) + len(slices) + len(pods)
	dir, err := os.MkdirTemp("", "dnscompare")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	api := newFakeAPI(nss, svcs, slices, pods...)
	if err := api.start(); err != nil {
		return 0, err
	}
	defer api.srv.Close()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(api.kubeconfig()), 0o600); err != nil {
		return 0, err
	}
	up, stopUp := stubUpstream()
	defer stopUp()

	// DNSCOMPARE_SHOW=text prints both answers to every question whose
	// name or description contains text, equal or not.
	show := os.Getenv("DNSCOMPARE_SHOW")
	total, diffs := 0, 0
	for _, mode := range []string{"insecure", "verified", "disabled"} {
		qs := append(append([]question(nil), fixedQuestions...), g.podQs...)
		if mode == "insecure" {
			qs = append(qs, g.qs...)
			qs = append(qs, protocolQuestions()...)
		}
		targets, err := startTargets(dir, kc, up, svcnetBin, corednsBin, targetOpts{ttl: "5", pods: mode})
		if err != nil {
			return 0, err
		}
		d := 0
		for _, q := range qs {
			var got [2]string
			for i, t := range targets[:2] {
				got[i] = ask(q, t.dnsPort)
			}
			if show != "" && strings.Contains(q.name+q.how(), show) {
				fmt.Printf("SHOW [pods %s] %s %s%s\n  svcnet:  %s\n  coredns: %s\n", mode, q.name, dns.TypeToString[q.qtype], q.how(),
					strings.ReplaceAll(got[0], "\n", "\n           "), strings.ReplaceAll(got[1], "\n", "\n           "))
			}
			if got[0] != got[1] {
				d++
				if d <= 40 {
					fmt.Printf("DIFF [pods %s] %s %s%s\n  svcnet:  %s\n  coredns: %s\n", mode, q.name, dns.TypeToString[q.qtype], q.how(),
						strings.ReplaceAll(got[0], "\n", "\n           "), strings.ReplaceAll(got[1], "\n", "\n           "))
				}
			}
		}
		stopTargets(targets)
		fmt.Printf("pods %s: %d of %d questions differ\n", mode, d, len(qs))
		total += len(qs)
		diffs += d
	}
	fmt.Printf("cluster: %d objects (%d namespaces, %d Services, %d EndpointSlices, %d Pods); %d of %d questions differ\n",
		objects, len(nss), len(svcs), len(slices), len(pods), diffs, total)
	return diffs, nil
}

func (q question) how() string {
	var s []string
	if q.label != "" {
		s = append(s, q.label)
	}
	if q.edns != 0 {
		s = append(s, fmt.Sprintf("edns %d", q.edns))
	}
	if q.do {
		s = append(s, "do")
	}
	if q.noRD {
		s = append(s, "no rd")
	}
	if q.tcp {
		s = append(s, "tcp")
	}
	if len(s) == 0 {
		return ""
	}
	return " (" + strings.Join(s, ", ") + ")"
}

// ask sends q to the server on port and renders the answer canonically.
func ask(q question, port int) string {
	m := new(dns.Msg)
	m.SetQuestion(q.name, q.qtype)
	m.RecursionDesired = !q.noRD
	if q.edns != 0 {
		m.SetEdns0(q.edns, q.do)
	}
	if q.raw != nil {
		return askRaw(q.raw, port)
	}
	if q.mod != nil {
		q.mod(m)
	}
	c := &dns.Client{Timeout: 3 * time.Second, UDPSize: 65535}
	if q.tcp {
		c.Net = "tcp"
	}
	r, _, err := c.Exchange(m, fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return "error: " + err.Error()
	}
	return canonical(r)
}

// canonical renders a response for comparison: rcode, header flags, the
// OPT record, and each section's records sorted, SOA serials zeroed.
func canonical(r *dns.Msg) string {
	opt := "none"
	sec := func(rrs []dns.RR) string {
		var out []string
		for _, rr := range rrs {
			if o, ok := rr.(*dns.OPT); ok {
				opt = fmt.Sprintf("udp=%d do=%v version=%d rcode=%d options=%d", o.UDPSize(), o.Do(), o.Version(), o.ExtendedRcode(), len(o.Option))
				continue
			}
			if s, ok := rr.(*dns.SOA); ok {
				c := *s
				c.Serial = 0
				rr = &c
			}
			out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
		}
		sort.Strings(out)
		return strings.Join(out, " | ")
	}
	an, ns, ar := sec(r.Answer), sec(r.Ns), sec(r.Extra)
	if r.Truncated {
		// Which records survive truncation depends on the order they
		// were in (CoreDNS's loadbalance shuffles A and AAAA records, and
		// how far the additional section gets depends on which come
		// first): compare how many answers, not which, nor the rest.
		an, ns, ar = fmt.Sprintf("%d records", len(r.Answer)), fmt.Sprintf("%d records", len(r.Ns)), "(not compared)"
	}
	q := ""
	if len(r.Question) == 1 {
		q = strings.ReplaceAll(r.Question[0].String(), "\t", " ")
	}
	return fmt.Sprintf("%s op=%s aa=%v tc=%v rd=%v ra=%v ad=%v cd=%v opt=%s q=%s\nAN: %s\nNS: %s\nAR: %s", dns.RcodeToString[r.Rcode], dns.OpcodeToString[r.Opcode],
		r.Authoritative, r.Truncated, r.RecursionDesired, r.RecursionAvailable, r.AuthenticatedData, r.CheckingDisabled, opt, q, an, ns, ar)
}
