package main

import (
	"math/rand"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/apis/coordination"
	api "k8s.io/kubernetes/pkg/apis/core"
	k8slease "k8s.io/kubernetes/pkg/registry/coordination/lease"
	k8sconfigmap "k8s.io/kubernetes/pkg/registry/core/configmap"

	"github.com/svcnet/svcnet/registry/core"
)

// ConfigMaps and Leases: create and update through kube-apiserver's
// strategies and svcnet's.

func randConfigMap(r *rand.Rand) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: namespace}}
	if maybe(r, 0.2) {
		cm.Name = randObjectName(r)
	}
	// At most one bad key per map: keys are checked in map order.
	if maybe(r, 0.7) {
		cm.Data = map[string]string{"app.conf": "x=1"}
		if maybe(r, 0.4) {
			cm.Data[pick(r, "bad key!", "..", "a/b", ".hidden", "dup", strings.Repeat("k", 254))] = "v"
		}
	}
	if maybe(r, 0.3) {
		cm.BinaryData = map[string][]byte{pick(r, "blob", "dup", "bad key!"): []byte{1, 2}}
	}
	if maybe(r, 0.05) {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["big"] = strings.Repeat("x", 1<<20)
	}
	if maybe(r, 0.2) {
		cm.Immutable = ptr(maybe(r, 0.5))
	}
	return cm
}

func configMapCreateCase(r *rand.Rand) string {
	return compareCreate(randConfigMap(r), "", "configmaps", true, true, k8sconfigmap.Strategy, core.NewConfigMapStrategy(),
		func() runtime.Object { return &api.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMap{} })
}

func configMapUpdateCase(r *rand.Rand) string {
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: namespace, UID: "uid-8", ResourceVersion: "15"},
		Data: map[string]string{"app.conf": "x=1"}}
	if maybe(r, 0.4) {
		old.Immutable = ptr(true)
	}
	in := old.DeepCopy()
	next := randConfigMap(r)
	for _, k := range r.Perm(4)[:1+r.Intn(2)] {
		switch k {
		case 0:
			in.Data = next.Data
		case 1:
			in.BinaryData = next.BinaryData
		case 2:
			in.Immutable = pick(r, nil, ptr(false), ptr(true))
		case 3:
			in.Name = pick(r, "other", "Bad_Name")
		}
	}
	return withInput(compareUpdate(in, old, "", "configmaps", "", true, k8sconfigmap.Strategy, core.NewConfigMapStrategy(),
		func() (runtime.Object, runtime.Object) { return &api.ConfigMap{}, &api.ConfigMap{} },
		func() runtime.Object { return &corev1.ConfigMap{} }), in, old)
}

func randLease(r *rand.Rand) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: pick(r, "node-a", "node-a", "Bad_Name", "kube-controller-manager"), Namespace: namespace}}
	l.Spec.HolderIdentity = pick(r, nil, ptr("node-a"), ptr(""))
	l.Spec.LeaseDurationSeconds = pick(r, nil, ptr[int32](40), ptr[int32](0), ptr[int32](-1))
	l.Spec.LeaseTransitions = pick(r, nil, ptr[int32](0), ptr[int32](3), ptr[int32](-2))
	if maybe(r, 0.5) {
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}
	}
	if maybe(r, 0.2) {
		l.Spec.Strategy = ptr(pick[coordinationv1.CoordinatedLeaseStrategy](r, coordinationv1.OldestEmulationVersion, "Newest", "example.com/mine", "a/b/c"))
	}
	if maybe(r, 0.2) {
		l.Spec.PreferredHolder = ptr(pick(r, "", "node-b"))
	}
	return l
}

func leaseCreateCase(r *rand.Rand) string {
	return compareCreate(randLease(r), "coordination.k8s.io", "leases", true, true, k8slease.Strategy, core.NewLeaseStrategy(),
		func() runtime.Object { return &coordination.Lease{} }, func() runtime.Object { return &coordinationv1.Lease{} })
}

func leaseUpdateCase(r *rand.Rand) string {
	old := randLease(r)
	old.Name, old.UID, old.ResourceVersion = "node-a", "uid-9", "16"
	old.Spec.LeaseDurationSeconds, old.Spec.LeaseTransitions = ptr[int32](40), nil
	if maybe(r, 0.7) {
		old.Spec.Strategy, old.Spec.PreferredHolder = nil, nil
	}
	in := old.DeepCopy()
	in.Spec = randLease(r).Spec
	if maybe(r, 0.1) {
		in.Name = "node-b"
	}
	return withInput(compareUpdate(in, old, "coordination.k8s.io", "leases", "", true, k8slease.Strategy, core.NewLeaseStrategy(),
		func() (runtime.Object, runtime.Object) { return &coordination.Lease{}, &coordination.Lease{} },
		func() runtime.Object { return &coordinationv1.Lease{} }), in, old)
}
