package interop

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/testbed"
)

var (
	svcnetOnce sync.Once
	svcnetBin  string
	svcnetErr  error
)

// buildSvcnet builds svcnet alone (TestRealCoreDNS needs no kube-proxy).
func buildSvcnet(t *testing.T) string {
	t.Helper()
	svcnetOnce.Do(func() {
		dir, err := os.MkdirTemp("", "svcnet-interop-dns-")
		if err != nil {
			svcnetErr = err
			return
		}
		svcnetBin = filepath.Join(dir, "svcnet")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", svcnetBin, "./cmd/svcnet")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			svcnetErr = fmt.Errorf("go build ./cmd/svcnet: %v\n%s", err, out)
		}
	})
	if svcnetErr != nil {
		t.Fatal(svcnetErr)
	}
	return svcnetBin
}

// TestRealCoreDNS runs the real CoreDNS (its kubernetes plugin) against
// svcnet's API server, both inside a test network namespace on its own
// loopback, and checks its answers: a ClusterIP Service's A and SRV
// records, a headless Service's endpoint addresses and per-hostname
// records, an ExternalName's CNAME, and NXDOMAIN for a missing name.
// CoreDNS is not built by this module (it would pull CoreDNS's whole
// dependency tree into go.mod): point SVCNET_COREDNS at a v1.15.0 binary
// (`GOBIN=$PWD/bin go install github.com/coredns/coredns@v1.15.0`).
func TestRealCoreDNS(t *testing.T) {
	coredns := os.Getenv("SVCNET_COREDNS")
	if coredns == "" {
		t.Skip("SVCNET_COREDNS is not set (path of a CoreDNS v1.15.0 binary)")
	}
	if os.Geteuid() != 0 {
		t.Skip("interop: TestRealCoreDNS needs root (a network namespace)")
	}
	bin := buildSvcnet(t)
	ns := testbed.NewNetNS(t, "dns")
	data := t.TempDir()
	// Default authorization (RBAC,Node): CoreDNS runs as the coredns
	// service account with system:coredns, as kubeadm binds it.
	ctx, _, cs, _ := startAPIServer(t, ns, bin, data, "--service-cluster-ip-range", "10.96.0.0/16")

	web, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hl"},
		Spec:       corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready, port, proto := true, int32(80), corev1.ProtocolTCP
	host := "db-0"
	if _, err := cs.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "hl-1", Labels: map[string]string{discoveryv1.LabelServiceName: "hl"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}, Hostname: &host, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"10.244.2.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: &port, Protocol: &proto}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.org"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	corefile := filepath.Join(data, "Corefile")
	if err := os.WriteFile(corefile, []byte(`cluster.local:1053 {
    bind 127.0.0.1
    kubernetes cluster.local {
        kubeconfig `+componentKubeconfig(t, bin, data, "system:serviceaccount:kube-system:coredns",
		"system:serviceaccounts", "system:serviceaccounts:kube-system")+`
    }
    ready 127.0.0.1:8181
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ns.Start(coredns, "-conf", corefile)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return nsDialer(ns)(ctx, network, "127.0.0.1:1053")
	}}
	waitFor(t, 60*time.Second, "CoreDNS answering web.default.svc.cluster.local", func() error {
		addrs, err := r.LookupHost(ctx, "web.default.svc.cluster.local")
		if err != nil {
			return err
		}
		if !slices.Equal(addrs, []string{web.Spec.ClusterIP}) {
			return fmt.Errorf("web: %v, want %s", addrs, web.Spec.ClusterIP)
		}
		return nil
	})
	_, srvs, err := r.LookupSRV(ctx, "http", "tcp", "web.default.svc.cluster.local")
	if err != nil || len(srvs) != 1 || srvs[0].Port != 80 || srvs[0].Target != "web.default.svc.cluster.local." {
		t.Errorf("SRV _http._tcp.web: %+v %v", srvs, err)
	}
	addrs, err := r.LookupHost(ctx, "hl.default.svc.cluster.local")
	slices.Sort(addrs)
	if err != nil || !slices.Equal(addrs, []string{"10.244.1.5", "10.244.2.7"}) {
		t.Errorf("headless hl: %v %v", addrs, err)
	}
	if addrs, err := r.LookupHost(ctx, "db-0.hl.default.svc.cluster.local"); err != nil || !slices.Equal(addrs, []string{"10.244.1.5"}) {
		t.Errorf("db-0.hl: %v %v", addrs, err)
	}
	if cname, err := r.LookupCNAME(ctx, "ext.default.svc.cluster.local"); err != nil || cname != "example.org." {
		t.Errorf("ExternalName ext: %q %v", cname, err)
	}
	_, err = r.LookupHost(ctx, "missing.default.svc.cluster.local")
	if dnsErr, ok := err.(*net.DNSError); !ok || !dnsErr.IsNotFound {
		t.Errorf("missing name: %v, want NXDOMAIN", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// componentKubeconfig issues a kubeconfig for user (and groups) with
// `svcnet kubeconfig`, signed by the API server's CA in data, as an
// administrator would for a component.
func componentKubeconfig(t *testing.T, svcnet, data, user string, groups ...string) string {
	t.Helper()
	out := filepath.Join(data, strings.NewReplacer(":", "-").Replace(user)+".kubeconfig")
	args := []string{"kubeconfig", "--data-dir", data, "--user", user, "-o", out}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	if b, err := exec.Command(svcnet, args...).CombinedOutput(); err != nil {
		t.Fatalf("svcnet %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}
