package service

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/registry"
)

// serviceFieldLabels is the Service kind's field-label conversion: the
// labels kube-apiserver accepts in a Service field selector (kube-proxy
// lists with spec.clusterIP!=None-style selectors).
var serviceFieldLabels = registry.SupportedFieldLabels(nil, "metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type")

// FieldLabelConversion implements registry.FieldLabelConverter.
func (*Strategy) FieldLabelConversion() func(label, value string) (string, string, error) {
	return serviceFieldLabels
}

// FieldsSet implements registry.FieldsSetter: metadata plus spec.clusterIP
// and spec.type, as Kubernetes' Service registry.
func (*Strategy) FieldsSet(obj runtime.Object) map[string]string {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return map[string]string{}
	}
	return map[string]string{
		"metadata.name":      svc.Name,
		"metadata.namespace": svc.Namespace,
		"spec.clusterIP":     svc.Spec.ClusterIP,
		"spec.type":          string(svc.Spec.Type),
	}
}
