package apiserver

import (
	"net/http"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// reviewResources are create-only resources that are answered, not stored:
// SelfSubjectAccessReview (`kubectl auth can-i`) and SelfSubjectReview
// (`kubectl auth whoami`).
var reviewResources = map[schema.GroupVersion]metav1.APIResource{
	authorizationv1.SchemeGroupVersion:  {Name: "selfsubjectaccessreviews", SingularName: "selfsubjectaccessreview", Kind: "SelfSubjectAccessReview", Verbs: metav1.Verbs{"create"}},
	authenticationv1.SchemeGroupVersion: {Name: "selfsubjectreviews", SingularName: "selfsubjectreview", Kind: "SelfSubjectReview", Verbs: metav1.Verbs{"create"}},
}

// userOf returns the authenticated user: the client certificate's common
// name and organizations, plus system:authenticated.
func userOf(r *http.Request) authenticationv1.UserInfo {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return authenticationv1.UserInfo{}
	}
	c := r.TLS.PeerCertificates[0]
	groups := slices.Clone(c.Subject.Organization)
	return authenticationv1.UserInfo{Username: c.Subject.CommonName, Groups: append(groups, "system:authenticated")}
}

// serveReview answers a review request; ok is false for other paths.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, rest []string) bool {
	res, found := reviewResources[gv]
	if !found || len(rest) != 1 || rest[0] != res.Name {
		return false
	}
	if r.Method != http.MethodPost {
		writeError(w, apierrors.NewMethodNotSupported(gv.WithResource(res.Name).GroupResource(), r.Method))
		return true
	}
	out, err := negotiate(r, false)
	if err != nil {
		writeError(w, err)
		return true
	}
	body, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return true
	}
	switch res.Kind {
	case "SelfSubjectAccessReview":
		obj, err := decodeBody(r, body, &authorizationv1.SelfSubjectAccessReview{}, gv.WithKind(res.Kind), false)
		if err != nil {
			writeError(w, err)
			return true
		}
		review := obj.(*authorizationv1.SelfSubjectAccessReview)
		// svcnet has no authorization: every authenticated user may do everything.
		review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "svcnet authorizes every authenticated user"}
		writeObject(w, out, http.StatusCreated, review, gv)
	default:
		writeObject(w, out, http.StatusCreated, &authenticationv1.SelfSubjectReview{
			Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: userOf(r)},
		}, gv)
	}
	return true
}
