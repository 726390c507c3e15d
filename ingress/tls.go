package ingress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// TLS termination, as ingress-nginx does it: each host named in an
// Ingress's spec.tls is served over HTTPS with the certificate of the
// entry's Secret (a kubernetes.io/tls Secret, or any Secret with tls.crt
// and tls.key); a rule host no entry names takes an entry's certificate
// that is valid for it. A host whose Secret is missing, is no key pair or
// holds a certificate not valid for it, and a client naming no host or an
// unknown one, get the default certificate. Plain HTTP requests for a host
// with TLS are redirected to HTTPS (308) unless the Ingress sets
// ssl-redirect "false"; force-ssl-redirect redirects without TLS too.
// HTTPS responses of a host with TLS carry HSTS.

// Reasons of TLS problems.
const (
	ReasonTLSSecret = "TLSSecretInvalid"
	ReasonTLSHost   = "TLSCertificateHostMismatch"
)

// hstsValue is ingress-nginx's default Strict-Transport-Security (hsts,
// hsts-max-age 31536000, hsts-include-subdomains).
const hstsValue = "max-age=31536000; includeSubDomains"

// tlsHost is the TLS of one host: its certificate (nil: the default).
type tlsHost struct {
	cert *tls.Certificate
}

// Certificate is a parsed key pair of a Secret.
type Certificate struct {
	Pair *tls.Certificate
	Leaf *x509.Certificate
}

// ParseCertificate reads a Secret's tls.crt and tls.key as a key pair.
func ParseCertificate(s *corev1.Secret) (*Certificate, error) {
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return nil, errors.New("it has no tls.crt and tls.key")
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, err
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, err
		}
	}
	pair.Leaf = leaf
	return &Certificate{Pair: &pair, Leaf: leaf}, nil
}

// buildTLS gives the hosts of spec.tls their certificates (the oldest
// Ingress naming a host decides), then the rule hosts of each Ingress no
// entry names a certificate of that Ingress valid for them.
func (b *builder) buildTLS(ings []*networkingv1.Ingress) {
	if b.in.Certificate == nil {
		return
	}
	certOf := func(ing *networkingv1.Ingress, secret string) *Certificate {
		if secret == "" {
			return nil
		}
		b.t.secrets[ing.Namespace+"/"+secret] = true
		c, err := b.in.Certificate(ing.Namespace, secret)
		if err != nil {
			b.problem(ing, ReasonTLSSecret, fmt.Sprintf("secret %s/%s: %v; its hosts use the default certificate", ing.Namespace, secret, err))
			return nil
		}
		return c
	}
	for _, ing := range ings {
		for _, e := range ing.Spec.TLS {
			c := certOf(ing, e.SecretName)
			for _, h := range e.Hosts {
				host := strings.ToLower(strings.TrimSuffix(h, "."))
				if host == "" || b.t.tls[host] != nil {
					continue
				}
				th := &tlsHost{}
				if c != nil {
					if err := c.Leaf.VerifyHostname(host); err != nil {
						b.problem(ing, ReasonTLSHost, fmt.Sprintf("the certificate of secret %s/%s is not valid for host %q (%v); the host uses the default certificate",
							ing.Namespace, e.SecretName, host, err))
					} else {
						th.cert = c.Pair
					}
				}
				b.t.tls[host] = th
			}
		}
	}
	for _, ing := range ings {
		for _, r := range ing.Spec.Rules {
			host := strings.ToLower(strings.TrimSuffix(r.Host, "."))
			if host == "" || b.t.tls[host] != nil {
				continue
			}
			for _, e := range ing.Spec.TLS {
				if len(e.Hosts) > 0 || e.SecretName == "" {
					continue
				}
				if c := certOf(ing, e.SecretName); c != nil && c.Leaf.VerifyHostname(host) == nil {
					b.t.tls[host] = &tlsHost{cert: c.Pair}
					break
				}
			}
		}
	}
}

// tlsFor is the TLS of a host (lower case, no port): an exact entry, else
// the wildcard entry of its parent domain; nil when the host has none.
func (t *Table) tlsFor(host string) *tlsHost {
	if th := t.tls[host]; th != nil {
		return th
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		return t.tls["*"+host[i:]]
	}
	return nil
}

// HasTLS reports whether a host is served over HTTPS with a certificate of
// its own or the default one (it is named in a spec.tls, or covered by one).
func (t *Table) HasTLS(host string) bool {
	return t != nil && t.tlsFor(normalizeHost(host)) != nil
}

// CertificateFor is the certificate for a TLS client's server name; nil
// means the default certificate.
func (t *Table) CertificateFor(serverName string) *tls.Certificate {
	if t == nil {
		return nil
	}
	if th := t.tlsFor(normalizeHost(serverName)); th != nil {
		return th.cert
	}
	return nil
}

// FakeCertificate is a self-signed certificate for clients of unknown
// hosts, as ingress-nginx's default ("Kubernetes Ingress Controller Fake
// Certificate"), made anew at each start.
func FakeCertificate() (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Kubernetes Ingress Controller Fake Certificate", Organization: []string{"Acme Co"}},
		DNSNames:              []string{"ingress.local"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// cachedCert is a Secret's parsed key pair (or why it has none), kept
// while the Secret's resourceVersion stays the same.
type cachedCert struct {
	rv   string
	cert *Certificate
	err  error
}

// watchSecrets starts the Secrets informer of a TLS controller: a change
// rebuilds the table when the table reads that Secret, or when it is the
// default certificate's.
func (c *Controller) watchSecrets(f informers.SharedInformerFactory) {
	c.certs = map[string]cachedCert{}
	fake, err := FakeCertificate()
	if err != nil {
		// crypto/rand failing: no TLS without a certificate.
		panic(fmt.Sprintf("ingress: default certificate: %v", err))
	}
	c.fake = fake
	c.defaultCert.Store(fake)
	inf := f.Core().V1().Secrets()
	c.secrets = inf.Lister()
	relevant := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		key := s.Namespace + "/" + s.Name
		t := c.proxy.Table()
		if t == nil || t.readsSecret(key) || (c.cfg.DefaultCertificate != nil && c.cfg.DefaultCertificate.String() == key) {
			c.runner.Run()
		}
	}
	c.add(inf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    relevant,
		UpdateFunc: func(_, n any) { relevant(n) },
		DeleteFunc: relevant,
	})
}

// certificate is the parsed key pair of a Secret, from the cache while the
// Secret is unchanged.
func (c *Controller) certificate(namespace, name string) (*Certificate, error) {
	s, err := c.secrets.Secrets(namespace).Get(name)
	if err != nil {
		return nil, errors.New("not found")
	}
	key := namespace + "/" + name
	c.certMu.Lock()
	defer c.certMu.Unlock()
	if cc, ok := c.certs[key]; ok && cc.rv == s.ResourceVersion {
		return cc.cert, cc.err
	}
	cert, err := ParseCertificate(s)
	c.certs[key] = cachedCert{rv: s.ResourceVersion, cert: cert, err: err}
	return cert, err
}

// pruneCertificates forgets the parsed pairs of Secrets no table reads.
func (c *Controller) pruneCertificates(t *Table) {
	c.certMu.Lock()
	defer c.certMu.Unlock()
	for k := range c.certs {
		if !t.secrets[k] && (c.cfg.DefaultCertificate == nil || c.cfg.DefaultCertificate.String() != k) {
			delete(c.certs, k)
		}
	}
}

// updateDefaultCertificate reads --default-ssl-certificate (the fake one
// while it cannot be read).
func (c *Controller) updateDefaultCertificate() {
	d := c.cfg.DefaultCertificate
	if d == nil {
		return
	}
	cert, err := c.certificate(d.Namespace, d.Name)
	if err != nil {
		if c.defaultCert.Swap(c.fake) != c.fake || !c.defaultLogged {
			c.defaultLogged = true
			c.log.Warn("default certificate not usable; serving a self-signed one", "secret", d.String(), "err", err)
		}
		return
	}
	c.defaultCert.Store(cert.Pair)
}

// TLSConfig is the configuration of the HTTPS listener: the certificate of
// the client's server name from the current table, else the default one.
// HTTP/2 and HTTP/1.1 are offered, as ingress-nginx offers them.
func (c *Controller) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if cert := c.proxy.Table().CertificateFor(hello.ServerName); cert != nil {
				return cert, nil
			}
			if cert := c.defaultCert.Load(); cert != nil {
				return cert, nil
			}
			return nil, errors.New("no certificate")
		},
	}
}
