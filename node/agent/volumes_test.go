package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svcnet/svcnet/node/sandbox"
)

// saMountPath is where the ServiceAccount admission plugin mounts a pod's
// kube-api-access volume.
const saMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

const fakeCA = "-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"

// tokenServer answers the fake API's TokenRequests (serviceaccounts/NAME/
// token) with token-1, token-2, ..., each expiring ttl after it was
// issued, and records the requests.
type tokenServer struct {
	mu   sync.Mutex
	ttl  time.Duration
	reqs []tokenRequest
}

type tokenRequest struct {
	namespace, serviceAccount string
	spec                      authenticationv1.TokenRequestSpec
}

func newTokenServer(client *fake.Clientset, ttl time.Duration) *tokenServer {
	s := &tokenServer{ttl: ttl}
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateActionImpl)
		if !ok || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.reqs = append(s.reqs, tokenRequest{namespace: ca.Namespace, serviceAccount: ca.Name, spec: tr.Spec})
		tr.Status = authenticationv1.TokenRequestStatus{Token: fmt.Sprintf("token-%d", len(s.reqs)),
			ExpirationTimestamp: metav1.NewTime(time.Now().Add(s.ttl))}
		return true, tr, nil
	})
	return s
}

func (s *tokenServer) requests() []tokenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]tokenRequest(nil), s.reqs...)
}

// kubeAPIAccess is the volume the ServiceAccount admission plugin adds to
// every pod.
func kubeAPIAccess(name string) v1.Volume {
	mode, exp := int32(420), int64(3607)
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{ExpirationSeconds: &exp, Path: "token"}},
		{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
			Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace",
			FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
	}}}}
}

// saPod is a pod as the ServiceAccount admission plugin leaves it: service
// account default, its kube-api-access volume mounted read-only.
func saPod(name string, c v1.Container) *v1.Pod {
	c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: "kube-api-access-abcde", MountPath: saMountPath, ReadOnly: true})
	p := newPod(name, c)
	p.Spec.ServiceAccountName = "default"
	p.Spec.Volumes = append(p.Spec.Volumes, kubeAPIAccess("kube-api-access-abcde"))
	return p
}

func rootCA(ns string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": fakeCA}}
}

var sleeper = v1.Container{Name: "app", Image: "busybox", Command: []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.05; done"}}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func checkFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if got := readFile(path); got != content {
		t.Errorf("%s: %q, want %q", path, got, content)
	}
	if fi.Mode().Perm() != mode {
		t.Errorf("%s: mode %o, want %o", path, fi.Mode().Perm(), mode)
	}
}

func TestTokenRefreshAt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		life, want time.Duration
	}{
		{3607 * time.Second, 2885600 * time.Millisecond}, // 80% of the default 3607 s
		{time.Hour, 48 * time.Minute},
		{48 * time.Hour, 24 * time.Hour}, // at most a day
		{365 * 24 * time.Hour, 24 * time.Hour},
		{2 * time.Second, time.Second + 600*time.Millisecond},
		{time.Second, time.Second}, // never sooner than a second
		{-time.Minute, time.Second},
	} {
		if got := tokenRefreshAt(t0, t0.Add(c.life)).Sub(t0); got != c.want {
			t.Errorf("lifetime %v: refresh after %v, want %v", c.life, got, c.want)
		}
	}
	for _, exp := range []time.Time{{}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)} { // none; the end of time
		if got, want := tokenRefreshAt(t0, exp).Sub(t0), min(max(exp.Sub(t0)/10*8, time.Second), 24*time.Hour); got != want {
			t.Errorf("expiring %v: refresh after %v, want %v", exp, got, want)
		}
	}
	var got []time.Duration
	for n := 1; n <= 9; n++ {
		got = append(got, tokenRetryDelay(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
		time.Minute, time.Minute, time.Minute}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("retry delays %v, want %v", got, want)
	}
}

// The kube-api-access volume: token, ca.crt and namespace with mode 0644,
// mounted read-only; the token comes from a TokenRequest bound to the pod
// and is replaced when 80% of its life has passed, until the pod is gone.
func TestServiceAccountVolume(t *testing.T) {
	client := fake.NewClientset(rootCA("default"))
	tokens := newTokenServer(client, 2*time.Second)
	e := startAgent(t, client, nil, nil)
	ctx := context.Background()
	grace := int64(1)
	p := saPod("sa", sleeper)
	p.Spec.TerminationGracePeriodSeconds = &grace
	if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("Running", func() (bool, string) {
		p := e.pod("sa")
		return p != nil && p.Status.Phase == v1.PodRunning, p.String()
	})
	vdir := filepath.Join(e.rt.dir, "default_sa", "volumes", "kube-api-access-abcde")
	checkFile(t, filepath.Join(vdir, "ca.crt"), fakeCA, 0o644)
	checkFile(t, filepath.Join(vdir, "namespace"), "default", 0o644)
	if got := readFile(filepath.Join(vdir, "token")); !strings.HasPrefix(got, "token-") {
		t.Errorf("token %q", got)
	}
	if fi, err := os.Stat(filepath.Dir(vdir)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("volumes directory: %v %v", fi, err)
	}
	e.rt.mu.Lock()
	mounts := e.rt.sbs["default/sa"].spec.Mounts
	e.rt.mu.Unlock()
	if want := []sandbox.Mount{{Source: vdir, Target: saMountPath, ReadOnly: true}}; !reflect.DeepEqual(mounts, want) {
		t.Errorf("mounts %+v, want %+v", mounts, want)
	}
	r := tokens.requests()[0]
	wantSpec := authenticationv1.TokenRequestSpec{ExpirationSeconds: p.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds,
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "sa", UID: "uid-sa"}}
	if r.namespace != "default" || r.serviceAccount != "default" || !reflect.DeepEqual(r.spec, wantSpec) {
		t.Errorf("token request %+v", r)
	}

	// Refresh: a 2 s token is replaced after 1.6 s; a reader sees a whole
	// token every time, and no temporary file stays behind.
	deadline := time.Now().Add(6 * time.Second)
	seen := map[string]bool{}
	for time.Now().Before(deadline) && len(seen) < 3 {
		tok := readFile(filepath.Join(vdir, "token"))
		if !strings.HasPrefix(tok, "token-") {
			t.Fatalf("token file read as %q", tok)
		}
		seen[tok] = true
		time.Sleep(5 * time.Millisecond)
	}
	if len(seen) < 3 {
		t.Errorf("tokens seen in 6 s: %v", seen)
	}
	if entries, _ := os.ReadDir(vdir); len(entries) != 3 {
		t.Errorf("volume files: %v", entries)
	}

	// Once the pod is gone, no more requests.
	cur := e.pod("sa")
	now := metav1.Now()
	cur.DeletionTimestamp, cur.DeletionGracePeriodSeconds = &now, &grace
	if _, err := client.CoreV1().Pods("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("pod deleted", func() (bool, string) { return e.pod("sa") == nil, "" })
	n := len(tokens.requests())
	time.Sleep(2500 * time.Millisecond)
	if m := len(tokens.requests()); m != n {
		t.Errorf("%d token requests after the pod was deleted", m-n)
	}
}

// A missing ConfigMap (or key) keeps the pod in ContainerCreating with the
// kubelet's FailedMount message and event, and the pod starts once it
// exists; optional: true lets the pod start without it.
func TestVolumeMissingConfigMap(t *testing.T) {
	client := fake.NewClientset()
	e := startAgent(t, client, nil, nil)
	ctx := context.Background()
	yes := true
	cmPod := func(name string, optional *bool, items []v1.KeyToPath) *v1.Pod {
		c := sleeper
		c.VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/app"}}
		p := newPod(name, c)
		p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}, Optional: optional, Items: items}}}}
		return p
	}
	for _, p := range []*v1.Pod{cmPod("needs-cm", nil, nil), cmPod("optional-cm", &yes, nil),
		cmPod("needs-key", nil, []v1.KeyToPath{{Key: "nope", Path: "nope"}})} {
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waiting := func(name, msg string) {
		t.Helper()
		e.eventually(name+" waiting", func() (bool, string) {
			p := e.pod(name)
			if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
				return false, p.String()
			}
			w := p.Status.ContainerStatuses[0].State.Waiting
			return p.Status.Phase == v1.PodPending && w.Reason == "ContainerCreating" && w.Message == msg, w.String()
		})
	}
	notFound := `MountVolume.SetUp failed for volume "cfg" : configmap "app-config" not found`
	waiting("needs-cm", notFound)
	e.eventually("FailedMount event", func() (bool, string) {
		evs, _ := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Name == "needs-cm" && ev.Reason == "FailedMount" && ev.Type == v1.EventTypeWarning &&
				ev.Message == notFound && ev.Source.Host == "node-1" {
				return true, ""
			}
		}
		return false, fmt.Sprint(evs.Items)
	})
	e.eventually("optional-cm Running", func() (bool, string) {
		p := e.pod("optional-cm")
		return p != nil && p.Status.Phase == v1.PodRunning, p.String()
	})
	if entries, err := os.ReadDir(filepath.Join(e.rt.dir, "default_optional-cm", "volumes", "cfg")); err != nil || len(entries) != 0 {
		t.Errorf("optional volume without its ConfigMap: %v %v", entries, err)
	}

	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app-config"},
		Data: map[string]string{"app.properties": "color=blue\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waiting("needs-key", `MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: nope`)
	e.eventually("needs-cm Running", func() (bool, string) {
		p := e.pod("needs-cm")
		return p != nil && p.Status.Phase == v1.PodRunning, p.String()
	})
	checkFile(t, filepath.Join(e.rt.dir, "default_needs-cm", "volumes", "cfg", "app.properties"), "color=blue\n", 0o644)
}

// downwardAPI (every supported field, modes), emptyDir, configMap items
// with a mode and a subPath mount, a volume two containers mount, and one
// svcnet does not mount.
func TestDownwardAPIAndOtherVolumes(t *testing.T) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cfg"}, Data: map[string]string{"a": "alpha", "b": "beta"}}
	client := fake.NewClientset(cm)
	e := startAgent(t, client, nil, nil)
	ctx := context.Background()
	m := func(v int32) *int32 { return &v }
	field := func(path, fp string) v1.DownwardAPIVolumeFile {
		return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fp}}
	}
	uid := field("uid", "metadata.uid")
	uid.Mode = m(0o600)
	c1 := sleeper
	c1.VolumeMounts = []v1.VolumeMount{{Name: "podinfo", MountPath: "/etc/podinfo", ReadOnly: true}, {Name: "scratch", MountPath: "/scratch"},
		{Name: "cfg", MountPath: "/etc/a.txt", SubPath: "sub/a.txt"}}
	c2 := sleeper
	c2.Name = "side"
	c2.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch/", ReadOnly: true}, {Name: "host", MountPath: "/host"},
		{Name: "gone", MountPath: "/data"}}
	hostDir := filepath.Join(t.TempDir(), "srv") // made by the agent (hostPath without type)
	p := newPod("info", c1)
	p.Spec.Containers = append(p.Spec.Containers, c2)
	p.Labels = map[string]string{"app": "web", "tier": "front"}
	p.Annotations = map[string]string{"note": `a "quoted" value`}
	p.Spec.ServiceAccountName = "builder"
	p.Spec.Volumes = []v1.Volume{
		{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{DefaultMode: m(0o640), Items: []v1.DownwardAPIVolumeFile{
			field("name", "metadata.name"), field("namespace", "metadata.namespace"), uid, field("labels", "metadata.labels"),
			field("annotations", "metadata.annotations"), field("app", "metadata.labels['app']"), field("node", "spec.nodeName"),
			field("sa", "spec.serviceAccountName"), field("ip/pod", "status.podIP")}}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items: []v1.KeyToPath{{Key: "a", Path: "sub/a.txt", Mode: m(0o400)}, {Key: "b", Path: "b.txt"}}}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}},
		{Name: "gone", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("Running", func() (bool, string) {
		p := e.pod("info")
		return p != nil && p.Status.Phase == v1.PodRunning, p.String()
	})
	vols := filepath.Join(e.rt.dir, "default_info", "volumes")
	for name, want := range map[string]string{"name": "info", "namespace": "default", "labels": "app=\"web\"\ntier=\"front\"",
		"annotations": `note="a \"quoted\" value"`, "app": "web", "node": "node-1", "sa": "builder", "ip/pod": "127.0.0.1"} {
		checkFile(t, filepath.Join(vols, "podinfo", name), want, 0o640)
	}
	checkFile(t, filepath.Join(vols, "podinfo", "uid"), "uid-info", 0o600)
	checkFile(t, filepath.Join(vols, "cfg", "sub", "a.txt"), "alpha", 0o400)
	checkFile(t, filepath.Join(vols, "cfg", "b.txt"), "beta", 0o644)
	if fi, err := os.Stat(filepath.Join(vols, "scratch")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Errorf("emptyDir: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(vols, "host")); !os.IsNotExist(err) {
		t.Errorf("hostPath volume written: %v", err)
	}
	if fi, err := os.Stat(hostDir); err != nil || !fi.IsDir() {
		t.Errorf("hostPath directory not made: %v", err)
	}
	e.rt.mu.Lock()
	mounts := e.rt.sbs["default/info"].spec.Mounts
	e.rt.mu.Unlock()
	want := []sandbox.Mount{
		{Source: filepath.Join(vols, "cfg", "sub", "a.txt"), Target: "/etc/a.txt"},
		{Source: filepath.Join(vols, "podinfo"), Target: "/etc/podinfo", ReadOnly: true},
		{Source: hostDir, Target: "/host"},
		{Source: filepath.Join(vols, "scratch"), Target: "/scratch"}, // read-only for one container only
	}
	if !reflect.DeepEqual(mounts, want) {
		t.Errorf("mounts\n%+v\nwant\n%+v", mounts, want)
	}
}

// The volumeMounts a pod's shared mount namespace cannot have, and paths
// that would leave a volume.
func TestPodMountsErrors(t *testing.T) {
	dir := t.TempDir()
	scratch := filepath.Join(dir, volumesDir, "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(scratch, "escape")); err != nil {
		t.Fatal(err)
	}
	vols := []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "other", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod := func(mounts ...[]v1.VolumeMount) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}, Spec: v1.PodSpec{Volumes: vols}}
		for i, m := range mounts {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprintf("c%d", i), VolumeMounts: m})
		}
		return p
	}
	for _, c := range []struct {
		pod  *v1.Pod
		want string
	}{
		{pod([]v1.VolumeMount{{Name: "scratch", MountPath: "/data"}}, []v1.VolumeMount{{Name: "other", MountPath: "/data"}}),
			"mountPath /data is also a mount of container c0"},
		{pod([]v1.VolumeMount{{Name: "missing", MountPath: "/data"}}), `no volume "missing"`},
		{pod([]v1.VolumeMount{{Name: "scratch", MountPath: "/"}}), "need an absolute path other than /"},
		{pod([]v1.VolumeMount{{Name: "scratch", MountPath: "data"}}), "need an absolute path other than /"},
		{pod([]v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "../x"}}), "must not contain '..'"},
		{pod([]v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "/etc"}}), "must be relative"},
		{pod([]v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "escape"}}), "leads out of the volume"},
		{pod([]v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "escape/not-yet"}}), "leads out of the volume"},
		{pod([]v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPathExpr: "$(POD)"}}), "subPathExpr is not supported"},
	} {
		_, _, err := podMounts(c.pod, dir)
		var me *mountError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &me) {
			t.Errorf("%+v: %v, want a mount error with %q", c.pod.Spec.Containers, err, c.want)
		}
	}
	mounts, skipped, err := podMounts(pod([]v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "sub"}},
		[]v1.VolumeMount{{Name: "scratch", MountPath: "/data/", SubPath: "sub", ReadOnly: true}}), dir)
	if err != nil || len(skipped) != 0 || !reflect.DeepEqual(mounts, []sandbox.Mount{{Source: filepath.Join(scratch, "sub"), Target: "/data"}}) {
		t.Errorf("shared mount: %+v %v %v", mounts, skipped, err)
	}
}

// adoptRuntime is a hostRuntime whose pods of the UIDs in adoptable have a
// sandbox an earlier agent left.
type adoptRuntime struct {
	*hostRuntime
	adoptable map[string]bool
}

func (r *adoptRuntime) AdoptPodSandbox(uid, ns, name string) (PodSandbox, error) {
	if !r.adoptable[uid] {
		return nil, sandbox.ErrNotRunning
	}
	sb := &hostSandbox{dir: filepath.Join(r.dir, ns+"_"+name), adopted: true}
	r.mu.Lock()
	r.sbs[ns+"/"+name] = sb
	r.mu.Unlock()
	return sb, nil
}

func (r *adoptRuntime) CleanupExcept(context.Context, func(string) bool) (int, error) { return 0, nil }

// A restarted agent that adopts a running pod gets it a fresh token at once
// (the earlier agent's refresh times died with it) and keeps refreshing.
func TestTokenRefreshAfterAdoption(t *testing.T) {
	p := saPod("kept", sleeper)
	p.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: time.Now().Add(-time.Hour)}}
	client := fake.NewClientset(rootCA("default"), p)
	tokens := newTokenServer(client, 2*time.Second)
	var rt *hostRuntime
	e := startAgent(t, client, func(hr *hostRuntime) Runtime {
		rt = hr
		// What the earlier agent wrote, its token about to expire.
		vdir := filepath.Join(hr.dir, "default_kept", volumesDir, "kube-api-access-abcde")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string]string{"token": "old-token", "ca.crt": fakeCA, "namespace": "default"} {
			if err := os.WriteFile(filepath.Join(vdir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return &adoptRuntime{hostRuntime: hr, adoptable: map[string]bool{"uid-kept": true}}
	}, nil)
	token := filepath.Join(rt.dir, "default_kept", volumesDir, "kube-api-access-abcde", "token")
	e.eventually("a fresh token", func() (bool, string) { got := readFile(token); return got == "token-1", got })
	rt.mu.Lock()
	adopted := rt.sbs["default/kept"] != nil && rt.sbs["default/kept"].adopted
	rt.mu.Unlock()
	if !adopted {
		t.Error("the sandbox was not adopted")
	}
	e.eventually("a refreshed token", func() (bool, string) { got := readFile(token); return got == "token-2", got })
	if r := tokens.requests(); len(r) < 2 || r[1].spec.BoundObjectRef.UID != "uid-kept" {
		t.Errorf("token requests %+v", r)
	}
}

// A running pod's configMap, secret and downwardAPI volumes follow their
// sources, as the kubelet's do: a changed key is rewritten, a new one
// appears, a removed one goes, new labels reach the labels file; a
// ConfigMap deleted leaves the files as they were.
func TestVolumeContentsFollowSources(t *testing.T) {
	defer func(p time.Duration) { contentSyncPeriod = p }(contentSyncPeriod)
	contentSyncPeriod = 20 * time.Millisecond
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cfg"}, Data: map[string]string{"a": "alpha", "b": "beta"}}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sec"}, Data: map[string][]byte{"password": []byte("one")}}
	client := fake.NewClientset(cm, sec)
	e := startAgent(t, client, nil, nil)
	ctx := context.Background()
	c := sleeper
	c.VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}, {Name: "sec", MountPath: "/etc/sec"}, {Name: "info", MountPath: "/etc/info"}}
	p := newPod("follow", c)
	p.Labels = map[string]string{"app": "web"}
	p.Spec.Volumes = []v1.Volume{
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}}}}}},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("Running", func() (bool, string) {
		p := e.pod("follow")
		return p != nil && p.Status.Phase == v1.PodRunning, p.String()
	})
	vols := filepath.Join(e.rt.dir, "default_follow", "volumes")
	checkFile(t, filepath.Join(vols, "cfg", "a"), "alpha", 0o644)
	checkFile(t, filepath.Join(vols, "cfg", "b"), "beta", 0o644)

	cm.Data = map[string]string{"a": "ALPHA", "c": "gamma"}
	if _, err := client.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec.Data["password"] = []byte("two")
	if _, err := client.CoreV1().Secrets("default").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cur := e.pod("follow")
	cur.Labels["tier"] = "front"
	if _, err := client.CoreV1().Pods("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, bErr := os.Stat(filepath.Join(vols, "cfg", "b"))
	e.eventually("volumes follow their sources", func() (bool, string) {
		_, bErr = os.Stat(filepath.Join(vols, "cfg", "b"))
		got := fmt.Sprintf("a=%q c=%q b gone=%v password=%q labels=%q", readFile(filepath.Join(vols, "cfg", "a")), readFile(filepath.Join(vols, "cfg", "c")),
			os.IsNotExist(bErr), readFile(filepath.Join(vols, "sec", "password")), readFile(filepath.Join(vols, "info", "labels")))
		return got == `a="ALPHA" c="gamma" b gone=true password="two" labels="app=\"web\"\ntier=\"front\""`, got
	})
	if err := client.CoreV1().ConfigMaps("default").Delete(ctx, "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * contentSyncPeriod)
	checkFile(t, filepath.Join(vols, "cfg", "a"), "ALPHA", 0o644)
}

// hostPath volumes: the kubelet's type checks, and the paths they make.
func TestCheckHostPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	typ := func(s v1.HostPathType) *v1.HostPathType { return &s }
	for _, c := range []struct {
		path string
		typ  *v1.HostPathType
		want string // error; "" for none
	}{
		{dir, nil, ""},
		{filepath.Join(dir, "new/a"), nil, ""},
		{filepath.Join(dir, "new/b"), typ(v1.HostPathDirectoryOrCreate), ""},
		{file, typ(v1.HostPathDirectoryOrCreate), "hostPath type check failed: " + file + " is not a directory"},
		{dir, typ(v1.HostPathDirectory), ""},
		{filepath.Join(dir, "missing"), typ(v1.HostPathDirectory), "hostPath type check failed: " + dir + "/missing is not a directory"},
		{file, typ(v1.HostPathFile), ""},
		{dir, typ(v1.HostPathFile), "hostPath type check failed: " + dir + " is not a file"},
		{filepath.Join(dir, "made/f"), typ(v1.HostPathFileOrCreate), ""},
		{file, typ(v1.HostPathSocket), "hostPath type check failed: " + file + " is not a socket file"},
		{"/dev/null", typ(v1.HostPathCharDev), ""},
		{"/dev/null", typ(v1.HostPathBlockDev), "hostPath type check failed: /dev/null is not a block device"},
		{"relative", nil, `hostPath "relative" is not an absolute path`},
	} {
		err := checkHostPath(&v1.HostPathVolumeSource{Path: c.path, Type: c.typ})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s %v: %q, want %q", c.path, c.typ, got, c.want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "new/b")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Errorf("DirectoryOrCreate: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "made/f")); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
		t.Errorf("FileOrCreate: %v %v", fi, err)
	}
}
