// Package envvars computes the Service environment variables the kubelet
// injects into every container: for each Service with a cluster IP,
// {SVC}_SERVICE_HOST, {SVC}_SERVICE_PORT, {SVC}_SERVICE_PORT_{NAME} for named
// ports, and the Docker-link style {SVC}_PORT, {SVC}_PORT_{port}_{PROTO} with
// its _PROTO, _PORT and _ADDR companions.
//
// Which Services count is decided by ForPod, exactly as the kubelet's
// getServiceEnvVarMap does: the Services of the pod's namespace (only when
// enableServiceLinks is unset or true) plus the master service "kubernetes"
// from the default namespace (always). The caller passes the Services that
// exist when the container starts, so a Service created after a pod is
// invisible to it until one of its containers restarts.
package envvars

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MasterServiceName is the Service of the default namespace whose variables
// every pod gets, whatever its enableServiceLinks says.
const MasterServiceName = "kubernetes"

// isServiceIPSet reports whether svc has a usable cluster IP: headless
// ("None") and IP-less Services (ExternalName) have no variables.
func isServiceIPSet(svc *v1.Service) bool {
	return svc.Spec.ClusterIP != v1.ClusterIPNone && svc.Spec.ClusterIP != ""
}

// VariableName turns a Service or port name into its variable prefix:
// upper case, dashes become underscores ("my-app" → "MY_APP").
func VariableName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

// FromServices returns the variables for services, in the order the kubelet
// builds them: per Service HOST, PORT, the named ports, then the link
// variables of each port. Services without a cluster IP or without ports are
// skipped.
func FromServices(services []*v1.Service) []v1.EnvVar {
	var out []v1.EnvVar
	for _, svc := range services {
		if !isServiceIPSet(svc) || len(svc.Spec.Ports) == 0 {
			continue
		}
		prefix := VariableName(svc.Name)
		out = append(out, v1.EnvVar{Name: prefix + "_SERVICE_HOST", Value: svc.Spec.ClusterIP})
		portVar := prefix + "_SERVICE_PORT"
		out = append(out, v1.EnvVar{Name: portVar, Value: strconv.Itoa(int(svc.Spec.Ports[0].Port))})
		for _, sp := range svc.Spec.Ports {
			if sp.Name != "" {
				out = append(out, v1.EnvVar{Name: portVar + "_" + VariableName(sp.Name), Value: strconv.Itoa(int(sp.Port))})
			}
		}
		out = append(out, linkVariables(prefix, svc)...)
	}
	return out
}

// linkVariables are the Docker-links compatible variables. The first port
// also gets the bare {SVC}_PORT.
func linkVariables(prefix string, svc *v1.Service) []v1.EnvVar {
	var out []v1.EnvVar
	for i, sp := range svc.Spec.Ports {
		proto := string(v1.ProtocolTCP)
		if sp.Protocol != "" {
			proto = string(sp.Protocol)
		}
		lower := strings.ToLower(proto)
		url := fmt.Sprintf("%s://%s", lower, net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(sp.Port))))
		if i == 0 {
			out = append(out, v1.EnvVar{Name: prefix + "_PORT", Value: url})
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, sp.Port, strings.ToUpper(proto))
		out = append(out,
			v1.EnvVar{Name: pp, Value: url},
			v1.EnvVar{Name: pp + "_PROTO", Value: lower},
			v1.EnvVar{Name: pp + "_PORT", Value: strconv.Itoa(int(sp.Port))},
			v1.EnvVar{Name: pp + "_ADDR", Value: svc.Spec.ClusterIP},
		)
	}
	return out
}

// ForPod selects, from all Services of the cluster, those whose variables a
// pod in namespace ns gets, and returns the variables as a map. A Service of
// the pod's own namespace named "kubernetes" wins over the master service,
// as in the kubelet.
func ForPod(ns string, enableServiceLinks *bool, all []*v1.Service) map[string]string {
	links := enableServiceLinks == nil || *enableServiceLinks
	chosen := map[string]*v1.Service{}
	for _, svc := range all {
		if !isServiceIPSet(svc) {
			continue
		}
		switch {
		case svc.Namespace == metav1.NamespaceDefault && svc.Name == MasterServiceName:
			if _, ok := chosen[svc.Name]; !ok {
				chosen[svc.Name] = svc
			}
		case svc.Namespace == ns && links:
			chosen[svc.Name] = svc
		}
	}
	names := make([]string, 0, len(chosen))
	for n := range chosen {
		names = append(names, n)
	}
	sort.Strings(names)
	list := make([]*v1.Service, 0, len(names))
	for _, n := range names {
		list = append(list, chosen[n])
	}
	m := map[string]string{}
	for _, e := range FromServices(list) {
		m[e.Name] = e.Value
	}
	return m
}
