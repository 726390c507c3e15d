package apiserver_e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubectlSecrets: Secrets as users make them with kubectl create
// secret (generic, tls, docker-registry) and manifests with stringData:
// kubectl get's columns, the stored data, the type field selector, a TLS
// Secret whose key does not match its certificate (stored, with
// kube-apiserver's warning), refused writes (a TLS Secret without its key,
// a change to an immutable Secret or to a Secret's type).
func TestKubectlSecrets(t *testing.T) {
	k := newKubectl(t)
	mustMatch(t, k.ok("create", "secret", "generic", "db", "--from-literal=user=admin", "--from-literal=password=s3cret"), `secret/db created`)
	mustMatch(t, k.ok("get", "secret", "db"), `NAME\s+TYPE\s+DATA\s+AGE\n`, `db\s+Opaque\s+2\s+\d+s\n`)
	if got := k.ok("get", "secret", "db", "-o", "jsonpath={.data.password}"); got != base64.StdEncoding.EncodeToString([]byte("s3cret")) {
		t.Errorf("data.password = %q", got)
	}

	// stringData is folded into data and not stored.
	y := "apiVersion: v1\nkind: Secret\nmetadata: {name: app}\ndata: {token: b2xk}\nstringData: {token: new, mode: prod}\n"
	mustMatch(t, k.ok("apply", "-f", writeTemp(t, y)), `secret/app created`)
	out := k.ok("get", "secret", "app", "-o", "json")
	mustMatch(t, out, `"token": "`+base64.StdEncoding.EncodeToString([]byte("new"))+`"`, `"mode": "`+base64.StdEncoding.EncodeToString([]byte("prod"))+`"`, `"type": "Opaque"`)
	if got := k.ok("get", "secret", "app", "-o", "jsonpath={.stringData}"); got != "" {
		t.Errorf("stringData stored: %q", got)
	}

	// kubectl create secret tls with a matching pair; with a key of
	// another certificate the Secret is stored and kubectl prints the
	// server's warning.
	dir := t.TempDir()
	cert, key := selfSigned(t, dir, "a")
	_, otherKey := selfSigned(t, dir, "b")
	mustMatch(t, k.ok("create", "secret", "tls", "web-tls", "--cert", cert, "--key", key), `secret/web-tls created`)
	mustNotMatch(t, k.ok("get", "secret", "web-tls"), `Warning`)
	// kubectl create secret tls checks the pair itself, so the mismatched
	// one goes in as a manifest.
	certPEM, _ := os.ReadFile(cert)
	keyPEM, _ := os.ReadFile(otherKey)
	y = "apiVersion: v1\nkind: Secret\nmetadata: {name: odd-tls}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: " + base64.StdEncoding.EncodeToString(certPEM) +
		"\n  tls.key: " + base64.StdEncoding.EncodeToString(keyPEM) + "\n"
	mustMatch(t, k.ok("apply", "-f", writeTemp(t, y)), `Warning: tls: private key does not match public key`, `secret/odd-tls created`)
	mustMatch(t, k.ok("create", "secret", "docker-registry", "pull", "--docker-server=registry:5000", "--docker-username=u", "--docker-password=p"), `secret/pull created`)

	// Field selector on type, as kubectl get --field-selector sends it.
	out = k.ok("get", "secrets", "--field-selector", "type=kubernetes.io/tls", "-o", "name")
	if got := strings.Fields(out); strings.Join(got, " ") != "secret/odd-tls secret/web-tls" {
		t.Errorf("secrets of type kubernetes.io/tls: %q", out)
	}

	// Refused writes.
	out = k.run(true, "apply", "-f", writeTemp(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: nokey}\ntype: kubernetes.io/tls\nstringData: {tls.crt: x}\n"))
	mustMatch(t, out, `data\[tls.key\]: Required value`)
	k.ok("apply", "-f", writeTemp(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: frozen}\nimmutable: true\nstringData: {a: \"1\"}\n"))
	out = k.run(true, "apply", "-f", writeTemp(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: frozen}\nimmutable: true\nstringData: {a: \"2\"}\n"))
	mustMatch(t, out, "data: Forbidden: field is immutable when `immutable` is set")
	out = k.run(true, "patch", "secret", "db", "--type=merge", "-p", `{"type":"kubernetes.io/basic-auth"}`)
	mustMatch(t, out, `type: Invalid value: "kubernetes.io/basic-auth": field is immutable`)
}

// selfSigned writes a self-signed certificate and its key into dir and
// returns their paths.
func selfSigned(t *testing.T, dir, name string) (certPath, keyPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + ".example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}
