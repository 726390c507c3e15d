package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/dns/dnstest"
)

// compareQueries are asked of both servers in --compare mode.
var compareQueries = []struct {
	name  string
	qtype uint16
}{
	{"myapp.default.svc.cluster.local.", dns.TypeA},
	{"MyApp.Default.SVC.Cluster.Local.", dns.TypeA},
	{"myapp.default.svc.cluster.local.", dns.TypeAAAA},
	{"myapp.default.svc.cluster.local.", dns.TypeTXT},
	{"myapp.default.svc.cluster.local.", dns.TypeMX},
	{"myapp.default.svc.cluster.local.", dns.TypeCNAME},
	{"myapp.default.svc.cluster.local.", dns.TypeSOA},
	{"myapp.default.svc.cluster.local.", dns.TypeSRV},
	{"http.tcp.myapp.default.svc.cluster.local.", dns.TypeSRV},
	{"_http._tcp.myapp.default.svc.cluster.local.", dns.TypeSRV},
	{"_http._udp.myapp.default.svc.cluster.local.", dns.TypeSRV},
	{"_https._tcp.myapp.default.svc.cluster.local.", dns.TypeSRV},
	{"multi.default.svc.cluster.local.", dns.TypeSRV},
	{"dual.default.svc.cluster.local.", dns.TypeAAAA},
	{"_http._tcp.dual.default.svc.cluster.local.", dns.TypeSRV},
	{"web.default.svc.cluster.local.", dns.TypeA},
	{"web.default.svc.cluster.local.", dns.TypeAAAA},
	{"_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV},
	{"web-0.web.default.svc.cluster.local.", dns.TypeA},
	{"10-244-2-11.web.default.svc.cluster.local.", dns.TypeA},
	{"10-244-1-5.myapp.default.svc.cluster.local.", dns.TypeA},
	{"web-2.web.default.svc.cluster.local.", dns.TypeA},
	{"nope.default.svc.cluster.local.", dns.TypeA},
	{"noports.default.svc.cluster.local.", dns.TypeA},
	{"noports.default.svc.cluster.local.", dns.TypeSRV},
	{"alias.default.svc.cluster.local.", dns.TypeA},
	{"dangling.default.svc.cluster.local.", dns.TypeA},
	{"svc-external-name.default.svc.cluster.local.", dns.TypeCNAME},
	{"svc-external-name.default.svc.cluster.local.", dns.TypeSRV},
	{"svc-external-name.default.svc.cluster.local.", dns.TypeTXT},
	{"ipext.default.svc.cluster.local.", dns.TypeA},
	{"x.svc-external-name.default.svc.cluster.local.", dns.TypeA},
	{"215.3.96.10.in-addr.arpa.", dns.TypePTR},
	{"10.1.244.10.in-addr.arpa.", dns.TypePTR},
	{"11.2.244.10.in-addr.arpa.", dns.TypePTR},
	{"dns-version.cluster.local.", dns.TypeTXT},
	{"dns-version.cluster.local.", dns.TypeA},
	{"nosuch.cluster.local.", dns.TypeTXT},
	{"10-244-7-7.default.pod.cluster.local.", dns.TypeA},
	{"10-244-7-7.nowhere.pod.cluster.local.", dns.TypeA},
	{"10-244-7.default.pod.cluster.local.", dns.TypeA},
	{"x.10-244-7-7.default.pod.cluster.local.", dns.TypeA},
	{"default.pod.cluster.local.", dns.TypeA},
	{"myapp.nowhere.svc.cluster.local.", dns.TypeA},
	{"nosuch.default.svc.cluster.local.", dns.TypeA},
	{"nosuch.default.svc.cluster.local.", dns.TypeSOA},
	{"myapp.default.svc.cluster.local.default.svc.cluster.local.", dns.TypeA},
	{"myapp.svc.cluster.local.", dns.TypeA},
	{"myapp.cluster.local.", dns.TypeA},
	{"a.b.c.myapp.default.svc.cluster.local.", dns.TypeA},
	{"default.svc.cluster.local.", dns.TypeA},
	{"nowhere.svc.cluster.local.", dns.TypeA},
	{"svc.cluster.local.", dns.TypeA},
	{"pod.cluster.local.", dns.TypeA},
	{"cluster.local.", dns.TypeA},
	{"cluster.local.", dns.TypeSOA},
	{"cluster.local.", dns.TypeNS},
	{"ns.dns.cluster.local.", dns.TypeA},
	{"cluster.local.", dns.TypeAXFR},
}

// compare serves dnstest.Cluster from the fake API to both servers and
// prints every question whose answers differ (SOA serials ignored).
func compare(svcnetBin, corednsBin string) error {
	var nss []corev1.Namespace
	var svcs []corev1.Service
	var slices []discoveryv1.EndpointSlice
	for _, o := range dnstest.Cluster() {
		switch v := o.(type) {
		case *corev1.Namespace:
			nss = append(nss, *v)
		case *corev1.Service:
			svcs = append(svcs, *v)
		case *discoveryv1.EndpointSlice:
			slices = append(slices, *v)
		}
	}
	dir, err := os.MkdirTemp("", "dnscompare")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	api := newFakeAPI(nss, svcs, slices)
	if err := api.start(); err != nil {
		return err
	}
	defer api.srv.Close()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(api.kubeconfig()), 0o600); err != nil {
		return err
	}
	up, stopUp := stubUpstream()
	defer stopUp()
	targets, err := startTargets(dir, kc, up, svcnetBin, corednsBin, "5")
	if err != nil {
		return err
	}
	defer stopTargets(targets)
	if len(targets) < 2 {
		return fmt.Errorf("--compare needs --coredns")
	}
	diffs := 0
	for _, q := range compareQueries {
		var got [2]string
		for i, t := range targets[:2] {
			m := new(dns.Msg)
			m.SetQuestion(q.name, q.qtype)
			c := &dns.Client{Timeout: 2 * time.Second}
			if q.qtype == dns.TypeAXFR {
				c.Net = "tcp"
			}
			r, _, err := c.Exchange(m, fmt.Sprintf("127.0.0.1:%d", t.dnsPort))
			if err != nil {
				got[i] = "error: " + err.Error()
				continue
			}
			got[i] = canonical(r)
		}
		if got[0] != got[1] {
			diffs++
			fmt.Printf("DIFF %s %s\n  svcnet:  %s\n  coredns: %s\n", q.name, dns.TypeToString[q.qtype],
				strings.ReplaceAll(got[0], "\n", "\n           "), strings.ReplaceAll(got[1], "\n", "\n           "))
		}
	}
	fmt.Printf("%d of %d questions differ\n", diffs, len(compareQueries))
	return nil
}

// canonical renders a response for comparison: rcode, flags, and each
// section's records sorted, SOA serials zeroed.
func canonical(r *dns.Msg) string {
	sec := func(rrs []dns.RR) string {
		var out []string
		for _, rr := range rrs {
			if rr.Header().Rrtype == dns.TypeOPT {
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
	return fmt.Sprintf("%s aa=%v\nAN: %s\nNS: %s\nAR: %s", dns.RcodeToString[r.Rcode], r.Authoritative,
		sec(r.Answer), sec(r.Ns), sec(r.Extra))
}
