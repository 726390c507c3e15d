package authz

import (
	"context"
	"errors"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Policy gives the RBAC objects the authorizer evaluates. Implementations
// are caches fed by watches; they must be safe for concurrent use and must
// not hand out objects callers may modify.
type Policy interface {
	GetRole(namespace, name string) (*rbacv1.Role, bool)
	GetClusterRole(name string) (*rbacv1.ClusterRole, bool)
	ClusterRoleBindings() []*rbacv1.ClusterRoleBinding
	RoleBindings(namespace string) []*rbacv1.RoleBinding
}

// RBAC is the RBAC authorizer (--authorization-mode=RBAC).
type RBAC struct{ Policy Policy }

var rbacGR = "rbac.authorization.k8s.io"

// visit calls fn with the rules of every binding that applies to user in
// namespace (cluster role bindings first, then the namespace's role
// bindings), with a description of where they come from; fn returns false
// to stop. Missing roles are reported as errors, as Kubernetes' rule
// resolver does.
func (r *RBAC) visit(user User, namespace string, fn func(source string, rules []rbacv1.PolicyRule) bool) []error {
	var errs []error
	for _, b := range r.Policy.ClusterRoleBindings() {
		subj, ok := appliesTo(user, b.Subjects, "")
		if !ok {
			continue
		}
		rules, err := r.roleRules(b.RoleRef, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !fn(fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(subj, "")), rules) {
			return errs
		}
	}
	if namespace == "" {
		return errs
	}
	for _, b := range r.Policy.RoleBindings(namespace) {
		subj, ok := appliesTo(user, b.Subjects, namespace)
		if !ok {
			continue
		}
		rules, err := r.roleRules(b.RoleRef, namespace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !fn(fmt.Sprintf("RoleBinding %q of %s %q to %s", b.Namespace+"/"+b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(subj, namespace)), rules) {
			return errs
		}
	}
	return errs
}

func describeSubject(s rbacv1.Subject, bindingNamespace string) string {
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return fmt.Sprintf("%s %q", s.Kind, ns+"/"+s.Name)
	default:
		return fmt.Sprintf("%s %q", s.Kind, s.Name)
	}
}

// RoleGetter finds Roles and ClusterRoles.
type RoleGetter interface {
	GetRole(namespace, name string) (*rbacv1.Role, bool)
	GetClusterRole(name string) (*rbacv1.ClusterRole, bool)
}

func (r *RBAC) roleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	return roleRefRules(r.Policy, ref, namespace)
}

// roleRefRules returns the rules of the role ref points to.
func roleRefRules(p RoleGetter, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		role, ok := p.GetRole(namespace, ref.Name)
		if !ok {
			return nil, apierrors.NewNotFound(rbacv1.Resource("role"), ref.Name)
		}
		return role.Rules, nil
	case "ClusterRole":
		role, ok := p.GetClusterRole(ref.Name)
		if !ok {
			return nil, apierrors.NewNotFound(rbacv1.Resource("clusterrole"), ref.Name)
		}
		return role.Rules, nil
	default:
		return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
	}
}

// appliesTo returns the first subject that names user.
func appliesTo(user User, subjects []rbacv1.Subject, bindingNamespace string) (rbacv1.Subject, bool) {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if user.Name == s.Name {
				return s, true
			}
		case rbacv1.GroupKind:
			if user.InGroup(s.Name) {
				return s, true
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = bindingNamespace
			}
			if ns != "" && user.Name == ServiceAccountUser+ns+":"+s.Name {
				return s, true
			}
		}
	}
	return rbacv1.Subject{}, false
}

// Authorize implements Authorizer.
func (r *RBAC) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	allowedBy := ""
	errs := r.visit(a.User, a.Namespace, func(source string, rules []rbacv1.PolicyRule) bool {
		for i := range rules {
			if RuleAllows(a, &rules[i]) {
				allowedBy = source
				return false
			}
		}
		return true
	})
	if allowedBy != "" {
		return Allow, "RBAC: allowed by " + allowedBy, nil
	}
	if len(errs) > 0 {
		return NoOpinion, "RBAC: " + aggregate(errs), nil
	}
	return NoOpinion, "", nil
}

// RulesFor returns every rule that applies to user in namespace (cluster
// role bindings and, for a namespace, its role bindings), and the errors met.
func (r *RBAC) RulesFor(user User, namespace string) ([]rbacv1.PolicyRule, []error) {
	var out []rbacv1.PolicyRule
	errs := r.visit(user, namespace, func(_ string, rules []rbacv1.PolicyRule) bool {
		out = append(out, rules...)
		return true
	})
	return out, errs
}

func aggregate(errs []error) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

// RuleAllows reports whether rule grants the request, with the matching
// rules of Kubernetes' RBAC: "*" matches any verb, group, resource or name;
// a resource "pods/log" names a subresource and "*/scale" matches that
// subresource of every resource ("pods/*" matches nothing special); an empty resourceNames list matches every
// name; a nonResourceURL ending in "*" matches every path with that prefix.
func RuleAllows(a Attributes, rule *rbacv1.PolicyRule) bool {
	if !has(rule.Verbs, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		return nonResourceURLMatches(rule, a.Path)
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	return has(rule.APIGroups, a.APIGroup) && resourceMatches(rule, combined, a.Subresource) && resourceNameMatches(rule, a.Name)
}

func has(set []string, v string) bool {
	for _, s := range set {
		if s == "*" || s == v {
			return true
		}
	}
	return false
}

func resourceMatches(rule *rbacv1.PolicyRule, combined, sub string) bool {
	for _, r := range rule.Resources {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case sub == "":
		case len(r) == len(sub)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, sub):
			return true
		}
	}
	return false
}

func resourceNameMatches(rule *rbacv1.PolicyRule, name string) bool {
	if len(rule.ResourceNames) == 0 {
		return true
	}
	for _, n := range rule.ResourceNames {
		if n == name {
			return true
		}
	}
	return false
}

func nonResourceURLMatches(rule *rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		switch {
		case u == rbacv1.NonResourceAll, u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimSuffix(u, "*")):
			return true
		}
	}
	return false
}

// ErrNoPolicy is returned while the policy cache has not loaded yet.
var ErrNoPolicy = errors.New("RBAC policy not loaded yet")
