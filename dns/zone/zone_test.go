package zone_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/dns/dnstest"
	"github.com/svcnet/svcnet/dns/index"
	"github.com/svcnet/svcnet/dns/zone"
)

// stubUpstream answers every name outside the zone like a public resolver
// would for www.example.com.
type stubUpstream struct{}

func (stubUpstream) Lookup(_ context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if name == "www.example.com." && qtype == dns.TypeA {
		m.Answer = []dns.RR{dnstest.A("www.example.com. 30 IN A 93.184.215.14")}
	}
	return m, nil
}

func newZone(t *testing.T, mode zone.PodMode) (*zone.Zone, *fake.Clientset) {
	t.Helper()
	client := fake.NewSimpleClientset(dnstest.Cluster()...)
	idx, synced := dnstest.SyncedIndex(t, client, mode == zone.PodsVerified)
	z := zone.New(zone.Config{Zone: "cluster.local.", TTL: 5, Pods: mode, Reverse: true,
		LocalIPs: []netip.Addr{netip.MustParseAddr("10.244.0.53")}}, idx, synced, stubUpstream{})
	return z, client
}

const soa = "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 0 7200 1800 86400 5"

var (
	A     = dnstest.A
	AAAA  = dnstest.AAAA
	SRV   = dnstest.SRV
	PTR   = dnstest.PTR
	CNAME = dnstest.CNAME
	TXT   = dnstest.TXT
	SOA   = dnstest.SOA
	NS    = dnstest.NS
)

func nx(name, qname string, qtype uint16) dnstest.Case {
	return dnstest.Case{Name: name, Qname: qname, Qtype: qtype, Rcode: dns.RcodeNameError, Ns: []dns.RR{SOA(soa)}}
}

const (
	soa4 = "in-addr.arpa. 5 IN SOA ns.dns.in-addr.arpa. hostmaster.in-addr.arpa. 0 7200 1800 86400 5"
	soa6 = "ip6.arpa. 5 IN SOA ns.dns.ip6.arpa. hostmaster.ip6.arpa. 0 7200 1800 86400 5"
)

// nxIn and nodataIn are negative answers in a reverse zone, whose SOA they
// carry.
func nxIn(zoneSOA, name, qname string, qtype uint16) dnstest.Case {
	return dnstest.Case{Name: name, Qname: qname, Qtype: qtype, Rcode: dns.RcodeNameError, Ns: []dns.RR{SOA(zoneSOA)}}
}

func nodataIn(zoneSOA, name, qname string, qtype uint16) dnstest.Case {
	return dnstest.Case{Name: name, Qname: qname, Qtype: qtype, Rcode: dns.RcodeSuccess, Ns: []dns.RR{SOA(zoneSOA)}}
}

func nodata(name, qname string, qtype uint16) dnstest.Case {
	return dnstest.Case{Name: name, Qname: qname, Qtype: qtype, Rcode: dns.RcodeSuccess, Ns: []dns.RR{SOA(soa)}}
}

var zoneCases = []dnstest.Case{
	{Name: "clusterip A", Qname: "myapp.default.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("myapp.default.svc.cluster.local. 5 IN A 10.96.3.215")}},
	{Name: "case echoed", Qname: "MyApp.Default.SVC.Cluster.Local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("MyApp.Default.SVC.Cluster.Local. 5 IN A 10.96.3.215")}},
	nodata("AAAA on IPv4-only service", "myapp.default.svc.cluster.local.", dns.TypeAAAA),
	{Name: "seed SRV without underscores", Qname: "http.tcp.myapp.default.svc.cluster.local.", Qtype: dns.TypeSRV,
		Answer: []dns.RR{SRV("http.tcp.myapp.default.svc.cluster.local. 5 IN SRV 0 100 38080 myapp.default.svc.cluster.local.")},
		Extra:  []dns.RR{A("myapp.default.svc.cluster.local. 5 IN A 10.96.3.215")}},
	{Name: "SRV with underscores", Qname: "_http._tcp.myapp.default.svc.cluster.local.", Qtype: dns.TypeSRV,
		Answer: []dns.RR{SRV("_http._tcp.myapp.default.svc.cluster.local. 5 IN SRV 0 100 38080 myapp.default.svc.cluster.local.")},
		Extra:  []dns.RR{A("myapp.default.svc.cluster.local. 5 IN A 10.96.3.215")}},
	nx("SRV unknown port", "_https._tcp.myapp.default.svc.cluster.local.", dns.TypeSRV),
	nx("SRV wrong protocol", "_http._udp.myapp.default.svc.cluster.local.", dns.TypeSRV),
	{Name: "SRV of service name lists every port", Qname: "multi.default.svc.cluster.local.", Qtype: dns.TypeSRV,
		Answer: []dns.RR{
			SRV("multi.default.svc.cluster.local. 5 IN SRV 0 33 80 multi.default.svc.cluster.local."),
			SRV("multi.default.svc.cluster.local. 5 IN SRV 0 33 53 multi.default.svc.cluster.local."),
			SRV("multi.default.svc.cluster.local. 5 IN SRV 0 33 9000 multi.default.svc.cluster.local."),
		},
		Extra: []dns.RR{A("multi.default.svc.cluster.local. 5 IN A 10.96.0.20")}},
	{Name: "SRV udp port", Qname: "_dns._udp.multi.default.svc.cluster.local.", Qtype: dns.TypeSRV,
		Answer: []dns.RR{SRV("_dns._udp.multi.default.svc.cluster.local. 5 IN SRV 0 100 53 multi.default.svc.cluster.local.")},
		Extra:  []dns.RR{A("multi.default.svc.cluster.local. 5 IN A 10.96.0.20")}},
	{Name: "dual-stack A", Qname: "dual.default.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("dual.default.svc.cluster.local. 5 IN A 10.96.0.30")}},
	{Name: "dual-stack AAAA", Qname: "dual.default.svc.cluster.local.", Qtype: dns.TypeAAAA,
		Answer: []dns.RR{AAAA("dual.default.svc.cluster.local. 5 IN AAAA fd00:10:96::30")}},
	{Name: "dual-stack SRV weight counts both families", Qname: "_http._tcp.dual.default.svc.cluster.local.", Qtype: dns.TypeSRV,
		Answer: []dns.RR{SRV("_http._tcp.dual.default.svc.cluster.local. 5 IN SRV 0 50 80 dual.default.svc.cluster.local.")},
		Extra: []dns.RR{A("dual.default.svc.cluster.local. 5 IN A 10.96.0.30"),
			AAAA("dual.default.svc.cluster.local. 5 IN AAAA fd00:10:96::30")}},
	{Name: "headless A lists ready endpoints only", Qname: "web.default.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("web.default.svc.cluster.local. 5 IN A 10.244.1.10"), A("web.default.svc.cluster.local. 5 IN A 10.244.2.11")}},
	{Name: "headless AAAA", Qname: "web.default.svc.cluster.local.", Qtype: dns.TypeAAAA,
		Answer: []dns.RR{AAAA("web.default.svc.cluster.local. 5 IN AAAA fd00:10:244::10")}},
	{Name: "headless SRV targets endpoints", Qname: "_http._tcp.web.default.svc.cluster.local.", Qtype: dns.TypeSRV,
		Answer: []dns.RR{
			SRV("_http._tcp.web.default.svc.cluster.local. 5 IN SRV 0 33 80 web-0.web.default.svc.cluster.local."),
			SRV("_http._tcp.web.default.svc.cluster.local. 5 IN SRV 0 33 80 10-244-2-11.web.default.svc.cluster.local."),
		},
		Extra: []dns.RR{
			A("web-0.web.default.svc.cluster.local. 5 IN A 10.244.1.10"),
			A("10-244-2-11.web.default.svc.cluster.local. 5 IN A 10.244.2.11"),
			AAAA("web-0.web.default.svc.cluster.local. 5 IN AAAA fd00:10:244::10"),
		}},
	{Name: "endpoint by hostname", Qname: "web-0.web.default.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("web-0.web.default.svc.cluster.local. 5 IN A 10.244.1.10")}},
	{Name: "endpoint by dashed IP", Qname: "10-244-2-11.web.default.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("10-244-2-11.web.default.svc.cluster.local. 5 IN A 10.244.2.11")}},
	{Name: "endpoint of a ClusterIP service", Qname: "10-244-1-5.myapp.default.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("10-244-1-5.myapp.default.svc.cluster.local. 5 IN A 10.244.1.5")}},
	nx("not-ready endpoint", "web-2.web.default.svc.cluster.local.", dns.TypeA),
	nx("headless without ready endpoints", "nope.default.svc.cluster.local.", dns.TypeA),
	{Name: "headless slice without ports still has A", Qname: "noports.default.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("noports.default.svc.cluster.local. 5 IN A 10.244.8.8")}},
	nodata("headless slice without ports has no SRV", "noports.default.svc.cluster.local.", dns.TypeSRV),
	{Name: "ExternalName CNAME chased upstream", Qname: "svc-external-name.default.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{CNAME("svc-external-name.default.svc.cluster.local. 5 IN CNAME www.example.com."),
			A("www.example.com. 30 IN A 93.184.215.14")}},
	{Name: "ExternalName CNAME query", Qname: "svc-external-name.default.svc.cluster.local.", Qtype: dns.TypeCNAME,
		Answer: []dns.RR{CNAME("svc-external-name.default.svc.cluster.local. 5 IN CNAME www.example.com.")}},
	{Name: "ExternalName in-zone target followed", Qname: "alias.default.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{CNAME("alias.default.svc.cluster.local. 5 IN CNAME api-service.prod.svc.cluster.local."),
			A("api-service.prod.svc.cluster.local. 5 IN A 10.96.5.5")}},
	nodata("ExternalName in-zone dangling target", "dangling.default.svc.cluster.local.", dns.TypeA),
	nodata("ExternalName has no SRV", "svc-external-name.default.svc.cluster.local.", dns.TypeSRV),
	nx("ExternalName with an IP", "ipext.default.svc.cluster.local.", dns.TypeA),
	nx("ExternalName has no endpoints", "x.svc-external-name.default.svc.cluster.local.", dns.TypeA),
	nodata("CNAME on ClusterIP service", "myapp.default.svc.cluster.local.", dns.TypeCNAME),
	{Name: "PTR cluster IP", Qname: "215.3.96.10.in-addr.arpa.", Qtype: dns.TypePTR,
		Answer: []dns.RR{PTR("215.3.96.10.in-addr.arpa. 5 IN PTR myapp.default.svc.cluster.local.")}},
	{Name: "PTR endpoint hostname", Qname: "10.1.244.10.in-addr.arpa.", Qtype: dns.TypePTR,
		Answer: []dns.RR{PTR("10.1.244.10.in-addr.arpa. 5 IN PTR web-0.web.default.svc.cluster.local.")}},
	{Name: "PTR endpoint dashed", Qname: "11.2.244.10.in-addr.arpa.", Qtype: dns.TypePTR,
		Answer: []dns.RR{PTR("11.2.244.10.in-addr.arpa. 5 IN PTR 10-244-2-11.web.default.svc.cluster.local.")}},
	{Name: "PTR IPv6 cluster IP", Qname: "0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", Qtype: dns.TypePTR,
		Answer: []dns.RR{PTR("0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa. 5 IN PTR dual.default.svc.cluster.local.")}},
	{Name: "dns-version", Qname: "dns-version.cluster.local.", Qtype: dns.TypeTXT,
		Answer: []dns.RR{TXT(`dns-version.cluster.local. 28800 IN TXT "1.1.0"`)}},
	nx("dns-version is TXT only", "dns-version.cluster.local.", dns.TypeA),
	nodata("TXT of a service is NODATA", "myapp.default.svc.cluster.local.", dns.TypeTXT),
	nx("TXT of a missing name", "nosuch.cluster.local.", dns.TypeTXT),
	nodata("SOA below the apex is always NODATA", "nosuch.default.svc.cluster.local.", dns.TypeSOA),
	{Name: "pod insecure", Qname: "10-244-7-7.default.pod.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("10-244-7-7.default.pod.cluster.local. 5 IN A 10.244.7.7")}},
	nx("pod in unknown namespace", "10-244-7-7.nowhere.pod.cluster.local.", dns.TypeA),
	nx("pod with bad IP", "10-244-7.default.pod.cluster.local.", dns.TypeA),
	nx("unknown namespace", "myapp.nowhere.svc.cluster.local.", dns.TypeA),
	nx("unknown service", "nosuch.default.svc.cluster.local.", dns.TypeA),
	nx("search path expansion", "myapp.default.svc.cluster.local.default.svc.cluster.local.", dns.TypeA),
	nx("seed search: svc", "myapp.svc.cluster.local.", dns.TypeA),
	nx("seed search: zone", "myapp.cluster.local.", dns.TypeA),
	nx("too many labels", "a.b.c.myapp.default.svc.cluster.local.", dns.TypeA),
	nodata("namespace name", "default.svc.cluster.local.", dns.TypeA),
	nodata("empty namespace name", "empty.svc.cluster.local.", dns.TypeA),
	nodata("svc apex", "svc.cluster.local.", dns.TypeA),
	nodata("zone apex A", "cluster.local.", dns.TypeA),
	nodata("MX on service", "myapp.default.svc.cluster.local.", dns.TypeMX),
	nx("MX on missing", "nosuch.default.svc.cluster.local.", dns.TypeMX),
	{Name: "SOA at apex", Qname: "cluster.local.", Qtype: dns.TypeSOA, Answer: []dns.RR{SOA(soa)}},
	{Name: "NS at apex", Qname: "cluster.local.", Qtype: dns.TypeNS,
		Answer: []dns.RR{NS("cluster.local. 5 IN NS kube-dns.kube-system.svc.cluster.local.")},
		Extra:  []dns.RR{A("kube-dns.kube-system.svc.cluster.local. 5 IN A 10.96.0.10")}},
	{Name: "ns.dns A", Qname: "ns.dns.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("ns.dns.cluster.local. 5 IN A 10.96.0.10")}},
	// The question spells the zone in upper case: CoreDNS compares the
	// lower-cased name with the zone as spelled, so ns.dns is a name like
	// any other (NXDOMAIN) and the apex has no NS records (NODATA).
	nxIn("Cluster.Local. 5 IN SOA ns.dns.Cluster.Local. hostmaster.Cluster.Local. 0 7200 1800 86400 5",
		"ns.dns A, zone in upper case", "NS.DNS.Cluster.Local.", dns.TypeA),
	nodataIn("Cluster.Local. 5 IN SOA ns.dns.Cluster.Local. hostmaster.Cluster.Local. 0 7200 1800 86400 5",
		"NS at apex, zone in upper case", "Cluster.Local.", dns.TypeNS),
	{Name: "ns.dns A, only ns.dns in upper case", Qname: "NS.DNS.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("NS.DNS.cluster.local. 5 IN A 10.96.0.10")}},
	// Reverse zones: authoritative, as kubeadm's "kubernetes cluster.local
	// in-addr.arpa ip6.arpa" (without fallthrough).
	// CoreDNS reads the 32 nibbles next to ip6.arpa. and ignores up to
	// three labels more on the left.
	{Name: "PTR IPv6 cluster IP, 33 labels", Qname: "x.0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", Qtype: dns.TypePTR,
		Answer: []dns.RR{PTR("x.0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa. 5 IN PTR dual.default.svc.cluster.local.")}},
	{Name: "PTR IPv6 cluster IP, 35 labels", Qname: "a.b.c.0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", Qtype: dns.TypePTR,
		Answer: []dns.RR{PTR("a.b.c.0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa. 5 IN PTR dual.default.svc.cluster.local.")}},
	nxIn(soa6, "PTR IPv6, 36 labels", "a.b.c.d.0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR),
	nxIn(soa6, "PTR IPv6, two-digit nibble", "00.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR),
	nxIn(soa4, "PTR of an address that belongs to nothing", "1.1.1.1.in-addr.arpa.", dns.TypePTR),
	nxIn(soa6, "PTR of an IPv6 address that belongs to nothing", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", dns.TypePTR),
	nxIn(soa4, "PTR of a not-ready endpoint", "12.3.244.10.in-addr.arpa.", dns.TypePTR),
	nxIn(soa4, "A in the reverse zone", "215.3.96.10.in-addr.arpa.", dns.TypeA),
	nxIn(soa4, "partial reverse name", "10.in-addr.arpa.", dns.TypePTR),
	nxIn(soa4, "too long reverse name", "1.215.3.96.10.in-addr.arpa.", dns.TypePTR),
	nodataIn(soa4, "reverse apex PTR", "in-addr.arpa.", dns.TypePTR),
	{Name: "reverse apex SOA", Qname: "in-addr.arpa.", Qtype: dns.TypeSOA, Answer: []dns.RR{SOA(soa4)}},
	nodataIn(soa4, "SOA below the reverse apex", "215.3.96.10.in-addr.arpa.", dns.TypeSOA),
	{Name: "reverse zone keeps the question's case", Qname: "1.1.1.1.IN-ADDR.arpa.", Qtype: dns.TypePTR, Rcode: dns.RcodeNameError,
		Ns: []dns.RR{SOA("IN-ADDR.arpa. 5 IN SOA ns.dns.IN-ADDR.arpa. hostmaster.IN-ADDR.arpa. 0 7200 1800 86400 5")}},
	{Name: "PTR name echoed in question case", Qname: "215.3.96.10.IN-ADDR.ARPA.", Qtype: dns.TypePTR,
		Answer: []dns.RR{PTR("215.3.96.10.IN-ADDR.ARPA. 5 IN PTR myapp.default.svc.cluster.local.")}},
	nxIn(soa4, "TXT of a reverse name that exists (only PTR lives there)", "215.3.96.10.in-addr.arpa.", dns.TypeTXT),
	// SRV edge cases.
	nx("SRV with an extra label under the service", "_http._tcp.x.myapp.default.svc.cluster.local.", dns.TypeSRV),
	nx("SRV with port only under the service", "_http.x.myapp.default.svc.cluster.local.", dns.TypeSRV),
	nx("SRV port form on an ExternalName", "_http._tcp.svc-external-name.default.svc.cluster.local.", dns.TypeSRV),
	nx("A in SRV form on an ExternalName", "_http._tcp.svc-external-name.default.svc.cluster.local.", dns.TypeA),
	nx("SRV of an unknown endpoint", "x.myapp.default.svc.cluster.local.", dns.TypeSRV),
	{Name: "SRV of an endpoint name", Qname: "web-0.web.default.svc.cluster.local.", Qtype: dns.TypeSRV,
		Answer: []dns.RR{SRV("web-0.web.default.svc.cluster.local. 5 IN SRV 0 50 80 web-0.web.default.svc.cluster.local.")},
		Extra: []dns.RR{A("web-0.web.default.svc.cluster.local. 5 IN A 10.244.1.10"),
			AAAA("web-0.web.default.svc.cluster.local. 5 IN AAAA fd00:10:244::10")}},
	{Name: "SRV of a pod name answers port 0", Qname: "_http._tcp.10-244-7-7.default.pod.cluster.local.", Qtype: dns.TypeSRV,
		Answer: []dns.RR{SRV("_http._tcp.10-244-7-7.default.pod.cluster.local. 5 IN SRV 0 100 0 10-244-7-7.default.pod.cluster.local.")},
		Extra:  []dns.RR{A("10-244-7-7.default.pod.cluster.local. 5 IN A 10.244.7.7")}},
	nx("wildcard service name", "*.default.svc.cluster.local.", dns.TypeA),
	nx("wildcard SRV", "_http._tcp.*.default.svc.cluster.local.", dns.TypeSRV),
	// Pod names.
	{Name: "pod name with an extra label", Qname: "x.10-244-7-7.default.pod.cluster.local.", Qtype: dns.TypeA,
		Answer: []dns.RR{A("x.10-244-7-7.default.pod.cluster.local. 5 IN A 10.244.7.7")}},
	{Name: "pod IPv6 name", Qname: "fd00-10-244--7.default.pod.cluster.local.", Qtype: dns.TypeAAAA,
		Answer: []dns.RR{AAAA("fd00-10-244--7.default.pod.cluster.local. 5 IN AAAA fd00:10:244::7")}},
	nodata("pod namespace", "default.pod.cluster.local.", dns.TypeA),
	nodata("pod A of an IPv4 pod asked AAAA", "10-244-7-7.default.pod.cluster.local.", dns.TypeAAAA),
	nx("TXT of a pod namespace", "default.pod.cluster.local.", dns.TypeTXT),
	nodata("TXT of a pod", "10-244-7-7.default.pod.cluster.local.", dns.TypeTXT),
	// Other types and names without records.
	nx("TXT at the apex", "cluster.local.", dns.TypeTXT),
	nx("TXT of a namespace", "default.svc.cluster.local.", dns.TypeTXT),
	nodata("TXT of an ExternalName", "svc-external-name.default.svc.cluster.local.", dns.TypeTXT),
	nodata("ANY on a service", "myapp.default.svc.cluster.local.", dns.TypeANY),
	nx("ANY on a missing name", "nosuch.default.svc.cluster.local.", dns.TypeANY),
	nodata("NS below the apex", "myapp.default.svc.cluster.local.", dns.TypeNS),
	nx("NS of a missing name", "nosuch.default.svc.cluster.local.", dns.TypeNS),
	nodata("HINFO on a namespace", "default.svc.cluster.local.", dns.TypeHINFO),
	nodata("PTR of a forward name", "myapp.default.svc.cluster.local.", dns.TypePTR),
	nx("TXT of ns.dns", "ns.dns.cluster.local.", dns.TypeTXT),
	nx("PTR of ns.dns", "ns.dns.cluster.local.", dns.TypePTR),
	nodata("SRV of ns.dns", "ns.dns.cluster.local.", dns.TypeSRV),
	nodata("NS of ns.dns", "ns.dns.cluster.local.", dns.TypeNS),
	nodata("AAAA of ns.dns", "ns.dns.cluster.local.", dns.TypeAAAA),
	nx("other names under dns", "x.dns.cluster.local.", dns.TypeA),
	{Name: "AXFR refused", Qname: "cluster.local.", Qtype: dns.TypeAXFR, Rcode: dns.RcodeRefused},
	{Name: "IXFR refused", Qname: "cluster.local.", Qtype: dns.TypeIXFR, Rcode: dns.RcodeRefused},
	{Name: "kube-dns SRV", Qname: "_dns._udp.kube-dns.kube-system.svc.cluster.local.", Qtype: dns.TypeSRV,
		Answer: []dns.RR{SRV("_dns._udp.kube-dns.kube-system.svc.cluster.local. 5 IN SRV 0 100 53 kube-dns.kube-system.svc.cluster.local.")},
		Extra:  []dns.RR{A("kube-dns.kube-system.svc.cluster.local. 5 IN A 10.96.0.10")}},
}

func TestZone(t *testing.T) {
	z, _ := newZone(t, zone.PodsInsecure)
	for _, c := range zoneCases {
		t.Run(c.Name, func(t *testing.T) {
			resp := z.Serve(context.Background(), c.Msg())
			if d := c.Check(resp); d != "" {
				t.Errorf("%s %s:\n%s", c.Qname, dns.TypeToString[c.Qtype], d)
			}
			if resp != nil && c.Rcode != dns.RcodeRefused && !resp.Authoritative {
				t.Errorf("AA flag not set")
			}
			if resp != nil && (resp.RecursionAvailable || !resp.RecursionDesired) {
				t.Errorf("flags: want RD echoed and no RA (CoreDNS's kubernetes plugin), got rd=%v ra=%v", resp.RecursionDesired, resp.RecursionAvailable)
			}
		})
	}
}

func TestUpperCaseZoneEchoedInSOA(t *testing.T) {
	z, _ := newZone(t, zone.PodsInsecure)
	c := dnstest.Case{Qname: "nosuch.default.svc.CLUSTER.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError,
		Ns: []dns.RR{SOA("CLUSTER.local. 5 IN SOA ns.dns.CLUSTER.local. hostmaster.CLUSTER.local. 0 7200 1800 86400 5")}}
	if d := c.Check(z.Serve(context.Background(), c.Msg())); d != "" {
		t.Error(d)
	}
}

func TestNotOurs(t *testing.T) {
	z, _ := newZone(t, zone.PodsInsecure)
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"www.example.com.", dns.TypeA},
		{"local.", dns.TypeSOA},
		{"arpa.", dns.TypeSOA},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		if resp := z.Serve(context.Background(), m); resp != nil {
			t.Errorf("%s %s answered in-zone:\n%v", q.name, dns.TypeToString[q.qtype], resp)
		}
	}
}

// TestReverseFallthrough: with ReverseFallthrough, reverse names that do not
// exist are left to the caller (forwarded), those that exist are answered.
func TestReverseFallthrough(t *testing.T) {
	client := fake.NewSimpleClientset(dnstest.Cluster()...)
	idx, synced := dnstest.SyncedIndex(t, client, false)
	z := zone.New(zone.Config{Zone: "cluster.local.", TTL: 5, Reverse: true, ReverseFallthrough: true}, idx, synced, nil)
	ask := func(name string, qtype uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		return z.Serve(context.Background(), m)
	}
	if r := ask("1.1.1.1.in-addr.arpa.", dns.TypePTR); r != nil {
		t.Errorf("unknown reverse name answered, want fallthrough: %v", r)
	}
	if r := ask("215.3.96.10.in-addr.arpa.", dns.TypePTR); r == nil || len(r.Answer) != 1 {
		t.Errorf("known reverse name: %v", r)
	}
	if r := ask("nosuch.default.svc.cluster.local.", dns.TypeA); r == nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("fallthrough must only apply to reverse zones: %v", r)
	}
}

func TestPodModes(t *testing.T) {
	q := "10-244-1-5.default.pod.cluster.local."
	t.Run("verified", func(t *testing.T) {
		z, _ := newZone(t, zone.PodsVerified)
		ok := dnstest.Case{Qname: q, Qtype: dns.TypeA, Answer: []dns.RR{A(q + " 5 IN A 10.244.1.5")}}
		if d := ok.Check(z.Serve(context.Background(), ok.Msg())); d != "" {
			t.Error(d)
		}
		dual := "fd00-10-244--9.default.pod.cluster.local."
		for _, c := range []dnstest.Case{
			nx("unknown pod", "10-244-7-7.default.pod.cluster.local.", dns.TypeA),
			nx("pod in other namespace", "10-244-1-5.prod.pod.cluster.local.", dns.TypeA),
			// Every address of a dual-stack pod is verified.
			{Name: "dual-stack pod, IPv4", Qname: "10-244-9-9.default.pod.cluster.local.", Qtype: dns.TypeA,
				Answer: []dns.RR{A("10-244-9-9.default.pod.cluster.local. 5 IN A 10.244.9.9")}},
			{Name: "dual-stack pod, IPv6", Qname: dual, Qtype: dns.TypeAAAA, Answer: []dns.RR{AAAA(dual + " 5 IN AAAA fd00:10:244::9")}},
			{Name: "dual-stack pod, upper case", Qname: "FD00-10-244--9.default.pod.cluster.local.", Qtype: dns.TypeAAAA,
				Answer: []dns.RR{AAAA("FD00-10-244--9.default.pod.cluster.local. 5 IN AAAA fd00:10:244::9")}},
			// CoreDNS compares the address as text with the pod's.
			nx("dual-stack pod, IPv6 spelled out", "fd00-10-244-0-0-0-0-0-9.default.pod.cluster.local.", dns.TypeAAAA),
			// A pod first seen terminating is not taken in (CoreDNS).
			nx("terminating pod", "10-244-9-10.default.pod.cluster.local.", dns.TypeA),
		} {
			if d := c.Check(z.Serve(context.Background(), c.Msg())); d != "" {
				t.Errorf("%s: %s", c.Name, d)
			}
		}
	})
	t.Run("disabled", func(t *testing.T) {
		z, _ := newZone(t, zone.PodsDisabled)
		for _, c := range []dnstest.Case{nx("pod", q, dns.TypeA), nx("pod namespace", "default.pod.cluster.local.", dns.TypeA)} {
			if d := c.Check(z.Serve(context.Background(), c.Msg())); d != "" {
				t.Errorf("%s: %s", c.Name, d)
			}
		}
	})
}

func TestServfailUntilSynced(t *testing.T) {
	idx := index.New()
	z := zone.New(zone.Config{Zone: "cluster.local.", TTL: 5}, idx, func() bool { return false }, nil)
	m := new(dns.Msg)
	m.SetQuestion("myapp.default.svc.cluster.local.", dns.TypeA)
	if resp := z.Serve(context.Background(), m); resp == nil || resp.Rcode != dns.RcodeServerFailure {
		t.Fatalf("want SERVFAIL before sync, got %v", resp)
	}
}

// TestIncrementalUpdates changes the cluster through the API and expects the
// answers to follow within a short time, without rebuilding the index.
func TestIncrementalUpdates(t *testing.T) {
	z, client := newZone(t, zone.PodsInsecure)
	ctx := context.Background()
	ask := func(name string, qtype uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		return z.Serve(ctx, m)
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// New Service appears.
	s := dnstest.Svc("default", "late", []string{"10.96.9.9"}, dnstest.Port("http", corev1.ProtocolTCP, 80))
	if _, err := client.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("new service", func() bool {
		r := ask("late.default.svc.cluster.local.", dns.TypeA)
		return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1
	})
	// Endpoint becomes not ready: it leaves the headless answer.
	es, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "web-v4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := false
	es.Endpoints[0].Conditions.Ready = &ready
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("endpoint to leave", func() bool {
		r := ask("web-0.web.default.svc.cluster.local.", dns.TypeA)
		return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 0 // AAAA-family web-0 still exists: NODATA
	})
	eventually("PTR to leave", func() bool {
		return ask("10.1.244.10.in-addr.arpa.", dns.TypePTR).Rcode == dns.RcodeNameError
	})
	// Service deleted.
	if err := client.CoreV1().Services("default").Delete(ctx, "myapp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("service to go", func() bool {
		return ask("myapp.default.svc.cluster.local.", dns.TypeA).Rcode == dns.RcodeNameError
	})
	// Its cluster IP no longer reverses.
	if r := ask("215.3.96.10.in-addr.arpa.", dns.TypePTR); r.Rcode != dns.RcodeNameError {
		t.Errorf("deleted service still reverses: %v", r)
	}
}
