package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	mrand "math/rand"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	api "k8s.io/kubernetes/pkg/apis/core"
	k8ssecret "k8s.io/kubernetes/pkg/registry/core/secret"

	"github.com/svcnet/svcnet/registry/core"
)

// Secrets: create and update through kube-apiserver's strategy and
// svcnet's, as users write them (kubectl create secret generic, tls,
// docker-registry; manifests with stringData).

var (
	tlsPairOnce         sync.Once
	tlsCert, tlsKey     []byte
	otherCert, otherKey []byte
)

// tlsPair is a certificate and its key, made once per run (the cases
// compare what each server says about a pair, not the pair itself).
func tlsPair() (cert, key, cert2, key2 []byte) {
	tlsPairOnce.Do(func() {
		mk := func() ([]byte, []byte) {
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				panic(err)
			}
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "web.example.com"},
				NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<32, 0)}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
			if err != nil {
				panic(err)
			}
			kd, err := x509.MarshalECPrivateKey(k)
			if err != nil {
				panic(err)
			}
			return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
		}
		tlsCert, tlsKey = mk()
		otherCert, otherKey = mk()
	})
	return tlsCert, tlsKey, otherCert, otherKey
}

func randSecret(r *mrand.Rand) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-credentials", Namespace: namespace}}
	if maybe(r, 0.2) {
		s.Name = randObjectName(r)
	}
	s.Type = pick[corev1.SecretType](r, "", corev1.SecretTypeOpaque, corev1.SecretTypeOpaque, corev1.SecretTypeTLS, corev1.SecretTypeTLS,
		corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg, corev1.SecretTypeBasicAuth, corev1.SecretTypeSSHAuth,
		corev1.SecretTypeServiceAccountToken, corev1.SecretTypeBootstrapToken, "example.com/custom")
	cert, key, cert2, key2 := tlsPair()
	badKey := false
	switch s.Type {
	case corev1.SecretTypeTLS:
		s.Data = map[string][]byte{}
		if maybe(r, 0.85) {
			s.Data[corev1.TLSCertKey] = pick(r, cert, cert, cert2, []byte("not a certificate"), []byte{})
		}
		if maybe(r, 0.85) {
			s.Data[corev1.TLSPrivateKeyKey] = pick(r, key, key, key2, []byte("garbage"))
		}
	case corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg:
		k := corev1.DockerConfigJsonKey
		if s.Type == corev1.SecretTypeDockercfg {
			k = corev1.DockerConfigKey
		}
		if maybe(r, 0.2) {
			k = pick(r, corev1.DockerConfigJsonKey, corev1.DockerConfigKey)
		}
		if maybe(r, 0.9) {
			s.Data = map[string][]byte{k: []byte(pick(r, `{"auths":{"registry:5000":{"auth":"dTpw"}}}`, `{}`, `{"auths":`, `[]`, `null`, ``))}
		}
	case corev1.SecretTypeBasicAuth:
		s.Data = map[string][]byte{}
		if maybe(r, 0.6) {
			s.Data[corev1.BasicAuthUsernameKey] = []byte(pick(r, "admin", ""))
		}
		if maybe(r, 0.6) {
			s.Data[corev1.BasicAuthPasswordKey] = []byte(pick(r, "s3cret", ""))
		}
	case corev1.SecretTypeSSHAuth:
		if maybe(r, 0.7) {
			s.Data = map[string][]byte{corev1.SSHAuthPrivateKey: []byte(pick(r, "-----BEGIN OPENSSH PRIVATE KEY-----", ""))}
		}
	case corev1.SecretTypeServiceAccountToken:
		if maybe(r, 0.6) {
			s.Annotations = map[string]string{corev1.ServiceAccountNameKey: pick(r, "builder", "")}
		}
	default:
		if maybe(r, 0.8) {
			s.Data = map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret")}
			if maybe(r, 0.3) {
				// At most one bad key in data and stringData together:
				// the keys are checked in map order.
				badKey = true
				s.Data[pick(r, "bad key!", "..", "a/b", ".hidden", strings.Repeat("k", 254), "tls.crt")] = []byte("v")
			}
		}
	}
	if maybe(r, 0.35) {
		// stringData as manifests write it; it overrides data's value of
		// the same key, and may supply a required key.
		k := pick(r, "password", "token", corev1.TLSCertKey, corev1.BasicAuthUsernameKey, corev1.SSHAuthPrivateKey, corev1.DockerConfigJsonKey, "bad key!")
		if badKey && k == "bad key!" {
			k = "token"
		}
		s.StringData = map[string]string{k: pick(r, "plain", "", "{}")}
	}
	if maybe(r, 0.04) {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data["big"] = []byte(strings.Repeat("x", 1<<20))
	}
	if maybe(r, 0.2) {
		s.Immutable = ptr(maybe(r, 0.5))
	}
	return s
}

func secretCreateCase(r *mrand.Rand) string {
	return compareCreate(randSecret(r), "", "secrets", true, true, k8ssecret.Strategy, core.NewSecretStrategy(),
		func() runtime.Object { return &api.Secret{} }, func() runtime.Object { return &corev1.Secret{} })
}

func secretUpdateCase(r *mrand.Rand) string {
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-credentials", Namespace: namespace, UID: "uid-10", ResourceVersion: "17"},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("s3cret")}}
	if maybe(r, 0.3) {
		cert, key, _, _ := tlsPair()
		old.Type, old.Data = corev1.SecretTypeTLS, map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}
	}
	if maybe(r, 0.4) {
		old.Immutable = ptr(true)
	}
	in := old.DeepCopy()
	next := randSecret(r)
	for _, k := range r.Perm(5)[:1+r.Intn(2)] {
		switch k {
		case 0:
			in.Data = next.Data
		case 1:
			in.StringData = next.StringData
			if in.StringData == nil {
				in.StringData = map[string]string{"password": pick(r, "new", "s3cret")}
			}
		case 2:
			in.Immutable = pick(r, nil, ptr(false), ptr(true))
		case 3:
			in.Type = next.Type
		case 4:
			in.Name = pick(r, "other", "Bad_Name")
		}
	}
	return withInput(compareUpdate(in, old, "", "secrets", "", true, k8ssecret.Strategy, core.NewSecretStrategy(),
		func() (runtime.Object, runtime.Object) { return &api.Secret{}, &api.Secret{} },
		func() runtime.Object { return &corev1.Secret{} }), in, old)
}
