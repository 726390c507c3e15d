package service

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// patchAllocatedValues lets a client re-send the manifest it created the
// Service from (no clusterIP, no nodePort) without a read-modify-write:
// values the server allocated are carried over from old when the new object
// leaves them empty. Node ports are matched by port name and are not carried
// to a port if another port of the new object already uses that value.
func patchAllocatedValues(svc, old *corev1.Service) {
	if needsClusterIP(old) && needsClusterIP(svc) {
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = old.Spec.ClusterIP
		}
		if len(svc.Spec.ClusterIPs) == 0 && len(old.Spec.ClusterIPs) > 0 {
			svc.Spec.ClusterIPs = slices.Clone(old.Spec.ClusterIPs)
		}
	}
	if needsNodePort(old) && needsNodePort(svc) {
		used := func(s *corev1.Service) map[int32]bool {
			m := map[int32]bool{}
			for _, p := range s.Spec.Ports {
				if p.NodePort != 0 {
					m[p.NodePort] = true
				}
			}
			return m
		}
		oldUsed, newUsed := used(old), used(svc)
		byName := map[string]int32{}
		for _, p := range old.Spec.Ports {
			byName[p.Name] = p.NodePort
		}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			v := byName[p.Name]
			if v != 0 && !(oldUsed[v] && newUsed[v]) {
				p.NodePort = v
				newUsed[v] = true
			}
		}
	}
	if NeedsHealthCheck(old) && NeedsHealthCheck(svc) && svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
}

// normalizeClusterIPs keeps clusterIP and clusterIPs in step. On create a
// clusterIP given alone becomes clusterIPs = [clusterIP]. On update, when
// only clusterIP was changed (as by a patch), clusterIPs follows it: cleared
// with it, or replaced by [clusterIP] (validation then judges the change).
func normalizeClusterIPs(svc, old *corev1.Service) {
	if old == nil {
		if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
			svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		}
		return
	}
	if svc.Spec.ClusterIP != old.Spec.ClusterIP && slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) {
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIPs = nil
		} else {
			svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		}
	}
	if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
}

// dropTypeDependentFields wipes, on update, fields that stop applying after
// a type change, when the client left them as they were (a value the client
// changed is left for validation to judge).
func dropTypeDependentFields(svc, old *corev1.Service) {
	if old == nil {
		return
	}
	if needsClusterIP(old) && !needsClusterIP(svc) {
		if svc.Spec.ClusterIP == old.Spec.ClusterIP && slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) {
			svc.Spec.ClusterIP = ""
			svc.Spec.ClusterIPs = nil
		}
		if slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies) {
			svc.Spec.IPFamilies = nil
		}
		if samePolicy(svc.Spec.IPFamilyPolicy, old.Spec.IPFamilyPolicy) {
			svc.Spec.IPFamilyPolicy = nil
		}
	}
	if needsNodePort(old) && !needsNodePort(svc) && sameNodePorts(svc, old) {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
	if NeedsHealthCheck(old) && !NeedsHealthCheck(svc) && svc.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		a, b := svc.Spec.AllocateLoadBalancerNodePorts, old.Spec.AllocateLoadBalancerNodePorts
		if a != nil && b != nil && *a == *b {
			svc.Spec.AllocateLoadBalancerNodePorts = nil
		}
		if sameStringPtr(svc.Spec.LoadBalancerClass, old.Spec.LoadBalancerClass) {
			svc.Spec.LoadBalancerClass = nil
		}
	}
	if ExternallyAccessible(old) && !ExternallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	}
}

func samePolicy(a, b *corev1.IPFamilyPolicy) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// sameNodePorts: every nodePort of svc is unset or equal to old's for the
// same port index.
func sameNodePorts(svc, old *corev1.Service) bool {
	for i, p := range svc.Spec.Ports {
		if p.NodePort == 0 {
			continue
		}
		if i >= len(old.Spec.Ports) || old.Spec.Ports[i].NodePort != p.NodePort {
			return false
		}
	}
	return true
}

func policyOf(svc *corev1.Service) corev1.IPFamilyPolicy {
	if svc.Spec.IPFamilyPolicy == nil {
		return ""
	}
	return *svc.Spec.IPFamilyPolicy
}

// isMatchingPreferDualStack: a PreferDualStack Service whose families and
// IPs did not change is left as it is, so a cluster that gains or loses a
// family does not silently upgrade or downgrade it.
func isMatchingPreferDualStack(svc, old *corev1.Service) bool {
	if old == nil || svc.Spec.IPFamilyPolicy == nil || old.Spec.Type != svc.Spec.Type {
		return false
	}
	if !needsClusterIP(svc) || !needsClusterIP(old) {
		return false
	}
	if *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack {
		return false
	}
	if old.Spec.IPFamilyPolicy != nil && *old.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack {
		return false
	}
	return slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) && slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies)
}

func otherFamily(f corev1.IPFamily) corev1.IPFamily {
	if f == corev1.IPv4Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// initIPFamilyFields defaults ipFamilyPolicy and ipFamilies from the
// Service's clusterIPs and the cluster's configured families, and rejects
// families the cluster does not have, as kube-apiserver's allocation step
// does (these checks need the cluster configuration, so they are not part of
// ValidateService).
func (s *Strategy) initIPFamilyFields(svc, old *corev1.Service) error {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if isMatchingPreferDualStack(svc, old) {
		return nil
	}
	if svc.Spec.IPFamilyPolicy == nil {
		switch {
		case old != nil && old.Spec.IPFamilyPolicy != nil:
			p := *old.Spec.IPFamilyPolicy
			svc.Spec.IPFamilyPolicy = &p
		case svc.Spec.ClusterIP == corev1.ClusterIPNone && len(svc.Spec.Selector) == 0:
			// Headless and selectorless: dual-stack by default.
			p := corev1.IPFamilyPolicyRequireDualStack
			svc.Spec.IPFamilyPolicy = &p
		default:
			p := corev1.IPFamilyPolicySingleStack
			svc.Spec.IPFamilyPolicy = &p
		}
	}
	var oldIPs []string
	if old != nil {
		oldIPs = old.Spec.ClusterIPs
	}
	if el := validateClusterIPsRelatedFields(svc, oldIPs); len(el) != 0 {
		return invalid(svc, el)
	}

	var el field.ErrorList
	policyPath := field.NewPath("spec", "ipFamilyPolicy")
	if old != nil {
		if policyOf(svc) == corev1.IPFamilyPolicySingleStack {
			if slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) && len(svc.Spec.ClusterIPs) > 1 {
				svc.Spec.ClusterIPs = svc.Spec.ClusterIPs[:1]
			}
			if slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies) && len(svc.Spec.IPFamilies) > 1 {
				svc.Spec.IPFamilies = svc.Spec.IPFamilies[:1]
			}
		} else {
			if len(svc.Spec.ClusterIPs) < len(old.Spec.ClusterIPs) && len(svc.Spec.ClusterIPs) > 0 {
				el = append(el, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'SingleStack' to release the secondary cluster IP"))
			}
			if len(svc.Spec.IPFamilies) < len(old.Spec.IPFamilies) && len(svc.Spec.IPFamilies) > 0 {
				el = append(el, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'SingleStack' to release the secondary IP family"))
			}
		}
	}
	if policyOf(svc) == corev1.IPFamilyPolicySingleStack {
		if len(svc.Spec.ClusterIPs) == 2 {
			el = append(el, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"))
		}
		if len(svc.Spec.IPFamilies) == 2 {
			el = append(el, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"))
		}
	}
	for i, ip := range svc.Spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			break
		}
		fam := FamilyOf(ip)
		if i >= len(svc.Spec.IPFamilies) {
			if _, ok := s.byFamily[fam]; !ok {
				el = append(el, field.Invalid(field.NewPath("spec", "clusterIPs").Index(i), svc.Spec.ClusterIPs,
					fmt.Sprintf("%s is not configured on this cluster", fam)))
			} else {
				svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, fam)
			}
		}
	}
	if len(el) > 0 {
		return invalid(svc, el)
	}

	if svc.Spec.ClusterIP == corev1.ClusterIPNone && len(svc.Spec.Selector) == 0 {
		if len(svc.Spec.IPFamilies) == 0 {
			svc.Spec.IPFamilies = []corev1.IPFamily{s.primary}
		}
		if len(svc.Spec.IPFamilies) < 2 && policyOf(svc) != corev1.IPFamilyPolicySingleStack {
			svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, otherFamily(svc.Spec.IPFamilies[0]))
		}
		return nil
	}

	if policyOf(svc) == corev1.IPFamilyPolicyRequireDualStack && len(s.byFamily) < 2 {
		el = append(el, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "this cluster is not configured for dual-stack services"))
	}
	for i, fam := range svc.Spec.IPFamilies {
		if _, ok := s.byFamily[fam]; !ok {
			el = append(el, field.Invalid(field.NewPath("spec", "ipFamilies").Index(i), fam, "not configured on this cluster"))
		}
	}
	if len(el) > 0 {
		return invalid(svc, el)
	}
	if len(svc.Spec.IPFamilies) == 0 {
		svc.Spec.IPFamilies = []corev1.IPFamily{s.primary}
	}
	if policyOf(svc) != corev1.IPFamilyPolicySingleStack && len(svc.Spec.IPFamilies) == 1 && len(s.byFamily) == 2 {
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, otherFamily(svc.Spec.IPFamilies[0]))
	}
	return nil
}
