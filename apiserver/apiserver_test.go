package apiserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/apiserver"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func jsonClient(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	return kubernetes.NewForConfigOrDie(c)
}

func protoClient(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf"
	return kubernetes.NewForConfigOrDie(c)
}

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
}

func TestStartupTime(t *testing.T) {
	start := time.Now()
	apiservertest.Start(t)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("apiservertest.Start took %v, want < 5s", d)
	} else {
		t.Logf("apiservertest.Start took %v", d)
	}
}

func TestTypedCRUD(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	for name, c := range map[string]*kubernetes.Clientset{"default": kubernetes.NewForConfigOrDie(srv.Config), "json": jsonClient(t, srv.Config), "protobuf": protoClient(t, srv.Config)} {
		t.Run(name, func(t *testing.T) {
			pods := c.CoreV1().Pods("default")
			p, err := pods.Create(ctx, testPod("p-"+name), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if p.UID == "" || p.ResourceVersion == "" || p.CreationTimestamp.IsZero() || p.Generation != 1 {
				t.Errorf("server-owned fields not set: uid=%q rv=%q ts=%v gen=%d", p.UID, p.ResourceVersion, p.CreationTimestamp, p.Generation)
			}
			if p.Spec.DNSPolicy != corev1.DNSClusterFirst || p.Spec.RestartPolicy != corev1.RestartPolicyAlways || p.Spec.EnableServiceLinks == nil || !*p.Spec.EnableServiceLinks {
				t.Errorf("pod defaults missing: %+v", p.Spec)
			}
			if p.Status.Phase != corev1.PodPending {
				t.Errorf("phase = %q, want Pending", p.Status.Phase)
			}
			if len(p.ManagedFields) == 0 {
				t.Errorf("no managedFields")
			}
			if _, err := pods.Create(ctx, testPod("p-"+name), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
				t.Errorf("second create: got %v, want AlreadyExists", err)
			}
			got, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.UID != p.UID {
				t.Fatalf("get: %v %v", got, err)
			}
			got.Labels["x"] = "y"
			upd, err := pods.Update(ctx, got, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if upd.ResourceVersion == got.ResourceVersion || upd.Labels["x"] != "y" {
				t.Errorf("update did not apply: %+v", upd.ObjectMeta)
			}
			// A stale resourceVersion is a conflict.
			got.Labels["x"] = "z"
			if _, err := pods.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("stale update: got %v, want Conflict", err)
			}
			list, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) == 0 || list.ResourceVersion == "" {
				t.Fatalf("list: %v %v", list, err)
			}
			if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, err := pods.Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get after delete: %v, want NotFound", err)
			}
		})
	}
}

func TestGenerateNameAndGeneration(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: testPod("x").Spec},
		},
	}
	got, err := c.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.Name, "web-") || len(got.Name) != len("web-")+5 {
		t.Errorf("generated name %q", got.Name)
	}
	if *got.Spec.Replicas != 1 || got.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("deployment defaults missing: %+v", got.Spec)
	}
	got.Labels = map[string]string{"a": "b"}
	got, err = c.AppsV1().Deployments("default").Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || got.Generation != 1 {
		t.Fatalf("metadata-only update: gen %d err %v", got.Generation, err)
	}
	r := int32(3)
	got.Spec.Replicas = &r
	got, err = c.AppsV1().Deployments("default").Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || got.Generation != 2 {
		t.Fatalf("spec update: gen %d err %v", got.Generation, err)
	}
	sc, err := c.AppsV1().Deployments("default").GetScale(ctx, got.Name, metav1.GetOptions{})
	if err != nil || sc.Spec.Replicas != 3 || sc.Status.Selector != "app=web" {
		t.Fatalf("scale: %+v %v", sc, err)
	}
	sc.Spec.Replicas = 5
	if _, err := c.AppsV1().Deployments("default").UpdateScale(ctx, got.Name, sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, _ = c.AppsV1().Deployments("default").Get(ctx, got.Name, metav1.GetOptions{})
	if *got.Spec.Replicas != 5 {
		t.Errorf("replicas after scale = %d", *got.Spec.Replicas)
	}
	// Status writes go through /status only.
	got.Status.Replicas = 7
	got, err = c.AppsV1().Deployments("default").Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || got.Status.Replicas != 0 {
		t.Fatalf("main resource must keep status: %d %v", got.Status.Replicas, err)
	}
	got.Status.Replicas = 7
	got, err = c.AppsV1().Deployments("default").UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil || got.Status.Replicas != 7 {
		t.Fatalf("status update: %d %v", got.Status.Replicas, err)
	}
	// Selector must match the template: 422 with the field path.
	bad := d.DeepCopy()
	bad.Spec.Template.Labels = map[string]string{"app": "other"}
	_, err = c.AppsV1().Deployments("default").Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.template.metadata.labels") {
		t.Errorf("mismatched selector: %v", err)
	}
}

func TestPatchTypes(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	pods := c.CoreV1().Pods("default")
	p := testPod("patchme")
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: "busybox"})
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Patch(ctx, "patchme", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels/j","value":"1"}]`), metav1.PatchOptions{})
	if err != nil || got.Labels["j"] != "1" {
		t.Fatalf("json patch: %v %v", got.Labels, err)
	}
	got, err = pods.Patch(ctx, "patchme", types.MergePatchType, []byte(`{"metadata":{"labels":{"m":"2","j":null}}}`), metav1.PatchOptions{})
	if err != nil || got.Labels["m"] != "2" || got.Labels["j"] != "" {
		t.Fatalf("merge patch: %v %v", got.Labels, err)
	}
	// A strategic merge patch merges containers by name and honours $patch:
	// delete (in a Deployment's template: a Pod may not lose a container).
	got, err = pods.Patch(ctx, "patchme", types.StrategicMergePatchType, []byte(`{"spec":{"containers":[{"name":"side","$patch":"delete"},{"name":"c","image":"nginx:2"}]}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.containers: Forbidden: pod updates may not add or remove containers") {
		t.Fatalf("strategic patch removing a pod's container: %v", err)
	}
	replicas := int32(0)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "patchme"}, Spec: appsv1.DeploymentSpec{Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: p.Spec}}}
	if _, err := c.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gotD, err := c.AppsV1().Deployments("default").Patch(ctx, "patchme", types.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"side","$patch":"delete"},{"name":"c","image":"nginx:2"}]}}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cs := gotD.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Image != "nginx:2" {
		t.Errorf("strategic patch: %+v", cs)
	}
	// Server-side apply creates, records the manager, and detects conflicts.
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied","namespace":"default"},"data":{"a":"1"}}`
	cmo, err := c.CoreV1().ConfigMaps("default").Patch(ctx, "applied", types.ApplyPatchType, []byte(cm), metav1.PatchOptions{FieldManager: "one"})
	if err != nil || cmo.Data["a"] != "1" {
		t.Fatalf("apply create: %v %v", cmo, err)
	}
	found := false
	for _, mf := range cmo.ManagedFields {
		found = found || (mf.Manager == "one" && mf.Operation == metav1.ManagedFieldsOperationApply)
	}
	if !found {
		t.Errorf("managedFields lack apply by one: %+v", cmo.ManagedFields)
	}
	cm2 := strings.Replace(cm, `"1"`, `"2"`, 1)
	_, err = c.CoreV1().ConfigMaps("default").Patch(ctx, "applied", types.ApplyPatchType, []byte(cm2), metav1.PatchOptions{FieldManager: "two"})
	if !apierrors.IsConflict(err) {
		t.Errorf("conflicting apply: %v, want Conflict", err)
	}
	force := true
	cmo, err = c.CoreV1().ConfigMaps("default").Patch(ctx, "applied", types.ApplyPatchType, []byte(cm2), metav1.PatchOptions{FieldManager: "two", Force: &force})
	if err != nil || cmo.Data["a"] != "2" {
		t.Errorf("forced apply: %v %v", cmo, err)
	}
	_, err = c.CoreV1().ConfigMaps("default").Patch(ctx, "applied", types.ApplyPatchType, []byte(cm2), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Errorf("apply without fieldManager: %v", err)
	}
	if _, err := pods.Patch(ctx, "missing", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("patch of missing object: %v", err)
	}
}

func TestNamespaces(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		n, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
		if n.Labels["kubernetes.io/metadata.name"] != ns || n.Status.Phase != corev1.NamespaceActive {
			t.Errorf("namespace %s: labels %v phase %s", ns, n.Labels, n.Status.Phase)
		}
	}
	if _, err := c.CoreV1().ConfigMaps("nope").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("create in missing namespace: %v, want NotFound", err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete default: %v, want Forbidden", err)
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tmp"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.CoreV1().ConfigMaps("tmp").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CoreV1().Pods("tmp").Create(ctx, testPod("p"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, "tmp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server only marks the namespace; emptying it and removing the
	// "kubernetes" finalizer is the namespace controller's work
	// (controller/namespace).
	n, err := c.CoreV1().Namespaces().Get(ctx, "tmp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.DeletionTimestamp == nil || n.Status.Phase != corev1.NamespaceTerminating || n.DeletionGracePeriodSeconds != nil {
		t.Errorf("deleted namespace: deletionTimestamp %v grace %v phase %s", n.DeletionTimestamp, n.DeletionGracePeriodSeconds, n.Status.Phase)
	}
	if _, err := c.CoreV1().ConfigMaps("tmp").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create in terminating namespace: %v, want Forbidden", err)
	}
	// spec.finalizers changes through /finalize only.
	n.Spec.Finalizers = nil
	if n, err = c.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil || len(n.Spec.Finalizers) != 1 {
		t.Errorf("update of spec.finalizers: %v %v, want them kept", n.Spec.Finalizers, err)
	}
	if err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/tmp/finalize").Do(ctx).Error(); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("GET finalize: %v, want MethodNotSupported", err)
	}
	n.Spec.Finalizers = []corev1.FinalizerName{"nonstandard"}
	if _, err := c.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.finalizers[0]: Invalid value: \"nonstandard\": name is neither a standard finalizer name nor is it fully qualified") {
		t.Errorf("finalize with a bad name: %v", err)
	}
	n.Spec.Finalizers = nil
	if _, err := c.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().Get(ctx, "tmp", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("finalized namespace: %v, want NotFound", err)
	}
	// Without spec.finalizers a delete removes the namespace at once.
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bare, _ := c.CoreV1().Namespaces().Get(ctx, "bare", metav1.GetOptions{})
	bare.Spec.Finalizers = nil
	if _, err := c.CoreV1().Namespaces().Finalize(ctx, bare, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, "bare", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().Get(ctx, "bare", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace without finalizers after delete: %v, want NotFound", err)
	}
}

func TestGracefulPodDeletion(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	pods := c.CoreV1().Pods("default")
	p := testPod("bound")
	p.Spec.NodeName = "node-1"
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, "bound", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bound pod must stay until its node confirms: %v", err)
	}
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
		t.Errorf("deletionTimestamp %v grace %v", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	zero := int64(0)
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "bound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after grace 0: %v", err)
	}
	// An unscheduled pod goes at once.
	if _, err := pods.Create(ctx, testPod("free"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "free", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "free", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("unscheduled pod: %v", err)
	}
}

func TestSelectorsAndPaging(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	pods := c.CoreV1().Pods("default")
	for i := 0; i < 7; i++ {
		p := testPod(fmt.Sprintf("p%d", i))
		if i%2 == 0 {
			p.Labels["even"] = "true"
			p.Spec.NodeName = "n1"
		}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(opts metav1.ListOptions) int {
		t.Helper()
		l, err := pods.List(ctx, opts)
		if err != nil {
			t.Fatalf("list %+v: %v", opts, err)
		}
		return len(l.Items)
	}
	cases := []struct {
		name string
		opts metav1.ListOptions
		want int
	}{
		{"label", metav1.ListOptions{LabelSelector: "even=true"}, 4},
		{"not-key", metav1.ListOptions{LabelSelector: "!even"}, 3},
		{"name", metav1.ListOptions{FieldSelector: "metadata.name=p3"}, 1},
		{"nodeName", metav1.ListOptions{FieldSelector: "spec.nodeName=n1"}, 4},
		{"phase", metav1.ListOptions{FieldSelector: "status.phase!=Running"}, 7},
		{"both", metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "spec.nodeName="}, 3},
	}
	for _, tc := range cases {
		if got := count(tc.opts); got != tc.want {
			t.Errorf("%s: %d items, want %d", tc.name, got, tc.want)
		}
	}
	if _, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("unsupported field: %v", err)
	}
	var names []string
	opts := metav1.ListOptions{Limit: 3}
	pages := 0
	for {
		l, err := pods.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, p := range l.Items {
			names = append(names, p.Name)
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if len(names) != 7 || pages != 3 {
		t.Errorf("paging: %d names in %d pages: %v", len(names), pages, names)
	}
}

func TestDryRun(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}}
	got, err := c.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{DryRun: []string{"All"}})
	if err != nil || got.UID == "" {
		t.Fatalf("dry-run create: %v %v", got, err)
	}
	if _, err := c.CoreV1().ConfigMaps("default").Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run create stored the object: %v", err)
	}
}

// rawClient is an HTTPS client with the admin credentials for raw requests.
func rawClient(t *testing.T, cfg *rest.Config, withCert bool) *http.Client {
	tc, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !withCert {
		tc = &tls.Config{RootCAs: tc.RootCAs}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
}

func do(t *testing.T, hc *http.Client, method, url, ct string, body []byte) (int, metav1.Status) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	_ = json.Unmarshal(data, &st)
	return resp.StatusCode, st
}

func TestBadInput(t *testing.T) {
	srv := apiservertest.Start(t)
	hc := rawClient(t, srv.Config, true)
	base := srv.Config.Host + "/api/v1/namespaces/default/configmaps"
	cases := []struct {
		name, method, url, ct, body string
		code                        int
		reason                      metav1.StatusReason
		causeField                  string
	}{
		{"malformed json", "POST", base, "application/json", `{"metadata":`, 400, metav1.StatusReasonBadRequest, ""},
		{"malformed yaml", "POST", base, "application/yaml", "metadata: [", 400, metav1.StatusReasonBadRequest, ""},
		{"unknown field strict", "POST", base + "?fieldValidation=Strict", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"bogus":1}`, 400, metav1.StatusReasonBadRequest, ""},
		{"wrong content type", "POST", base, "text/plain", `hello`, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"wrong kind", "POST", base, "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"invalid name", "POST", base, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}`, 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"invalid label", "POST", base, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok","labels":{"a b":"c"}}}`, 422, metav1.StatusReasonInvalid, "metadata.labels"},
		{"oversized", "POST", base, "application/json", `{"x":"` + strings.Repeat("a", 3*1024*1024+10) + `"}`, 413, metav1.StatusReasonRequestEntityTooLarge, ""},
		{"bad patch type", "PATCH", base + "/x", "application/json", `{}`, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"not found", "GET", base + "/nope", "", "", 404, metav1.StatusReasonNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, st := do(t, hc, tc.method, tc.url, tc.ct, []byte(tc.body))
			if code != tc.code || st.Reason != tc.reason || st.Kind != "Status" {
				t.Errorf("got %d %q (%s), want %d %q", code, st.Reason, st.Message, tc.code, tc.reason)
			}
			if tc.causeField != "" {
				found := false
				if st.Details != nil {
					for _, c := range st.Details.Causes {
						found = found || strings.HasPrefix(c.Field, tc.causeField)
					}
				}
				if !found {
					t.Errorf("no cause for %s in %+v", tc.causeField, st.Details)
				}
			}
		})
	}
	c := kubernetes.NewForConfigOrDie(srv.Config)
	l, err := c.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(l.Items) != 0 {
		t.Errorf("bad input stored something: %v %v", l, err)
	}
	code, st := do(t, rawClient(t, srv.Config, false), "GET", base, "", nil)
	if code != 401 || st.Reason != metav1.StatusReasonUnauthorized {
		t.Errorf("no credentials: %d %q, want 401 Unauthorized", code, st.Reason)
	}
}

func TestWatchBasics(t *testing.T) {
	srv := apiservertest.Start(t)
	for name, c := range map[string]*kubernetes.Clientset{"json": jsonClient(t, srv.Config), "protobuf": protoClient(t, srv.Config)} {
		t.Run(name, func(t *testing.T) { testWatch(t, c, "w-"+name) })
	}
}

func testWatch(t *testing.T, c *kubernetes.Clientset, ns string) {
	ctx := ctxT(t)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := c.CoreV1().ConfigMaps(ns)
	first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm, _ := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, metav1.CreateOptions{})
	cm.Data = map[string]string{"k": "v"}
	_, _ = cms.Update(ctx, cm, metav1.UpdateOptions{})
	_ = cms.Delete(ctx, "w1", metav1.DeleteOptions{})
	want := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}
	for i, wt := range want {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != wt {
				t.Fatalf("event %d: %s, want %s", i, ev.Type, wt)
			}
			got := ev.Object.(*corev1.ConfigMap)
			if got.Name != "w1" {
				t.Errorf("event %d for %s", i, got.Name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("timeout waiting for %s", wt)
		}
	}
}

func TestClientKubeconfig(t *testing.T) {
	srv := apiservertest.Start(t)
	path := t.TempDir() + "/node.kubeconfig"
	if err := apiserver.WriteClientKubeconfig(srv.DataDir, path, srv.URL(), "system:node:n1", []string{"system:nodes"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	// The Node authorizer lets a node read its own Node (by name, here
	// through a metadata.name field selector as client-go informers send it).
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().List(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=n1"}); err != nil {
		t.Errorf("node credentials rejected: %v", err)
	}
}

// The API server never deletes dependents itself (the garbage collector in
// controller/gc does, see controller's TestCascadingDeletionByGarbageCollector):
// Background removes only the owner; Orphan and Foreground mark it with
// their finalizer for the collector, as kube-apiserver does.
func TestDeletePropagation(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	mk := func(name string) {
		t.Helper()
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
		tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: testPod("x").Spec}
		d, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		yes := true
		if _, err := c.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name + "-rs",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: &yes}}},
			Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deps := c.AppsV1().Deployments("default")
	mk("background")
	if err := deps.Delete(ctx, "background", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := deps.Get(ctx, "background", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("background delete: the owner is still there (%v)", err)
	}
	if rs, err := c.AppsV1().ReplicaSets("default").Get(ctx, "background-rs", metav1.GetOptions{}); err != nil || len(rs.OwnerReferences) != 1 {
		t.Errorf("background delete: the dependent is the collector's to delete, want it untouched: %v %+v", err, rs)
	}

	for _, tc := range []struct {
		policy    metav1.DeletionPropagation
		finalizer string
	}{{metav1.DeletePropagationOrphan, metav1.FinalizerOrphanDependents}, {metav1.DeletePropagationForeground, metav1.FinalizerDeleteDependents}} {
		name := strings.ToLower(string(tc.policy))
		mk(name)
		if err := deps.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &tc.policy}); err != nil {
			t.Fatal(err)
		}
		d, err := deps.Get(ctx, name, metav1.GetOptions{})
		if err != nil || d.DeletionTimestamp == nil || !slices.Equal(d.Finalizers, []string{tc.finalizer}) {
			t.Errorf("%s delete: want the owner marked with the %q finalizer, got %v %+v", tc.policy, tc.finalizer, err, d)
		}
		if rs, err := c.AppsV1().ReplicaSets("default").Get(ctx, name+"-rs", metav1.GetOptions{}); err != nil || len(rs.OwnerReferences) != 1 {
			t.Errorf("%s delete: dependent changed by the API server: %v %+v", tc.policy, err, rs)
		}
	}
	// A second delete with another policy swaps the finalizer; an explicit
	// Background drops it, and with no finalizer left the object goes.
	if err := deps.Delete(ctx, "orphan", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	if d, err := deps.Get(ctx, "orphan", metav1.GetOptions{}); err != nil || !slices.Equal(d.Finalizers, []string{metav1.FinalizerDeleteDependents}) {
		t.Errorf("orphan then foreground: %v %+v, want only the foregroundDeletion finalizer", err, d)
	}
	if err := deps.Delete(ctx, "orphan", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	if _, err := deps.Get(ctx, "orphan", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("explicit background on a marked owner: want it deleted, got %v", err)
	}
	// The deprecated orphanDependents is the Orphan policy, and may not be
	// combined with a policy.
	mk("legacy")
	if err := deps.Delete(ctx, "legacy", metav1.DeleteOptions{OrphanDependents: ptr.To(true), PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "orphanDependents and deletionPropagation cannot be both set") {
		t.Errorf("orphanDependents with a policy: %v, want kube-apiserver's Invalid error", err)
	}
	if err := deps.Delete(ctx, "legacy", metav1.DeleteOptions{OrphanDependents: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	if d, err := deps.Get(ctx, "legacy", metav1.GetOptions{}); err != nil || !slices.Equal(d.Finalizers, []string{metav1.FinalizerOrphanDependents}) {
		t.Errorf("orphanDependents=true: %v %+v, want the orphan finalizer", err, d)
	}
}

func TestPodBinding(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	pods := c.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, testPod("sched"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "sched"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	if err := pods.Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	p, _ := pods.Get(ctx, "sched", metav1.GetOptions{})
	if p.Spec.NodeName != "node-1" || len(p.Status.Conditions) != 1 || p.Status.Conditions[0].Type != corev1.PodScheduled {
		t.Errorf("after bind: node %q conditions %+v", p.Spec.NodeName, p.Status.Conditions)
	}
	b.Target.Name = "node-2"
	if err := pods.Bind(ctx, b, metav1.CreateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("second bind: %v, want Conflict", err)
	}
}

func TestPodLogsProxiedToNode(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	// A stand-in node agent on loopback.
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s?%s", r.URL.Path, r.URL.RawQuery)
	}))
	defer agent.Close()
	_, portStr, _ := net.SplitHostPort(agent.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	node, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := testPod("logged")
	p.Spec.NodeName = "n1"
	if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tail := int64(5)
	out, err := c.CoreV1().Pods("default").GetLogs("logged", &corev1.PodLogOptions{TailLines: &tail}).Do(ctx).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "/containerLogs/default/logged/c?tailLines=5" {
		t.Errorf("node agent got %q", out)
	}
}
