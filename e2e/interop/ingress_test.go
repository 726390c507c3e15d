package interop

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ingress runs `svcnet ingress` as a service account of the real
// kube-apiserver with the RBAC an Ingress controller's manifests grant,
// beside the real DefaultIngressClass admission: the seed's cookie-affinity
// Ingress, created without a class, is given the default class by
// kube-apiserver, served (sticky with its cookie, spread without it), and
// its status is written through kube-apiserver's ingresses/status.
func (c *realCluster) ingress(t *testing.T) {
	ctx := context.Background()
	sa := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "svcnet-ingress", Namespace: "kube-system"}}
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: kind, Name: name}
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "svcnet-ingress"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "secrets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "ingressclasses"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses/status"}, Verbs: []string{"update"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}, metav1.CreateOptions{}))
	must(c.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "svcnet-ingress"}, RoleRef: ref("ClusterRole", "svcnet-ingress"), Subjects: sa,
	}, metav1.CreateOptions{}))
	must(c.admin.RbacV1().Roles("kube-system").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "svcnet-ingress-leader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}},
	}, metav1.CreateOptions{}))
	must(c.admin.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "svcnet-ingress-leader"}, RoleRef: ref("Role", "svcnet-ingress-leader"), Subjects: sa,
	}, metav1.CreateOptions{}))
	must(c.admin.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "svcnet", Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: "svcnet.io/ingress"},
	}, metav1.CreateOptions{}))

	// Two HTTP backends in the control plane's namespace, named by address
	// (not loopback ones: an EndpointSlice may not hold those).
	backends := []string{"10.3.0.2", "10.3.0.3"}
	for _, ip := range backends {
		c.cp.MustRun("ip", "addr", "add", ip+"/32", "dev", "lo")
		serveHTTP(t, c, ip)
	}
	must(c.admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "my-service"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP,
			TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}))
	var eps []discoveryv1.Endpoint
	for _, ip := range backends {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	}
	must(c.admin.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "my-service-manual", Labels: map[string]string{discoveryv1.LabelServiceName: "my-service", discoveryv1.LabelManagedBy: "interop-test"}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
	}, metav1.CreateOptions{}))
	prefix := networkingv1.PathTypePrefix
	ing, err := c.admin.NetworkingV1().Ingresses("default").Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "my-ingress", Annotations: map[string]string{
			"nginx.ingress.kubernetes.io/affinity":               "cookie",
			"nginx.ingress.kubernetes.io/session-cookie-name":    "INGRESSCOOKIE",
			"nginx.ingress.kubernetes.io/session-cookie-expires": "172800",
		}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "my-service",
					Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "svcnet" {
		t.Fatalf("kube-apiserver's DefaultIngressClass admission did not set the class: %v", ing.Spec.IngressClassName)
	}

	logPath := filepath.Join(t.TempDir(), "svcnet-ingress.log")
	start(t, c.cp, logPath, c.svcnet, "ingress",
		"--kubeconfig", c.saKubeconfig(t, "https://127.0.0.1:6443", "kube-system", "svcnet-ingress"),
		"--http-port", "18080", "--bind-address", "127.0.0.1", "--healthz-port", "0",
		"--publish-status-address", cpIP, "--election-namespace", "kube-system")
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: nsDialer(c.cp), DisableKeepAlives: true}}
	get := func(cookie string) (string, string, error) {
		req, _ := http.NewRequest("GET", "http://127.0.0.1:18080/", nil)
		req.Host = "example.com"
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", "", fmt.Errorf("%s: %s", resp.Status, b)
		}
		set := ""
		for _, ck := range resp.Cookies() {
			if ck.Name == "INGRESSCOOKIE" {
				set = ck.Name + "=" + ck.Value
				if ck.Expires.Before(time.Now().Add(47 * time.Hour)) {
					return "", "", fmt.Errorf("cookie expires %v, want 48 hours ahead", ck.Expires)
				}
			}
		}
		return strings.TrimSpace(string(b)), set, nil
	}
	var first, cookie string
	waitFor(t, 2*time.Minute, "svcnet ingress serving example.com with a session cookie", func() error {
		var err error
		first, cookie, err = get("")
		if err == nil && cookie == "" {
			err = fmt.Errorf("no INGRESSCOOKIE cookie")
		}
		return err
	})
	for i := 0; i < 10; i++ {
		if got, _, err := get(cookie); err != nil || got != first {
			t.Fatalf("with %s: %q %v, want %q", cookie, got, err, first)
		}
	}
	seen := map[string]bool{}
	for i := 0; i < 40 && len(seen) < len(backends); i++ {
		if got, _, err := get(""); err == nil {
			seen[got] = true
		}
	}
	if len(seen) != len(backends) {
		t.Errorf("new sessions reached %v, want both backends %v", seen, backends)
	}
	waitFor(t, time.Minute, "the Ingress status written through kube-apiserver", func() error {
		cur, err := c.admin.NetworkingV1().Ingresses("default").Get(ctx, "my-ingress", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lb := cur.Status.LoadBalancer.Ingress; len(lb) != 1 || lb[0].IP != cpIP {
			return fmt.Errorf("status %+v", lb)
		}
		return nil
	})
	// TLS: a kubernetes.io/tls Secret stored by kube-apiserver and an
	// Ingress naming it; svcnet ingress (watching Secrets with the RBAC
	// above) serves the host on its HTTPS listener with that certificate.
	certPEM, keyPEM := selfSignedPair(t, "secure.example.com")
	must(c.admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "secure-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}, metav1.CreateOptions{}))
	must(c.admin.NetworkingV1().Ingresses("default").Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "secure"},
		Spec: networkingv1.IngressSpec{
			TLS: []networkingv1.IngressTLS{{Hosts: []string{"secure.example.com"}, SecretName: "secure-tls"}},
			Rules: []networkingv1.IngressRule{{Host: "secure.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "my-service",
						Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}},
		},
	}, metav1.CreateOptions{}))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	hs := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "secure.example.com"},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return nsDialer(c.cp)(ctx, network, "127.0.0.1:443")
		}}}
	waitFor(t, time.Minute, "secure.example.com over HTTPS with its Secret's certificate", func() error {
		resp, err := hs.Get("https://secure.example.com/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(b), "10.3.0.") {
			return fmt.Errorf("%s: %q", resp.Status, b)
		}
		return nil
	})
	checkLog(t, logPath)
}

// selfSignedPair is a self-signed certificate for host and its key, PEM.
func selfSignedPair(t *testing.T, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// serveHTTP answers every HTTP request with ip on ip:8080 in the control
// plane's namespace.
func serveHTTP(t *testing.T, c *realCluster, ip string) {
	t.Helper()
	var ln net.Listener
	if err := c.cp.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(ip, "8080"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, ip) }),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}
