package main

import (
	"math/rand"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	api "k8s.io/kubernetes/pkg/apis/core"
	k8sserviceaccount "k8s.io/kubernetes/pkg/registry/core/serviceaccount"

	"github.com/svcnet/svcnet/registry/core"
)

// ServiceAccounts: create and update through kube-apiserver's strategy and
// svcnet's.

// randSecretRef is a reference to a secret as clients send it, sometimes
// with the fields the strategy drops.
func randSecretRef(r *rand.Rand) corev1.ObjectReference {
	ref := corev1.ObjectReference{Name: pick(r, "s1", "s2", "builder-token", "", "Bad_Name")}
	if maybe(r, 0.5) {
		ref.Namespace = pick(r, namespace, "other")
		ref.UID = "uid-secret"
		ref.Kind = pick(r, "Secret", "ConfigMap")
		ref.APIVersion = pick(r, "v1", "")
		ref.ResourceVersion = "42"
		ref.FieldPath = pick(r, "", "data.token")
	}
	return ref
}

func randServiceAccount(r *rand.Rand) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: namespace}}
	if maybe(r, 0.3) {
		sa.Name = pick(r, randObjectName(r), "default", "a.b", "-sa", "sa-", "", strings.Repeat("s", 253))
	}
	if maybe(r, 0.05) {
		sa.GenerateName = pick(r, "builder-", "Bad_")
	}
	// At most one bad label and one bad annotation: they are checked in map
	// order.
	if maybe(r, 0.3) {
		sa.Labels = map[string]string{"app": "ci"}
		if maybe(r, 0.3) {
			sa.Labels[pick(r, "bad key!", "team")] = pick(r, "x", "bad value!", strings.Repeat("v", 64))
		}
	}
	if maybe(r, 0.3) {
		sa.Annotations = map[string]string{"kubernetes.io/enforce-mountable-secrets": pick(r, "true", "false", "yes")}
		if maybe(r, 0.2) {
			sa.Annotations[pick(r, "bad key!", "note", "a/b/c")] = "x"
		}
		if maybe(r, 0.05) {
			sa.Annotations["big"] = strings.Repeat("x", 256*1024)
		}
	}
	for i, n := 0, pick(r, 0, 0, 1, 2, 3); i < n; i++ {
		sa.Secrets = append(sa.Secrets, randSecretRef(r))
	}
	for i, n := 0, pick(r, 0, 0, 1, 2); i < n; i++ {
		sa.ImagePullSecrets = append(sa.ImagePullSecrets, corev1.LocalObjectReference{Name: pick(r, "pull1", "pull2", "", "Bad_Name")})
	}
	sa.AutomountServiceAccountToken = pick(r, nil, nil, ptr(true), ptr(false))
	if maybe(r, 0.05) {
		sa.Finalizers = []string{pick(r, "example.com/keep", "bad")}
	}
	return sa
}

func serviceAccountCreateCase(r *rand.Rand) string {
	return compareCreate(randServiceAccount(r), "", "serviceaccounts", true, true, k8sserviceaccount.Strategy, core.NewServiceAccountStrategy(),
		func() runtime.Object { return &api.ServiceAccount{} }, func() runtime.Object { return &corev1.ServiceAccount{} })
}

func serviceAccountUpdateCase(r *rand.Rand) string {
	old := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: namespace, UID: "uid-10", ResourceVersion: "17"},
		Secrets: []corev1.ObjectReference{{Name: "s1"}}}
	if maybe(r, 0.3) {
		old.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull1"}}
	}
	if maybe(r, 0.3) {
		old.AutomountServiceAccountToken = ptr(false)
	}
	if maybe(r, 0.2) {
		old.Annotations = map[string]string{"kubernetes.io/enforce-mountable-secrets": "true"}
	}
	if maybe(r, 0.1) {
		// Stored before the strategy cleaned references.
		old.Secrets = []corev1.ObjectReference{{Name: "s1", Namespace: namespace, Kind: "Secret", UID: "uid-s1"}}
	}
	in := old.DeepCopy()
	next := randServiceAccount(r)
	for _, k := range r.Perm(8)[:1+r.Intn(2)] {
		switch k {
		case 0:
			in.Secrets = next.Secrets
		case 1:
			in.ImagePullSecrets = next.ImagePullSecrets
		case 2:
			in.AutomountServiceAccountToken = next.AutomountServiceAccountToken
		case 3:
			in.Labels = next.Labels
		case 4:
			in.Annotations = next.Annotations
		case 5:
			in.Name = pick(r, "other", "Bad_Name")
		case 6:
			in.UID = pick[types.UID](r, "", "uid-11")
		case 7:
			in.Finalizers = pick(r, nil, []string{"example.com/keep"}, []string{"bad"})
		}
	}
	return withInput(compareUpdate(in, old, "", "serviceaccounts", "", true, k8sserviceaccount.Strategy, core.NewServiceAccountStrategy(),
		func() (runtime.Object, runtime.Object) { return &api.ServiceAccount{}, &api.ServiceAccount{} },
		func() runtime.Object { return &corev1.ServiceAccount{} }), in, old)
}
