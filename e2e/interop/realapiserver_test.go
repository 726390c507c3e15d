package interop

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/svcnet/svcnet/internal/testbed"
)

// kubeAPIServerVersion is stamped into kube-apiserver (its /version).
const kubeAPIServerVersion = "v1.37.2"

// buildControlPlane builds the real kube-apiserver (k8s.io/kubernetes, the
// version go.mod pins) and etcd (go.etcd.io/etcd/server/v3, the version
// Kubernetes requires) in this module, into a directory removed when t ends.
func buildControlPlane(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, args := range [][]string{
		{"build", "-o", filepath.Join(dir, "kube-apiserver"),
			"-ldflags", "-X k8s.io/component-base/version.gitVersion=" + kubeAPIServerVersion,
			"k8s.io/kubernetes/cmd/kube-apiserver"},
		{"build", "-o", filepath.Join(dir, "etcd"), "go.etcd.io/etcd/server/v3"},
	} {
		start := time.Now()
		if out, err := exec.Command(gobin, args...).CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("go %s took %s", args[len(args)-1], time.Since(start).Round(time.Second))
	}
	return dir
}

// pki is a cluster CA and the files kube-apiserver is started with.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

func newPKI(t *testing.T, dir string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "interop-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &pki{dir: dir, ca: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
	p.write(t, "ca.crt", p.caPEM)
	return p
}

func (p *pki) write(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue signs a certificate for cn (organizations = groups); with hosts it
// is a serving certificate, otherwise a client certificate. It returns the
// certificate and key in PEM.
func (p *pki) issue(t *testing.T, cn string, groups []string, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: cn, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// kubeconfig writes a kubeconfig for server with a client certificate for
// cn/groups, or with a bearer token when token is set.
func (p *pki) kubeconfig(t *testing.T, name, server, cn string, groups []string, token string) string {
	t.Helper()
	user := &clientcmdapi.AuthInfo{Token: token}
	if token == "" {
		user.ClientCertificateData, user.ClientKeyData = p.issue(t, cn, groups)
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"interop": {Server: server, CertificateAuthorityData: p.caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{name: user},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: "interop", AuthInfo: name}},
		CurrentContext: name,
	}
	path := filepath.Join(p.dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// realCluster is etcd and kube-apiserver running in the cp namespace.
type realCluster struct {
	cp     *testbed.NetNS
	pki    *pki
	admin  *kubernetes.Clientset
	svcnet string
	dir    string
}

// The control plane's namespace holds the advertise address on its
// loopback; node namespaces reach it over their own link.
const (
	cpIP        = "10.2.0.1"
	serviceCIDR = "10.96.0.0/16"
)

// startRealCluster starts etcd and kube-apiserver v1.37.2 inside cp, with
// the authorization real clusters use (Node,RBAC), x509 client
// certificates and service-account tokens.
func startRealCluster(t *testing.T, bin, svcnet string) *realCluster {
	t.Helper()
	cp := testbed.NewNetNS(t, "rcp")
	dir := t.TempDir()
	p := newPKI(t, dir)
	// The advertise address, on the namespace's loopback; node namespaces
	// route to it over their links.
	cp.MustRun("ip", "addr", "add", cpIP+"/32", "dev", "lo")

	start(t, cp, filepath.Join(dir, "etcd.log"), bin+"/etcd", "--name", "interop", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "interop=http://127.0.0.1:2380")

	crt, key := p.issue(t, "kube-apiserver", nil, "127.0.0.1", cpIP, "10.96.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	saDER, _ := x509.MarshalECPrivateKey(saKey)
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	start(t, cp, filepath.Join(dir, "kube-apiserver.log"), bin+"/kube-apiserver",
		"--etcd-servers", "http://127.0.0.1:2379",
		"--advertise-address", cpIP, "--bind-address", "0.0.0.0", "--secure-port", "6443",
		"--tls-cert-file", p.write(t, "apiserver.crt", crt), "--tls-private-key-file", p.write(t, "apiserver.key", key),
		"--client-ca-file", filepath.Join(dir, "ca.crt"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", p.write(t, "sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})),
		"--service-account-signing-key-file", p.write(t, "sa.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER})),
		"--service-cluster-ip-range", serviceCIDR,
		"--authorization-mode", "Node,RBAC",
		"--profiling=false", "--v", "1")

	cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig(t, "admin", "https://127.0.0.1:6443", "interop-admin", []string{"system:masters"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = nsDialer(cp)
	cfg.WarningHandler = rest.NoWarnings{}
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	waitFor(t, 3*time.Minute, "kube-apiserver /readyz", func() error {
		_, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	v, err := admin.Discovery().ServerVersion()
	if err != nil || v.GitVersion != kubeAPIServerVersion {
		t.Fatalf("kube-apiserver version %v %v, want %s", v, err, kubeAPIServerVersion)
	}
	// The ServiceAccount admission plugin wants the namespace's default
	// account (the service account controller's work in a real cluster).
	for _, ns := range []string{"default", "kube-system"} {
		waitFor(t, time.Minute, "namespace "+ns, func() error {
			_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}
	return &realCluster{cp: cp, pki: p, admin: admin, svcnet: svcnet, dir: dir}
}

// saKubeconfig creates service account ns/name and returns a kubeconfig
// holding a token issued for it by the TokenRequest API, as
// kube-controller-manager (--use-service-account-credentials) and
// kubelet-mounted tokens do.
func (c *realCluster) saKubeconfig(t *testing.T, server, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := c.admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c.pki.kubeconfig(t, ns+"-"+name+"-"+strings.ReplaceAll(strings.TrimPrefix(server, "https://"), ":", "-"), server, "", nil, tr.Status.Token)
}

// start runs args inside ns with output to logPath; the process is killed
// when the test ends, and its log shown if the test failed.
func start(t *testing.T, ns *testbed.NetNS, logPath string, args ...string) {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s:\n%s", filepath.Base(logPath), tail(string(b), 60))
		}
	})
}

// checkLog fails on list/watch failures and forbidden requests in a
// component's log, and shows its other warnings and errors.
func checkLog(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		l := strings.ToLower(line)
		switch {
		case strings.Contains(l, "failed to list"), strings.Contains(l, "failed to watch"), strings.Contains(l, "forbidden"),
			strings.Contains(l, "server rejected event"):
			t.Errorf("%s: %s", filepath.Base(path), line[:min(len(line), 400)])
		case strings.HasPrefix(line, "E"), strings.HasPrefix(line, "W"), strings.Contains(line, "level=ERROR"), strings.Contains(line, "level=WARN"):
			t.Logf("%s: %s", filepath.Base(path), line[:min(len(line), 300)])
		}
	}
}

// TestSvcnetOnRealKubeAPIServer runs svcnet's proxy (iptables and nftables
// modes), DNS, Ingress controller and controllers against the real kube-apiserver v1.37.2 and
// etcd, each component with the identity a real cluster gives it, and
// checks their work: packets to a ClusterIP and a NodePort reach both
// backends, DNS answers, EndpointSlices, ReplicaSets and Pods are written.
func TestSvcnetOnRealKubeAPIServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("interop: TestSvcnetOnRealKubeAPIServer needs root (network namespaces, iptables/nftables in them)")
	}
	testbed.RequireCommand(t, "ip", "iptables-save", "nft")
	bin := buildControlPlane(t)
	svcnet := buildSvcnet(t)
	c := startRealCluster(t, bin, svcnet)
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run("proxy-"+mode, func(t *testing.T) { c.proxy(t, mode) })
	}
	t.Run("dns", c.dns)
	t.Run("ingress", c.ingress)
	t.Run("controllers", c.controllers)
	t.Run("list-semantics", c.listSemantics)
}

// proxy runs `svcnet proxy` as system:kube-proxy (bound to
// system:node-proxier by kube-apiserver's bootstrap policy) in a fresh node
// namespace linked to the control plane and to a pods namespace.
func (c *realCluster) proxy(t *testing.T, mode string) {
	const nodeIP = "10.1.0.1"
	nodeName := "node-" + mode
	backends := []string{"10.1.0.2", "10.1.0.3"}
	node := testbed.NewNetNS(t, "rnode")
	pods := testbed.NewNetNS(t, "rpods")
	testbed.Link(t, node, "eth0", nodeIP+"/24", pods, "eth0", backends[0]+"/24")
	pods.MustRun("ip", "addr", "add", backends[1]+"/24", "dev", "eth0")
	// Each node namespace has its own link (and subnet) to the control plane.
	subnet := map[string]string{"iptables": "10.2.1", "nftables": "10.2.2"}[mode]
	testbed.Link(t, node, "cp0", subnet+".2/24", c.cp, "n"+mode[:2], subnet+".1/24")
	node.MustRun("ip", "route", "add", cpIP+"/32", "via", subnet+".1")
	node.MustRun("ip", "route", "add", "10.96.0.0/16", "dev", "eth0")
	node.MustRun("sysctl", "-qw", "net.ipv4.ip_forward=1")
	for _, ip := range backends {
		serveAddr(t, pods, ip)
	}

	ctx := context.Background()
	if _, err := c.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/hostname": nodeName}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := c.admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}, {Type: corev1.NodeHostName, Address: nodeName}}
	if _, err := c.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := "web-" + mode
	svc, err := c.admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var eps []discoveryv1.Endpoint
	for _, ip := range backends {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}, NodeName: ptr(nodeName)})
	}
	if _, err := c.admin.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-manual", Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "interop-test"}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	logPath := filepath.Join(t.TempDir(), "svcnet-proxy.log")
	start(t, node, logPath, c.svcnet, "proxy",
		"--kubeconfig", c.pki.kubeconfig(t, "kube-proxy-"+mode, "https://"+cpIP+":6443", "system:kube-proxy", nil, ""),
		"--hostname-override", nodeName, "--proxy-mode", mode, "--cluster-cidr", "10.244.0.0/16",
		"--conntrack-max-per-core", "0", "--nodeport-addresses", "primary",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256")
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: nsDialer(node)}}
	waitFor(t, 2*time.Minute, "svcnet proxy /healthz 200", func() error {
		resp, err := hc.Get("http://127.0.0.1:10256/healthz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	})
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	waitFor(t, time.Minute, "a connection to "+addr, func() error { _, err := fetch(node, addr); return err })
	spread(t, node, addr, backends)
	spread(t, pods, net.JoinHostPort(nodeIP, fmt.Sprint(svc.Spec.Ports[0].NodePort)), backends)
	if mode == "nftables" {
		// Given no --service-cluster-ip-range, the proxy reads
		// kube-apiserver's ServiceCIDR objects, as kube-proxy does, and
		// drops traffic to unallocated ClusterIPs in them.
		waitFor(t, time.Minute, "the drop rule for the ServiceCIDR "+serviceCIDR, func() error {
			out, err := node.Run("nft", "list", "chain", "ip", "kube-proxy", "cluster-ips-check")
			if err != nil {
				return err
			}
			if !strings.Contains(out, "ip daddr "+serviceCIDR+" drop") {
				return fmt.Errorf("no drop rule:\n%s", out)
			}
			return nil
		})
	}
	checkLog(t, logPath)
}

// serveAddr answers every TCP connection to ip:8080 in ns with ip.
func serveAddr(t *testing.T, ns *testbed.NetNS, ip string) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(ip, "8080"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, ip+"\n")
			c.Close()
		}
	}()
}

// dns runs `svcnet dns` as the kube-system/coredns service account, with
// the system:coredns ClusterRole and binding kubeadm creates, and asks it
// with miekg/dns.
func (c *realCluster) dns(t *testing.T) {
	ctx := context.Background()
	if _, err := c.admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:coredns"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "coredns", Namespace: "kube-system"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web, err := c.admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "dnsweb"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hl"},
		Spec:       corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "hl-1", Labels: map[string]string{discoveryv1.LabelServiceName: "hl", discoveryv1.LabelManagedBy: "interop-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}, Hostname: ptr("db-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
			{Addresses: []string{"10.244.2.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(80)), Protocol: ptr(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.org"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	logPath := filepath.Join(t.TempDir(), "svcnet-dns.log")
	start(t, c.cp, logPath, c.svcnet, "dns",
		"--kubeconfig", c.saKubeconfig(t, "https://127.0.0.1:6443", "kube-system", "coredns"),
		"--listen", "127.0.0.1:1053", "--health-listen", "", "--ready-listen", "127.0.0.1:8181", "--metrics-listen", "",
		"--upstream", "127.0.0.1:9")
	ask := func(name string, qtype uint16) (*dns.Msg, error) {
		var in *dns.Msg
		err := c.cp.Do(func() error {
			m := new(dns.Msg)
			m.SetQuestion(name, qtype)
			var err error
			in, _, err = (&dns.Client{Timeout: 3 * time.Second}).Exchange(m, "127.0.0.1:1053")
			return err
		})
		return in, err
	}
	records := func(m *dns.Msg) []string {
		var out []string
		for _, rr := range m.Answer {
			f := strings.Fields(rr.String())
			out = append(out, f[3]+" "+strings.Join(f[4:], " "))
		}
		sort.Strings(out)
		return out
	}
	waitFor(t, 2*time.Minute, "svcnet dns answering dnsweb.default.svc.cluster.local", func() error {
		m, err := ask("dnsweb.default.svc.cluster.local.", dns.TypeA)
		if err != nil {
			return err
		}
		if got := records(m); !slices.Equal(got, []string{"A " + web.Spec.ClusterIP}) {
			return fmt.Errorf("A: %v", got)
		}
		return nil
	})
	rev, _ := dns.ReverseAddr(web.Spec.ClusterIP)
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  []string
	}{
		{"_http._tcp.dnsweb.default.svc.cluster.local.", dns.TypeSRV, []string{"SRV 0 100 80 dnsweb.default.svc.cluster.local."}},
		{rev, dns.TypePTR, []string{"PTR dnsweb.default.svc.cluster.local."}},
		{"hl.default.svc.cluster.local.", dns.TypeA, []string{"A 10.244.1.5", "A 10.244.2.7"}},
		{"db-0.hl.default.svc.cluster.local.", dns.TypeA, []string{"A 10.244.1.5"}},
		{"ext.default.svc.cluster.local.", dns.TypeCNAME, []string{"CNAME example.org."}},
	} {
		m, err := ask(tc.name, tc.qtype)
		if err != nil {
			t.Errorf("%s %s: %v", tc.name, dns.TypeToString[tc.qtype], err)
			continue
		}
		if got := records(m); m.Rcode != dns.RcodeSuccess || !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %s %v, want %v", tc.name, dns.TypeToString[tc.qtype], dns.RcodeToString[m.Rcode], got, tc.want)
		}
	}
	if m, err := ask("missing.default.svc.cluster.local.", dns.TypeA); err != nil || m.Rcode != dns.RcodeNameError {
		t.Errorf("missing name: %v %v, want NXDOMAIN", m, err)
	}
	checkLog(t, logPath)
}

// controllers runs svcnet's EndpointSlice, Deployment and ReplicaSet
// controllers as kube-controller-manager does with
// --use-service-account-credentials (kubeadm's default): each under its own
// kube-system service account, holding only the system:controller:* role
// kube-apiserver's bootstrap policy binds to it.
func (c *realCluster) controllers(t *testing.T) {
	var logs []string
	for _, ctl := range []struct{ name, sa string }{
		{"endpointslice", "endpointslice-controller"},
		{"deployment", "deployment-controller"},
		{"replicaset", "replicaset-controller"},
	} {
		logPath := filepath.Join(t.TempDir(), "svcnet-controllers-"+ctl.name+".log")
		// Each runs with only its controller's service account, which may
		// not take kube-controller-manager's Lease (kube-controller-manager
		// elects with its own identity): no leader election.
		start(t, c.cp, logPath, c.svcnet, "controllers", "--controllers", ctl.name, "--leader-elect=false",
			"--kubeconfig", c.saKubeconfig(t, "https://127.0.0.1:6443", "kube-system", ctl.sa))
		logs = append(logs, logPath)
	}
	ctx := context.Background()
	labels := map[string]string{"app": "ctl"}
	if _, err := c.admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ctl"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := c.admin.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "ctl"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	waitFor(t, 2*time.Minute, "the Deployment's ReplicaSet and its two Pods", func() error {
		rs, err := c.admin.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=ctl"})
		if err != nil {
			return err
		}
		if len(rs.Items) != 1 || metav1.GetControllerOf(&rs.Items[0]) == nil || metav1.GetControllerOf(&rs.Items[0]).UID != d.UID {
			return fmt.Errorf("ReplicaSets: %d", len(rs.Items))
		}
		pl, err := c.admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=ctl"})
		if err != nil {
			return err
		}
		if len(pl.Items) != 2 {
			return fmt.Errorf("Pods: %d", len(pl.Items))
		}
		for _, p := range pl.Items {
			if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != rs.Items[0].UID {
				return fmt.Errorf("pod %s not owned by ReplicaSet %s", p.Name, rs.Items[0].Name)
			}
		}
		pods = pl.Items
		return nil
	})
	// No kubelet here: the test binds one pod and reports it running and
	// ready, as the scheduler and kubelet would.
	if _, err := c.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-ctl"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := pods[0]
	if err := c.admin.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-ctl"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "pod status written", func() error {
		cur, err := c.admin.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodRunning
		cur.Status.PodIP, cur.Status.PodIPs = "10.244.9.5", []corev1.PodIP{{IP: "10.244.9.5"}}
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		_, err = c.admin.CoreV1().Pods("default").UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	waitFor(t, 2*time.Minute, "svcnet's EndpointSlice for default/ctl with the ready pod", func() error {
		l, err := c.admin.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=ctl"})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 {
			return fmt.Errorf("%d slices", len(l.Items))
		}
		s := l.Items[0]
		if s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" || metav1.GetControllerOf(&s) == nil || metav1.GetControllerOf(&s).Kind != "Service" {
			return fmt.Errorf("slice %s: labels %v owner %v", s.Name, s.Labels, s.OwnerReferences)
		}
		if len(s.Endpoints) != 1 || !slices.Equal(s.Endpoints[0].Addresses, []string{"10.244.9.5"}) || s.Endpoints[0].NodeName == nil || *s.Endpoints[0].NodeName != "node-ctl" ||
			len(s.Ports) != 1 || s.Ports[0].Port == nil || *s.Ports[0].Port != 8080 {
			var b bytes.Buffer
			fmt.Fprintf(&b, "%+v %+v", s.Endpoints, s.Ports)
			return fmt.Errorf("slice %s: %s", s.Name, b.String())
		}
		return nil
	})
	waitFor(t, time.Minute, "Deployment status from svcnet's deployment controller", func() error {
		cur, err := c.admin.AppsV1().Deployments("default").Get(ctx, "ctl", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Status.ObservedGeneration != cur.Generation || cur.Status.Replicas != 2 {
			return fmt.Errorf("status %+v", cur.Status)
		}
		return nil
	})
	for _, l := range logs {
		checkLog(t, l)
	}
}
