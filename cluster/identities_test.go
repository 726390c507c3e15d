package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/apiserver"
)

// TestComponentKubeconfigs checks the identity each component of svcnet up
// gets: the certificate subjects the RBAC and Node authorizers key on.
func TestComponentKubeconfigs(t *testing.T) {
	dir := t.TempDir()
	apiDir := filepath.Join(dir, "apiserver")
	if _, err := apiserver.LoadOrCreatePKI(filepath.Join(apiDir, "pki")); err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: dir, Nodes: 2, Prefix: "svcnet"}
	kcs, err := writeComponentKubeconfigs(cfg, apiDir, "https://172.18.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"proxy":                     {"system:kube-proxy", ""},
		"controllers":               {"system:kube-controller-manager", ""},
		"dns":                       {"system:serviceaccount:kube-system:coredns", "system:serviceaccounts:kube-system"},
		"netpol":                    {"system:serviceaccount:kube-system:svcnet-netpol", "system:serviceaccounts:kube-system"},
		"speaker":                   {"system:serviceaccount:metallb-system:speaker", "system:serviceaccounts:metallb-system"},
		"ingress":                   {"system:serviceaccount:kube-system:svcnet-ingress", "system:serviceaccounts:kube-system"},
		"node-svcnet-control-plane": {"system:node:svcnet-control-plane", "system:nodes"},
		"node-svcnet-worker":        {"system:node:svcnet-worker", "system:nodes"},
	}
	if len(kcs) != len(want) {
		t.Errorf("kubeconfigs %v", kcs)
	}
	for comp, w := range want {
		kc, err := clientcmd.LoadFromFile(kcs[comp])
		if err != nil {
			t.Fatalf("%s: %v", comp, err)
		}
		ctx := kc.Contexts[kc.CurrentContext]
		if kc.Clusters[ctx.Cluster].Server != "https://172.18.0.1:6443" {
			t.Errorf("%s: server %s", comp, kc.Clusters[ctx.Cluster].Server)
		}
		b, _ := pem.Decode(kc.AuthInfos[ctx.AuthInfo].ClientCertificateData)
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if cert.Subject.CommonName != w[0] || (w[1] != "" && !slices.Contains(cert.Subject.Organization, w[1])) || slices.Contains(cert.Subject.Organization, "system:masters") {
			t.Errorf("%s: subject %v, want CN %s in %q and not system:masters", comp, cert.Subject, w[0], w[1])
		}
	}
}
