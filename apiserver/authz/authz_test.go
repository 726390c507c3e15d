package authz

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRuleAllows(t *testing.T) {
	res := func(verb, group, resource, sub, name string) Attributes {
		return Attributes{Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Name: name}
	}
	path := func(verb, p string) Attributes { return Attributes{Verb: verb, Path: p} }
	for _, tc := range []struct {
		rule rbacv1.PolicyRule
		a    Attributes
		want bool
	}{
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "", "x"), true},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "log", "x"), false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}, res("get", "", "pods", "log", "x"), true},
		{rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}}, res("update", "apps", "deployments", "scale", "d"), true},
		{rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}}, res("update", "apps", "deployments", "", "d"), false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/*"}}, res("get", "", "pods", "log", "x"), false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"pods"}}, res("get", "", "pods", "", "x"), false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"cm"}, ResourceNames: []string{"a"}}, res("get", "", "cm", "", "a"), true},
		{rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"cm"}, ResourceNames: []string{"a"}}, res("list", "", "cm", "", ""), false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz/*"}}, path("get", "/healthz/etcd"), true},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz/*"}}, path("get", "/healthz"), false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}, path("post", "/healthz"), false},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"*"}}, res("get", "", "pods", "", ""), false},
	} {
		if got := RuleAllows(tc.a, &tc.rule); got != tc.want {
			t.Errorf("%+v on %+v: %v, want %v", tc.rule, tc.a, got, tc.want)
		}
	}
}

type fakePolicy struct {
	roles  map[string]*rbacv1.ClusterRole
	cbs    []*rbacv1.ClusterRoleBinding
	rbs    []*rbacv1.RoleBinding
	nsRole map[string]*rbacv1.Role
}

func (f *fakePolicy) GetRole(ns, name string) (*rbacv1.Role, bool) {
	r, ok := f.nsRole[ns+"/"+name]
	return r, ok
}
func (f *fakePolicy) GetClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	r, ok := f.roles[name]
	return r, ok
}
func (f *fakePolicy) ClusterRoleBindings() []*rbacv1.ClusterRoleBinding { return f.cbs }
func (f *fakePolicy) RoleBindings(ns string) []*rbacv1.RoleBinding {
	var out []*rbacv1.RoleBinding
	for _, b := range f.rbs {
		if b.Namespace == ns {
			out = append(out, b)
		}
	}
	return out
}

func TestRBACServiceAccountSubjectsAndMissingRoles(t *testing.T) {
	p := &fakePolicy{
		roles: map[string]*rbacv1.ClusterRole{"reader": {Rules: []rbacv1.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"services"}}}}},
		rbs: []*rbacv1.RoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "b"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "reader"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa"}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "gone"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "missing"},
				Subjects: []rbacv1.Subject{{Kind: "Group", Name: "system:authenticated"}}},
		},
	}
	r := &RBAC{Policy: p}
	a := Attributes{Verb: "list", ResourceRequest: true, Resource: "services", Namespace: "ns1",
		User: User{Name: "system:serviceaccount:ns1:sa", Groups: []string{"system:authenticated"}}}
	if d, reason, _ := r.Authorize(context.Background(), a); d != Allow || reason != `RBAC: allowed by RoleBinding "ns1/b" of ClusterRole "reader" to ServiceAccount "ns1/sa"` {
		t.Errorf("sa in its namespace: %v %q", d, reason)
	}
	a.User.Name = "system:serviceaccount:ns2:sa"
	if d, reason, _ := r.Authorize(context.Background(), a); d != NoOpinion || reason != `RBAC: role.rbac.authorization.k8s.io "missing" not found` {
		t.Errorf("sa of another namespace: %v %q", d, reason)
	}
}

func TestDefaultPolicyLoads(t *testing.T) {
	p, err := LoadDefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	proxier, ok := p.ClusterRole("system:node-proxier")
	if !ok {
		t.Fatal("no system:node-proxier")
	}
	// kube-proxy (and svcnet proxy) watch EndpointSlices and ServiceCIDRs.
	for _, a := range []Attributes{
		{Verb: "watch", ResourceRequest: true, APIGroup: "discovery.k8s.io", Resource: "endpointslices"},
		{Verb: "list", ResourceRequest: true, APIGroup: "networking.k8s.io", Resource: "servicecidrs"},
		{Verb: "watch", ResourceRequest: true, APIGroup: "networking.k8s.io", Resource: "servicecidrs"},
	} {
		allowed := false
		for i := range proxier.Rules {
			allowed = allowed || RuleAllows(a, &proxier.Rules[i])
		}
		if !allowed {
			t.Errorf("node-proxier cannot %s %s", a.Verb, a.Resource)
		}
	}
	for _, b := range p.ClusterRoleBindings {
		if _, ok := p.ClusterRole(b.RoleRef.Name); !ok {
			t.Errorf("binding %s names missing role %s", b.Name, b.RoleRef.Name)
		}
	}
}
