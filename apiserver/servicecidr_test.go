package apiserver_test

import (
	"context"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/storage"
)

func mkService(t *testing.T, c *kubernetes.Clientset, name, clusterIP string) (*corev1.Service, error) {
	t.Helper()
	return c.CoreV1().Services("default").Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{ClusterIP: clusterIP, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
}

func checkIPAddress(t *testing.T, c *kubernetes.Clientset, ip, svc string) {
	t.Helper()
	obj, err := c.NetworkingV1().IPAddresses().Get(context.Background(), ip, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("IPAddress %s: %v", ip, err)
	}
	want := networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: svc}
	if obj.Spec.ParentRef == nil || *obj.Spec.ParentRef != want ||
		obj.Labels["ipaddress.kubernetes.io/managed-by"] != "ipallocator.k8s.io" || obj.Labels["ipaddress.kubernetes.io/ip-family"] != "IPv4" {
		t.Errorf("IPAddress %s = %+v %v", ip, obj.Spec.ParentRef, obj.Labels)
	}
}

// TestServiceCIDRsAndIPAddresses: ClusterIPs are IPAddress objects in
// ServiceCIDRs, the default one made from --service-cluster-ip-range; a new
// ServiceCIDR extends the range at once; bad ServiceCIDRs and IPAddresses
// get kube-apiserver's errors.
func TestServiceCIDRsAndIPAddresses(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	def, err := c.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(def.Spec.CIDRs) != 1 || def.Spec.CIDRs[0] != "10.96.0.0/16" || len(def.Status.Conditions) != 1 ||
		def.Status.Conditions[0].Type != "Ready" || def.Status.Conditions[0].Status != metav1.ConditionTrue ||
		def.Status.Conditions[0].Message != "Kubernetes default Service CIDR is ready" {
		t.Errorf("default ServiceCIDR = %+v", def)
	}
	checkIPAddress(t, c, "10.96.0.1", "kubernetes")

	web, err := mkService(t, c, "web", "")
	if err != nil {
		t.Fatal(err)
	}
	checkIPAddress(t, c, web.Spec.ClusterIP, "web")

	// Outside every ServiceCIDR, then inside a new one.
	_, err = mkService(t, c, "extra", "10.100.0.10")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "failed to allocate IP 10.100.0.10: the provided network does not match the current range") {
		t.Fatalf("ClusterIP outside every ServiceCIDR: %v", err)
	}
	if _, err := c.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.100.0.0/24"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mkService(t, c, "extra", "10.100.0.10"); err != nil {
		t.Fatalf("ClusterIP in the new ServiceCIDR: %v", err)
	}
	checkIPAddress(t, c, "10.100.0.10", "extra")
	// The taken address, and a network address.
	if _, err := mkService(t, c, "dup", "10.100.0.10"); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "failed to allocate IP 10.100.0.10: provided IP is already allocated") {
		t.Errorf("taken ClusterIP: %v", err)
	}
	if _, err := mkService(t, c, "dup", "10.100.0.0"); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "failed to allocate IP 10.100.0.0: the provided network does not match the current range") {
		t.Errorf("network address: %v", err)
	}

	// Invalid ServiceCIDRs: 422 with kube-apiserver's messages; nothing stored.
	for _, tc := range []struct {
		cidrs []string
		msg   string
	}{
		{nil, `spec.cidrs: Required value: at least one CIDR required`},
		{[]string{"10.0.0.0/33"}, `spec.cidrs[0]: Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`},
		{[]string{"10.0.0.0/24", "10.1.0.0/24"}, `may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64`},
		{[]string{"10.0.0.1/24"}, `spec.cidrs[0]: Invalid value: "10.0.0.1/24": must not have bits set beyond the prefix length`},
	} {
		_, err := c.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: tc.cidrs}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ServiceCIDR %v: %v, want 422 with %q", tc.cidrs, err, tc.msg)
		}
	}
	if _, err := c.NetworkingV1().ServiceCIDRs().Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a rejected ServiceCIDR was stored: %v", err)
	}
	// spec.cidrs is immutable.
	extra, _ := c.NetworkingV1().ServiceCIDRs().Get(ctx, "extra", metav1.GetOptions{})
	extra.Spec.CIDRs = []string{"10.100.1.0/24"}
	if _, err := c.NetworkingV1().ServiceCIDRs().Update(ctx, extra, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("ServiceCIDR update: %v", err)
	}

	// Several errors in kube-apiserver's order: the declarative rules'
	// (parentRef's resource and name required) after the handwritten ones.
	_, err = c.NetworkingV1().IPAddresses().Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.96.5.5"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Namespace: "a/b", Name: "x/y"}}}, metav1.CreateOptions{})
	if want := `[spec.parentRef.name: Invalid value: "x/y": may not contain '/', spec.parentRef.namespace: Invalid value: "a/b": may not contain '/', spec.parentRef.resource: Required value]`; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("IPAddress with three errors: %v, want them as %s", err, want)
	}

	// IPAddresses: the name must be an IP in canonical form, parentRef is required.
	for _, tc := range []struct {
		name string
		ref  *networkingv1.ParentReference
		msg  string
	}{
		{"10.96.0.010", &networkingv1.ParentReference{Resource: "services", Name: "x"}, `metadata.name: Invalid value: "10.96.0.010"`},
		{"10.96.5.5", nil, `spec.parentRef: Required value`},
		{"10.96.5.5", &networkingv1.ParentReference{Name: "x"}, `spec.parentRef.resource: Required value`},
	} {
		_, err := c.NetworkingV1().IPAddresses().Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: tc.name},
			Spec: networkingv1.IPAddressSpec{ParentRef: tc.ref}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("IPAddress %s: %v, want 422 with %q", tc.name, err, tc.msg)
		}
	}
	// A hand-made IPAddress reserves its address from the allocator.
	if _, err := c.NetworkingV1().IPAddresses().Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.100.0.20"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Group: "example.com", Resource: "gateways", Name: "gw"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mkService(t, c, "dup", "10.100.0.20"); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "provided IP is already allocated") {
		t.Errorf("address reserved by hand: %v", err)
	}

	// parentRef is immutable (kube-apiserver reports it declaratively, with no value).
	gw, err := c.NetworkingV1().IPAddresses().Get(ctx, "10.100.0.20", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gw.Spec.ParentRef.Name = "gw2"
	if _, err := c.NetworkingV1().IPAddresses().Update(ctx, gw, metav1.UpdateOptions{}); err == nil ||
		!strings.HasSuffix(err.Error(), `is invalid: spec.parentRef: Invalid value: null: field is immutable`) {
		t.Errorf("IPAddress parentRef update: %v", err)
	}

	// Deleting a Service releases its IPAddress.
	if err := c.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NetworkingV1().IPAddresses().Get(ctx, web.Spec.ClusterIP, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("IPAddress of a deleted Service: %v", err)
	}
}

// TestStatusKeepsStoredMetadata: a write to /status changes the status
// only, and what else it keeps from the stored object is kube-apiserver's
// per kind: a ServiceCIDR's labels, annotations, finalizers and owners
// (metav1.ResetObjectMetaForStatus), a Deployment's labels (its annotations
// may change).
func TestStatusKeepsStoredMetadata(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)

	sc, err := c.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra", Labels: map[string]string{"a": "1"}},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.100.0.0/24"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Labels["a"] = "2"
	sc.Annotations = map[string]string{"note": "x"}
	sc.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Test", LastTransitionTime: metav1.Now()}}
	got, err := c.NetworkingV1().ServiceCIDRs().UpdateStatus(ctx, sc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["a"] != "1" || got.Annotations["note"] != "" || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "Test" {
		t.Errorf("ServiceCIDR after /status: labels %v annotations %v conditions %+v", got.Labels, got.Annotations, got.Status.Conditions)
	}

	labels := map[string]string{"app": "web"}
	d, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"tier": "front"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Labels["tier"] = "back"
	d.Annotations = map[string]string{"note": "x"}
	d.Status.ObservedGeneration = 1
	gotD, err := c.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gotD.Labels["tier"] != "front" || gotD.Annotations["note"] != "x" || gotD.Status.ObservedGeneration != 1 {
		t.Errorf("Deployment after /status: labels %v annotations %v observedGeneration %d", gotD.Labels, gotD.Annotations, gotD.Status.ObservedGeneration)
	}
}

// TestClusterIPMigration: ClusterIPs held in the bitmap of svcnet before
// IPAddress allocation become IPAddress objects at start, unchanged, and
// the bitmaps are removed.
func TestClusterIPMigration(t *testing.T) {
	dir := t.TempDir()
	srv := apiservertest.Start(t, apiservertest.WithDataDir(dir))
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	var ips []string
	for _, n := range []string{"a", "b", "c"} {
		s, err := mkService(t, c, n, "")
		if err != nil {
			t.Fatal(err)
		}
		ips = append(ips, s.Spec.ClusterIP)
	}
	// Make the store look like one written by the bitmap allocator: no
	// IPAddress objects, a bitmap under /registry/ranges/serviceips.
	cli := srv.Etcd()
	prefix := storage.KeyPrefix(schema.GroupResource{Group: "networking.k8s.io", Resource: "ipaddresses"})
	if _, err := cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/registry/ranges/serviceips", "legacy"); err != nil {
		t.Fatal(err)
	}
	if l, _ := c.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Fatalf("IPAddresses left: %d", len(l.Items))
	}
	srv.Stop()
	srv = apiservertest.Start(t, apiservertest.WithDataDir(dir))
	c = kubernetes.NewForConfigOrDie(srv.Config)
	for i, n := range []string{"a", "b", "c"} {
		s, err := c.CoreV1().Services("default").Get(ctx, n, metav1.GetOptions{})
		if err != nil || s.Spec.ClusterIP != ips[i] {
			t.Fatalf("service %s after migration: %v %v", n, s, err)
		}
		checkIPAddress(t, c, ips[i], n)
	}
	checkIPAddress(t, c, "10.96.0.1", "kubernetes")
	if r, err := srv.Etcd().Get(ctx, "/registry/ranges/serviceips"); err != nil || r.Count != 0 {
		t.Errorf("bitmap key after migration: %v %v", r, err)
	}
}
