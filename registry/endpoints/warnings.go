package endpoints

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// WarningsOnCreate implements registry.CreateWarner (see Warnings).
func (Strategy) WarningsOnCreate(_ context.Context, obj runtime.Object) []string {
	return Warnings(obj)
}

// WarningsOnUpdate implements registry.UpdateWarner (see Warnings).
func (Strategy) WarningsOnUpdate(_ context.Context, obj, _ runtime.Object) []string {
	return Warnings(obj)
}

// Warnings are kube-apiserver 1.37's Warning headers for an Endpoints write:
// addresses written in a non-standard form (an update may keep them from
// before strict validation). Endpoints the endpoints controller labels as
// its own are not checked, as kube-apiserver skips them. (The deprecation
// of v1 Endpoints itself is a separate warning, per request.)
func Warnings(obj runtime.Object) []string {
	ep, ok := obj.(*corev1.Endpoints)
	if !ok || ep.Labels["endpoints.kubernetes.io/managed-by"] == "endpoint-controller" {
		return nil
	}
	var w []string
	for i, ss := range ep.Subsets {
		p := field.NewPath("subsets").Index(i)
		for j, a := range ss.Addresses {
			w = append(w, utilvalidation.GetWarningsForIP(p.Child("addresses").Index(j).Child("ip"), a.IP)...)
		}
		for j, a := range ss.NotReadyAddresses {
			w = append(w, utilvalidation.GetWarningsForIP(p.Child("notReadyAddresses").Index(j).Child("ip"), a.IP)...)
		}
	}
	return w
}
