package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// PKI is the cluster's certificate authority and the server's credentials,
// kept as PEM files under <data-dir>/pki.
type PKI struct {
	Dir    string
	CACert *x509.Certificate
	CAKey  *ecdsa.PrivateKey
	CAPEM  []byte
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func readPEM(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	return b.Bytes, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// LoadOrCreatePKI loads the CA from dir, creating it on first use.
func LoadOrCreatePKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki dir: %w", err)
	}
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	p := &PKI{Dir: dir}
	if certDER, err := readPEM(certPath); err == nil {
		keyDER, err := readPEM(keyPath)
		if err != nil {
			return nil, fmt.Errorf("read CA key: %w", err)
		}
		if p.CACert, err = x509.ParseCertificate(certDER); err != nil {
			return nil, fmt.Errorf("parse CA: %w", err)
		}
		if p.CAKey, err = x509.ParseECPrivateKey(keyDER); err != nil {
			return nil, fmt.Errorf("parse CA key: %w", err)
		}
		p.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
		return p, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "svcnet-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	if err := writePEM(keyPath, "EC PRIVATE KEY", keyDER); err != nil {
		return nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	p.CACert, _ = x509.ParseCertificate(der)
	p.CAKey = key
	p.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return p, nil
}

// Issue signs a new certificate. For a client certificate, cn is the user
// name and orgs its groups; for a serving certificate, hosts are the SANs.
func (p *PKI) Issue(cn string, orgs []string, hosts []string, server bool) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CACert, &key.PublicKey, p.CAKey)
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate for %s: %w", cn, err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// servingCert returns the serving certificate, reissuing it when a host is
// missing from the stored one's SANs.
func (p *PKI) servingCert(hosts []string) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(p.Dir, "apiserver.crt"), filepath.Join(p.Dir, "apiserver.key")
	if c, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err == nil && coversAll(leaf, hosts) && leaf.NotAfter.After(time.Now().Add(24*time.Hour)) {
			return c, nil
		}
	}
	certPEM, keyPEM, err := p.Issue("kube-apiserver", nil, hosts, true)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

func coversAll(c *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(c.IPAddresses, func(x net.IP) bool { return x.Equal(ip) }) {
				return false
			}
		} else if h != "" && !slices.Contains(c.DNSNames, h) {
			return false
		}
	}
	return true
}

// WriteKubeconfig writes a kubeconfig for server with an admin client
// certificate (user kubernetes-admin, group system:masters).
func (p *PKI) WriteKubeconfig(path, server string) error {
	certPEM, keyPEM, err := p.Issue("kubernetes-admin", []string{"system:masters"}, nil, false)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["svcnet"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.CAPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["svcnet"] = &clientcmdapi.Context{Cluster: "svcnet", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "svcnet"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// WriteClientKubeconfig writes a kubeconfig at path for server that
// authenticates as user (in groups) with a new client certificate from the
// cluster CA under dataDir. Node agents and other components get their
// credentials this way, for example user "system:node:node-1" in group
// "system:nodes". What the user may do is up to the apiserver's
// authorizers (RBAC, Node).
func WriteClientKubeconfig(dataDir, path, server, user string, groups []string) error {
	p, err := LoadOrCreatePKI(filepath.Join(dataDir, "pki"))
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := p.Issue(user, groups, nil, false)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["svcnet"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.CAPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["svcnet"] = &clientcmdapi.Context{Cluster: "svcnet", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "svcnet"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig for %s: %w", user, err)
	}
	return nil
}
