package main

import (
	"math/rand"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/apis/rbac"
	k8sclusterrole "k8s.io/kubernetes/pkg/registry/rbac/clusterrole"
	k8sclusterrolebinding "k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding"
	k8srole "k8s.io/kubernetes/pkg/registry/rbac/role"
	k8srolebinding "k8s.io/kubernetes/pkg/registry/rbac/rolebinding"

	"github.com/svcnet/svcnet/apiserver/authz"
)

// Roles, ClusterRoles, RoleBindings and ClusterRoleBindings: create and
// update through kube-apiserver's strategies and svcnet's (without the
// escalation checks, which answer 403 before validation in both).

func randRule(r *rand.Rand) rbacv1.PolicyRule {
	var p rbacv1.PolicyRule
	for i, n := 0, pick(r, 0, 1, 1, 2); i < n; i++ {
		p.Verbs = append(p.Verbs, pick(r, "get", "list", "*", ""))
	}
	switch r.Intn(3) {
	case 0:
		p.NonResourceURLs = []string{pick(r, "/healthz", "/metrics*")}
		if maybe(r, 0.2) {
			p.Resources = []string{"pods"}
		}
	default:
		if maybe(r, 0.8) {
			p.APIGroups = []string{pick(r, "", "apps")}
		}
		if maybe(r, 0.8) {
			p.Resources = []string{pick(r, "pods", "services", "*")}
		}
		if maybe(r, 0.2) {
			p.ResourceNames = []string{"web"}
		}
	}
	return p
}

func randRules(r *rand.Rand) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for i, n := 0, r.Intn(3); i < n; i++ {
		out = append(out, randRule(r))
	}
	return out
}

func randSubject(r *rand.Rand) rbacv1.Subject {
	s := rbacv1.Subject{Kind: pick(r, rbacv1.UserKind, rbacv1.GroupKind, rbacv1.ServiceAccountKind, "Robot"),
		Name: pick(r, "alice", "alice", "", "system:nodes", "Bad_SA", "default")}
	if maybe(r, 0.4) {
		s.APIGroup = pick(r, rbacv1.GroupName, "", "other.io")
	}
	if maybe(r, 0.5) {
		s.Namespace = pick(r, "default", "", "kube-system")
	}
	return s
}

func randRoleRef(r *rand.Rand) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: pick(r, "", rbacv1.GroupName, rbacv1.GroupName, "other.io"),
		Kind: pick(r, "Role", "ClusterRole", "ClusterRole", "Thing"), Name: pick(r, "view", "view", "", "a/b")}
}

func randSubjects(r *rand.Rand) []rbacv1.Subject {
	var out []rbacv1.Subject
	for i, n := 0, r.Intn(3); i < n; i++ {
		out = append(out, randSubject(r))
	}
	return out
}

func rbacName(r *rand.Rand) string {
	return pick(r, "viewer", "viewer", "system:viewer", "a/b", "..", "")
}

func roleCreateCase(r *rand.Rand) string {
	in := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: rbacName(r), Namespace: namespace}, Rules: randRules(r)}
	return compareCreate(in, "rbac.authorization.k8s.io", "roles", true, true, k8srole.Strategy, authz.NewStrategy(true),
		func() runtime.Object { return &rbac.Role{} }, func() runtime.Object { return &rbacv1.Role{} })
}

func clusterRoleCreateCase(r *rand.Rand) string {
	in := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: rbacName(r)}, Rules: randRules(r)}
	if maybe(r, 0.2) {
		in.AggregationRule = &rbacv1.AggregationRule{}
		if maybe(r, 0.6) {
			in.AggregationRule.ClusterRoleSelectors = []metav1.LabelSelector{*randSelector(r)}
		}
	}
	return compareCreate(in, "rbac.authorization.k8s.io", "clusterroles", false, true, k8sclusterrole.Strategy, authz.NewStrategy(false),
		func() runtime.Object { return &rbac.ClusterRole{} }, func() runtime.Object { return &rbacv1.ClusterRole{} })
}

func roleBindingCreateCase(r *rand.Rand) string {
	in := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rbacName(r), Namespace: namespace}, RoleRef: randRoleRef(r), Subjects: randSubjects(r)}
	return compareCreate(in, "rbac.authorization.k8s.io", "rolebindings", true, true, k8srolebinding.Strategy, authz.NewStrategy(true),
		func() runtime.Object { return &rbac.RoleBinding{} }, func() runtime.Object { return &rbacv1.RoleBinding{} })
}

func clusterRoleBindingCreateCase(r *rand.Rand) string {
	in := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rbacName(r)}, RoleRef: randRoleRef(r), Subjects: randSubjects(r)}
	return compareCreate(in, "rbac.authorization.k8s.io", "clusterrolebindings", false, true, k8sclusterrolebinding.Strategy, authz.NewStrategy(false),
		func() runtime.Object { return &rbac.ClusterRoleBinding{} }, func() runtime.Object { return &rbacv1.ClusterRoleBinding{} })
}

func roleUpdateCase(r *rand.Rand) string {
	old := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "viewer", Namespace: namespace, UID: "uid-10", ResourceVersion: "17"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	in := old.DeepCopy()
	in.Rules = randRules(r)
	return withInput(compareUpdate(in, old, "rbac.authorization.k8s.io", "roles", "", true, k8srole.Strategy, authz.NewStrategy(true),
		func() (runtime.Object, runtime.Object) { return &rbac.Role{}, &rbac.Role{} },
		func() runtime.Object { return &rbacv1.Role{} }), in, old)
}

func roleBindingUpdateCase(r *rand.Rand) string {
	old := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewers", Namespace: namespace, UID: "uid-11", ResourceVersion: "18"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}
	in := old.DeepCopy()
	if maybe(r, 0.5) {
		in.RoleRef = randRoleRef(r)
	}
	if maybe(r, 0.7) {
		in.Subjects = randSubjects(r)
	}
	return withInput(compareUpdate(in, old, "rbac.authorization.k8s.io", "rolebindings", "", true, k8srolebinding.Strategy, authz.NewStrategy(true),
		func() (runtime.Object, runtime.Object) { return &rbac.RoleBinding{}, &rbac.RoleBinding{} },
		func() runtime.Object { return &rbacv1.RoleBinding{} }), in, old)
}

func clusterRoleBindingUpdateCase(r *rand.Rand) string {
	old := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewers", UID: "uid-12", ResourceVersion: "19"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"}}}
	in := old.DeepCopy()
	if maybe(r, 0.5) {
		in.RoleRef = randRoleRef(r)
	}
	if maybe(r, 0.7) {
		in.Subjects = randSubjects(r)
	}
	return withInput(compareUpdate(in, old, "rbac.authorization.k8s.io", "clusterrolebindings", "", false, k8sclusterrolebinding.Strategy, authz.NewStrategy(false),
		func() (runtime.Object, runtime.Object) { return &rbac.ClusterRoleBinding{}, &rbac.ClusterRoleBinding{} },
		func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }), in, old)
}
