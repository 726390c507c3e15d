package core

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The Warning headers kube-apiserver 1.37 returns for writes of these kinds
// (its strategies' WarningsOnCreate/WarningsOnUpdate), compared with its own
// code by hack/apidiff.

// serviceAccountWarnings warns when a write sets the annotation deprecated in
// 1.32
// (an update of an account that already had it does not warn again).
func serviceAccountWarnings(obj, old runtime.Object) []string {
	if old != nil {
		if _, had := old.(*corev1.ServiceAccount).Annotations[enforceMountableSecretsAnnotation]; had {
			return nil
		}
	}
	if _, has := obj.(*corev1.ServiceAccount).Annotations[enforceMountableSecretsAnnotation]; has {
		return []string{fmt.Sprintf("metadata.annotations[%s]: deprecated in v1.32+; prefer separate namespaces to isolate access to mounted secrets", enforceMountableSecretsAnnotation)}
	}
	return nil
}

// nodeWarnings: removed and deprecated spec fields, and pod CIDRs written in
// a non-canonical form. The same on create and update (not /status).
func nodeWarnings(obj runtime.Object) []string {
	n := obj.(*corev1.Node)
	var w []string
	if n.Spec.ConfigSource != nil {
		w = append(w, "spec.configSource: the feature is removed")
	}
	if n.Spec.DoNotUseExternalID != "" {
		w = append(w, "spec.externalID: this field is deprecated, and is unused by Kubernetes")
	}
	p := field.NewPath("spec", "podCIDRs")
	for i, c := range n.Spec.PodCIDRs {
		w = append(w, utilvalidation.GetWarningsForCIDR(p.Index(i), c)...)
	}
	return w
}
