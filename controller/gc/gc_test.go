package gc

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/utils/ptr"
)

func obj(r Resource, name string, uid types.UID, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(r.apiVersion())
	u.SetKind(r.Kind)
	u.SetNamespace("default")
	u.SetName(name)
	u.SetUID(uid)
	u.SetOwnerReferences(owners)
	return u
}

func ref(r Resource, name string, uid types.UID, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: r.apiVersion(), Kind: r.Kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(block)}
}

var (
	podR    = DefaultResources[0]
	rsR     = DefaultResources[4]
	deployR = DefaultResources[5]
)

func TestCollector(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listKinds := map[schema.GroupVersionResource]string{}
	for _, r := range DefaultResources {
		listKinds[r.GVR] = r.Kind + "List"
	}
	now := metav1.Now()
	orphaning := obj(deployR, "orphaning", "d-orphan")
	orphaning.SetDeletionTimestamp(&now)
	orphaning.SetFinalizers([]string{FinalizerOrphan})
	fg := obj(deployR, "fg", "d-fg")
	fg.SetDeletionTimestamp(&now)
	fg.SetFinalizers([]string{FinalizerForeground})
	objs := []runtime.Object{
		obj(deployR, "alive", "d-alive"),
		obj(rsR, "rs-alive", "rs-alive", ref(deployR, "alive", "d-alive", true)),
		obj(rsR, "rs-dangling", "rs-dangling", ref(deployR, "gone", "d-gone", true)),
		obj(podR, "pod-of-dangling", "p1", ref(rsR, "rs-dangling", "rs-dangling", true)),
		obj(podR, "pod-two-owners", "p2", ref(rsR, "rs-alive", "rs-alive", false), ref(rsR, "rs-old", "rs-old", false)),
		obj(rsR, "wrong-uid", "rs-w", ref(deployR, "alive", "d-other", true)),
		orphaning,
		obj(rsR, "rs-orphaned", "rs-o", ref(deployR, "orphaning", "d-orphan", true)),
		fg,
		obj(rsR, "rs-fg", "rs-fg", ref(deployR, "fg", "d-fg", true)),
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	g := New(dyn, factory, DefaultResources, nil)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { g.Run(ctx, 2); close(done) }()
	defer func() { cancel(); <-done; factory.Shutdown() }()

	get := func(r Resource, name string) *unstructured.Unstructured {
		u, err := dyn.Resource(r.GVR).Namespace("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return u
	}
	eventually := func(what string, f func() bool) {
		t.Helper()
		for i := 0; i < 500; i++ {
			if f() {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("never: %s", what)
	}
	eventually("replicaset with a missing owner is deleted", func() bool { return get(rsR, "rs-dangling") == nil })
	eventually("and then its pod (cascade)", func() bool { return get(podR, "pod-of-dangling") == nil })
	eventually("owner with another UID counts as gone", func() bool { return get(rsR, "wrong-uid") == nil })
	eventually("dangling second owner reference removed", func() bool {
		p := get(podR, "pod-two-owners")
		return p != nil && len(p.GetOwnerReferences()) == 1 && p.GetOwnerReferences()[0].Name == "rs-alive"
	})
	eventually("orphan: dependent keeps living without the reference", func() bool {
		rs := get(rsR, "rs-orphaned")
		return rs != nil && len(rs.GetOwnerReferences()) == 0
	})
	eventually("orphan finalizer removed", func() bool {
		d := get(deployR, "orphaning")
		return d == nil || !slices.Contains(d.GetFinalizers(), FinalizerOrphan)
	})
	eventually("foreground: dependent deleted", func() bool { return get(rsR, "rs-fg") == nil })
	eventually("foreground finalizer removed", func() bool {
		d := get(deployR, "fg")
		return d == nil || !slices.Contains(d.GetFinalizers(), FinalizerForeground)
	})
	if get(rsR, "rs-alive") == nil || get(deployR, "alive") == nil {
		t.Fatal("live objects were collected")
	}
}
