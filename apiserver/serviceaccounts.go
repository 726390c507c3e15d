package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/apiserver/authz"
	"github.com/svcnet/svcnet/registry"
)

var (
	serviceAccountsGR = schema.GroupResource{Resource: "serviceaccounts"}
	tokenRequestGVK   = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
)

const (
	// DefaultServiceAccountIssuer is --service-account-issuer as kubeadm
	// sets it; it is also the default API audience.
	DefaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	// warnOnlyBoundTokenSeconds is the lifetime the ServiceAccount admission
	// plugin asks for in the token volume it adds (3607 s): such a token,
	// bound to a pod and for the API's audiences, is issued for a year and
	// carries a warnafter claim at the requested expiry, as kube-apiserver's
	// --service-account-extend-token-expiration (on by default) does.
	warnOnlyBoundTokenSeconds = 3607
	extendedTokenSeconds      = 365 * 24 * 60 * 60
	// tokenLeeway is the clock skew allowed on exp, nbf and iat (go-jose's
	// DefaultLeeway, which kube-apiserver's validator uses).
	tokenLeeway = time.Minute
)

// saTokens issues and checks service account tokens: JWTs signed with the
// server's service account key (RS256), with kube-apiserver's claims, so
// that client-go's in-cluster configuration, `kubectl create token` and
// anything that reads kube's tokens work unchanged.
type saTokens struct {
	key       *rsa.PrivateKey
	keyID     string
	issuer    string
	audiences []string
}

// loadOrCreateSAKey reads the RSA key at path (PKCS#1 or PKCS#8 PEM), making
// a 2048-bit one on first use, as kubeadm makes sa.key.
func loadOrCreateSAKey(path string) (*rsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		if err := writePEM(path, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)); err != nil {
			return nil, fmt.Errorf("service account key: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("service account key: %w", err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("service account key %s: no PEM block", path)
	}
	if key, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return key, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("service account key %s: %w", path, err)
	}
	key, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("service account key %s: not an RSA key", path)
	}
	return key, nil
}

func newSATokens(key *rsa.PrivateKey, issuer string, audiences []string) (*saTokens, error) {
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	// The key ID kube-apiserver puts in its tokens' headers: the unpadded
	// base64url SHA-256 of the public key's DER.
	sum := sha256.Sum256(der)
	return &saTokens{key: key, keyID: base64.RawURLEncoding.EncodeToString(sum[:]), issuer: issuer, audiences: audiences}, nil
}

// tokenRef is a name and UID in the kubernetes.io claim.
type tokenRef struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

type kubernetesClaim struct {
	Namespace      string           `json:"namespace,omitempty"`
	ServiceAccount tokenRef         `json:"serviceaccount,omitempty"`
	Pod            *tokenRef        `json:"pod,omitempty"`
	Node           *tokenRef        `json:"node,omitempty"`
	WarnAfter      *jwt.NumericDate `json:"warnafter,omitempty"`
}

type saClaims struct {
	jwt.RegisteredClaims
	Kubernetes *kubernetesClaim `json:"kubernetes.io,omitempty"`
}

// issue signs a token for sa, bound to pod (and its node) when given.
func (t *saTokens) issue(sa *corev1.ServiceAccount, pod *corev1.Pod, node *corev1.Node, now time.Time, seconds, warnAfter int64, audiences []string) (string, error) {
	k := &kubernetesClaim{Namespace: sa.Namespace, ServiceAccount: tokenRef{Name: sa.Name, UID: string(sa.UID)}}
	if pod != nil {
		k.Pod = &tokenRef{Name: pod.Name, UID: string(pod.UID)}
	}
	if node != nil {
		k.Node = &tokenRef{Name: node.Name, UID: string(node.UID)}
	}
	if warnAfter > 0 {
		k.WarnAfter = jwt.NewNumericDate(now.Add(time.Duration(warnAfter) * time.Second))
	}
	c := saClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    t.issuer,
			Subject:   authz.ServiceAccountUser + sa.Namespace + ":" + sa.Name,
			Audience:  jwt.ClaimStrings(audiences),
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Duration(seconds) * time.Second)),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        string(uuid.NewUUID()),
		},
		Kubernetes: k,
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = t.keyID
	return tok.SignedString(t.key)
}

// errTokenInvalid is what a client is told about any bad token (401), as
// kube-apiserver tells it; the reason goes to the server's log.
var errTokenInvalid = errors.New("invalid bearer token")

// authenticateToken checks a bearer token as kube-apiserver's service
// account token authenticator does: signature, issuer, audience, time, and
// that the service account (and the pod it is bound to) still exist with
// the UIDs the token names.
func (s *Server) authenticateToken(ctx context.Context, raw string) (authz.User, error) {
	t := s.saTokens
	var c saClaims
	_, err := jwt.ParseWithClaims(raw, &c, func(*jwt.Token) (any, error) { return &t.key.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(t.issuer), jwt.WithLeeway(tokenLeeway),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil {
		return authz.User{}, err
	}
	if !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(t.audiences, a) }) {
		return authz.User{}, errors.New("token audiences do not include the API's")
	}
	k := c.Kubernetes
	if k == nil || k.Namespace == "" || k.ServiceAccount.Name == "" {
		return authz.User{}, errors.New("token has no service account claim")
	}
	if c.Subject != authz.ServiceAccountUser+k.Namespace+":"+k.ServiceAccount.Name {
		return authz.User{}, errors.New("token subject does not match its service account claim")
	}
	obj, err := getFresh(ctx, s.byGR[serviceAccountsGR].Store, k.Namespace, k.ServiceAccount.Name, k.ServiceAccount.UID)
	if err != nil {
		return authz.User{}, fmt.Errorf("service account %s/%s: %w", k.Namespace, k.ServiceAccount.Name, err)
	}
	sa := obj.(*corev1.ServiceAccount)
	if string(sa.UID) != k.ServiceAccount.UID {
		return authz.User{}, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, k.ServiceAccount.UID)
	}
	if sa.DeletionTimestamp != nil && sa.DeletionTimestamp.Time.Before(time.Now().Add(-tokenLeeway)) {
		return authz.User{}, fmt.Errorf("service account %s/%s has been deleted", sa.Namespace, sa.Name)
	}
	u := authz.User{
		Name:   c.Subject,
		UID:    string(sa.UID),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + k.Namespace, authz.SystemAuthenticated},
		Extra:  map[string][]string{},
	}
	if k.Pod != nil {
		obj, err := getFresh(ctx, s.byGR[podsGR].Store, k.Namespace, k.Pod.Name, k.Pod.UID)
		if err != nil {
			return authz.User{}, fmt.Errorf("pod %s/%s: %w", k.Namespace, k.Pod.Name, err)
		}
		pod := obj.(*corev1.Pod)
		if string(pod.UID) != k.Pod.UID {
			return authz.User{}, fmt.Errorf("pod UID (%s) does not match claim (%s)", pod.UID, k.Pod.UID)
		}
		if pod.DeletionTimestamp != nil && pod.DeletionTimestamp.Time.Before(time.Now().Add(-tokenLeeway)) {
			return authz.User{}, fmt.Errorf("pod %s/%s has been deleted", pod.Namespace, pod.Name)
		}
		u.Extra["authentication.kubernetes.io/pod-name"] = []string{k.Pod.Name}
		u.Extra["authentication.kubernetes.io/pod-uid"] = []string{k.Pod.UID}
	}
	if k.Node != nil {
		u.Extra["authentication.kubernetes.io/node-name"] = []string{k.Node.Name}
		if k.Node.UID != "" {
			u.Extra["authentication.kubernetes.io/node-uid"] = []string{k.Node.UID}
		}
	}
	if c.ID != "" {
		u.Extra["authentication.kubernetes.io/credential-id"] = []string{"JTI=" + c.ID}
	}
	return u, nil
}

// getFresh reads the object a token names from the resource's list cache,
// as kube-apiserver's token authenticator reads its informers (every
// in-cluster request is authenticated, and two etcd reads each cost more than
// the rest of the check), and from etcd when the cache does not hold it or
// holds another UID (an object deleted and made again since the cache's
// last event). A deletion reaches the cache with its watch event, within
// milliseconds.
func getFresh(ctx context.Context, st *registry.Store, ns, name, uid string) (runtime.Object, error) {
	obj, err := st.GetCached(ctx, ns, name)
	if err == nil {
		if m, merr := meta.Accessor(obj); merr == nil && string(m.GetUID()) == uid {
			return obj, nil
		}
	}
	return st.Get(ctx, ns, name)
}

// handleTokenRequest serves POST serviceaccounts/<name>/token (`kubectl
// create token`, the kubelet's projected token volumes) as kube-apiserver
// 1.37: the request is defaulted (one hour, the API's audiences) and
// validated, a bound pod must exist, run as that service account and match
// the UID given, and the answer carries the signed token.
func (s *Server) handleTokenRequest(w http.ResponseWriter, r *http.Request, req request) error {
	out, err := negotiate(r, false)
	if err != nil {
		return err
	}
	if _, err := parseWriteParams(r); err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	obj, err := decodeBody(r, body, &authenticationv1.TokenRequest{}, tokenRequestGVK, false)
	if err != nil {
		return err
	}
	tr := obj.(*authenticationv1.TokenRequest)
	if err := s.nodeTokenRestriction(r, req, tr); err != nil {
		return err
	}
	if tr.Spec.ExpirationSeconds == nil {
		hour := int64(3600)
		tr.Spec.ExpirationSeconds = &hour
	}
	gk := tokenRequestGVK.GroupKind()
	if tr.Name != "" && tr.Name != req.name {
		return apierrors.NewInvalid(gk, req.name, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), tr.Name, "must match the service account name if specified")})
	}
	if tr.Namespace != "" && tr.Namespace != req.namespace {
		return apierrors.NewInvalid(gk, req.name, field.ErrorList{field.Invalid(field.NewPath("metadata", "namespace"), tr.Namespace, "must match the service account namespace if specified")})
	}
	ctx := r.Context()
	saObj, err := s.byGR[serviceAccountsGR].Get(ctx, req.namespace, req.name)
	if err != nil {
		return err
	}
	sa := saObj.(*corev1.ServiceAccount)
	if tr.UID != "" && tr.UID != sa.UID {
		return apierrors.NewConflict(schema.GroupResource{Group: tokenRequestGVK.Group, Resource: tokenRequestGVK.Kind}, req.name,
			fmt.Errorf("the UID in the token request (%s) does not match the UID of the service account (%s)", tr.UID, sa.UID))
	}
	if len(tr.Spec.Audiences) == 0 {
		tr.Spec.Audiences = slices.Clone(s.saTokens.audiences)
	}
	tr.Name, tr.Namespace, tr.UID = sa.Name, sa.Namespace, sa.UID
	now := time.Now()
	tr.CreationTimestamp = metav1.NewTime(now)
	tr.Status = authenticationv1.TokenRequestStatus{}
	if errs := validateTokenRequest(tr); len(errs) > 0 {
		return apierrors.NewInvalid(gk, "", errs)
	}
	var pod *corev1.Pod
	var node *corev1.Node
	if ref := tr.Spec.BoundObjectRef; ref != nil {
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		var uid types.UID
		switch {
		case gvk.Group == "" && gvk.Kind == "Pod":
			obj, err := s.byGR[podsGR].Get(ctx, req.namespace, ref.Name)
			if err != nil {
				return err
			}
			pod = obj.(*corev1.Pod)
			if req.name != pod.Spec.ServiceAccountName {
				return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", req.name))
			}
			uid = pod.UID
			if n := pod.Spec.NodeName; n != "" {
				node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
				if obj, err := s.byGR[nodesGR].Get(ctx, "", n); err == nil {
					node = obj.(*corev1.Node)
				} else if !apierrors.IsNotFound(err) {
					return apierrors.NewInternalError(err)
				}
			}
		case gvk.Group == "" && gvk.Kind == "Node":
			obj, err := s.byGR[nodesGR].Get(ctx, "", ref.Name)
			if err != nil {
				return err
			}
			node = obj.(*corev1.Node)
			uid = node.UID
		default:
			// Secrets and webhook configurations, the other kinds
			// kube-apiserver binds to, are not served by svcnet.
			return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
		}
		if ref.UID != "" && uid != ref.UID {
			return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
				fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
		}
	}
	seconds, warnAfter := *tr.Spec.ExpirationSeconds, int64(0)
	if pod != nil && seconds == warnOnlyBoundTokenSeconds && s.isAPIAudiences(tr.Spec.Audiences) {
		warnAfter, seconds = seconds, extendedTokenSeconds
	}
	token, err := s.saTokens.issue(sa, pod, node, now, seconds, warnAfter, tr.Spec.Audiences)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to generate token: %v", err))
	}
	tr.Status = authenticationv1.TokenRequestStatus{Token: token,
		ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
	writeObject(w, out, http.StatusCreated, tr, authenticationv1.SchemeGroupVersion)
	return nil
}

// nodeTokenRestriction is the NodeRestriction admission plugin's rule for
// token requests: a node may only ask for a token bound to a pod (by name
// and UID) that is bound to the node.
func (s *Server) nodeTokenRestriction(r *http.Request, req request, tr *authenticationv1.TokenRequest) error {
	node, ok := authz.NodeName(requestUser(r))
	if !ok {
		return nil
	}
	forbidden := func(format string, args ...any) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, req.name, fmt.Errorf(format, args...))
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return forbidden("node requested token not bound to a pod")
	}
	if ref.UID == "" {
		return forbidden("node requested token with a pod binding without a uid")
	}
	obj, err := s.byGR[podsGR].Get(r.Context(), req.namespace, ref.Name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	if ref.UID != pod.UID {
		return forbidden("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID)
	}
	if pod.Spec.NodeName != node {
		return forbidden("node requested token bound to a pod scheduled on a different node")
	}
	// ServiceAccountNodeAudienceRestriction (on by default): the audience
	// (none, or one) must be one a token volume of the pod asks for, or RBAC
	// must grant the node request-serviceaccounts-token-audience on it.
	// svcnet serves no CSI drivers, the other source kube accepts.
	aud := ""
	switch len(tr.Spec.Audiences) {
	case 0:
	case 1:
		aud = tr.Spec.Audiences[0]
	default:
		return forbidden("node may only request 0 or 1 audiences")
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil && src.ServiceAccountToken.Audience == aud {
				return nil
			}
		}
	}
	u := requestUser(r)
	d, _, err := s.authorizer.Authorize(r.Context(), authz.Attributes{User: u, Verb: "request-serviceaccounts-token-audience",
		Resource: aud, Namespace: req.namespace, Name: req.name, ResourceRequest: true})
	if d == authz.Allow {
		return nil
	}
	if err != nil {
		return forbidden("error authorizing %s to request tokens for audience %q: %w", u.Name, aud, err)
	}
	return forbidden("%s is not authorized to request tokens for audience %q", u.Name, aud)
}

// isAPIAudiences reports whether every audience is one of the API's.
func (s *Server) isAPIAudiences(auds []string) bool {
	for _, a := range auds {
		if !slices.Contains(s.saTokens.audiences, a) {
			return false
		}
	}
	return true
}

// validateTokenRequest is kube-apiserver's ValidateTokenRequest for the
// fields svcnet serves.
func validateTokenRequest(tr *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "expirationSeconds")
	if s := *tr.Spec.ExpirationSeconds; s < 600 {
		errs = append(errs, field.Invalid(p, s, "may not specify a duration less than 10 minutes"))
	} else if s > 1<<32 {
		errs = append(errs, field.Invalid(p, s, "may not specify a duration larger than 2^32 seconds"))
	}
	return errs
}

// getServiceAccount is the ServiceAccount admission plugin's lookup.
func (s *Server) getServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	obj, err := s.byGR[serviceAccountsGR].Get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ServiceAccount), nil
}

// serveOIDCDiscovery serves the service account issuer's OpenID Connect
// discovery document, as kube-apiserver does, so that other systems can
// check its tokens (RBAC: system:service-account-issuer-discovery lets every
// service account read it).
func (s *Server) serveOIDCDiscovery(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"issuer":                                s.saTokens.issuer,
		"jwks_uri":                              s.url + "/openid/v1/jwks",
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	})
}

// serveJWKS serves the public key tokens are signed with.
func (s *Server) serveJWKS(w http.ResponseWriter, r *http.Request) {
	pub := s.saTokens.key.PublicKey
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
		"use": "sig", "kty": "RSA", "kid": s.saTokens.keyID, "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

// bearerToken returns the token of an Authorization: Bearer header.
func bearerToken(r *http.Request) (string, bool) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
