package main

import (
	"math/rand"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	api "k8s.io/kubernetes/pkg/apis/core"
	k8snamespace "k8s.io/kubernetes/pkg/registry/core/namespace"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// Namespaces: create, update, /status and /finalize through
// kube-apiserver's namespace strategies and svcnet's.

var finalizerPool = []corev1.FinalizerName{"kubernetes", "kubernetes", "example.com/cleanup", "orphan", "foregroundDeletion",
	"bad", "Bad/Name!", "", "a/b/c", corev1.FinalizerName(strings.Repeat("f", 70))}

func randFinalizers(r *rand.Rand) []corev1.FinalizerName {
	var out []corev1.FinalizerName
	for i, n := 0, pick(r, 0, 0, 1, 1, 2, 3); i < n; i++ {
		out = append(out, pick(r, finalizerPool...))
	}
	return out
}

func randNamespace(r *rand.Rand) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pick(r, "team-a", "team-a", "Team", "a.b", "1team", strings.Repeat("n", 64), "kube-system")}}
	// At most one bad label: labels are checked in map order (random on
	// both sides), and the name becomes a label too.
	if maybe(r, 0.2) && len(ns.Name) <= 63 {
		ns.Labels = map[string]string{pick(r, "env", "bad key!", corev1.LabelMetadataName): pick(r, "prod", "bad value!", "other")}
	}
	ns.Spec.Finalizers = randFinalizers(r)
	if maybe(r, 0.2) {
		ns.Status.Phase = pick(r, corev1.NamespaceActive, corev1.NamespaceTerminating, "Bogus")
	}
	return ns
}

func storedNamespace(r *rand.Rand) *corev1.Namespace {
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "uid-6", ResourceVersion: "13", Labels: map[string]string{corev1.LabelMetadataName: "team-a"}},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	if maybe(r, 0.3) {
		ts := metav1.NewTime(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
		ns.DeletionTimestamp = &ts
		ns.Status.Phase = corev1.NamespaceTerminating
	}
	return ns
}

func namespaceCreateCase(r *rand.Rand) string {
	return compareCreate(randNamespace(r), "", "namespaces", false, true, k8snamespace.Strategy, core.NewNamespaceStrategy(),
		func() runtime.Object { return &api.Namespace{} }, func() runtime.Object { return &corev1.Namespace{} })
}

// namespaceUpdate mutates a stored namespace for an update of sub ("",
// "status" or "finalize").
func namespaceUpdate(r *rand.Rand, sub string) (in, old *corev1.Namespace) {
	old = storedNamespace(r)
	in = old.DeepCopy()
	for _, k := range r.Perm(4)[:1+r.Intn(2)] {
		switch k {
		case 0:
			in.Spec.Finalizers = randFinalizers(r)
		case 1:
			in.Status.Phase = pick(r, corev1.NamespaceActive, corev1.NamespaceTerminating, "", "Bogus")
		case 2:
			in.Labels = map[string]string{pick(r, "env", "bad key!"): "x"}
		case 3:
			in.Name = pick(r, "team-b", "Bad")
		}
	}
	return in, old
}

func namespaceUpdateCase(r *rand.Rand) string {
	in, old := namespaceUpdate(r, "")
	return withInput(compareNamespaceUpdate(in, old, "", k8snamespace.Strategy, core.NewNamespaceStrategy()), in, old)
}

func namespaceStatusCase(r *rand.Rand) string {
	in, old := namespaceUpdate(r, "status")
	st := core.NewNamespaceStrategy().(interface{ StatusStrategy() registry.Strategy }).StatusStrategy()
	return withInput(compareNamespaceUpdate(in, old, "status", k8snamespace.StatusStrategy, st), in, old)
}

func namespaceFinalizeCase(r *rand.Rand) string {
	in, old := namespaceUpdate(r, "finalize")
	st := core.NewNamespaceStrategy().(registry.FinalizeStrategist).FinalizeStrategy()
	return withInput(compareNamespaceUpdate(in, old, "finalize", k8snamespace.FinalizeStrategy, st), in, old)
}

func compareNamespaceUpdate(in, old *corev1.Namespace, sub string, kst genericrest.RESTUpdateStrategy, st registry.Strategy) string {
	return compareUpdate(in, old, "", "namespaces", sub, false, kst, st,
		func() (runtime.Object, runtime.Object) { return &api.Namespace{}, &api.Namespace{} },
		func() runtime.Object { return &corev1.Namespace{} })
}
