// Package fakeapi makes client-go's fake clientset behave a little more
// like a real API server for controller tests: generateName produces a name
// with a 5-character random suffix, new objects get a UID, a creation
// timestamp and generation 1, and an update of the status subresource
// changes only the stored object's status and annotations (client-go's tracker would store
// the whole object, so a controller writing status from a stale cache copy
// would silently undo a concurrent spec change, which a real API server
// never does).
package fakeapi

import (
	"reflect"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var uidCounter atomic.Int64

// NewClientset returns a fake clientset holding objs, with the behaviour
// described in the package doc.
func NewClientset(objs ...runtime.Object) *fake.Clientset {
	return withReactors(fake.NewClientset(objs...))
}

// NewSimpleClientset is NewClientset without server-side-apply field
// tracking, which makes every create build a REST mapper: much faster for
// benchmarks with thousands of objects.
func NewSimpleClientset(objs ...runtime.Object) *fake.Clientset {
	//lint:ignore SA1019 field tracking is what we avoid here
	return withReactors(fake.NewSimpleClientset(objs...)) //nolint:staticcheck
}

func withReactors(c *fake.Clientset) *fake.Clientset {
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "" {
			return false, nil, nil
		}
		m, err := metaOf(ca.GetObject())
		if err != nil {
			return false, nil, nil
		}
		if m.GetName() == "" && m.GetGenerateName() != "" {
			m.SetName(m.GetGenerateName() + utilrand.String(5))
		}
		if m.GetUID() == "" {
			m.SetUID(types.UID("uid-" + m.GetName() + "-" + string(rune('a'+uidCounter.Add(1)%26))))
		}
		if ts := m.GetCreationTimestamp(); ts.IsZero() {
			m.SetCreationTimestamp(metav1.Now())
		}
		if m.GetGeneration() == 0 {
			m.SetGeneration(1)
		}
		return false, nil, nil
	})
	c.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ua, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetSubresource() != "status" {
			return false, nil, nil
		}
		in := ua.GetObject()
		m, err := metaOf(in)
		if err != nil {
			return false, nil, nil
		}
		cur, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		out := cur.DeepCopyObject()
		src, dst := reflect.ValueOf(in).Elem().FieldByName("Status"), reflect.ValueOf(out).Elem().FieldByName("Status")
		if !src.IsValid() || !dst.IsValid() || src.Type() != dst.Type() {
			return false, nil, nil
		}
		dst.Set(src)
		// The request's annotations too, as the API servers' /status
		// strategies keep them (a deployment controller writes its revision
		// annotation there).
		if om, err := metaOf(out); err == nil {
			om.SetAnnotations(m.GetAnnotations())
		}
		if err := c.Tracker().Update(a.GetResource(), out, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, out, nil
	})
	return c
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	type accessor interface{ GetObjectMeta() metav1.Object }
	if a, ok := obj.(accessor); ok {
		return a.GetObjectMeta(), nil
	}
	return nil, errNoMeta
}

type metaErr string

func (e metaErr) Error() string { return string(e) }

const errNoMeta = metaErr("object has no metadata")
