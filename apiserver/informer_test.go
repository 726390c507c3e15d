package apiserver_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

func TestInformerSync(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	for i := 0; i < 5; i++ {
		if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("pre", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f := informers.NewSharedInformerFactory(c, 0)
	inf := f.Core().V1().ConfigMaps().Informer()
	added := make(chan string, 100)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { added <- obj.(*corev1.ConfigMap).Name }})
	f.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if n := len(inf.GetStore().List()); n != 5 {
		t.Errorf("informer has %d objects after sync, want 5", n)
	}
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "post"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-added:
			if n == "post" {
				return
			}
		case <-deadline:
			t.Fatal("informer missed the new object")
		}
	}
}

func TestStreamingListWatch(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	for i := 0; i < 3; i++ {
		if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("s", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	yes := true
	w, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{
		SendInitialEvents: &yes, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	adds := 0
	for {
		select {
		case ev := <-w.ResultChan():
			switch ev.Type {
			case watch.Added:
				adds++
				if ev.Object.GetObjectKind().GroupVersionKind().Kind != "ConfigMap" && ev.Object.(*corev1.ConfigMap).Name == "" {
					t.Errorf("added event without object")
				}
			case watch.Bookmark:
				cm := ev.Object.(*corev1.ConfigMap)
				if cm.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
					t.Fatalf("bookmark without initial-events-end annotation: %+v", cm.ObjectMeta)
				}
				if adds != 3 || cm.ResourceVersion == "" {
					t.Errorf("initial events: %d adds, bookmark rv %q", adds, cm.ResourceVersion)
				}
				return
			default:
				t.Fatalf("unexpected %s", ev.Type)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no initial-events-end bookmark")
		}
	}
}

func TestExpiredAfterCompaction(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	cms := c.CoreV1().ConfigMaps("default")
	var old string
	for i := 0; i < 5; i++ {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("c", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			old = cm.ResourceVersion
		}
	}
	page, err := cms.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil || page.Continue == "" {
		t.Fatalf("first page: %v", err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, _ := cms.List(ctx, metav1.ListOptions{})
	rev, _ := strconv.ParseInt(l.ResourceVersion, 10, 64)
	if _, err := srv.Etcd().Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: old})
	if err != nil {
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Fatalf("watch from compacted rv: %v", err)
		}
	} else {
		select {
		case ev := <-w.ResultChan():
			st, ok := ev.Object.(*metav1.Status)
			if ev.Type != watch.Error || !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
				t.Errorf("watch from compacted rv: %s %+v, want ERROR 410 Expired", ev.Type, ev.Object)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no error event")
		}
		w.Stop()
	}
	if _, err := cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: page.Continue}); !apierrors.IsResourceExpired(err) {
		t.Errorf("continue at compacted rv: %v, want 410 Expired", err)
	}
	// An informer started now lists and watches normally.
	f := informers.NewSharedInformerFactory(c, 0)
	inf := f.Core().V1().ConfigMaps().Informer()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync after compaction")
	}
}

func TestRestartKeepsObjects(t *testing.T) {
	dir := t.TempDir()
	srv := apiservertest.Start(t, apiservertest.WithDataDir(dir))
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	cm, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keep"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv2 := apiservertest.Start(t, apiservertest.WithDataDir(dir))
	c2 := kubernetes.NewForConfigOrDie(srv2.Config)
	got, err := c2.CoreV1().ConfigMaps("default").Get(ctx, "keep", metav1.GetOptions{})
	if err != nil || got.UID != cm.UID || got.Data["a"] != "b" {
		t.Fatalf("after restart: %v %v", got, err)
	}
	svcs, err := c2.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(svcs.Items) != 1 {
		t.Errorf("kubernetes service duplicated or lost after restart: %v %v", svcs, err)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEtcd runs Debian's etcd on free localhost ports until the test ends.
func startEtcd(t *testing.T) string {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd binary not installed (Debian package etcd-server)")
	}
	cport, pport := freePort(t), freePort(t)
	curl := fmt.Sprintf("http://127.0.0.1:%d", cport)
	purl := fmt.Sprintf("http://127.0.0.1:%d", pport)
	cmd := exec.Command(bin, "--name", "t", "--data-dir", t.TempDir(),
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", "t="+purl, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", cport))
		if err == nil {
			conn.Close()
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatal("etcd did not start")
	}
	return curl
}

func TestTwoServersOneEtcd(t *testing.T) {
	ep := startEtcd(t)
	a := apiservertest.Start(t, apiservertest.WithEtcd(ep))
	b := apiservertest.Start(t, apiservertest.WithEtcd(ep))
	ctx := ctxT(t)
	ca, cb := kubernetes.NewForConfigOrDie(a.Config), kubernetes.NewForConfigOrDie(b.Config)
	w, err := cb.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=shared"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := ca.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.CoreV1().ConfigMaps("default").Get(ctx, "shared", metav1.GetOptions{}); err != nil {
		t.Errorf("written through a, not readable through b: %v", err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Errorf("b's watch: %s", ev.Type)
		}
	case <-time.After(5 * time.Second):
		t.Error("b's watch did not see a's write")
	}
}
