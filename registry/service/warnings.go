package service

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// WarningsOnCreate implements registry.CreateWarner: the Warning headers
// kube-apiserver 1.37 returns for a created Service (kubectl prints them),
// compared with its own code by hack/apidiff.
func (*Strategy) WarningsOnCreate(_ context.Context, obj runtime.Object) []string {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil
	}
	return Warnings(svc)
}

// WarningsOnUpdate implements registry.UpdateWarner: the same warnings, for
// the updated Service.
func (*Strategy) WarningsOnUpdate(_ context.Context, obj, _ runtime.Object) []string {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil
	}
	return Warnings(svc)
}

// WarningsOnUpdate of /status: load-balancer addresses in a non-standard form.
func (statusStrategy) WarningsOnUpdate(_ context.Context, obj, _ runtime.Object) []string {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil
	}
	var w []string
	p := field.NewPath("status", "loadBalancer", "ingress")
	for i, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			w = append(w, utilvalidation.GetWarningsForIP(p.Index(i), in.IP)...)
		}
	}
	return w
}

// Warnings are what a Service holds that works but is deprecated, ignored or
// written in a non-standard form: the old topology annotation, fields a
// headless or ExternalName Service ignores, externalIPs (deprecated), the
// PreferClose distribution, and addresses and CIDRs that are not canonical.
func Warnings(svc *corev1.Service) []string {
	var w []string
	spec := field.NewPath("spec")
	if _, ok := svc.Annotations[corev1.DeprecatedAnnotationTopologyAwareHints]; ok {
		w = append(w, fmt.Sprintf("annotation %s is deprecated, please use %s instead", corev1.DeprecatedAnnotationTopologyAwareHints, corev1.AnnotationTopologyMode))
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		for i, c := range svc.Spec.ClusterIPs {
			w = append(w, utilvalidation.GetWarningsForIP(spec.Child("clusterIPs").Index(i), c)...)
		}
	}
	headless := svc.Spec.Type == corev1.ServiceTypeClusterIP && svc.Spec.ClusterIP == corev1.ClusterIPNone
	if headless {
		if svc.Spec.LoadBalancerIP != "" {
			w = append(w, "spec.loadBalancerIP is ignored for headless services")
		}
		if len(svc.Spec.ExternalIPs) > 0 {
			w = append(w, "spec.externalIPs is ignored for headless services")
		}
		if svc.Spec.SessionAffinity != corev1.ServiceAffinityNone {
			w = append(w, "spec.SessionAffinity is ignored for headless services")
		}
	}
	for i, ip := range svc.Spec.ExternalIPs {
		w = append(w, utilvalidation.GetWarningsForIP(spec.Child("externalIPs").Index(i), ip)...)
	}
	if len(svc.Spec.ExternalIPs) > 0 && !headless && svc.Spec.Type != corev1.ServiceTypeExternalName {
		w = append(w, "spec.externalIPs is deprecated and may no longer be implemented in some clusters")
	}
	if svc.Spec.LoadBalancerIP != "" {
		w = append(w, utilvalidation.GetWarningsForIP(spec.Child("loadBalancerIP"), svc.Spec.LoadBalancerIP)...)
	}
	for i, c := range svc.Spec.LoadBalancerSourceRanges {
		w = append(w, utilvalidation.GetWarningsForCIDR(spec.Child("loadBalancerSourceRanges").Index(i), c)...)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName && len(svc.Spec.ExternalIPs) > 0 {
		w = append(w, fmt.Sprintf("spec.externalIPs is ignored when spec.type is %q", corev1.ServiceTypeExternalName))
	}
	if svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ExternalName != "" {
		w = append(w, fmt.Sprintf("spec.externalName is ignored when spec.type is not %q", corev1.ServiceTypeExternalName))
	}
	if d := svc.Spec.TrafficDistribution; d != nil && *d == corev1.ServiceTrafficDistributionPreferClose {
		w = append(w, fmt.Sprintf("spec.trafficDistribution: %q is deprecated; use %q", corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone))
	}
	return w
}
