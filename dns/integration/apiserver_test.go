package integration

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/dns/dnstest"
	"github.com/svcnet/svcnet/dns/index"
	"github.com/svcnet/svcnet/dns/server"
	"github.com/svcnet/svcnet/dns/zone"
)

// TestAgainstAPIServer creates the seed's myapp Service and a headless
// Service in the real apiserver, serves DNS from informers on it, and checks
// that answers follow creates, endpoint changes and deletes.
func TestAgainstAPIServer(t *testing.T) {
	api := apiservertest.Start(t)
	client := kubernetes.NewForConfigOrDie(api.Config)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	svc := dnstest.Svc("default", "myapp", nil, dnstest.Port("http", corev1.ProtocolTCP, 38080))
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil // allocated by the apiserver
	created, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterIP := created.Spec.ClusterIP
	web := dnstest.Svc("default", "web", []string{"None"}, dnstest.Port("http", corev1.ProtocolTCP, 80))
	if _, err := client.CoreV1().Services("default").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	es := dnstest.Slice("default", "web-manual", "web", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{dnstest.SlicePort("http", corev1.ProtocolTCP, 80)},
		dnstest.EP{IP: "10.244.1.10", Host: "web-0", Ready: true}, dnstest.EP{IP: "10.244.2.11", Ready: false})
	// Keep the endpointslice controller (if one runs) from claiming it.
	es.Labels[discoveryv1.LabelManagedBy] = "test.svcnet.io"
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	idx := index.New()
	w, err := index.NewWatcher(client, idx, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(ctx)
	if !w.WaitForSync(ctx, 20*time.Second) {
		t.Fatal("informers did not sync against the apiserver")
	}
	z := zone.New(zone.Config{Zone: "cluster.local.", TTL: 5, Reverse: true, LocalIPs: []netip.Addr{netip.MustParseAddr("10.244.0.53")}}, idx, w.HasSynced, nil)
	srv := server.New(server.Config{Listen: []string{"127.0.0.1:0"}}, &server.Handler{Zone: z}, w.HasSynced, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	addr := srv.DNSAddrs()[0]

	ask := func(name string, qtype uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out: %s", what)
			}
		}
	}

	for _, c := range []dnstest.Case{
		{Name: "allocated ClusterIP", Qname: "myapp.default.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{dnstest.A("myapp.default.svc.cluster.local. 5 IN A " + clusterIP)}},
		{Name: "seed SRV", Qname: "http.tcp.myapp.default.svc.cluster.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{dnstest.SRV("http.tcp.myapp.default.svc.cluster.local. 5 IN SRV 0 100 38080 myapp.default.svc.cluster.local.")},
			Extra:  []dns.RR{dnstest.A("myapp.default.svc.cluster.local. 5 IN A " + clusterIP)}},
		{Name: "kubernetes service", Qname: "kubernetes.default.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{dnstest.A("kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1")}},
		{Name: "headless ready only", Qname: "web.default.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{dnstest.A("web.default.svc.cluster.local. 5 IN A 10.244.1.10")}},
	} {
		if d := c.Check(ask(c.Qname, c.Qtype)); d != "" {
			t.Errorf("%s: %s", c.Name, d)
		}
	}
	if r := ask("myapp.kube-system.svc.cluster.local.", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("missing service in kube-system: %s", dns.RcodeToString[r.Rcode])
	}

	// An endpoint turns ready: it joins within moments, via a watch event.
	cur, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "web-manual", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := true
	cur.Endpoints[1].Conditions.Ready = &ready
	start := time.Now()
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("second endpoint", func() bool { return len(ask("web.default.svc.cluster.local.", dns.TypeA).Answer) == 2 })
	t.Logf("endpoint change visible in DNS after %v", time.Since(start))

	// Service deleted: NXDOMAIN, and its PTR is gone.
	if err := client.CoreV1().Services("default").Delete(ctx, "myapp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("service deletion", func() bool {
		return ask("myapp.default.svc.cluster.local.", dns.TypeA).Rcode == dns.RcodeNameError
	})
	rev, _ := dns.ReverseAddr(clusterIP)
	if r := z.Serve(ctx, func() *dns.Msg { m := new(dns.Msg); m.SetQuestion(rev, dns.TypePTR); return m }()); r == nil || r.Rcode != dns.RcodeNameError || len(r.Answer) != 0 {
		t.Errorf("PTR of deleted service still answered: %v", r)
	}
}
