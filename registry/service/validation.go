package service

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// ValidateServiceName is the name rule for Services in Kubernetes 1.37: an
// RFC 1123 label (RelaxedServiceNameValidation is GA and locked on, so
// "1web" is accepted; "web.x" and "Web" are not).
var ValidateServiceName = apivalidation.NameIsDNSLabel

// The annotation kube-apiserver reads source ranges from when the field is empty.
const annotationLoadBalancerSourceRanges = "service.beta.kubernetes.io/load-balancer-source-ranges"

const (
	annotationTopologyMode          = "service.kubernetes.io/topology-mode"
	annotationTopologyAwareHintsOld = "service.kubernetes.io/topology-aware-hints"
)

var (
	supportedSessionAffinity = sets.New(corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone)
	supportedServiceTypes    = sets.New(corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort,
		corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)
	supportedInternalTrafficPolicies = sets.New(corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal)
	supportedExternalTrafficPolicies = sets.New(corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal)
	supportedIPFamilies              = sets.New(corev1.IPv4Protocol, corev1.IPv6Protocol)
	supportedIPFamilyPolicies        = sets.New(corev1.IPFamilyPolicySingleStack,
		corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack)
	// SupportedPortProtocols are the protocols a Service or endpoint port may use.
	SupportedPortProtocols = sets.New(corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)
)

// ValidateService returns the field errors of a (defaulted) Service, with
// kube-apiserver 1.37's field paths and messages. validOldIPs lists IPs
// (clusterIPs, externalIPs) that the stored object already had; they are
// accepted even if they would fail today's strict IP syntax check.
//
// The object metadata (name, namespace, labels, annotations) is checked here,
// on create only: on update kube-apiserver checks just the metadata update
// rules (ValidateServiceUpdate), never the name syntax again.
func ValidateService(svc *corev1.Service) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&svc.ObjectMeta, true, ValidateServiceName, field.NewPath("metadata"))
	return append(allErrs, validateService(svc, nil)...)
}

func validateService(svc *corev1.Service, old *corev1.Service) field.ErrorList {
	metaPath := field.NewPath("metadata")
	var allErrs field.ErrorList

	hintsVal, hintsSet := svc.Annotations[annotationTopologyAwareHintsOld]
	modeVal, modeSet := svc.Annotations[annotationTopologyMode]
	if modeSet && hintsSet && modeVal != hintsVal {
		allErrs = append(allErrs, field.Invalid(metaPath.Child("annotations").Key(annotationTopologyMode), modeVal,
			fmt.Sprintf("must match annotations[%s] when both are specified", annotationTopologyAwareHintsOld)))
	}

	specPath := field.NewPath("spec")
	headless := IsHeadless(svc)
	if len(svc.Spec.Ports) == 0 && !headless && svc.Spec.Type != corev1.ServiceTypeExternalName {
		allErrs = append(allErrs, field.Required(specPath.Child("ports"), ""))
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		if headless {
			allErrs = append(allErrs, field.Invalid(specPath.Child("clusterIPs").Index(0), svc.Spec.ClusterIPs[0],
				"may not be set to 'None' for LoadBalancer services"))
		}
	case corev1.ServiceTypeNodePort:
		if headless {
			allErrs = append(allErrs, field.Invalid(specPath.Child("clusterIPs").Index(0), svc.Spec.ClusterIPs[0],
				"may not be set to 'None' for NodePort services"))
		}
	case corev1.ServiceTypeExternalName:
		if len(svc.Spec.ClusterIPs) > 0 {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(svc.Spec.IPFamilies) > 0 {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if svc.Spec.IPFamilyPolicy != nil {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		// A trailing dot marks the name as fully qualified.
		cname := strings.TrimSuffix(svc.Spec.ExternalName, ".")
		if cname != "" {
			allErrs = append(allErrs, validateDNS1123Subdomain(cname, specPath.Child("externalName"))...)
		} else {
			allErrs = append(allErrs, field.Required(specPath.Child("externalName"), ""))
		}
	}

	names := sets.New[string]()
	portsPath := specPath.Child("ports")
	for i := range svc.Spec.Ports {
		allErrs = append(allErrs, validateServicePort(&svc.Spec.Ports[i], len(svc.Spec.Ports) > 1, names, portsPath.Index(i))...)
	}

	if svc.Spec.Selector != nil {
		allErrs = append(allErrs, metavalidation.ValidateLabels(svc.Spec.Selector, specPath.Child("selector"))...)
	}

	if svc.Spec.SessionAffinity == "" {
		allErrs = append(allErrs, field.Required(specPath.Child("sessionAffinity"), ""))
	} else if !supportedSessionAffinity.Has(svc.Spec.SessionAffinity) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("sessionAffinity"), svc.Spec.SessionAffinity, sets.List(supportedSessionAffinity)))
	}
	switch svc.Spec.SessionAffinity {
	case corev1.ServiceAffinityClientIP:
		allErrs = append(allErrs, validateClientIPAffinityConfig(svc.Spec.SessionAffinityConfig, specPath.Child("sessionAffinityConfig"))...)
	case corev1.ServiceAffinityNone:
		if svc.Spec.SessionAffinityConfig != nil {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("sessionAffinityConfig"),
				fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone)))
		}
	}

	var oldClusterIPs, oldExternalIPs, oldSourceRanges []string
	if old != nil {
		oldClusterIPs, oldExternalIPs, oldSourceRanges = old.Spec.ClusterIPs, old.Spec.ExternalIPs, old.Spec.LoadBalancerSourceRanges
	}
	allErrs = append(allErrs, validateClusterIPsRelatedFields(svc, oldClusterIPs)...)

	ipPath := specPath.Child("externalIPs")
	for i, ip := range svc.Spec.ExternalIPs {
		idxPath := ipPath.Index(i)
		if errs := validation.IsValidIPForLegacyField(idxPath, ip, true, oldExternalIPs); len(errs) != 0 {
			allErrs = append(allErrs, errs...)
		} else {
			allErrs = append(allErrs, ValidateEndpointIP(ip, idxPath)...)
		}
	}

	if svc.Spec.Type == "" {
		allErrs = append(allErrs, field.Required(specPath.Child("type"), ""))
	} else if !supportedServiceTypes.Has(svc.Spec.Type) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("type"), svc.Spec.Type, sets.List(supportedServiceTypes)))
	}

	if svc.Spec.Type == corev1.ServiceTypeClusterIP {
		for i := range svc.Spec.Ports {
			if svc.Spec.Ports[i].NodePort != 0 {
				allErrs = append(allErrs, field.Forbidden(portsPath.Index(i).Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
		}
	}

	// Duplicate nodePorts are judged per (protocol, nodePort): TCP and UDP
	// may share a number.
	type protoPort struct {
		proto corev1.Protocol
		port  int32
	}
	seenNodePorts := map[protoPort]bool{}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.NodePort == 0 {
			continue
		}
		k := protoPort{p.Protocol, p.NodePort}
		if seenNodePorts[k] {
			allErrs = append(allErrs, field.Duplicate(portsPath.Index(i).Child("nodePort"), p.NodePort))
		}
		seenNodePorts[k] = true
	}
	seenPorts := map[protoPort]bool{}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		k := protoPort{p.Protocol, p.Port}
		if seenPorts[k] {
			// kube-apiserver reports the (protocol, port) key as a value of
			// its internal ServicePort type, which has no JSON tags.
			allErrs = append(allErrs, field.Duplicate(portsPath.Index(i), internalServicePort{Protocol: p.Protocol, Port: p.Port}))
		}
		seenPorts[k] = true
	}

	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		// The capital L is kube-apiserver's own spelling of this path.
		fp := specPath.Child("LoadBalancerSourceRanges")
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			allErrs = append(allErrs, field.Forbidden(fp, "may only be used when `type` is 'LoadBalancer'"))
		}
		for i, v := range svc.Spec.LoadBalancerSourceRanges {
			// Historically these may be space-padded.
			allErrs = append(allErrs, validation.IsValidCIDRForLegacyField(fp.Index(i), strings.TrimSpace(v), true, oldSourceRanges)...)
		}
	} else if val, ok := svc.Annotations[annotationLoadBalancerSourceRanges]; ok {
		fp := field.NewPath("metadata", "annotations").Key(annotationLoadBalancerSourceRanges)
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			allErrs = append(allErrs, field.Forbidden(fp, "may only be used when `type` is 'LoadBalancer'"))
		}
		if val = strings.TrimSpace(val); val != "" {
			for _, v := range strings.Split(val, ",") {
				allErrs = append(allErrs, validation.IsValidCIDRForLegacyField(fp, strings.TrimSpace(v), true, nil)...)
			}
		}
	}

	if svc.Spec.AllocateLoadBalancerNodePorts != nil && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.AllocateLoadBalancerNodePorts == nil {
		// kube-apiserver reports this without the "spec." prefix.
		allErrs = append(allErrs, field.Required(field.NewPath("allocateLoadBalancerNodePorts"), ""))
	}

	// On update the class was already checked against old (and, as in
	// kube-apiserver, a format or type error is then reported twice).
	allErrs = append(allErrs, validateLoadBalancerClass(nil, svc)...)
	allErrs = append(allErrs, validateExternalTrafficPolicy(svc)...)
	allErrs = append(allErrs, validateInternalTrafficPolicy(svc)...)
	if td := svc.Spec.TrafficDistribution; td != nil {
		// kube-apiserver lists the supported values in this (unsorted) order.
		valid := []string{corev1.ServiceTrafficDistributionPreferClose,
			corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode}
		if !sets.New(valid...).Has(*td) {
			allErrs = append(allErrs, field.NotSupported(specPath.Child("trafficDistribution"), *td, valid))
		}
	}
	return allErrs
}

// internalServicePort mirrors the field order of Kubernetes' internal
// core.ServicePort so that a Duplicate error renders its value exactly as
// kube-apiserver does.
type internalServicePort struct {
	Name        string
	Protocol    corev1.Protocol
	AppProtocol *string
	Port        int32
	TargetPort  intstr.IntOrString
	NodePort    int32
}

func validateServicePort(sp *corev1.ServicePort, requireName bool, names sets.Set[string], fp *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if requireName && sp.Name == "" {
		allErrs = append(allErrs, field.Required(fp.Child("name"), ""))
	} else if sp.Name != "" {
		allErrs = append(allErrs, validateDNS1123Label(sp.Name, fp.Child("name"))...)
		if names.Has(sp.Name) {
			allErrs = append(allErrs, field.Duplicate(fp.Child("name"), sp.Name))
		} else {
			names.Insert(sp.Name)
		}
	}
	for _, msg := range validation.IsValidPortNum(int(sp.Port)) {
		allErrs = append(allErrs, field.Invalid(fp.Child("port"), sp.Port, msg))
	}
	if sp.Protocol == "" {
		allErrs = append(allErrs, field.Required(fp.Child("protocol"), ""))
	} else if !SupportedPortProtocols.Has(sp.Protocol) {
		allErrs = append(allErrs, field.NotSupported(fp.Child("protocol"), sp.Protocol, sets.List(SupportedPortProtocols)))
	}
	allErrs = append(allErrs, ValidatePortNumOrName(sp.TargetPort, fp.Child("targetPort"))...)
	if sp.AppProtocol != nil {
		allErrs = append(allErrs, ValidateQualifiedName(*sp.AppProtocol, fp.Child("appProtocol"))...)
	}
	return allErrs
}

// ValidatePortNumOrName checks a targetPort: a number in 1..65535, or an
// IANA service name (at most 15 characters, a-z0-9 and '-', at least one letter).
func ValidatePortNumOrName(port intstr.IntOrString, fp *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			allErrs = append(allErrs, field.Invalid(fp, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			allErrs = append(allErrs, field.Invalid(fp, port.StrVal, msg))
		}
	default:
		allErrs = append(allErrs, field.InternalError(fp, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return allErrs
}

// ValidateQualifiedName checks a Kubernetes qualified name (label-key syntax),
// as used for appProtocol and loadBalancerClass.
func ValidateQualifiedName(value string, fp *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsQualifiedName(value) {
		allErrs = append(allErrs, field.Invalid(fp, value, msg))
	}
	return allErrs
}

func validateDNS1123Label(value string, fp *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		allErrs = append(allErrs, field.Invalid(fp, value, msg))
	}
	return allErrs
}

func validateDNS1123Subdomain(value string, fp *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		allErrs = append(allErrs, field.Invalid(fp, value, msg))
	}
	return allErrs
}

func validateClientIPAffinityConfig(cfg *corev1.SessionAffinityConfig, fp *field.Path) field.ErrorList {
	when := fmt.Sprintf("when session affinity type is %s", corev1.ServiceAffinityClientIP)
	if cfg == nil {
		return field.ErrorList{field.Required(fp, when)}
	}
	if cfg.ClientIP == nil {
		return field.ErrorList{field.Required(fp.Child("clientIP"), when)}
	}
	tp := fp.Child("clientIP").Child("timeoutSeconds")
	if cfg.ClientIP.TimeoutSeconds == nil {
		return field.ErrorList{field.Required(tp, when)}
	}
	if t := *cfg.ClientIP.TimeoutSeconds; t <= 0 || t > MaxClientIPTimeoutSeconds {
		return field.ErrorList{field.Invalid(tp, t, fmt.Sprintf("must be greater than 0 and less than %d", MaxClientIPTimeoutSeconds))}
	}
	return nil
}

// ValidateEndpointIP rejects addresses that make no sense as a backend or
// external IP: unspecified, loopback, link-local and link-local multicast.
// An address that does not parse is left to the syntax check.
func ValidateEndpointIP(ip string, fp *field.Path) field.ErrorList {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil
	}
	return endpointIPRanges(addr.Unmap(), ip, fp)
}

func endpointIPRanges(addr netip.Addr, ip string, fp *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if addr.IsUnspecified() {
		allErrs = append(allErrs, field.Invalid(fp, ip, fmt.Sprintf("may not be unspecified (%v)", ip)))
	}
	if addr.IsLoopback() {
		allErrs = append(allErrs, field.Invalid(fp, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if addr.IsLinkLocalUnicast() {
		allErrs = append(allErrs, field.Invalid(fp, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if addr.IsLinkLocalMulticast() {
		allErrs = append(allErrs, field.Invalid(fp, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return allErrs
}

// ValidateEndpointIPSloppy is kube-apiserver's endpoint-address check as
// Endpoints addresses get it: the address is parsed leniently (leading zeros
// read as decimal, as Go before 1.17 did); one that does not parse even so is
// "must be a valid IP address"; otherwise the ValidateEndpointIP ranges apply.
func ValidateEndpointIPSloppy(ip string, fp *field.Path) field.ErrorList {
	parsed := netutils.ParseIPSloppy(ip)
	if parsed == nil {
		return field.ErrorList{field.Invalid(fp, ip, "must be a valid IP address")}
	}
	addr, _ := netip.AddrFromSlice(parsed)
	return endpointIPRanges(addr.Unmap(), ip, fp)
}

// validateClusterIPsRelatedFields checks clusterIP, clusterIPs, ipFamilies and
// ipFamilyPolicy against each other (kube-apiserver's
// ValidateServiceClusterIPsRelatedFields). The allocation step runs it too,
// before it interprets the fields.
func validateClusterIPsRelatedFields(svc *corev1.Service, oldClusterIPs []string) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var allErrs field.ErrorList
	specPath := field.NewPath("spec")
	ipsPath := specPath.Child("clusterIPs")
	famPath := specPath.Child("ipFamilies")

	if svc.Spec.ClusterIP != "" {
		if len(svc.Spec.ClusterIPs) == 0 {
			allErrs = append(allErrs, field.Required(ipsPath, ""))
		} else if svc.Spec.ClusterIPs[0] != svc.Spec.ClusterIP {
			allErrs = append(allErrs, field.Invalid(ipsPath, svc.Spec.ClusterIPs, "first value must match `clusterIP`"))
		}
	} else if len(svc.Spec.ClusterIPs) != 0 {
		allErrs = append(allErrs, field.Invalid(ipsPath, svc.Spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}

	seen := sets.New[corev1.IPFamily]()
	for i, fam := range svc.Spec.IPFamilies {
		if !supportedIPFamilies.Has(fam) {
			allErrs = append(allErrs, field.NotSupported(famPath.Index(i), fam, sets.List(supportedIPFamilies)))
		}
		if seen.Has(fam) {
			allErrs = append(allErrs, field.Duplicate(famPath.Index(i), fam))
		}
		seen.Insert(fam)
	}
	if p := svc.Spec.IPFamilyPolicy; p != nil && !supportedIPFamilyPolicies.Has(*p) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("ipFamilyPolicy"), *p, sets.List(supportedIPFamilyPolicies)))
	}

	invalid := false
	for i, ip := range svc.Spec.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(svc.Spec.ClusterIPs) > 1 {
				invalid = true
				allErrs = append(allErrs, field.Invalid(ipsPath, svc.Spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		errs := validation.IsValidIPForLegacyField(ipsPath.Index(i), ip, true, oldClusterIPs)
		invalid = invalid || len(errs) != 0
		allErrs = append(allErrs, errs...)
	}
	if len(svc.Spec.ClusterIPs) > 2 {
		allErrs = append(allErrs, field.Invalid(ipsPath, svc.Spec.ClusterIPs, "may only hold up to 2 values"))
	}
	if invalid {
		// Further checks would only repeat the problem in other words.
		return allErrs
	}
	if len(svc.Spec.ClusterIPs) > 1 {
		// An entry accepted only because old already had it (for example
		// "None" moved to second place) cannot be parsed here; kube-apiserver
		// then reports an internal error besides the family error.
		dualStack, err := netutils.IsDualStackIPStrings(svc.Spec.ClusterIPs)
		if err != nil {
			allErrs = append(allErrs, field.InternalError(ipsPath, fmt.Errorf("failed to check for dual stack with error:%v", err)))
		}
		if !dualStack {
			allErrs = append(allErrs, field.Invalid(ipsPath, svc.Spec.ClusterIPs, "may specify no more than one IP for each IP family"))
		}
	}
	if !IsHeadless(svc) && len(svc.Spec.ClusterIPs) > 0 && len(svc.Spec.IPFamilies) > 0 {
		for i, ip := range svc.Spec.ClusterIPs {
			if i >= len(svc.Spec.IPFamilies) {
				break
			}
			v6 := FamilyOf(ip) == corev1.IPv6Protocol
			if svc.Spec.IPFamilies[i] == corev1.IPv4Protocol && v6 {
				allErrs = append(allErrs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv4 value as indicated by `ipFamilies[%v]`", i)))
			}
			if svc.Spec.IPFamilies[i] == corev1.IPv6Protocol && !v6 {
				allErrs = append(allErrs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv6 value as indicated by `ipFamilies[%v]`", i)))
			}
		}
	}
	return allErrs
}

// FamilyOf returns the IP family of an address string (IPv4 for anything
// that is not IPv6, including IPv4-mapped IPv6 addresses).
func FamilyOf(ip string) corev1.IPFamily {
	a, err := netip.ParseAddr(ip)
	if err == nil && a.Is6() && !a.Is4In6() {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

func validateLoadBalancerClass(old, svc *corev1.Service) field.ErrorList {
	var allErrs field.ErrorList
	fp := field.NewPath("spec", "loadBalancerClass")
	if old != nil && old.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		if !sameStringPtr(old.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass) {
			allErrs = append(allErrs, field.Invalid(fp, svc.Spec.LoadBalancerClass, "may not change once set"))
		}
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		if svc.Spec.LoadBalancerClass != nil {
			allErrs = append(allErrs, ValidateQualifiedName(*svc.Spec.LoadBalancerClass, fp)...)
		}
	} else if svc.Spec.LoadBalancerClass != nil {
		allErrs = append(allErrs, field.Forbidden(fp, "may only be used when `type` is 'LoadBalancer'"))
	}
	return allErrs
}

func sameStringPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func validateExternalTrafficPolicy(svc *corev1.Service) field.ErrorList {
	var allErrs field.ErrorList
	fp := field.NewPath("spec")
	if !ExternallyAccessible(svc) {
		if svc.Spec.ExternalTrafficPolicy != "" {
			allErrs = append(allErrs, field.Invalid(fp.Child("externalTrafficPolicy"), svc.Spec.ExternalTrafficPolicy,
				"may only be set for externally-accessible services"))
		}
	} else if svc.Spec.ExternalTrafficPolicy == "" {
		allErrs = append(allErrs, field.Required(fp.Child("externalTrafficPolicy"), ""))
	} else if !supportedExternalTrafficPolicies.Has(svc.Spec.ExternalTrafficPolicy) {
		allErrs = append(allErrs, field.NotSupported(fp.Child("externalTrafficPolicy"), svc.Spec.ExternalTrafficPolicy,
			sets.List(supportedExternalTrafficPolicies)))
	}
	if !NeedsHealthCheck(svc) {
		if svc.Spec.HealthCheckNodePort != 0 {
			allErrs = append(allErrs, field.Invalid(fp.Child("healthCheckNodePort"), svc.Spec.HealthCheckNodePort,
				"may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		}
	} else if svc.Spec.HealthCheckNodePort == 0 {
		allErrs = append(allErrs, field.Required(fp.Child("healthCheckNodePort"), ""))
	} else {
		for _, msg := range validation.IsValidPortNum(int(svc.Spec.HealthCheckNodePort)) {
			allErrs = append(allErrs, field.Invalid(fp.Child("healthCheckNodePort"), svc.Spec.HealthCheckNodePort, msg))
		}
	}
	return allErrs
}

func validateInternalTrafficPolicy(svc *corev1.Service) field.ErrorList {
	var allErrs field.ErrorList
	fp := field.NewPath("spec").Child("internalTrafficPolicy")
	if svc.Spec.InternalTrafficPolicy == nil {
		// Not required for ExternalName, for historical reasons.
		switch svc.Spec.Type {
		case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP:
			allErrs = append(allErrs, field.Required(fp, ""))
		}
	} else if !supportedInternalTrafficPolicies.Has(*svc.Spec.InternalTrafficPolicy) {
		allErrs = append(allErrs, field.NotSupported(fp, *svc.Spec.InternalTrafficPolicy, sets.List(supportedInternalTrafficPolicies)))
	}
	return allErrs
}

// ValidateServiceUpdate validates an update from old to svc: object-meta
// update rules, the clusterIPs/ipFamilies upgrade-downgrade rules (the
// primary clusterIP "may not change once set", except to or from
// ExternalName), loadBalancerClass and healthCheckNodePort immutability,
// then every create-time spec rule on svc (not the metadata syntax rules).
func ValidateServiceUpdate(svc, old *corev1.Service) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMetaUpdate(&svc.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateUpgradeDowngradeClusterIPs(old, svc)...)
	allErrs = append(allErrs, validateUpgradeDowngradeIPFamilies(old, svc)...)
	allErrs = append(allErrs, validateLoadBalancerClass(old, svc)...)
	if NeedsHealthCheck(old) && NeedsHealthCheck(svc) && svc.Spec.HealthCheckNodePort != old.Spec.HealthCheckNodePort {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "healthCheckNodePort"), "field is immutable"))
	}
	return append(allErrs, validateService(svc, old)...)
}

// ValidateServiceStatusUpdate validates a write to the status subresource:
// load-balancer ingress only on LoadBalancer Services, valid IPs with an
// ipMode (VIP or Proxy), hostnames that are DNS names and not IPs.
func ValidateServiceStatusUpdate(svc, old *corev1.Service) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMetaUpdate(&svc.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	ingPath := field.NewPath("status", "loadBalancer", "ingress")
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) != 0 {
		return append(allErrs, field.Forbidden(ingPath, "may only be used when `spec.type` is 'LoadBalancer'"))
	}
	var oldIPs []string
	for _, ing := range old.Status.LoadBalancer.Ingress {
		oldIPs = append(oldIPs, ing.IP)
	}
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		idx := ingPath.Index(i)
		if ing.IP != "" {
			allErrs = append(allErrs, validation.IsValidIPForLegacyField(idx.Child("ip"), ing.IP, true, oldIPs)...)
		}
		switch {
		case ing.IPMode == nil:
			if ing.IP != "" {
				allErrs = append(allErrs, field.Required(idx.Child("ipMode"), "must be specified when `ip` is set"))
			}
		case ing.IP == "":
			allErrs = append(allErrs, field.Forbidden(idx.Child("ipMode"), "may not be specified when `ip` is not set"))
		case *ing.IPMode != corev1.LoadBalancerIPModeVIP && *ing.IPMode != corev1.LoadBalancerIPModeProxy:
			allErrs = append(allErrs, field.NotSupported(idx.Child("ipMode"), *ing.IPMode,
				[]string{string(corev1.LoadBalancerIPModeProxy), string(corev1.LoadBalancerIPModeVIP)}))
		}
		if ing.Hostname != "" {
			allErrs = append(allErrs, validateDNS1123Subdomain(ing.Hostname, idx.Child("hostname"))...)
			if _, err := netip.ParseAddr(ing.Hostname); err == nil {
				allErrs = append(allErrs, field.Invalid(idx.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return allErrs
}

func validateUpgradeDowngradeClusterIPs(old, svc *corev1.Service) field.ErrorList {
	var allErrs field.ErrorList
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return allErrs
	}
	if IsHeadless(old) && IsHeadless(svc) {
		return allErrs
	}
	ips := field.NewPath("spec", "clusterIPs")
	oldIPs, newIPs := old.Spec.ClusterIPs, svc.Spec.ClusterIPs
	switch {
	case len(oldIPs) == len(newIPs):
		for i, ip := range oldIPs {
			if ip != newIPs[i] {
				allErrs = append(allErrs, field.Invalid(ips.Index(i), newIPs, "may not change once set"))
			}
		}
	case len(oldIPs) > len(newIPs):
		if len(newIPs) == 0 {
			allErrs = append(allErrs, field.Invalid(ips.Index(0), newIPs, "primary clusterIP can not be unset"))
		}
		if len(oldIPs) > 0 && len(newIPs) > 0 && newIPs[0] != oldIPs[0] {
			allErrs = append(allErrs, field.Invalid(ips.Index(0), newIPs, "may not change once set"))
		}
		if len(newIPs) == 1 && (svc.Spec.IPFamilyPolicy == nil || *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack) {
			allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy,
				"must be set to 'SingleStack' when releasing the secondary clusterIP"))
		}
	default:
		if len(oldIPs) > 0 && newIPs[0] != oldIPs[0] {
			allErrs = append(allErrs, field.Invalid(ips.Index(0), newIPs, "may not change once set"))
		}
	}
	return allErrs
}

func validateUpgradeDowngradeIPFamilies(old, svc *corev1.Service) field.ErrorList {
	var allErrs field.ErrorList
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return allErrs
	}
	if IsHeadless(old) != IsHeadless(svc) || IsHeadless(svc) {
		return allErrs
	}
	fams := field.NewPath("spec", "ipFamilies")
	oldF, newF := old.Spec.IPFamilies, svc.Spec.IPFamilies
	switch {
	case len(oldF) == len(newF):
		for i, f := range oldF {
			if f != newF[i] {
				allErrs = append(allErrs, field.Invalid(fams.Index(0), newF, "may not change once set"))
			}
		}
	case len(oldF) > len(newF):
		if len(svc.Spec.ClusterIPs) == 0 {
			allErrs = append(allErrs, field.Invalid(fams.Index(0), newF, "primary ipFamily can not be unset"))
		}
		if len(newF) > 0 && newF[0] != oldF[0] {
			allErrs = append(allErrs, field.Invalid(fams.Index(0), svc.Spec.ClusterIPs, "may not change once set"))
		}
		if len(newF) == 1 && (svc.Spec.IPFamilyPolicy == nil || *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack) {
			allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy,
				"must be set to 'SingleStack' when releasing the secondary ipFamily"))
		}
	default:
		if len(oldF) > 0 && len(newF) > 0 && newF[0] != oldF[0] {
			allErrs = append(allErrs, field.Invalid(fams.Index(0), svc.Spec.ClusterIPs, "may not change once set"))
		}
	}
	return allErrs
}
