// Package podutil holds the small pod predicates every svcnet controller
// shares: readiness, terminal phases, whether a pod belongs in a Service's
// endpoints, and the resolution of a Service targetPort (number or name) to a
// container port of one particular pod.
//
// They follow the rules of Kubernetes' own controllers so that svcnet writes
// the same Endpoints and EndpointSlices that kube-controller-manager would.
package podutil

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// IsPodReady reports whether the pod's Ready condition is True. A pod with no
// Ready condition is not ready.
func IsPodReady(pod *corev1.Pod) bool {
	c := GetPodCondition(&pod.Status, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// GetPodCondition returns the condition of the given type, or nil.
func GetPodCondition(status *corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}

// IsPodTerminal reports whether the pod has finished for good (phase
// Succeeded or Failed); such pods never serve traffic again.
func IsPodTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// IsPodActive reports whether the pod counts towards a ReplicaSet's
// replicas: not terminal and not being deleted.
func IsPodActive(pod *corev1.Pod) bool {
	return !IsPodTerminal(pod) && pod.DeletionTimestamp == nil
}

// ShouldPodBeInEndpoints reports whether a pod is a candidate endpoint at
// all: it has an IP, it is not terminal, and unless includeTerminating is set
// it is not being deleted.
func ShouldPodBeInEndpoints(pod *corev1.Pod, includeTerminating bool) bool {
	if IsPodTerminal(pod) {
		return false
	}
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	if !includeTerminating && pod.DeletionTimestamp != nil {
		return false
	}
	return true
}

// FindPort resolves a Service port's targetPort for one pod. A numeric
// targetPort is returned as is (0 means "same as port"); a named one is looked
// up among the pod's containers by name and protocol, and an error is returned
// when the pod has no such port.
func FindPort(pod *corev1.Pod, svcPort *corev1.ServicePort) (int32, error) {
	target := svcPort.TargetPort
	switch target.Type {
	case intstr.String:
		name := target.StrVal
		for _, c := range pod.Spec.InitContainers {
			// Restartable init containers (sidecars) serve traffic too.
			if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				continue
			}
			for _, p := range c.Ports {
				if p.Name == name && protocolOf(p.Protocol) == protocolOf(svcPort.Protocol) {
					return p.ContainerPort, nil
				}
			}
		}
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == name && protocolOf(p.Protocol) == protocolOf(svcPort.Protocol) {
					return p.ContainerPort, nil
				}
			}
		}
	case intstr.Int:
		if target.IntVal == 0 {
			return svcPort.Port, nil
		}
		return target.IntVal, nil
	}
	return 0, fmt.Errorf("no suitable port for manifest: %s", pod.UID)
}

func protocolOf(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// ServiceIPFamily returns the IP family a Service's endpoints are drawn from:
// its first ipFamilies entry, else the family of its ClusterIP, else (a
// headless Service from an older apiserver) the family of podIP.
func ServiceIPFamily(svc *corev1.Service, podIP string) corev1.IPFamily {
	if len(svc.Spec.IPFamilies) > 0 {
		return svc.Spec.IPFamilies[0]
	}
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone {
		ip = podIP
	}
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() && !a.Is4In6() {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// PodIPOfFamily returns the pod's IP of the given family, or "" if it has
// none.
func PodIPOfFamily(pod *corev1.Pod, family corev1.IPFamily) string {
	ips := make([]string, 0, 2)
	for _, p := range pod.Status.PodIPs {
		ips = append(ips, p.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = append(ips, pod.Status.PodIP)
	}
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		is6 := a.Is6() && !a.Is4In6()
		if (family == corev1.IPv6Protocol) == is6 {
			return s
		}
	}
	return ""
}

// ShouldSetHostname reports whether a pod's spec.hostname is published in
// the endpoints of svc: the pod names the Service as its subdomain.
func ShouldSetHostname(pod *corev1.Pod, svc *corev1.Service) bool {
	return pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && svc.Namespace == pod.Namespace
}

// ServiceKeysForPod returns the namespace/name keys of the Services in the
// pod's namespace whose non-empty selector matches the pod's labels.
func ServiceKeysForPod(services []*corev1.Service, pod *corev1.Pod) []string {
	var keys []string
	for _, s := range services {
		if s.Namespace != pod.Namespace || len(s.Spec.Selector) == 0 {
			continue
		}
		if labels.SelectorFromValidatedSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			keys = append(keys, s.Namespace+"/"+s.Name)
		}
	}
	return keys
}
