package apiserver

import (
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/apiserver/authz"
)

// reviewResources are create-only resources that are answered, not stored:
// the access reviews (`kubectl auth can-i`, with --list the rules review)
// and SelfSubjectReview (`kubectl auth whoami`).
var reviewResources = map[schema.GroupVersion][]metav1.APIResource{
	authorizationv1.SchemeGroupVersion: {
		{Name: "localsubjectaccessreviews", SingularName: "localsubjectaccessreview", Namespaced: true, Kind: "LocalSubjectAccessReview", Verbs: metav1.Verbs{"create"}},
		{Name: "selfsubjectaccessreviews", SingularName: "selfsubjectaccessreview", Kind: "SelfSubjectAccessReview", Verbs: metav1.Verbs{"create"}},
		{Name: "selfsubjectrulesreviews", SingularName: "selfsubjectrulesreview", Kind: "SelfSubjectRulesReview", Verbs: metav1.Verbs{"create"}},
		{Name: "subjectaccessreviews", SingularName: "subjectaccessreview", Kind: "SubjectAccessReview", Verbs: metav1.Verbs{"create"}},
	},
	authenticationv1.SchemeGroupVersion: {
		{Name: "selfsubjectreviews", SingularName: "selfsubjectreview", Kind: "SelfSubjectReview", Verbs: metav1.Verbs{"create"}},
	},
}

// userOf returns the request's user in authentication.k8s.io form.
func userOf(r *http.Request) authenticationv1.UserInfo {
	u := requestUser(r)
	info := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	for k, v := range u.Extra {
		if info.Extra == nil {
			info.Extra = map[string]authenticationv1.ExtraValue{}
		}
		info.Extra[k] = v
	}
	return info
}

// serveReview answers a review request; ok is false for other paths.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, rest []string) bool {
	namespace := ""
	if len(rest) == 3 && rest[0] == "namespaces" {
		namespace, rest = rest[1], rest[2:]
	}
	if len(rest) != 1 {
		return false
	}
	var res metav1.APIResource
	found := false
	for _, cand := range reviewResources[gv] {
		if cand.Name == rest[0] && cand.Namespaced == (namespace != "") {
			res, found = cand, true
		}
	}
	if !found {
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
	var into runtime.Object
	switch res.Kind {
	case "SelfSubjectAccessReview":
		into = &authorizationv1.SelfSubjectAccessReview{}
	case "SubjectAccessReview":
		into = &authorizationv1.SubjectAccessReview{}
	case "LocalSubjectAccessReview":
		into = &authorizationv1.LocalSubjectAccessReview{}
	case "SelfSubjectRulesReview":
		into = &authorizationv1.SelfSubjectRulesReview{}
	default:
		writeObject(w, out, http.StatusCreated, &authenticationv1.SelfSubjectReview{
			Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: userOf(r)},
		}, gv)
		return true
	}
	obj, err := decodeBody(r, body, into, gv.WithKind(res.Kind), false)
	if err != nil {
		writeError(w, err)
		return true
	}
	gk := gv.WithKind(res.Kind).GroupKind()
	switch o := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		if errs := validateAccessSpec(o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes); len(errs) > 0 {
			writeError(w, apierrors.NewInvalid(gk, "", errs))
			return true
		}
		o.Status = s.accessReview(r, requestUser(r), o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
	case *authorizationv1.SubjectAccessReview:
		if errs := validateSubjectSpec(o.Spec); len(errs) > 0 {
			writeError(w, apierrors.NewInvalid(gk, "", errs))
			return true
		}
		o.Status = s.accessReview(r, subjectUser(o.Spec), o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
	case *authorizationv1.LocalSubjectAccessReview:
		errs := validateSubjectSpec(o.Spec)
		if o.Spec.ResourceAttributes != nil && o.Spec.ResourceAttributes.Namespace != namespace {
			errs = append(errs, field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), o.Spec.ResourceAttributes.Namespace, "must match metadata.namespace"))
		}
		if o.Spec.NonResourceAttributes != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), o.Spec.NonResourceAttributes, "disallowed on this kind of request"))
		}
		if len(errs) > 0 {
			writeError(w, apierrors.NewInvalid(gk, "", errs))
			return true
		}
		o.Namespace = namespace
		o.Status = s.accessReview(r, subjectUser(o.Spec), o.Spec.ResourceAttributes, nil)
	case *authorizationv1.SelfSubjectRulesReview:
		o.Status = s.rulesReview(requestUser(r), o.Spec.Namespace)
	}
	writeObject(w, out, http.StatusCreated, obj, gv)
	return true
}

func subjectUser(spec authorizationv1.SubjectAccessReviewSpec) authz.User {
	u := authz.User{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	for k, v := range spec.Extra {
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = v
	}
	return u
}

func validateAccessSpec(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) field.ErrorList {
	if (ra == nil) == (nra == nil) {
		p := field.NewPath("spec", "resourceAttributes")
		return field.ErrorList{field.Invalid(p, ra, "exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	}
	return nil
}

func validateSubjectSpec(spec authorizationv1.SubjectAccessReviewSpec) field.ErrorList {
	errs := validateAccessSpec(spec.ResourceAttributes, spec.NonResourceAttributes)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

// accessReview evaluates one access question for u with the server's
// authorizers.
func (s *Server) accessReview(r *http.Request, u authz.User, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	a := authz.Attributes{User: u}
	if ra != nil {
		a.ResourceRequest = true
		a.Verb, a.Namespace, a.APIGroup, a.APIVersion = ra.Verb, ra.Namespace, ra.Group, ra.Version
		a.Resource, a.Subresource, a.Name = ra.Resource, ra.Subresource, ra.Name
		if ra.FieldSelector != nil {
			a.FieldSelector = ra.FieldSelector.RawSelector
		}
		if ra.LabelSelector != nil {
			a.LabelSelector = ra.LabelSelector.RawSelector
		}
	} else {
		a.Verb, a.Path = nra.Verb, nra.Path
	}
	d, reason, err := s.authorizer.Authorize(r.Context(), a)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authz.Allow, Denied: d == authz.Deny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}

// rulesReview lists what u may do in namespace according to RBAC (the
// Node authorizer cannot list its rules, so a node's answer is incomplete).
func (s *Server) rulesReview(u authz.User, namespace string) authorizationv1.SubjectRulesReviewStatus {
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	if s.rbac == nil {
		st.Incomplete = true
		st.EvaluationError = "RBAC authorization is not enabled"
		return st
	}
	rules, errs := s.rbac.RulesFor(u, namespace)
	for _, rule := range rules {
		if len(rule.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: rule.Verbs, APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: rule.ResourceNames})
	}
	if len(errs) > 0 {
		st.Incomplete = true
		st.EvaluationError = errs[0].Error()
	}
	if _, isNode := authz.NodeName(u); isNode {
		st.Incomplete = true
		if st.EvaluationError == "" {
			st.EvaluationError = "node authorizer does not support user rule resolution"
		}
	}
	return st
}

var _ = rbacv1.GroupName
