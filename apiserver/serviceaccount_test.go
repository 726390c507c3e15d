package apiserver_test

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestServiceAccountTokens: the TokenRequest API as the kubelet uses it
// (node credentials, a token bound to one of its pods, the NodeRestriction
// rules), the claims of the token kube-apiserver would issue (extended
// lifetime and warnafter for the admission plugin's 3607 s), and the token
// accepted as a bearer credential.
func TestServiceAccountTokens(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.WithServiceAccountAdmission())
	admin := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	for _, sa := range []string{"default", "web"} {
		if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkPod := func(name, node, sa string) *corev1.Pod {
		p, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa, Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mine, other := mkPod("mine", "n1", "web"), mkPod("other", "n2", "web")
	mkPod("plain", "n1", "")
	node, _ := userClient(t, srv, "system:node:n1", "system:nodes")
	seconds := int64(3607)
	req := func(pod *corev1.Pod) *authenticationv1.TokenRequest {
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
		if pod != nil {
			tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
		}
		return tr
	}
	// The node may get a token for its pod's service account, bound to it.
	tr, err := node.CoreV1().ServiceAccounts("default").CreateToken(ctx, "web", req(mine), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node token for its pod: %v", err)
	}
	if got := tr.Status.ExpirationTimestamp.Sub(time.Now()); got < 3500*time.Second || got > 3700*time.Second {
		t.Errorf("expirationTimestamp in %v, want the 3607 s asked for", got)
	}
	claims := jwtClaims(t, tr.Status.Token)
	k := claims["kubernetes.io"].(map[string]any)
	if claims["sub"] != "system:serviceaccount:default:web" || claims["iss"] != "https://kubernetes.default.svc.cluster.local" ||
		k["pod"].(map[string]any)["name"] != "mine" || k["node"].(map[string]any)["name"] != "n1" || k["namespace"] != "default" {
		t.Errorf("claims %v", claims)
	}
	if exp, iat, warn := claims["exp"].(float64), claims["iat"].(float64), k["warnafter"].(float64); exp-iat != 365*24*3600 || warn-iat != 3607 {
		t.Errorf("exp-iat %v, warnafter-iat %v: want a year and 3607 s", exp-iat, warn-iat)
	}
	for _, c := range []struct {
		what, sa string
		tr       *authenticationv1.TokenRequest
		want     string
	}{
		{"unbound", "web", req(nil), "node requested token not bound to a pod"},
		{"another node's pod", "web", req(other), "node requested token bound to a pod scheduled on a different node"},
		{"a service account none of its pods uses", "nobody", req(mine), `User "system:node:n1" cannot create resource "serviceaccounts/token"`},
		{"an audience its pod's volumes do not ask for", "web", withAudiences(req(mine), "vault"), `system:node:n1 is not authorized to request tokens for audience "vault"`},
		{"two audiences", "web", withAudiences(req(mine), "a", "b"), "node may only request 0 or 1 audiences"},
	} {
		if _, err := node.CoreV1().ServiceAccounts("default").CreateToken(ctx, c.sa, c.tr, metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("node token %s: %v, want Forbidden %q", c.what, err, c.want)
		}
	}
	// An audience one of the pod's token volumes asks for is allowed; such a
	// token is not one for the API.
	vaulted, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vaulted"},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "nginx"}},
			Volumes: []corev1.Volume{{Name: "vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "t"}}}}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vt, err := node.CoreV1().ServiceAccounts("default").CreateToken(ctx, "web", withAudiences(req(vaulted), "vault"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node token for its pod's volume audience: %v", err)
	}
	if aud := jwtClaims(t, vt.Status.Token)["aud"]; fmt.Sprint(aud) != "[vault]" {
		t.Errorf("aud %v, want [vault]", aud)
	}
	vcfg := rest.AnonymousClientConfig(srv.Config)
	vcfg.BearerToken = vt.Status.Token
	if _, err := kubernetes.NewForConfigOrDie(vcfg).CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("a token for audience vault used on the API: %v, want Unauthorized", err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "default", req(mine), metav1.CreateOptions{}); !apierrors.IsBadRequest(err) ||
		!strings.Contains(err.Error(), `cannot bind token for serviceaccount "default" to pod running with different serviceaccount name.`) {
		t.Errorf("token for another service account than the pod's: %v", err)
	}
	// The pod without a service account got the default one.
	if p, _ := admin.CoreV1().Pods("default").Get(ctx, "plain", metav1.GetOptions{}); p.Spec.ServiceAccountName != "default" || len(p.Spec.Volumes) != 1 {
		t.Errorf("pod plain: serviceAccountName %q, volumes %v", p.Spec.ServiceAccountName, p.Spec.Volumes)
	}

	// The token authenticates as the service account, with the pod's name.
	cfg := rest.AnonymousClientConfig(srv.Config)
	cfg.BearerToken = tr.Status.Token
	ssr, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := ssr.Status.UserInfo; u.Username != "system:serviceaccount:default:web" || strings.Join(u.Groups, ",") != "system:serviceaccounts,system:serviceaccounts:default,system:authenticated" ||
		strings.Join(u.Extra["authentication.kubernetes.io/pod-name"], "") != "mine" || strings.Join(u.Extra["authentication.kubernetes.io/node-name"], "") != "n1" {
		t.Errorf("user %+v", u)
	}
	// A token signed by someone else is refused.
	parts := strings.Split(tr.Status.Token, ".")
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"https://kubernetes.default.svc.cluster.local","sub":"system:serviceaccount:default:web"}`)) + "." + parts[2]
	cfg.BearerToken = forged
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("forged token: %v, want Unauthorized", err)
	}
}

func withAudiences(tr *authenticationv1.TokenRequest, auds ...string) *authenticationv1.TokenRequest {
	tr = tr.DeepCopy()
	tr.Spec.Audiences = auds
	return tr
}

func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestServiceAccountIssuerDiscovery: a service account reads the issuer's
// OpenID discovery document and key set, and the key checks its token.
func TestServiceAccountIssuerDiscovery(t *testing.T) {
	srv := apiservertest.Start(t)
	admin := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(srv.Config)
	cfg.BearerToken = tr.Status.Token
	rc := kubernetes.NewForConfigOrDie(cfg).Discovery().RESTClient()
	var doc map[string]any
	b, err := rc.Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil || json.Unmarshal(b, &doc) != nil {
		t.Fatalf("discovery document: %v %s", err, b)
	}
	if doc["issuer"] != "https://kubernetes.default.svc.cluster.local" || doc["jwks_uri"] != srv.URL()+"/openid/v1/jwks" {
		t.Errorf("discovery document %v", doc)
	}
	var jwks struct {
		Keys []struct{ Kid, Kty, Alg, N, E string }
	}
	if b, err = rc.Get().AbsPath("/openid/v1/jwks").DoRaw(ctx); err != nil || json.Unmarshal(b, &jwks) != nil || len(jwks.Keys) != 1 {
		t.Fatalf("key set: %v %s", err, b)
	}
	k := jwks.Keys[0]
	n, _ := base64.RawURLEncoding.DecodeString(k.N)
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: 65537}
	parts := strings.Split(tr.Status.Token, ".")
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil || k.Kty != "RSA" || k.Alg != "RS256" || k.E != "AQAB" {
		t.Errorf("the published key does not check the token: %v (%+v)", err, k)
	}
	var hdr map[string]any
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if json.Unmarshal(h, &hdr); hdr["kid"] != k.Kid || hdr["alg"] != "RS256" {
		t.Errorf("token header %v, key id %s", hdr, k.Kid)
	}
}
