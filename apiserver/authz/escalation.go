package authz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// Escalation is the check of the RBAC API's writes: a user may only create
// or update a role whose rules it holds itself (or with the escalate verb
// on it), and only bind a role whose rules it holds (or with the bind verb
// on it); system:masters may do both.
type Escalation struct {
	RBAC       *RBAC
	Authorizer Authorizer
	// Roles, when set, is where a binding's role is read: kube-apiserver
	// reads it from storage, not from the authorizer's watch-fed cache, so
	// a role whose rules were just written (an aggregated ClusterRole
	// being filled) is judged by those rules. Nil reads RBAC.Policy.
	Roles RoleGetter
}

var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

func (e *Escalation) allowed(ctx context.Context, u User, verb, resource, namespace, name string) bool {
	if u.InGroup(SystemMasters) {
		return true
	}
	d, _, _ := e.Authorizer.Authorize(ctx, Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: rbacv1.GroupName,
		APIVersion: "v1", Resource: resource, Namespace: namespace, Name: name})
	return d == Allow
}

// CheckRole is the check of a Role (namespace set) or ClusterRole write.
func (e *Escalation) CheckRole(ctx context.Context, u User, namespace, name string, rules []rbacv1.PolicyRule, aggregated bool) error {
	resource := "clusterroles"
	if namespace != "" {
		resource = "roles"
	}
	gr := rbacv1.Resource(resource)
	if e.allowed(ctx, u, "escalate", resource, namespace, name) {
		return nil
	}
	if aggregated {
		if err := e.confirm(u, "", fullAuthority); err != nil {
			return apierrors.NewForbidden(gr, name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
		}
	}
	if err := e.confirm(u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

// CheckBinding is the check of a RoleBinding (namespace set) or
// ClusterRoleBinding write.
func (e *Escalation) CheckBinding(ctx context.Context, u User, namespace, name string, ref rbacv1.RoleRef) error {
	resource := "clusterrolebindings"
	if namespace != "" {
		resource = "rolebindings"
	}
	gr := rbacv1.Resource(resource)
	roleResource := "clusterroles"
	if ref.Kind == "Role" {
		roleResource = "roles"
	}
	if ref.APIGroup == rbacv1.GroupName && e.allowed(ctx, u, "bind", roleResource, namespace, ref.Name) {
		return nil
	}
	roles := e.Roles
	if roles == nil {
		roles = e.RBAC.Policy
	}
	rules, err := roleRefRules(roles, ref, namespace)
	if err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	if err := e.confirm(u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

// confirm returns kube-apiserver's error when u's rules in namespace do not
// cover rules.
func (e *Escalation) confirm(u User, namespace string, rules []rbacv1.PolicyRule) error {
	owner, errs := e.RBAC.RulesFor(u, namespace)
	ok, missing := validation.Covers(owner, rules)
	if ok {
		return nil
	}
	var desc []string
	for _, r := range compactRules(missing) {
		desc = append(desc, CompactString(r))
	}
	slices.Sort(desc)
	desc = slices.Compact(desc)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.Name, u.Groups, strings.Join(desc, "\n"))
	if len(errs) > 0 {
		msg += fmt.Sprintf("; resolution errors: %v", errs)
	}
	return errors.New(msg)
}

// compactRules merges the verbs of rules about one resource of one group
// (and at most one name), as Kubernetes does before listing missing rights.
func compactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct{ group, resource, name string }
	var out []rbacv1.PolicyRule
	simple := map[key]int{}
	for _, r := range rules {
		if len(r.APIGroups) == 1 && len(r.Resources) == 1 && len(r.ResourceNames) <= 1 && len(r.NonResourceURLs) == 0 {
			k := key{r.APIGroups[0], r.Resources[0], ""}
			if len(r.ResourceNames) == 1 {
				k.name = r.ResourceNames[0]
			}
			if i, ok := simple[k]; ok {
				out[i].Verbs = append(out[i].Verbs, r.Verbs...)
				continue
			}
			simple[k] = len(out)
		}
		out = append(out, *r.DeepCopy())
	}
	return out
}

// CompactString is Kubernetes' one-line description of a rule, for example
// {APIGroups:[""], Resources:["pods"], Verbs:["get"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	if len(r.APIGroups) > 0 {
		parts = append(parts, fmt.Sprintf("APIGroups:%q", r.APIGroups))
	}
	if len(r.Resources) > 0 {
		parts = append(parts, fmt.Sprintf("Resources:%q", r.Resources))
	}
	if len(r.NonResourceURLs) > 0 {
		parts = append(parts, fmt.Sprintf("NonResourceURLs:%q", r.NonResourceURLs))
	}
	if len(r.ResourceNames) > 0 {
		parts = append(parts, fmt.Sprintf("ResourceNames:%q", r.ResourceNames))
	}
	if len(r.Verbs) > 0 {
		parts = append(parts, fmt.Sprintf("Verbs:%q", r.Verbs))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
