package storage_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/svcnet/svcnet/storage"
)

var cmGR = schema.GroupResource{Resource: "configmaps"}

// newStore starts an embedded etcd in a temp dir and returns a ConfigMap
// store over it. This is the storage contract's fixture: every test below
// runs against real etcd.
func newStore(t *testing.T) (*storage.Store, *clientv3.Client) {
	t.Helper()
	ctx := context.Background()
	e, err := storage.StartEmbedded(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	c, err := storage.NewClient([]string{e.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	gv := corev1.SchemeGroupVersion
	codec := scheme.Codecs.CodecForVersions(info.Serializer, info.Serializer, gv, gv)
	return storage.NewStore(c, cmGR, codec, func() runtime.Object { return &corev1.ConfigMap{} }), c
}

func cm(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}, Data: data}
}

func key(ns, name string) string { return storage.Key(cmGR, ns, name) }

func rvOf(t *testing.T, o runtime.Object) int64 {
	t.Helper()
	n, err := strconv.ParseInt(o.(*corev1.ConfigMap).ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion: %v", err)
	}
	return n
}

func TestKeyLayout(t *testing.T) {
	if got := storage.Key(cmGR, "ns", "a"); got != "/registry/configmaps/ns/a" {
		t.Errorf("core key %q", got)
	}
	if got := storage.Key(schema.GroupResource{Group: "apps", Resource: "deployments"}, "ns", "a"); got != "/registry/apps/deployments/ns/a" {
		t.Errorf("group key %q", got)
	}
	if got := storage.Key(schema.GroupResource{Resource: "nodes"}, "", "n1"); got != "/registry/nodes/n1" {
		t.Errorf("cluster-scoped key %q", got)
	}
}

func TestCreateGetDelete(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	out, err := s.Create(ctx, key("a", "x"), cm("a", "x", map[string]string{"k": "v"}))
	if err != nil {
		t.Fatal(err)
	}
	rv := rvOf(t, out)
	raw, _ := c.Get(ctx, key("a", "x"))
	if raw.Kvs[0].ModRevision != rv {
		t.Errorf("resourceVersion %d is not the etcd mod revision %d", rv, raw.Kvs[0].ModRevision)
	}
	if _, err := s.Create(ctx, key("a", "x"), cm("a", "x", nil)); !apierrors.IsAlreadyExists(err) {
		t.Errorf("duplicate create: %v", err)
	}
	got, err := s.Get(ctx, key("a", "x"))
	if err != nil || got.(*corev1.ConfigMap).Data["k"] != "v" || rvOf(t, got) != rv {
		t.Fatalf("get: %v %v", got, err)
	}
	if _, err := s.Get(ctx, key("a", "nope")); !apierrors.IsNotFound(err) {
		t.Errorf("get missing: %v", err)
	}
	wrong := types.UID("other")
	if _, err := s.Delete(ctx, key("a", "x"), &storage.Preconditions{UID: &wrong}, nil); !apierrors.IsConflict(err) {
		t.Errorf("delete with wrong uid: %v", err)
	}
	del, err := s.Delete(ctx, key("a", "x"), nil, nil)
	if err != nil || rvOf(t, del) <= rv {
		t.Fatalf("delete: %v %v", del, err)
	}
	if _, err := s.Delete(ctx, key("a", "x"), nil, nil); !apierrors.IsNotFound(err) {
		t.Errorf("second delete: %v", err)
	}
}

func TestGuaranteedUpdateConcurrent(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, key("a", "n"), cm("a", "n", map[string]string{"n": "0"})); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.GuaranteedUpdate(ctx, key("a", "n"), false, nil, func(cur runtime.Object) (runtime.Object, error) {
				c := cur.(*corev1.ConfigMap)
				n, _ := strconv.Atoi(c.Data["n"])
				c.Data["n"] = strconv.Itoa(n + 1)
				return c, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, _ := s.Get(ctx, key("a", "n"))
	if n := got.(*corev1.ConfigMap).Data["n"]; n != "10" {
		t.Errorf("after 10 concurrent increments n = %s: an update was lost", n)
	}
	stale := "1"
	_, err := s.GuaranteedUpdate(ctx, key("a", "n"), false, &storage.Preconditions{ResourceVersion: &stale}, func(cur runtime.Object) (runtime.Object, error) { return cur, nil })
	if !apierrors.IsConflict(err) {
		t.Errorf("stale precondition: %v", err)
	}
	if _, err := s.GuaranteedUpdate(ctx, key("a", "missing"), false, nil, func(cur runtime.Object) (runtime.Object, error) { return cur, nil }); !apierrors.IsNotFound(err) {
		t.Errorf("update of missing key: %v", err)
	}
	created, err := s.GuaranteedUpdate(ctx, key("a", "upsert"), true, nil, func(cur runtime.Object) (runtime.Object, error) {
		if cur != nil {
			t.Error("upsert saw an object")
		}
		return cm("a", "upsert", nil), nil
	})
	if err != nil || created.(*corev1.ConfigMap).ResourceVersion == "" {
		t.Errorf("upsert: %v %v", created, err)
	}
	// An update that changes nothing writes nothing.
	before, _ := s.Get(ctx, key("a", "n"))
	after, err := s.GuaranteedUpdate(ctx, key("a", "n"), false, nil, func(cur runtime.Object) (runtime.Object, error) { return cur, nil })
	if err != nil || rvOf(t, after) != rvOf(t, before) {
		t.Errorf("no-op update changed resourceVersion %d -> %d (%v)", rvOf(t, before), rvOf(t, after), err)
	}
}

func TestListPagingAndFilter(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		ns := "a"
		if i >= 7 {
			ns = "b"
		}
		if _, err := s.Create(ctx, key(ns, fmt.Sprintf("x%02d", i)), cm(ns, fmt.Sprintf("x%02d", i), map[string]string{"even": strconv.FormatBool(i%2 == 0)})); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.List(ctx, storage.KeyPrefix(cmGR), storage.ListOptions{})
	if err != nil || len(all.Items) != 10 || all.Continue != "" {
		t.Fatalf("list all: %d %v", len(all.Items), err)
	}
	nsA, _ := s.List(ctx, storage.KeyPrefix(cmGR)+"a/", storage.ListOptions{})
	if len(nsA.Items) != 7 {
		t.Errorf("namespace a: %d items", len(nsA.Items))
	}
	even := func(o runtime.Object) bool { return o.(*corev1.ConfigMap).Data["even"] == "true" }
	var names []string
	opts := storage.ListOptions{Limit: 2, Filter: even}
	var firstRV int64
	for page := 0; ; page++ {
		res, err := s.List(ctx, storage.KeyPrefix(cmGR), opts)
		if err != nil {
			t.Fatal(err)
		}
		if page == 0 {
			firstRV = res.ResourceVersion
			// Writes between pages are not seen: pages read at one revision.
			_, _ = s.Create(ctx, key("a", "x00a"), cm("a", "x00a", map[string]string{"even": "true"}))
		} else if res.ResourceVersion != firstRV {
			t.Errorf("page %d at revision %d, first at %d", page, res.ResourceVersion, firstRV)
		}
		for _, it := range res.Items {
			names = append(names, it.(*corev1.ConfigMap).Name)
		}
		if res.Continue == "" {
			break
		}
		opts.Continue = res.Continue
	}
	if fmt.Sprint(names) != "[x00 x02 x04 x06 x08]" {
		t.Errorf("filtered pages: %v", names)
	}
	if _, err := s.List(ctx, storage.KeyPrefix(cmGR), storage.ListOptions{Continue: "garbage"}); !apierrors.IsBadRequest(err) {
		t.Errorf("bad continue: %v", err)
	}
	// A continue token from before a compaction is expired.
	res, _ := s.List(ctx, storage.KeyPrefix(cmGR), storage.ListOptions{Limit: 1})
	_, _ = s.Create(ctx, key("a", "late"), cm("a", "late", nil))
	cur, _ := s.CurrentRevision(ctx)
	if _, err := c.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, storage.KeyPrefix(cmGR), storage.ListOptions{Limit: 1, Continue: res.Continue}); !apierrors.IsResourceExpired(err) {
		t.Errorf("continue after compaction: %v, want 410 Expired", err)
	}
}

func next(t *testing.T, ch <-chan storage.Event) storage.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}
	return storage.Event{}
}

func TestWatch(t *testing.T) {
	s, c := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, _ := s.Create(ctx, key("a", "before"), cm("a", "before", nil))
	// From a revision: changes after it, including ones made before the watch started.
	_, _ = s.Create(ctx, key("a", "w"), cm("a", "w", map[string]string{"sel": "no"}))
	onlySel := func(o runtime.Object) bool { return o.(*corev1.ConfigMap).Data["sel"] == "yes" }
	all, err := s.Watch(ctx, storage.KeyPrefix(cmGR), rvOf(t, first), storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	filtered, err := s.Watch(ctx, storage.KeyPrefix(cmGR), rvOf(t, first), storage.WatchOptions{Filter: onlySel})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, all); ev.Type != storage.Added || ev.Object.(*corev1.ConfigMap).Name != "w" {
		t.Errorf("first event %s %v", ev.Type, ev.Object)
	}
	_, _ = s.GuaranteedUpdate(ctx, key("a", "w"), false, nil, func(cur runtime.Object) (runtime.Object, error) {
		cur.(*corev1.ConfigMap).Data["sel"] = "yes"
		return cur, nil
	})
	_, _ = s.GuaranteedUpdate(ctx, key("a", "w"), false, nil, func(cur runtime.Object) (runtime.Object, error) {
		cur.(*corev1.ConfigMap).Data["sel"] = "no"
		return cur, nil
	})
	del, _ := s.Delete(ctx, key("a", "w"), nil, nil)
	for _, want := range []storage.EventType{storage.Modified, storage.Modified, storage.Deleted} {
		if ev := next(t, all); ev.Type != want {
			t.Errorf("unfiltered: %s, want %s", ev.Type, want)
		} else if want == storage.Deleted && rvOf(t, ev.Object) != rvOf(t, del) {
			t.Errorf("deleted event rv %d, want the deletion's %d", rvOf(t, ev.Object), rvOf(t, del))
		}
	}
	// Entering the filter is ADDED, leaving it DELETED; the final delete of a
	// non-matching object is not reported.
	for _, want := range []storage.EventType{storage.Added, storage.Deleted} {
		if ev := next(t, filtered); ev.Type != want {
			t.Errorf("filtered: %s, want %s", ev.Type, want)
		}
	}
	select {
	case ev := <-filtered:
		t.Errorf("unexpected filtered event %s", ev.Type)
	case <-time.After(200 * time.Millisecond):
	}
	// Watching from a compacted revision ends with 410 Expired.
	cur, _ := s.CurrentRevision(ctx)
	if _, err := c.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	old, err := s.Watch(ctx, storage.KeyPrefix(cmGR), rvOf(t, first), storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := next(t, old)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != storage.Error || !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
		t.Errorf("compacted watch: %s %+v", ev.Type, ev.Object)
	}
	if _, open := <-old; open {
		t.Error("watch not closed after error")
	}
}

func TestWatchBookmarks(t *testing.T) {
	s, _ := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rev, _ := s.CurrentRevision(ctx)
	ch, err := s.Watch(ctx, storage.KeyPrefix(cmGR), rev, storage.WatchOptions{ProgressInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ev := next(t, ch)
	if ev.Type != storage.Bookmark || ev.Revision < rev {
		t.Errorf("got %s at %d, want a bookmark at >= %d", ev.Type, ev.Revision, rev)
	}
}

func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	e, err := storage.StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := storage.NewClient([]string{e.Endpoint})
	if _, err := c.Put(ctx, "/registry/test/k", "v"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.Close()
	e2, err := storage.StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	c2, _ := storage.NewClient([]string{e2.Endpoint})
	defer c2.Close()
	resp, err := c2.Get(ctx, "/registry/test/k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("after restart: %v %v", resp, err)
	}
}

// TestListLarge lists enough objects for the parallel decoder: every item
// comes back once, in key order, with its own resourceVersion, and one
// undecodable value fails the whole list.
func TestListLarge(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	const n = 3000
	ops := make([]clientv3.Op, 0, 100)
	flush := func() {
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
		ops = ops[:0]
	}
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	for i := range n {
		name := fmt.Sprintf("x%05d", i)
		b, err := runtime.Encode(enc, cm("a", name, map[string]string{"i": strconv.Itoa(i)}))
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, clientv3.OpPut(key("a", name), string(b)))
		if len(ops) == cap(ops) {
			flush()
		}
	}
	flush()
	res, err := s.List(ctx, storage.KeyPrefix(cmGR), storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != n {
		t.Fatalf("%d items, want %d", len(res.Items), n)
	}
	for i, it := range res.Items {
		o := it.(*corev1.ConfigMap)
		if want := fmt.Sprintf("x%05d", i); o.Name != want || o.Data["i"] != strconv.Itoa(i) {
			t.Fatalf("item %d: %s %v, want %s", i, o.Name, o.Data, want)
		}
		// 100 objects per transaction: item i was written at revision
		// first+i/100.
		if d := rvOf(t, it) - rvOf(t, res.Items[0]); d != int64(i/100) {
			t.Fatalf("item %d: resourceVersion %d after the first's, want %d", i, d, i/100)
		}
	}
	if _, err := c.Put(ctx, key("a", "x01500z"), "not an object"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, storage.KeyPrefix(cmGR), storage.ListOptions{}); !apierrors.IsInternalError(err) {
		t.Errorf("list with an undecodable value: %v, want an internal error", err)
	}
}
