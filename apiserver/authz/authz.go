// Package authz is svcnet's authorization: the request attributes
// kube-apiserver authorizes on, the RBAC authorizer with Kubernetes' rule
// semantics (verbs, API groups, resources, subresources, resourceNames,
// nonResourceURLs), the Node authorizer, the union of authorizers chosen by
// --authorization-mode, the escalation checks of the RBAC API, validation of
// its objects, and the default roles and bindings kube-apiserver bootstraps.
//
// The rule comparison of the escalation check is
// k8s.io/component-helpers/auth/rbac/validation.Covers; the default policy is
// kube-apiserver 1.37's bootstrap policy as data (bootstrap/*.yaml).
package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Well-known users and groups.
const (
	SystemMasters       = "system:masters"
	SystemAuthenticated = "system:authenticated"
	SystemNodes         = "system:nodes"
	NodeUserPrefix      = "system:node:"
	ServiceAccountUser  = "system:serviceaccount:"
)

// User is an authenticated (or impersonated) user.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// InGroup reports whether the user is a member of g.
func (u User) InGroup(g string) bool { return slices.Contains(u.Groups, g) }

// Attributes describe one request as kube-apiserver's authorizers see it.
type Attributes struct {
	User User
	// Verb is get, list, watch, create, update, patch, delete,
	// deletecollection (or impersonate, bind, escalate...) for resource
	// requests and the lower-case HTTP method for others.
	Verb            string
	ResourceRequest bool
	// Path is the request path (non-resource requests).
	Path        string
	Namespace   string
	APIGroup    string
	APIVersion  string
	Resource    string
	Subresource string
	Name        string
	// FieldSelector and LabelSelector are the list/watch selectors as sent.
	FieldSelector string
	LabelSelector string
}

// Decision is an authorizer's answer.
type Decision int

const (
	NoOpinion Decision = iota
	Allow
	Deny
)

// Authorizer decides on requests. reason explains a denial or no-opinion
// (it goes into the 403 message); err is an evaluation error (for example
// a binding naming a role that does not exist), which does not stop the
// union from asking the next authorizer.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (Decision, string, error)
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, a Attributes) (Decision, string, error)

func (f AuthorizerFunc) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	return f(ctx, a)
}

// AlwaysAllow authorizes everything (--authorization-mode=AlwaysAllow).
var AlwaysAllow = AuthorizerFunc(func(context.Context, Attributes) (Decision, string, error) { return Allow, "", nil })

// AlwaysDeny denies everything (--authorization-mode=AlwaysDeny).
var AlwaysDeny = AuthorizerFunc(func(context.Context, Attributes) (Decision, string, error) {
	return NoOpinion, "Everything is forbidden.", nil
})

// PrivilegedGroups allows every request of members of system:masters, as
// kube-apiserver puts it in front of the configured authorizers.
var PrivilegedGroups = AuthorizerFunc(func(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User.InGroup(SystemMasters) {
		return Allow, "", nil
	}
	return NoOpinion, "", nil
})

// Union asks each authorizer in turn; the first Allow or Deny wins. The
// reasons of the others are joined, and errors are collected, as
// k8s.io/apiserver's union authorizer does.
type Union []Authorizer

func (u Union) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	var reasons []string
	var errs []error
	for _, z := range u {
		d, reason, err := z.Authorize(ctx, a)
		if err != nil {
			errs = append(errs, err)
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
		if d == Allow || d == Deny {
			return d, reason, err
		}
	}
	var err error
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		if len(msgs) == 1 {
			err = errs[0]
		} else {
			err = fmt.Errorf("[%s]", strings.Join(msgs, ", "))
		}
	}
	return NoOpinion, strings.Join(reasons, "\n"), err
}

// New builds the authorizer of an --authorization-mode list (RBAC, Node,
// AlwaysAllow, AlwaysDeny), with system:masters allowed first.
func New(modes []string, rbac *RBAC, node *Node) (Authorizer, error) {
	u := Union{PrivilegedGroups}
	seen := map[string]bool{}
	for _, m := range modes {
		if seen[m] {
			return nil, fmt.Errorf("authorization-mode %q has mode specified more than once", m)
		}
		seen[m] = true
		switch m {
		case "RBAC":
			u = append(u, rbac)
		case "Node":
			u = append(u, node)
		case "AlwaysAllow":
			u = append(u, AlwaysAllow)
		case "AlwaysDeny":
			u = append(u, AlwaysDeny)
		default:
			return nil, fmt.Errorf("unknown authorization mode %q: supported are RBAC, Node, AlwaysAllow, AlwaysDeny", m)
		}
	}
	if len(modes) == 0 {
		return nil, fmt.Errorf("at least one authorization-mode must be passed")
	}
	return u, nil
}

// forbiddenMessage is kube-apiserver's description of a denied request.
func forbiddenMessage(a Attributes) string {
	if !a.ResourceRequest {
		return fmt.Sprintf("User %q cannot %s path %q", a.User.Name, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", a.User.Name, a.Verb, resource, a.APIGroup, a.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", a.User.Name, a.Verb, resource, a.APIGroup)
}

// Forbidden is the 403 kube-apiserver answers for a denied request, for
// example `services is forbidden: User "alice" cannot list resource
// "services" in API group "" in the namespace "default"`.
func Forbidden(a Attributes, reason string) error {
	msg := forbiddenMessage(a)
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
	return apierrors.NewForbidden(gr, a.Name, fmt.Errorf("%s", msg))
}

type userKey struct{}

// WithUser returns ctx carrying the request's user.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the request's user; ok is false for the server's own
// (internal) writes.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}
