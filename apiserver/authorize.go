package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/apiserver/authz"
)

// requestAttributes parses a request as kube-apiserver's RequestInfoFactory
// does: /api/v1/... and /apis/<group>/<version>/... with at least a
// resource are resource requests (verb from the method, list/watch for a GET
// without a name, deletecollection for a DELETE without one, the name taken
// from a metadata.name field selector on list/watch); everything else,
// discovery included, is a non-resource request with the method as verb.
func requestAttributes(r *http.Request, u authz.User) authz.Attributes {
	a := authz.Attributes{User: u, Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return a
	}
	prefix := parts[0]
	parts = parts[1:]
	if prefix == "apis" {
		if len(parts) < 3 {
			return a
		}
		a.APIGroup = parts[0]
		parts = parts[1:]
	}
	a.ResourceRequest = true
	a.APIVersion = parts[0]
	parts = parts[1:]
	if parts[0] == "watch" || parts[0] == "proxy" {
		if len(parts) < 2 {
			a.ResourceRequest = false
			return a
		}
		a.Verb = parts[0]
		parts = parts[1:]
	} else {
		switch r.Method {
		case http.MethodPost:
			a.Verb = "create"
		case http.MethodGet, http.MethodHead:
			a.Verb = "get"
		case http.MethodPut:
			a.Verb = "update"
		case http.MethodPatch:
			a.Verb = "patch"
		case http.MethodDelete:
			a.Verb = "delete"
		default:
			a.Verb = ""
		}
	}
	if parts[0] == "namespaces" {
		if len(parts) > 1 {
			a.Namespace = parts[1]
			if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
				parts = parts[2:]
			}
		}
	}
	switch {
	case len(parts) >= 3 && a.Verb != "proxy":
		a.Subresource = parts[2]
		fallthrough
	case len(parts) >= 2:
		a.Name = parts[1]
		fallthrough
	case len(parts) >= 1:
		a.Resource = parts[0]
	}
	q := r.URL.Query()
	a.FieldSelector, a.LabelSelector = q.Get("fieldSelector"), q.Get("labelSelector")
	if a.Name == "" && a.Verb == "get" {
		a.Verb = "list"
		if w := q.Get("watch"); w == "true" || w == "1" {
			a.Verb = "watch"
		}
		if sel, err := fields.ParseSelector(a.FieldSelector); err == nil {
			if name, ok := sel.RequiresExactMatch("metadata.name"); ok && len(content.IsPathSegmentName(name)) == 0 {
				a.Name = name
			}
		}
	}
	if a.Name == "" && a.Verb == "delete" {
		a.Verb = "deletecollection"
	}
	return a
}

// requestUser is the user a request acts as (after impersonation).
func requestUser(r *http.Request) authz.User {
	if u, ok := authz.UserFrom(r.Context()); ok {
		return u
	}
	if u, ok := authenticatedUser(r); ok {
		return u
	}
	return authz.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
}

// certUser is the user of the client certificate: common name and
// organizations, plus system:authenticated.
func certUser(r *http.Request) authz.User {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return authz.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
	}
	c := r.TLS.PeerCertificates[0]
	groups := slices.Clone(c.Subject.Organization)
	if !slices.Contains(groups, authz.SystemAuthenticated) {
		groups = append(groups, authz.SystemAuthenticated)
	}
	return authz.User{Name: c.Subject.CommonName, Groups: groups}
}

const impersonateExtraPrefix = "Impersonate-Extra-"

// impersonate applies the Impersonate-* headers as kube-apiserver does:
// each requested user, group, uid and extra value needs the impersonate
// verb on users/groups/serviceaccounts (core group) or uids/userextras
// (authentication.k8s.io); the request then runs as that user.
func (s *Server) impersonate(w http.ResponseWriter, r *http.Request, u authz.User) (authz.User, bool) {
	h := r.Header
	name := h.Get("Impersonate-User")
	groups := h.Values("Impersonate-Group")
	uid := h.Get("Impersonate-Uid")
	extra := map[string][]string{}
	for k, v := range h {
		if strings.HasPrefix(k, impersonateExtraPrefix) {
			key := strings.ToLower(strings.TrimPrefix(k, impersonateExtraPrefix))
			extra[key] = append(extra[key], v...)
		}
	}
	if name == "" {
		if len(groups) > 0 || uid != "" || len(extra) > 0 {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("requested %v without impersonating a user", describeImpersonation(groups, uid, extra))))
			return u, false
		}
		return u, true
	}
	check := func(a authz.Attributes) bool {
		a.User, a.Verb, a.ResourceRequest = u, "impersonate", true
		d, reason, _ := s.authorizer.Authorize(r.Context(), a)
		if d != authz.Allow {
			writeError(w, authz.Forbidden(a, reason))
			return false
		}
		return true
	}
	nu := authz.User{Name: name, UID: uid}
	if ns, sa, ok := strings.Cut(strings.TrimPrefix(name, authz.ServiceAccountUser), ":"); ok && strings.HasPrefix(name, authz.ServiceAccountUser) {
		if !check(authz.Attributes{Resource: "serviceaccounts", Namespace: ns, Name: sa}) {
			return u, false
		}
		if len(groups) == 0 {
			nu.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
		}
	} else if !check(authz.Attributes{Resource: "users", Name: name}) {
		return u, false
	}
	for _, g := range groups {
		if !check(authz.Attributes{Resource: "groups", Name: g}) {
			return u, false
		}
		nu.Groups = append(nu.Groups, g)
	}
	if uid != "" && !check(authz.Attributes{APIGroup: "authentication.k8s.io", Resource: "uids", Name: uid}) {
		return u, false
	}
	for k, vs := range extra {
		for _, v := range vs {
			if !check(authz.Attributes{APIGroup: "authentication.k8s.io", Resource: "userextras", Subresource: k, Name: v}) {
				return u, false
			}
		}
		nu.Extra = extra
	}
	if name != "system:anonymous" && !slices.Contains(nu.Groups, authz.SystemAuthenticated) && !slices.Contains(nu.Groups, "system:unauthenticated") {
		nu.Groups = append(nu.Groups, authz.SystemAuthenticated)
	}
	for k := range h {
		if strings.HasPrefix(k, "Impersonate-") {
			h.Del(k)
		}
	}
	return nu, true
}

func describeImpersonation(groups []string, uid string, extra map[string][]string) string {
	var parts []string
	for _, g := range groups {
		parts = append(parts, "{Group "+g+"}")
	}
	if uid != "" {
		parts = append(parts, "{UID "+uid+"}")
	}
	for k, vs := range extra {
		for _, v := range vs {
			parts = append(parts, "{"+textproto.CanonicalMIMEHeaderKey(impersonateExtraPrefix+k)+" "+v+"}")
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// authorizeRequests applies impersonation, the configured authorizers and
// the NodeRestriction admission to every authenticated request; the user
// travels in the request context (authz.UserFrom).
func (s *Server) authorizeRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		au, ok := authenticatedUser(r)
		if !ok {
			next.ServeHTTP(w, r) // public endpoints (authenticate let them through)
			return
		}
		u, ok := s.impersonate(w, r, au)
		if !ok {
			return
		}
		a := requestAttributes(r, u)
		d, reason, err := s.authorizer.Authorize(r.Context(), a)
		if d != authz.Allow {
			if err != nil && reason == "" {
				reason = err.Error()
			}
			writeError(w, authz.Forbidden(a, reason))
			return
		}
		if err := s.nodeRestriction(r, a); err != nil {
			writeError(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(authz.WithUser(r.Context(), u)))
	})
}

// nodeRestriction is kube-apiserver's NodeRestriction admission plugin for
// the writes the Node authorizer lets through: a node may only create
// mirror pods bound to itself, delete pods and update the status of pods
// bound to itself, and write its own Node and Lease.
func (s *Server) nodeRestriction(r *http.Request, a authz.Attributes) error {
	node, ok := authz.NodeName(a.User)
	if !ok || !a.ResourceRequest || a.APIGroup != "" && a.APIGroup != "coordination.k8s.io" {
		return nil
	}
	ctx := r.Context()
	forbidden := func(res, name string, format string, args ...any) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: a.APIGroup, Resource: res}, name, fmt.Errorf(format, args...))
	}
	switch {
	case a.APIGroup == "" && a.Resource == "pods":
		switch {
		case a.Verb == "create" && a.Subresource == "":
			obj, err := peekBody(r, &corev1.Pod{}, corev1.SchemeGroupVersion.WithKind("Pod"))
			if err != nil {
				return err
			}
			p := obj.(*corev1.Pod)
			if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; !mirror {
				return forbidden("pods", p.Name, "pod does not have %q annotation, node %q can only create mirror pods", corev1.MirrorPodAnnotationKey, node)
			}
			if p.Spec.NodeName != node {
				return forbidden("pods", p.Name, "node %q can only create pods with spec.nodeName set to itself", node)
			}
		case a.Verb == "delete" && a.Subresource == "", (a.Verb == "update" || a.Verb == "patch") && a.Subresource == "status",
			a.Verb == "create" && a.Subresource == "eviction":
			p, found := nodeGraph{s}.GetPod(ctx, a.Namespace, a.Name)
			if !found {
				return nil // the handler answers 404
			}
			if p.Spec.NodeName != node {
				what := map[string]string{"delete": "delete pods", "update": "update pod status for pods", "patch": "update pod status for pods", "create": "evict pods"}[a.Verb]
				return forbidden("pods", a.Name, "node %q can only %s with spec.nodeName set to itself", node, what)
			}
		}
	case a.APIGroup == "" && a.Resource == "nodes":
		name := a.Name
		switch a.Verb {
		case "create":
			obj, err := peekBody(r, &corev1.Node{}, corev1.SchemeGroupVersion.WithKind("Node"))
			if err != nil {
				return err
			}
			name = obj.(*corev1.Node).Name
		case "update", "patch", "delete":
		default:
			return nil
		}
		if name != node {
			return forbidden("nodes", name, "node %q is not allowed to modify node %q", node, name)
		}
	case a.APIGroup == "coordination.k8s.io" && a.Resource == "leases" && a.Verb == "create" && a.Namespace == corev1.NamespaceNodeLease:
		obj, err := peekBody(r, &coordinationv1.Lease{}, coordinationv1.SchemeGroupVersion.WithKind("Lease"))
		if err != nil {
			return err
		}
		if l := obj.(*coordinationv1.Lease); l.Name != node {
			return forbidden("leases", l.Name, "can only access node lease with the same name as the requesting node")
		}
	}
	return nil
}

// peekBody decodes the request body and puts it back for the handler.
func peekBody(r *http.Request, into runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return decodeBody(r, body, into, gvk, false)
}

var _ = context.Background
