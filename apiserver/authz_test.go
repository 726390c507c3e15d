package apiserver_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/apiserver"
	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// userClient returns a client authenticating with a new certificate for
// user in groups, and the kubeconfig's path.
func userClient(t *testing.T, srv *apiservertest.Server, user string, groups ...string) (*kubernetes.Clientset, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := apiserver.WriteClientKubeconfig(srv.DataDir, path, srv.URL(), user, groups); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg), path
}

// eventually retries f for a few seconds: RBAC changes reach the
// authorizer through a watch.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRBACForbiddenMessageAndGrants(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.Config)
	alice, _ := userClient(t, srv, "alice", "dev")

	_, err := alice.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	want := `services is forbidden: User "alice" cannot list resource "services" in API group "" in the namespace "default"`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("unknown user list services: %v, want 403 %q", err, want)
	}
	_, err = alice.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("unknown user get services: %v, want 403", err)
	}
	_, err = alice.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if want := `nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope`; err == nil || err.Error() != want {
		t.Errorf("cluster scope: %v, want %q", err, want)
	}
	// Discovery and /version are open to every authenticated user
	// (system:discovery, system:public-info-viewer).
	if _, err := alice.Discovery().ServerVersion(); err != nil {
		t.Errorf("version: %v", err)
	}
	if _, err := alice.Discovery().ServerGroups(); err != nil {
		t.Errorf("discovery: %v", err)
	}

	// A Role with resourceNames and a subresource, bound to the group.
	_, err = admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "svc-reader"},
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"services"}},
			{Verbs: []string{"update"}, APIGroups: []string{""}, Resources: []string{"services/status"}, ResourceNames: []string{"kubernetes"}},
		}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-svc"},
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "svc-reader"},
		Subjects: []rbacv1.Subject{{Kind: "Group", Name: "dev"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "list after binding", func() error {
		_, err := alice.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := alice.CoreV1().Services("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("other namespace: %v, want 403", err)
	}
	svc, err := alice.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CoreV1().Services("default").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Errorf("status of the named service: %v", err)
	}
	if _, err := alice.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("update (no rule): %v, want 403", err)
	}

	// Escalation: alice may create Roles but not grant what she lacks.
	_, err = admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "role-writer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"create"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-roles"},
		RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "role-writer"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice creates a role she holds", func() error {
		_, err := alice.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "sub"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"services"}}}}, metav1.CreateOptions{})
		return err
	})
	_, err = alice.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secrets"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}}, metav1.CreateOptions{})
	wantEsc := `roles.rbac.authorization.k8s.io "secrets" is forbidden: user "alice" (groups=["dev" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`
	if err == nil || err.Error() != wantEsc {
		t.Errorf("escalating role: %v\nwant %s", err, wantEsc)
	}
	// admin is an aggregated ClusterRole: until the aggregation controller has
	// filled its rules it grants nothing, and binding it is no escalation
	// (as in kube-apiserver). Wait for the rules first.
	eventually(t, "admin ClusterRole aggregated", func() error {
		cr, err := admin.RbacV1().ClusterRoles().Get(ctx, "admin", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(cr.Rules) == 0 {
			return fmt.Errorf("admin has no rules yet")
		}
		return nil
	})
	_, err = alice.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "to-admin"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "admin"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is attempting to grant RBAC permissions not currently held") {
		t.Errorf("binding admin: %v, want escalation 403", err)
	}
	if _, err := alice.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "to-sub"},
		RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "sub"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("binding a role she holds: %v", err)
	}

	// Validation as kube-apiserver's.
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "x"}, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa"}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`) ||
		!strings.Contains(err.Error(), "subjects[0].namespace: Required value") {
		t.Errorf("invalid binding: %v", err)
	}
	rb, _ := admin.RbacV1().RoleBindings("default").Get(ctx, "dev-svc", metav1.GetOptions{})
	rb.RoleRef.Name = "other"
	if _, err := admin.RbacV1().RoleBindings("default").Update(ctx, rb, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "roleRef: Invalid value") {
		t.Errorf("roleRef change: %v, want immutable", err)
	}
}

func TestRBACAggregationAndDefaults(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.Config)
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery", "system:public-info-viewer",
		"system:node-proxier", "system:kube-dns", "system:node", "system:kube-controller-manager", "system:controller:endpointslice-controller", "system:coredns"} {
		if _, err := admin.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("default clusterrole %s: %v", name, err)
		}
	}
	eventually(t, "view aggregated", func() error {
		v, err := admin.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
		if err != nil || len(v.Rules) == 0 {
			return apierrors.NewNotFound(rbacv1.Resource("clusterroles"), "view rules")
		}
		return nil
	})
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgets-view",
		Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, agg := range []string{"view", "edit", "admin"} {
		eventually(t, agg+" aggregates widgets", func() error {
			v, err := admin.RbacV1().ClusterRoles().Get(ctx, agg, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, r := range v.Rules {
				if len(r.Resources) == 1 && r.Resources[0] == "widgets" {
					return nil
				}
			}
			return apierrors.NewNotFound(rbacv1.Resource("rule"), "widgets")
		})
	}
	// A RoleBinding to view gives read access in its namespace only.
	bob, _ := userClient(t, srv, "bob")
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-view"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob views pods", func() error {
		_, err := bob.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := bob.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("view creates: %v", err)
	}
	// Rules review lists bob's rules in default.
	rr, err := bob.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rr.Status.ResourceRules {
		found = found || strings.Contains(strings.Join(r.Resources, ","), "widgets")
	}
	if !found || rr.Status.Incomplete {
		t.Errorf("rules review: %+v", rr.Status)
	}
}

func TestNodeAuthorizer(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.Config)
	n1, _ := userClient(t, srv, "system:node:n1", "system:nodes")
	for _, n := range []string{"n1", "n2"} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkPod := func(name, node string) *corev1.Pod {
		p, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mine, theirs := mkPod("mine", "n1"), mkPod("theirs", "n2")
	mine.Status.Message = "ok"
	if _, err := n1.CoreV1().Pods("default").UpdateStatus(ctx, mine, metav1.UpdateOptions{}); err != nil {
		t.Errorf("own pod status: %v", err)
	}
	theirs.Status.Message = "hijacked"
	_, err := n1.CoreV1().Pods("default").UpdateStatus(ctx, theirs, metav1.UpdateOptions{})
	if want := `pods "theirs" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself`; err == nil || err.Error() != want {
		t.Errorf("other node's pod status: %v, want %q", err, want)
	}
	if err := n1.CoreV1().Pods("default").Delete(ctx, "theirs", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete other node's pod: %v, want 403", err)
	}
	if _, err := n1.CoreV1().Pods("default").Get(ctx, "theirs", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get other node's pod: %v, want 403", err)
	}
	if _, err := n1.CoreV1().Pods("default").Update(ctx, mine, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("update pod spec: %v, want 403", err)
	}
	if _, err := n1.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"}); err != nil {
		t.Errorf("list own pods: %v", err)
	}
	if _, err := n1.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list all pods: %v, want 403", err)
	}
	n2, _ := admin.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
	n2.Labels = map[string]string{"x": "y"}
	if _, err := n1.CoreV1().Nodes().Update(ctx, n2, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), `node "n1" is not allowed to modify node "n2"`) {
		t.Errorf("modify other node: %v", err)
	}
	own, _ := n1.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	own.Status.Phase = corev1.NodeRunning
	if _, err := n1.CoreV1().Nodes().UpdateStatus(ctx, own, metav1.UpdateOptions{}); err != nil {
		t.Errorf("own node status: %v", err)
	}
	if _, err := n1.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("node rules allow services: %v", err)
	}
}

// TestKubectlAuthCanI drives the real kubectl: can-i for the admin, for an
// impersonated user, and impersonation denied to a user without the verb.
func TestKubectlAuthCanI(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	srv := apiservertest.Start(t)
	kc := srv.KubeconfigPath()
	run := func(kubeconfig string, args ...string) (string, error) {
		out, err := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := run(kc, "auth", "can-i", "list", "services"); out != "yes" || err != nil {
		t.Errorf("admin can-i: %q %v", out, err)
	}
	if out, _ := run(kc, "auth", "can-i", "list", "services", "--as", "alice"); out != "no" {
		t.Errorf("can-i --as alice: %q, want no", out)
	}
	if out, _ := run(kc, "auth", "can-i", "list", "services", "--as", "alice", "--as-group", "system:masters"); out != "yes" {
		t.Errorf("can-i --as alice in system:masters: %q, want yes", out)
	}
	if out, err := run(kc, "get", "services", "--as", "alice"); err == nil || !strings.Contains(out, `User "alice" cannot list resource "services" in API group "" in the namespace "default"`) {
		t.Errorf("get --as alice: %q %v", out, err)
	}
	if out, _ := run(kc, "auth", "whoami", "--as", "alice", "-o", "jsonpath={.status.userInfo.username}"); out != "alice" {
		t.Errorf("whoami --as alice: %q", out)
	}
	// RBAC objects through kubectl (OpenAPI-validated apply, create helpers).
	role := filepath.Join(t.TempDir(), "role.yaml")
	if err := os.WriteFile(role, []byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: pod-reader, namespace: default}\nrules:\n- {apiGroups: [\"\"], resources: [pods, pods/log], verbs: [get, list]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(kc, "apply", "-f", role); err != nil {
		t.Fatalf("apply role: %s %v", out, err)
	}
	if out, err := run(kc, "create", "rolebinding", "alice-pods", "--role", "pod-reader", "--user", "alice"); err != nil {
		t.Fatalf("create rolebinding: %s %v", out, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := run(kc, "auth", "can-i", "get", "pods", "--subresource", "log", "--as", "alice")
		if out == "yes" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("can-i get pods/log after binding: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, _ := run(kc, "auth", "can-i", "delete", "pods", "--as", "alice"); out != "no" {
		t.Errorf("can-i delete pods --as alice: %q", out)
	}
	_, alicePath := userClient(t, srv, "alice")
	if out, err := run(alicePath, "get", "services", "--as", "bob"); err == nil || !strings.Contains(out, `users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope`) {
		t.Errorf("alice impersonating: %q %v", out, err)
	}
	if out, _ := run(alicePath, "auth", "can-i", "--list"); !strings.Contains(out, "selfsubjectaccessreviews.authorization.k8s.io") {
		t.Errorf("can-i --list: %q", out)
	}
}

func TestAlwaysAllowMode(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.WithConfig(func(c *apiserver.Config) { c.AuthorizationModes = []string{"AlwaysAllow"} }))
	alice, _ := userClient(t, srv, "alice")
	if _, err := alice.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("AlwaysAllow: %v", err)
	}
}
