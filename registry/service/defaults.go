// Package service is the registry strategy for core/v1 Services: the
// defaults Kubernetes 1.37 applies when it decodes a Service, the validation
// rules of kube-apiserver (same field paths and messages), the update rules
// (what may not change, what is carried over from the stored object), and the
// ClusterIP / NodePort / healthCheckNodePort allocation hooks that run before
// validation and are rolled back when a request fails.
//
// Objects are the versioned k8s.io/api/core/v1 types; there is no internal
// type, so defaulting and validation are written directly against v1.
package service

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultClientIPTimeoutSeconds is the sessionAffinityConfig.clientIP.timeoutSeconds
// given to a ClientIP-affinity Service that does not set one (3 hours).
const DefaultClientIPTimeoutSeconds int32 = corev1.DefaultClientIPServiceAffinitySeconds

// MaxClientIPTimeoutSeconds is the largest accepted affinity timeout (one day).
const MaxClientIPTimeoutSeconds int32 = 86400

// SetDefaults applies the defaults of Kubernetes' v1 Service defaulting
// (pkg/apis/core/v1/defaults.go SetDefaults_Service) to svc in place:
//
//   - sessionAffinity "" → None; with None a supplied sessionAffinityConfig is
//     dropped; ClientIP without a timeout gets timeoutSeconds 10800;
//   - type "" → ClusterIP;
//   - per port: protocol "" → TCP, targetPort 0 or "" → port;
//   - externalTrafficPolicy "" → Cluster for externally accessible Services
//     (NodePort, LoadBalancer, and ClusterIP with externalIPs);
//   - internalTrafficPolicy nil → Cluster for ClusterIP/NodePort/LoadBalancer
//     (not ExternalName);
//   - allocateLoadBalancerNodePorts nil → true for LoadBalancer;
//   - ipMode VIP on load-balancer ingress entries with an IP.
//
// clusterIP/clusterIPs syncing, ipFamilyPolicy and ipFamilies are not
// defaulted here: they depend on the stored object and on the cluster's
// configured ranges and are filled in by the allocation step
// (Strategy.BeginCreate/BeginUpdate), as kube-apiserver does.
func SetDefaults(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityNone {
		spec.SessionAffinityConfig = nil
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		c := spec.SessionAffinityConfig
		if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			t := DefaultClientIPTimeoutSeconds
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &t},
			}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if ExternallyAccessible(svc) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil {
		switch spec.Type {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			p := corev1.ServiceInternalTrafficPolicyCluster
			spec.InternalTrafficPolicy = &p
		}
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		t := true
		spec.AllocateLoadBalancerNodePorts = &t
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer {
		vip := corev1.LoadBalancerIPModeVIP
		for i, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" && ing.IPMode == nil {
				svc.Status.LoadBalancer.Ingress[i].IPMode = &vip
			}
		}
	}
}

// ExternallyAccessible reports whether traffic from outside the cluster can
// reach the Service: LoadBalancer, NodePort, or ClusterIP with externalIPs.
// Only such Services carry an externalTrafficPolicy.
func ExternallyAccessible(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeClusterIP:
		return len(svc.Spec.ExternalIPs) > 0
	}
	return false
}

// NeedsHealthCheck reports whether the Service needs a healthCheckNodePort:
// type LoadBalancer with externalTrafficPolicy Local.
func NeedsHealthCheck(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// IsHeadless reports whether the Service is headless (clusterIPs == ["None"]).
func IsHeadless(svc *corev1.Service) bool {
	return svc != nil && len(svc.Spec.ClusterIPs) == 1 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone
}

// needsClusterIP: every type but ExternalName has clusterIP/clusterIPs
// (which may be "None").
func needsClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName
}

// needsNodePort: NodePort and LoadBalancer Services have node ports.
func needsNodePort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
}
