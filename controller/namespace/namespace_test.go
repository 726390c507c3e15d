package namespace_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/controller/namespace"
)

// start runs the namespace controller with cfg's identity until the test ends.
func start(t *testing.T, cfg *rest.Config) {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := namespace.New(client, dyn, factory, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.RecheckDelay = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() { defer close(done); _ = c.Run(ctx, 2) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// must returns v, or panics (failing the test) with err: setup steps
// that cannot fail unless the API server is broken.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// eventually polls cond (generously: the machine may be loaded) and fails
// the test with what cond last said.
func eventually(t *testing.T, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		ok, s := cond()
		last = s
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %s)", what, err, last)
	}
}

func condition(ns *corev1.Namespace, typ corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range ns.Status.Conditions {
		if ns.Status.Conditions[i].Type == typ {
			return &ns.Status.Conditions[i]
		}
	}
	return nil
}

func fill(t *testing.T, ctx context.Context, c kubernetes.Interface, ns string) {
	t.Helper()
	must(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	must(c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}))
	must(c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}, metav1.CreateOptions{}))
	port, proto := int32(8080), corev1.ProtocolTCP
	must(c.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}}},
		Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
	}, metav1.CreateOptions{}))
	must(c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{}))
}

// TestDeleteNamespaceWithContent deletes a namespace holding a Service
// (with its ClusterIP's IPAddress), a pod, an EndpointSlice, a ConfigMap and
// a ConfigMap held by a finalizer: the namespace stays Terminating with
// FinalizersRemaining until the finalizer goes, then it and everything in
// it are gone and the ClusterIP is free again.
func TestDeleteNamespaceWithContent(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	fill(t, ctx, c, "doomed")
	svc := must(c.CoreV1().Services("doomed").Get(ctx, "web", metav1.GetOptions{}))
	must(c.NetworkingV1().IPAddresses().Get(ctx, svc.Spec.ClusterIP, metav1.GetOptions{}))
	must(c.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{}))
	start(t, srv.Config)

	if err := c.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "namespace waits for the finalizer", func() (bool, string) {
		ns, err := c.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		fr, cr := condition(ns, corev1.NamespaceFinalizersRemaining), condition(ns, corev1.NamespaceContentRemaining)
		if fr == nil || cr == nil {
			return false, "no conditions yet"
		}
		return ns.Status.Phase == corev1.NamespaceTerminating &&
				fr.Status == corev1.ConditionTrue && fr.Reason == "SomeFinalizersRemain" &&
				fr.Message == "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances" &&
				cr.Status == corev1.ConditionTrue && cr.Message == "Some resources are remaining: configmaps. has 1 resource instances",
			fmt2(ns)
	})
	for _, check := range []func() (int, error){
		func() (int, error) {
			l, err := c.CoreV1().Services("doomed").List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		func() (int, error) {
			l, err := c.CoreV1().Pods("doomed").List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		func() (int, error) {
			l, err := c.DiscoveryV1().EndpointSlices("doomed").List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
	} {
		if n, err := check(); err != nil || n != 0 {
			t.Errorf("content left while the finalizer holds: %d objects, %v", n, err)
		}
	}
	// Nothing new may be created in a terminating namespace.
	if _, err := c.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create in terminating namespace: %v, want Forbidden", err)
	}

	must(c.CoreV1().ConfigMaps("doomed").Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}))
	eventually(t, ctx, "namespace deleted", func() (bool, string) {
		_, err := c.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "get: " + errString(err)
	})
	if _, err := c.NetworkingV1().IPAddresses().Get(ctx, svc.Spec.ClusterIP, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("IPAddress %s of the deleted Service: %v, want NotFound", svc.Spec.ClusterIP, err)
	}
	// The name can be used again at once.
	must(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{}))
	if l := must(c.CoreV1().ConfigMaps("doomed").List(ctx, metav1.ListOptions{})); len(l.Items) != 0 {
		t.Errorf("%d ConfigMaps survived their namespace", len(l.Items))
	}
}

// TestFailureIsRetried runs the controller as a user who may not delete
// ConfigMaps: the namespace shows NamespaceDeletionContentFailure with the
// API's refusal and stays; once the user is allowed, a retry finishes it.
func TestFailureIsRetried(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	rules := []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "watch", "delete"}, APIGroups: []string{""}, Resources: []string{"namespaces"}},
		{Verbs: []string{"update"}, APIGroups: []string{""}, Resources: []string{"namespaces/finalize", "namespaces/status"}},
		// Everything namespaced but ConfigMaps may be deleted.
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
		{Verbs: []string{"delete", "deletecollection"}, APIGroups: []string{"*"}},
	}
	lists := must(c.Discovery().ServerPreferredNamespacedResources())
	for _, l := range lists {
		for _, r := range l.APIResources {
			if r.Name != "configmaps" && !strings.Contains(r.Name, "/") {
				rules[3].Resources = append(rules[3].Resources, r.Name)
			}
		}
	}
	role := must(c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-ns-deleter"}, Rules: rules}, metav1.CreateOptions{}))
	must(c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-ns-deleter"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ns-deleter"}},
	}, metav1.CreateOptions{}))
	fill(t, ctx, c, "stuck")
	limited := rest.CopyConfig(srv.Config)
	limited.Impersonate = rest.ImpersonationConfig{UserName: "ns-deleter"}
	start(t, limited)

	if err := c.CoreV1().Namespaces().Delete(ctx, "stuck", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "content failure reported", func() (bool, string) {
		ns, err := c.CoreV1().Namespaces().Get(ctx, "stuck", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cf := condition(ns, corev1.NamespaceDeletionContentFailure)
		return cf != nil && cf.Status == corev1.ConditionTrue && cf.Reason == "ContentDeletionFailed" &&
			cf.Message == `Failed to delete all resource types, 1 remaining: configmaps is forbidden: User "ns-deleter" cannot deletecollection resource "configmaps" in API group "" in the namespace "stuck"`, fmt2(ns)
	})
	if n := must(c.CoreV1().Pods("stuck").List(ctx, metav1.ListOptions{})); len(n.Items) != 0 {
		t.Errorf("pods not deleted: %d", len(n.Items))
	}

	role.Rules[3].Resources = append(role.Rules[3].Resources, "configmaps")
	must(c.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}))
	eventually(t, ctx, "namespace deleted after the retry", func() (bool, string) {
		ns, err := c.CoreV1().Namespaces().Get(ctx, "stuck", metav1.GetOptions{})
		if err == nil {
			return false, fmt2(ns)
		}
		return apierrors.IsNotFound(err), err.Error()
	})
}

// TestOtherFinalizersKept: a namespace with a second spec finalizer loses
// only "kubernetes" and waits for the other owner.
func TestOtherFinalizersKept(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	ns := must(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "two"}}, metav1.CreateOptions{}))
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, "example.com/other")
	must(c.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}))
	start(t, srv.Config)
	if err := c.CoreV1().Namespaces().Delete(ctx, "two", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "kubernetes finalizer removed", func() (bool, string) {
		ns, err := c.CoreV1().Namespaces().Get(ctx, "two", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{"example.com/other"}), fmt2(ns)
	})
	ns = must(c.CoreV1().Namespaces().Get(ctx, "two", metav1.GetOptions{}))
	ns.Spec.Finalizers = nil
	must(c.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}))
	if _, err := c.CoreV1().Namespaces().Get(ctx, "two", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the last finalizer: %v, want NotFound", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func fmt2(ns *corev1.Namespace) string {
	var b strings.Builder
	b.WriteString("phase=" + string(ns.Status.Phase) + " finalizers=")
	for _, f := range ns.Spec.Finalizers {
		b.WriteString(string(f) + ",")
	}
	for _, c := range ns.Status.Conditions {
		b.WriteString(" [" + string(c.Type) + "=" + string(c.Status) + " " + c.Reason + ": " + c.Message + "]")
	}
	return b.String()
}
