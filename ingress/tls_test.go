package ingress

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tlsSecret is a kubernetes.io/tls Secret with a self-signed certificate
// for names.
func tlsSecret(t *testing.T, ns, name string, names ...string) *corev1.Secret {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}),
		}}
}

func withTLS(ing *networkingv1.Ingress, secret string, hosts ...string) *networkingv1.Ingress {
	ing.Spec.TLS = append(ing.Spec.TLS, networkingv1.IngressTLS{Hosts: hosts, SecretName: secret})
	return ing
}

func commonName(c *tls.Certificate) string {
	if c == nil {
		return "<default>"
	}
	return c.Leaf.Subject.CommonName
}

// TestBuildTLS: which certificate each host gets, and the problems.
func TestBuildTLS(t *testing.T) {
	secrets := map[string]*corev1.Secret{}
	for _, s := range []*corev1.Secret{
		tlsSecret(t, "ns", "a", "a.test"),
		tlsSecret(t, "ns", "wild", "*.wild.test"),
		tlsSecret(t, "ns", "other", "other.test"),
		tlsSecret(t, "ns", "san", "san.test", "san2.test"),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "junk"}, Data: map[string][]byte{"tls.crt": []byte("x"), "tls.key": []byte("y")}},
	} {
		secrets[s.Namespace+"/"+s.Name] = s
	}
	in := BuildInput{
		Ingresses: []*networkingv1.Ingress{
			withTLS(testIngress("ns", "a", 0, nil, trule{"a.test", []tpath{{prefix, "/", "svc"}}}), "a", "a.test"),
			// A younger Ingress naming a.test too does not take it.
			withTLS(testIngress("ns", "a2", 1, nil, trule{"a.test", []tpath{{prefix, "/x", "svc"}}}), "other", "a.test"),
			withTLS(testIngress("ns", "w", 2, nil, trule{"*.wild.test", []tpath{{prefix, "/", "svc"}}}), "wild", "*.wild.test"),
			// The certificate is for other.test: mismatch, default.
			withTLS(testIngress("ns", "m", 3, nil, trule{"mismatch.test", []tpath{{prefix, "/", "svc"}}}), "other", "mismatch.test"),
			withTLS(testIngress("ns", "gone", 4, nil, trule{"gone.test", []tpath{{prefix, "/", "svc"}}}), "missing", "gone.test"),
			withTLS(testIngress("ns", "junk", 5, nil, trule{"junk.test", []tpath{{prefix, "/", "svc"}}}), "junk", "junk.test"),
			// No hosts: the rule hosts the certificate is valid for.
			withTLS(testIngress("ns", "san", 6, nil, trule{"san2.test", []tpath{{prefix, "/", "svc"}}}, trule{"nosan.test", []tpath{{prefix, "/", "svc"}}}), "san"),
			testIngress("ns", "plain", 7, nil, trule{"plain.test", []tpath{{prefix, "/", "svc"}}}),
		},
		Service: noService,
		Slices:  noSlices,
		Certificate: func(ns, name string) (*Certificate, error) {
			s := secrets[ns+"/"+name]
			if s == nil {
				return nil, errors.New("not found")
			}
			return ParseCertificate(s)
		},
	}
	tab := Build(in)
	for host, want := range map[string]string{
		"a.test": "a.test", "A.Test:443": "a.test", "x.wild.test": "*.wild.test", "mismatch.test": "<default>", "gone.test": "<default>",
		"junk.test": "<default>", "san2.test": "san.test", "plain.test": "<none>", "nosan.test": "<none>", "wild.test": "<none>", "": "<none>",
	} {
		got := "<none>"
		if tab.HasTLS(host) {
			got = commonName(tab.CertificateFor(host))
		}
		if got != want {
			t.Errorf("%q: certificate %s, want %s", host, got, want)
		}
	}
	var problems []string
	for _, p := range tab.Problems {
		if strings.HasPrefix(p.Reason, "TLS") {
			problems = append(problems, p.Ingress.Name+":"+p.Reason)
		}
	}
	if got, want := strings.Join(problems, " "), "m:TLSCertificateHostMismatch gone:TLSSecretInvalid junk:TLSSecretInvalid"; got != want {
		t.Errorf("problems %q, want %q", got, want)
	}
	for _, k := range []string{"ns/a", "ns/other", "ns/missing", "ns/san"} {
		if !tab.readsSecret(k) {
			t.Errorf("table does not read secret %s", k)
		}
	}
	if tab.readsSecret("ns/unrelated") {
		t.Error("table reads an unrelated secret")
	}
}

// TestTLSTermination runs the controller with its HTTPS listener: SNI picks
// the host's certificate (the default one for others), HTTPS responses of
// hosts with TLS carry HSTS and backends see X-Forwarded-Proto https, plain
// HTTP is redirected unless ssl-redirect is off (and for force-ssl-redirect
// without TLS), ACME challenges are not, HTTP/2 is offered, and a rotated
// or deleted Secret changes the certificate served.
func TestTLSTermination(t *testing.T) {
	b := startBackend(t, "b")
	secure := servedIngress("default", "secure", 0, nil, trule{"secure.test", []tpath{{prefix, "/", "svc"}}})
	secure.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"secure.test"}, SecretName: "secure-tls"}}
	optOut := servedIngress("default", "optout", 1, map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "false"},
		trule{"optout.test", []tpath{{prefix, "/", "svc"}}})
	optOut.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"optout.test"}, SecretName: "secure-tls"}}
	objs := append(backendObjects("default", "svc", b), ingressClass("svcnet", DefaultControllerClass), secure, optOut,
		servedIngress("default", "plain", 2, nil, trule{"plain.test", []tpath{{prefix, "/", "svc"}}}),
		servedIngress("default", "forced", 3, map[string]string{"nginx.ingress.kubernetes.io/force-ssl-redirect": "true"},
			trule{"forced.test", []tpath{{prefix, "/", "svc"}}}),
		tlsSecret(t, "default", "secure-tls", "secure.test", "optout.test"))
	e := newEnv(t, nil, objs...)

	ln, err := tls.Listen("tcp", "127.0.0.1:0", e.ctrl.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e.ctrl.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()
	type answer struct {
		status int
		proto  string
		cn     string
		header http.Header
	}
	get := func(sni, host, path string) answer {
		t.Helper()
		tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: sni},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			}}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, "https://"+host+path, nil)
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("GET https://%s%s (SNI %q): %v", host, path, err, sni)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return answer{resp.StatusCode, resp.Proto, resp.TLS.PeerCertificates[0].Subject.CommonName, resp.Header}
	}

	a := get("secure.test", "secure.test", "/app")
	if a.status != 200 || a.cn != "secure.test" || a.proto != "HTTP/2.0" || a.header.Get("X-Backend") != "b" {
		t.Errorf("secure.test over HTTPS: %+v", a)
	}
	if h := a.header.Get("Strict-Transport-Security"); h != "max-age=31536000; includeSubDomains" {
		t.Errorf("HSTS %q", h)
	}
	if p := a.header.Get("X-Seen-X-Forwarded-Proto"); p != "https" {
		t.Errorf("backend saw X-Forwarded-Proto %q", p)
	}
	// A client of an unknown name (or none) gets the default certificate,
	// and the request is routed by its Host: no HSTS for a host without TLS.
	for _, sni := range []string{"unknown.test", ""} {
		a = get(sni, "plain.test", "/")
		if a.status != 200 || a.cn != "Kubernetes Ingress Controller Fake Certificate" || a.header.Get("Strict-Transport-Security") != "" {
			t.Errorf("SNI %q, Host plain.test: %+v", sni, a)
		}
	}

	// Plain HTTP.
	r := e.get("secure.test", "/app?x=1")
	if r.status != http.StatusPermanentRedirect || r.header.Get("Location") != "https://secure.test/app?x=1" {
		t.Errorf("HTTP secure.test: %d Location %q", r.status, r.header.Get("Location"))
	}
	if r := e.get("secure.test", "/.well-known/acme-challenge/token"); r.status != 200 || r.backend != "b" {
		t.Errorf("ACME challenge: %d %q", r.status, r.backend)
	}
	for host, want := range map[string]int{"optout.test": 200, "plain.test": 200, "forced.test": 308} {
		if r := e.get(host, "/"); r.status != want {
			t.Errorf("HTTP %s: %d, want %d", host, r.status, want)
		}
	}
	if r := e.get("optout.test", "/"); r.header.Get("Strict-Transport-Security") != "" {
		t.Error("HSTS on plain HTTP")
	}

	// Rotating the Secret serves the new certificate; deleting it, the
	// default one.
	rotated := tlsSecret(t, "default", "secure-tls", "secure.test", "optout.test", "rotated.secure.test")
	rotated.ResourceVersion = "2"
	ctx := context.Background()
	if _, err := e.client.CoreV1().Secrets("default").Update(ctx, rotated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := x509Leaf(t, rotated)
	e.waitFor("rotated certificate", func() bool {
		c := e.ctrl.Proxy().Table().CertificateFor("secure.test")
		return c != nil && c.Leaf.Equal(want)
	})
	if err := e.client.CoreV1().Secrets("default").Delete(ctx, "secure-tls", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("default certificate after the Secret's deletion", func() bool {
		return e.ctrl.Proxy().Table().HasTLS("secure.test") && e.ctrl.Proxy().Table().CertificateFor("secure.test") == nil
	})
	if a := get("secure.test", "secure.test", "/"); a.cn != "Kubernetes Ingress Controller Fake Certificate" || a.status != 200 {
		t.Errorf("after deletion: %+v", a)
	}
}

func x509Leaf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	c, err := ParseCertificate(s)
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf
}
