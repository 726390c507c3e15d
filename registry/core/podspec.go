package core

import (
	"fmt"
	"math"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Pod spec validation as kube-apiserver 1.37 does it for Pods and for the
// pod templates of Deployments and ReplicaSets, with its feature defaults
// (relaxed environment variable names, file-key references, no taint
// comparison operators): the same checks in the same order, the same paths,
// values and messages. hack/apidiff compares the two on random pods.

// AllowPrivileged is kube-apiserver's --allow-privileged: whether a
// container may ask for privileged mode. Like kube-apiserver, svcnet
// refuses it unless told otherwise (svcnet apiserver --allow-privileged).
var AllowPrivileged = false

// podSpecOptions are what differs between a Pod and a pod template.
type podSpecOptions struct {
	// isPod: the spec is a Pod's (a host-network Pod's hostPort must
	// equal its containerPort; a template's may be 0).
	isPod bool
	// podName is the Pod's name (none for a template): it names the
	// claims of its ephemeral volumes.
	podName string
	// What an update keeps allowing because the stored spec has it
	// (kube-apiserver's PodValidationOptions of the same names): a
	// projected token path that is not a local relative one, an image
	// volume without a reference.
	allowNonLocalProjectedTokenPath bool
	allowEmptyImageVolumeReference  bool
}

// withOldSpec sets the options an update derives from the stored spec.
func (o podSpecOptions) withOldSpec(old *corev1.PodSpec) podSpecOptions {
	if old == nil {
		return o
	}
	for _, v := range old.Volumes {
		if v.Image != nil && v.Image.Reference == "" {
			o.allowEmptyImageVolumeReference = true
		}
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil && len(localNonReservedPath(t.Path, nil)) > 0 {
				o.allowNonLocalProjectedTokenPath = true
			}
		}
	}
	return o
}

func validatePodSpec(s *corev1.PodSpec, p *field.Path, opts podSpecOptions) field.ErrorList {
	var errs field.ErrorList
	if s.TerminationGracePeriodSeconds == nil {
		errs = append(errs, field.Required(p.Child("terminationGracePeriodSeconds"), ""))
	}
	grace := s.TerminationGracePeriodSeconds
	vols, verrs := validateVolumes(s.Volumes, opts, p.Child("volumes"))
	errs = append(errs, verrs...)
	errs = append(errs, validateContainers(s, vols, grace, p.Child("containers"))...)
	errs = append(errs, validateInitContainers(s, vols, grace, p.Child("initContainers"))...)
	if s.HostNetwork {
		for i, c := range s.Containers {
			for j, port := range c.Ports {
				if (opts.isPod || port.HostPort != 0) && port.HostPort != port.ContainerPort {
					errs = append(errs, field.Invalid(p.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort"), port.HostPort,
						"must match `containerPort` when `hostNetwork` is true"))
				}
			}
		}
	}
	errs = append(errs, requiredEnum(p.Child("restartPolicy"), string(s.RestartPolicy), []string{"Always", "OnFailure", "Never"})...)
	errs = append(errs, requiredEnum(p.Child("dnsPolicy"), string(s.DNSPolicy), []string{"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"})...)
	errs = append(errs, metavalidation.ValidateLabels(s.NodeSelector, p.Child("nodeSelector"))...)
	errs = append(errs, validatePodSecurityContext(s.SecurityContext, p.Child("securityContext"))...)
	if s.ShareProcessNamespace != nil && *s.ShareProcessNamespace && s.HostPID {
		errs = append(errs, field.Invalid(p.Child("shareProcessNamespace"), *s.ShareProcessNamespace, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	for i, ref := range s.ImagePullSecrets {
		if !reflect.DeepEqual(ref, corev1.LocalObjectReference{Name: ref.Name}) {
			errs = append(errs, field.Invalid(p.Child("imagePullSecrets").Index(i), ref, "only name may be set"))
		}
	}
	errs = append(errs, validateAffinity(s.Affinity, p.Child("affinity"))...)
	errs = append(errs, validateDNSConfig(s.DNSConfig, s.DNSPolicy, p.Child("dnsConfig"))...)
	for i, g := range s.ReadinessGates {
		for _, msg := range validation.IsQualifiedName(string(g.ConditionType)) {
			errs = append(errs, field.Invalid(p.Child("readinessGates").Index(i).Child("conditionType"), string(g.ConditionType), msg))
		}
	}
	gates := sets.New[string]()
	for i, g := range s.SchedulingGates {
		for _, msg := range validation.IsQualifiedName(g.Name) {
			errs = append(errs, field.Invalid(p.Child("schedulingGates").Index(i), g.Name, msg))
		}
		if gates.Has(g.Name) {
			errs = append(errs, field.Duplicate(p.Child("schedulingGates").Index(i), g.Name))
		}
		gates.Insert(g.Name)
	}
	errs = append(errs, validateTopologySpread(s.TopologySpreadConstraints, p.Child("topologySpreadConstraints"))...)
	if s.HostUsers != nil && !*s.HostUsers {
		if s.HostNetwork {
			errs = append(errs, field.Forbidden(p.Child("hostNetwork"), "when `hostUsers` is false"))
		}
		if s.HostPID {
			errs = append(errs, field.Forbidden(p.Child("HostPID"), "when `hostUsers` is false"))
		}
		if s.HostIPC {
			errs = append(errs, field.Forbidden(p.Child("HostIPC"), "when `hostUsers` is false"))
		}
	}
	if s.ServiceAccountName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.ServiceAccountName) {
			errs = append(errs, field.Invalid(p.Child("serviceAccountName"), s.ServiceAccountName, msg))
		}
	}
	//nolint:staticcheck // the deprecated alias must stay equal to serviceAccountName
	if s.DeprecatedServiceAccount != s.ServiceAccountName {
		errs = append(errs, field.Invalid(p.Child("deprecatedServiceAccount"), s.DeprecatedServiceAccount, fmt.Sprintf("must be the same as serviceAccountName: %q", s.ServiceAccountName)))
	}
	if s.NodeName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.NodeName) {
			errs = append(errs, field.Invalid(p.Child("nodeName"), s.NodeName, msg))
		}
	}
	if d := s.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if s.Hostname != "" {
		errs = append(errs, dns1123Label(s.Hostname, p.Child("hostname"))...)
	}
	if s.Subdomain != "" {
		errs = append(errs, dns1123Label(s.Subdomain, p.Child("subdomain"))...)
	}
	errs = append(errs, validateTolerations(s.Tolerations, p.Child("tolerations"))...)
	for i, a := range s.HostAliases {
		ap := p.Child("hostAliases").Index(i)
		errs = append(errs, validation.IsValidIPForLegacyField(ap.Child("ip"), a.IP, true, nil)...)
		for j, h := range a.Hostnames {
			for _, msg := range validation.IsDNS1123Subdomain(h) {
				errs = append(errs, field.Invalid(ap.Child("hostnames").Index(j), h, msg).WithOrigin("format=k8s-long-name"))
			}
		}
	}
	if s.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.PriorityClassName) {
			errs = append(errs, field.Invalid(p.Child("priorityClassName"), s.PriorityClassName, msg))
		}
	}
	return errs
}

// validatePodCreate is what a Pod (not a template) adds on create: the
// template rules, a non-negative grace period, no projected token without a
// service account, images without surrounding blanks, no ephemeral
// containers and no node while scheduling gates remain.
func validatePodCreate(pod *corev1.Pod) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validatePodAnnotations(pod.Annotations, &pod.Spec, field.NewPath("metadata", "annotations"))
	errs = append(errs, validatePodSpec(&pod.Spec, spec, podSpecOptions{isPod: true, podName: pod.Name})...)
	if pod.Spec.ServiceAccountName == "" {
		errs = append(errs, projectedTokenErrors(pod, spec)...)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	errs = append(errs, imageWhitespace(pod, spec)...)
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return append(errs, validateSecurityAnnotationsMatch(&pod.ObjectMeta, &pod.Spec, spec)...)
}

// validatePodAnnotations: a mirror pod names its node, and the
// pod-deletion-cost annotation holds an int32 written without a sign or
// leading zeros.
func validatePodAnnotations(ann map[string]string, spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	const mirror = "kubernetes.io/config.mirror"
	const deletionCost = "controller.kubernetes.io/pod-deletion-cost"
	var errs field.ErrorList
	if v, ok := ann[mirror]; ok && spec.NodeName == "" {
		errs = append(errs, field.Invalid(p.Key(mirror), v, "must set spec.nodeName if mirror pod annotation is set"))
	}
	if v, ok := ann[deletionCost]; ok {
		valid := v != "" && (v[0] == '-' || v == "0" || (v[0] >= '1' && v[0] <= '9'))
		if valid {
			_, err := strconv.ParseInt(v, 10, 32)
			valid = err == nil
		}
		if !valid {
			errs = append(errs, field.Invalid(p.Key(deletionCost), v, "must be a 32bit integer"))
		}
	}
	return append(errs, validateSecurityAnnotations(ann, spec, p)...)
}

// requiredEnum: empty is Required, anything but the supported values
// NotSupported.
func requiredEnum(p *field.Path, v string, supported []string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	for _, s := range supported {
		if v == s {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, v, supported)}
}

func dns1123Label(v string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg).WithOrigin("format=k8s-short-name"))
	}
	return errs
}

func noBacksteps(target string, p *field.Path) field.ErrorList {
	for _, part := range strings.Split(filepath.ToSlash(target), "/") {
		if part == ".." {
			return field.ErrorList{field.Invalid(p, target, "must not contain '..'")}
		}
	}
	return nil
}

func localDescendingPath(target string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(target) {
		errs = append(errs, field.Invalid(p, target, "must be a relative path"))
	}
	return append(errs, noBacksteps(target, p)...)
}

func validateContainers(s *corev1.PodSpec, vols map[string]corev1.VolumeSource, grace *int64, p *field.Path) field.ErrorList {
	if len(s.Containers) == 0 {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range s.Containers {
		c := &s.Containers[i]
		cp := p.Index(i)
		errs = append(errs, validateContainerCommon(c, vols, s.HostUsers == nil || *s.HostUsers, cp)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		} else {
			names.Insert(c.Name)
		}
		if c.Lifecycle != nil {
			errs = append(errs, validateLifecycle(c.Lifecycle, grace, cp.Child("lifecycle"))...)
		}
		errs = append(errs, validateProbe(c.LivenessProbe, grace, cp.Child("livenessProbe"), probeLiveness)...)
		errs = append(errs, validateProbe(c.ReadinessProbe, grace, cp.Child("readinessProbe"), probeReadiness)...)
		errs = append(errs, validateProbe(c.StartupProbe, grace, cp.Child("startupProbe"), probeStartup)...)
		errs = append(errs, validateContainerRestartPolicy(c, cp)...)
	}
	return append(errs, hostPortConflicts(s.Containers, p)...)
}

func validateInitContainers(s *corev1.PodSpec, vols map[string]corev1.VolumeSource, grace *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for _, c := range s.Containers {
		names.Insert(c.Name)
	}
	for i := range s.InitContainers {
		c := &s.InitContainers[i]
		cp := p.Index(i)
		errs = append(errs, validateContainerCommon(c, vols, s.HostUsers == nil || *s.HostUsers, cp)...)
		always := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		errs = append(errs, validateContainerRestartPolicy(c, cp)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		} else if c.Name != "" {
			names.Insert(c.Name)
		}
		errs = append(errs, hostPortConflicts([]corev1.Container{*c}, p)...)
		if always {
			if c.Lifecycle != nil {
				errs = append(errs, validateLifecycle(c.Lifecycle, grace, cp.Child("lifecycle"))...)
			}
			errs = append(errs, validateProbe(c.LivenessProbe, grace, cp.Child("livenessProbe"), probeLiveness)...)
			errs = append(errs, validateProbe(c.ReadinessProbe, grace, cp.Child("readinessProbe"), probeReadiness)...)
			errs = append(errs, validateProbe(c.StartupProbe, grace, cp.Child("startupProbe"), probeStartup)...)
			continue
		}
		const notSidecar = "may not be set for init containers without restartPolicy=Always"
		if c.Lifecycle != nil {
			errs = append(errs, field.Forbidden(cp.Child("lifecycle"), notSidecar))
		}
		if c.LivenessProbe != nil {
			errs = append(errs, field.Forbidden(cp.Child("livenessProbe"), notSidecar))
		}
		if c.ReadinessProbe != nil {
			errs = append(errs, field.Forbidden(cp.Child("readinessProbe"), notSidecar))
		}
		if c.StartupProbe != nil {
			errs = append(errs, field.Forbidden(cp.Child("startupProbe"), notSidecar))
		}
	}
	return errs
}

// validateContainerRestartPolicy is a container's own restart policy and
// rules (Kubernetes' ContainerRestartRules, on by default since 1.35, with
// the RestartAllContainers action of 1.36), init containers' too.
func validateContainerRestartPolicy(c *corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch pol := c.RestartPolicy; {
	case pol == nil:
		if len(c.RestartPolicyRules) > 0 {
			errs = append(errs, field.Required(p.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
		}
		return errs
	case *pol != corev1.ContainerRestartPolicyAlways && *pol != corev1.ContainerRestartPolicyNever && *pol != corev1.ContainerRestartPolicyOnFailure:
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *pol, []string{"Always", "Never", "OnFailure"}))
	}
	if len(c.RestartPolicyRules) > 20 {
		errs = append(errs, field.TooMany(p.Child("restartPolicyRules"), len(c.RestartPolicyRules), 20))
	}
	for i, r := range c.RestartPolicyRules {
		rp := p.Child("restartPolicyRules").Index(i)
		if r.Action != corev1.ContainerRestartRuleActionRestart && r.Action != corev1.ContainerRestartRuleActionRestartAllContainers {
			errs = append(errs, field.NotSupported(rp.Child("action"), r.Action, []string{"Restart", "RestartAllContainers"}))
		}
		if r.ExitCodes == nil {
			errs = append(errs, field.Required(rp.Child("exitCodes"), "must be specified"))
			continue
		}
		if op := r.ExitCodes.Operator; op != corev1.ContainerRestartRuleOnExitCodesOpIn && op != corev1.ContainerRestartRuleOnExitCodesOpNotIn {
			errs = append(errs, field.NotSupported(rp.Child("exitCodes", "operator"), op, []string{"In", "NotIn"}))
		}
		if len(r.ExitCodes.Values) > 255 {
			errs = append(errs, field.TooMany(rp.Child("exitCodes", "values"), len(r.ExitCodes.Values), 255))
		}
	}
	return errs
}

// hostPortConflicts: a protocol, host IP and host port taken twice. Note
// the path: kube-apiserver indexes the containers of the list it is given,
// so an init container's conflict names index 0.
func hostPortConflicts(cs []corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range cs {
		for j, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(p.Index(i).Child("ports").Index(j).Child("hostPort"), key))
			}
			seen.Insert(key)
		}
	}
	return errs
}

func validateContainerCommon(c *corev1.Container, vols map[string]corev1.VolumeSource, hostUsers bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, dns1123Label(c.Name, p.Child("name"))...)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	errs = append(errs, requiredEnum(p.Child("terminationMessagePolicy"), string(c.TerminationMessagePolicy), []string{"File", "FallbackToLogsOnError"})...)
	errs = append(errs, validateContainerPorts(c.Ports, p.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, p.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, vols, p.Child("volumeMounts"))...)
	errs = append(errs, requiredEnum(p.Child("imagePullPolicy"), string(c.ImagePullPolicy), []string{"Always", "IfNotPresent", "Never"})...)
	errs = append(errs, validateResources(&c.Resources, p.Child("resources"))...)
	return append(errs, validateSecurityContext(c.SecurityContext, hostUsers, p.Child("securityContext"))...)
}

func validateContainerPorts(ports []corev1.ContainerPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		pp := p.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) > 0 {
				for _, msg := range msgs {
					errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
				}
			} else if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			} else {
				names.Insert(port.Name)
			}
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(pp.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		errs = append(errs, requiredEnum(pp.Child("protocol"), string(port.Protocol), []string{"SCTP", "TCP", "UDP"})...)
	}
	return errs
}

var (
	envFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
		"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
	// downwardFieldLabels are the pod fields the downward API converts.
	downwardFieldLabels = sets.New("metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace",
		"metadata.uid", "spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName", "spec.schedulerName",
		"status.phase", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
	resourceFieldPaths = sets.New("limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu",
		"requests.memory", "requests.ephemeral-storage")
	cpuDivisors    = sets.New("1m", "1")
	memoryDivisors = sets.New("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
)

func validateEnv(vars []corev1.EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		ep := p.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Name) {
				errs = append(errs, field.Invalid(ep.Child("name"), ev.Name, msg))
			}
		}
		errs = append(errs, validateEnvValueFrom(ev, ep.Child("valueFrom"))...)
	}
	return errs
}

func validateEnvValueFrom(ev corev1.EnvVar, p *field.Path) field.ErrorList {
	vf := ev.ValueFrom
	if vf == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if vf.FieldRef != nil {
		n++
		errs = append(errs, validateObjectFieldSelector(vf.FieldRef, envFieldPaths, p.Child("fieldRef"))...)
	}
	if vf.ResourceFieldRef != nil {
		n++
		errs = append(errs, validateResourceFieldSelector(vf.ResourceFieldRef, p.Child("resourceFieldRef"), false)...)
	}
	if vf.ConfigMapKeyRef != nil {
		n++
		errs = append(errs, validateKeySelector(vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key, p.Child("configMapKeyRef"))...)
	}
	if vf.SecretKeyRef != nil {
		n++
		errs = append(errs, validateKeySelector(vf.SecretKeyRef.Name, vf.SecretKeyRef.Key, p.Child("secretKeyRef"))...)
	}
	if vf.FileKeyRef != nil {
		n++
		errs = append(errs, validateFileKeySelector(vf.FileKeyRef, p.Child("fileKeyRef"))...)
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(p, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`"))
	case ev.Value != "":
		errs = append(errs, field.Invalid(p, "", "may not be specified when `value` is not empty"))
	case n > 1:
		errs = append(errs, field.Invalid(p, "", "may not have more than one field specified at a time"))
	}
	return errs
}

// splitSubscript splits "metadata.labels['app']" into its path and key
// (which may be empty); a path without a subscript is not split.
func splitSubscript(fp string) (string, string, bool) {
	if !strings.HasSuffix(fp, "']") {
		return fp, "", false
	}
	path, key, ok := strings.Cut(strings.TrimSuffix(fp, "']"), "['")
	if !ok || path == "" {
		return fp, "", false
	}
	return path, key, true
}

// validateObjectFieldSelector is a downward API field reference: apiVersion
// v1, a field the downward API converts, a label or annotation key, or one
// of the fields allowed where it is used (an env var's, a volume file's).
func validateObjectFieldSelector(fs *corev1.ObjectFieldSelector, allowed sets.Set[string], p *field.Path) field.ErrorList {
	if fs.APIVersion == "" {
		return field.ErrorList{field.Required(p.Child("apiVersion"), "")}
	}
	if fs.FieldPath == "" {
		return field.ErrorList{field.Required(p.Child("fieldPath"), "")}
	}
	var convErr string
	fp := fs.FieldPath
	switch path, _, sub := splitSubscript(fs.FieldPath); {
	case fs.APIVersion != "v1":
		convErr = "unsupported pod version: " + fs.APIVersion
	case sub && path != "metadata.annotations" && path != "metadata.labels":
		convErr = "field label does not support subscript: " + fs.FieldPath
	case sub:
	case fs.FieldPath == "spec.host":
		fp = "spec.nodeName"
	case !downwardFieldLabels.Has(fs.FieldPath):
		convErr = "field label not supported: " + fs.FieldPath
	}
	if convErr != "" {
		return field.ErrorList{field.Invalid(p.Child("fieldPath"), fs.FieldPath, "error converting fieldPath: "+convErr)}
	}
	var errs field.ErrorList
	if path, key, ok := splitSubscript(fp); ok {
		if path == "metadata.annotations" {
			key = strings.ToLower(key)
		}
		for _, msg := range validation.IsQualifiedName(key) {
			errs = append(errs, field.Invalid(p, key, msg))
		}
	} else if !allowed.Has(fp) {
		errs = append(errs, field.NotSupported(p.Child("fieldPath"), fp, sets.List(allowed)))
	}
	return errs
}

// validateResourceFieldSelector is a downward API resource reference; a
// volume file's must name its container (and then its resource is checked
// only when the container is named).
func validateResourceFieldSelector(fs *corev1.ResourceFieldSelector, p *field.Path, volume bool) field.ErrorList {
	var errs field.ErrorList
	switch {
	case volume && fs.ContainerName == "":
		errs = append(errs, field.Required(p.Child("containerName"), ""))
	case fs.Resource == "":
		errs = append(errs, field.Required(p.Child("resource"), ""))
	case !resourceFieldPaths.Has(fs.Resource) && !strings.HasPrefix(fs.Resource, "limits.hugepages-") && !strings.HasPrefix(fs.Resource, "requests.hugepages-"):
		errs = append(errs, field.NotSupported(p.Child("resource"), fs.Resource, sets.List(resourceFieldPaths)))
	}
	if fs.Divisor.IsZero() {
		return errs
	}
	d := fs.Divisor.String()
	switch fs.Resource {
	case "limits.cpu", "requests.cpu":
		if !cpuDivisors.Has(d) {
			errs = append(errs, field.Invalid(p.Child("divisor"), fs.Resource, "only divisor's values 1m and 1 are supported with the cpu resource"))
		}
	case "limits.memory", "requests.memory":
		if !memoryDivisors.Has(d) {
			errs = append(errs, field.Invalid(p.Child("divisor"), fs.Resource, "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource"))
		}
	case "limits.ephemeral-storage", "requests.ephemeral-storage":
		if !memoryDivisors.Has(d) {
			errs = append(errs, field.Invalid(p.Child("divisor"), fs.Resource, "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the local ephemeral storage resource"))
		}
	}
	if (strings.HasPrefix(fs.Resource, "requests.hugepages-") || strings.HasPrefix(fs.Resource, "limits.hugepages-")) && !memoryDivisors.Has(d) {
		errs = append(errs, field.Invalid(p.Child("divisor"), fs.Resource, "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the hugepages resource"))
	}
	return errs
}

// validateKeySelector is a ConfigMap's or Secret's key reference.
func validateKeySelector(name, key string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p.Child("name"), name, msg))
	}
	if key == "" {
		return append(errs, field.Required(p.Child("key"), ""))
	}
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(p.Child("key"), key, msg))
	}
	return errs
}

func validateFileKeySelector(s *corev1.FileKeySelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.VolumeName == "" {
		errs = append(errs, field.Required(p.Child("volumeName"), ""))
	} else {
		errs = append(errs, dns1123Label(s.VolumeName, p.Child("volumeName"))...)
	}
	if s.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	} else {
		errs = append(errs, localDescendingPath(s.Path, p.Child("path"))...)
	}
	if s.Key == "" {
		errs = append(errs, field.Required(p.Child("key"), ""))
	} else {
		for _, msg := range validation.IsRelaxedEnvVarName(s.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), s.Key, msg))
		}
	}
	return errs
}

func validateEnvFrom(srcs []corev1.EnvFromSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range srcs {
		ep := p.Index(i)
		if ev.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Prefix) {
				errs = append(errs, field.Invalid(ep.Child("prefix"), ev.Prefix, msg))
			}
		}
		n := 0
		if ev.ConfigMapRef != nil {
			n++
			errs = append(errs, validateEnvSourceName(ev.ConfigMapRef.Name, ep.Child("configMapRef", "name"))...)
		}
		if ev.SecretRef != nil {
			n++
			errs = append(errs, validateEnvSourceName(ev.SecretRef.Name, ep.Child("secretRef", "name"))...)
		}
		// As kube-apiserver, these two name the list, not the entry.
		if n == 0 {
			errs = append(errs, field.Invalid(p, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			errs = append(errs, field.Invalid(p, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

// validateEnvSourceName is a ConfigMap's or Secret's name as a prefix may
// be (a trailing dash allowed).
func validateEnvSourceName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	masked := name
	if len(masked) > 1 && strings.HasSuffix(masked, "-") {
		masked = masked[:len(masked)-1] + "a"
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(masked) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func validateVolumeMounts(mounts []corev1.VolumeMount, vols map[string]corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		mp := p.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		}
		if _, ok := vols[m.Name]; !ok {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		}
		if paths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(m.MountPath)
		// As kube-apiserver, the sub-path checks name the list's path.
		if m.SubPath != "" {
			errs = append(errs, localDescendingPath(m.SubPath, p.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, localDescendingPath(m.SubPathExpr, p.Child("subPathExpr"))...)
		}
	}
	return errs
}

// validateResources checks the limits, then the requests (each list in
// name order; kube-apiserver walks the maps in Go's random order, which
// matters only when several entries are wrong).
func validateResources(r *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	hugePages, cpuOrMemory := false, false
	lp, rp := p.Child("limits"), p.Child("requests")
	for _, name := range sortedResourceNames(r.Limits) {
		q := r.Limits[name]
		fp := lp.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, fp)...)
		errs = append(errs, validateQuantity(name, q, fp)...)
		if isHugePages(name) {
			hugePages = true
			errs = append(errs, validateHugePages(name, q, fp)...)
		}
		cpuOrMemory = cpuOrMemory || name == corev1.ResourceCPU || name == corev1.ResourceMemory
	}
	for _, name := range sortedResourceNames(r.Requests) {
		q := r.Requests[name]
		fp := rp.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, fp)...)
		errs = append(errs, validateQuantity(name, q, fp)...)
		overcommit := !strings.Contains(string(name), "/") || strings.Contains(string(name), "kubernetes.io/")
		overcommit = overcommit && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
		if limit, ok := r.Limits[name]; ok {
			if q.Cmp(limit) != 0 && !overcommit {
				errs = append(errs, field.Invalid(rp, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
			} else if q.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(rp, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
		} else if !overcommit {
			errs = append(errs, field.Required(lp, "Limit must be set for non overcommitable resources"))
		}
		if isHugePages(name) {
			hugePages = true
			errs = append(errs, validateHugePages(name, q, fp)...)
		}
		cpuOrMemory = cpuOrMemory || name == corev1.ResourceCPU || name == corev1.ResourceMemory
	}
	if hugePages && !cpuOrMemory {
		errs = append(errs, field.Forbidden(p, "HugePages require cpu or memory"))
	}
	return errs
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// validateHugePages: a whole number of pages of the size the name gives.
func validateHugePages(name corev1.ResourceName, q resource.Quantity, p *field.Path) field.ErrorList {
	size, err := resource.ParseQuantity(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix))
	if err == nil && size.Sign() > 0 && size.MilliValue()%1000 == 0 && q.Value()%size.Value() == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(p, q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name))}
}

func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

var standardResourceNames = sets.New("cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
	"requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "resourcequotas",
	"services", "replicationcontrollers", "secrets", "persistentvolumeclaims", "configmaps", "requests.storage",
	"services.nodeports", "services.loadbalancers", "storage")

func validateContainerResourceName(name corev1.ResourceName, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	s := string(name)
	hugePages := strings.HasPrefix(s, corev1.ResourceHugePagesPrefix)
	if !strings.Contains(s, "/") {
		if !standardResourceNames.Has(s) && !hugePages && !strings.HasPrefix(s, "requests.hugepages-") {
			errs = append(errs, field.Invalid(p, name, "must be a standard resource type or fully qualified"))
		}
		if s != "cpu" && s != "memory" && s != "ephemeral-storage" && !hugePages {
			errs = append(errs, field.Invalid(p, name, "must be a standard resource for containers"))
		}
		return errs
	}
	if !strings.Contains(s, "kubernetes.io/") && !isExtendedResourceName(s) {
		return field.ErrorList{field.Invalid(p, name, "doesn't follow extended resource name standard")}
	}
	return nil
}

// isExtendedResourceName: a domain-qualified name outside kubernetes.io
// that stays a qualified name as a quota's "requests." name.
func isExtendedResourceName(s string) bool {
	if !strings.Contains(s, "/") || strings.Contains(s, "kubernetes.io/") || strings.HasPrefix(s, "requests.") {
		return false
	}
	return len(validation.IsQualifiedName("requests."+s)) == 0
}

func validateQuantity(name corev1.ResourceName, q resource.Quantity, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
	}
	if isExtendedResourceName(string(name)) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(p, q, "must be an integer"))
	}
	return errs
}

type probeKind int

const (
	probeLiveness probeKind = iota
	probeReadiness
	probeStartup
)

func validateProbe(pr *corev1.Probe, grace *int64, p *field.Path, kind probeKind) field.ErrorList {
	if pr == nil {
		return nil
	}
	errs := validateHandler(pr.Exec, pr.HTTPGet, pr.TCPSocket, pr.GRPC, nil, grace, p)
	for _, f := range []struct {
		name string
		v    int32
	}{{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds},
		{"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold}} {
		if f.v < 0 {
			errs = append(errs, field.Invalid(p.Child(f.name), int64(f.v), "must be greater than or equal to 0"))
		}
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	switch kind {
	case probeLiveness, probeStartup:
		if pr.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
		}
	case probeReadiness:
		if pr.TerminationGracePeriodSeconds != nil {
			errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), pr.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
	}
	return errs
}

func validateLifecycle(lc *corev1.Lifecycle, grace *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, h := range []struct {
		name string
		h    *corev1.LifecycleHandler
	}{{"postStart", lc.PostStart}, {"preStop", lc.PreStop}} {
		if h.h != nil {
			errs = append(errs, validateHandler(h.h.Exec, h.h.HTTPGet, h.h.TCPSocket, nil, h.h.Sleep, grace, p.Child(h.name))...)
		}
	}
	return errs
}

// validateHandler: exactly one action, each checked.
func validateHandler(exec *corev1.ExecAction, get *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, grpc *corev1.GRPCAction,
	sleep *corev1.SleepAction, grace *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	one := func(set bool, name string, check func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(p.Child(name), "may not specify more than 1 handler type"))
			return
		}
		n++
		errs = append(errs, check(p.Child(name))...)
	}
	one(exec != nil, "exec", func(fp *field.Path) field.ErrorList {
		if len(exec.Command) == 0 {
			return field.ErrorList{field.Required(fp.Child("command"), "")}
		}
		return nil
	})
	one(get != nil, "httpGet", func(fp *field.Path) field.ErrorList {
		var errs field.ErrorList
		if get.Path == "" {
			errs = append(errs, field.Required(fp.Child("path"), ""))
		}
		errs = append(errs, validatePortNumOrName(get.Port, fp.Child("port"))...)
		if get.Scheme != corev1.URISchemeHTTP && get.Scheme != corev1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(fp.Child("scheme"), get.Scheme, []string{"HTTP", "HTTPS"}))
		}
		for _, h := range get.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(h.Name) {
				errs = append(errs, field.Invalid(fp.Child("httpHeaders"), h.Name, msg))
			}
		}
		return errs
	})
	one(tcp != nil, "tcpSocket", func(fp *field.Path) field.ErrorList { return validatePortNumOrName(tcp.Port, fp.Child("port")) })
	one(grpc != nil, "grpc", func(fp *field.Path) field.ErrorList {
		return validatePortNumOrName(intstr.FromInt32(grpc.Port), fp.Child("port"))
	})
	one(sleep != nil, "sleep", func(fp *field.Path) field.ErrorList {
		if grace != nil && (sleep.Seconds < 0 || sleep.Seconds > *grace) {
			return field.ErrorList{field.Invalid(fp, sleep.Seconds, fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *grace))}
		}
		return nil
	})
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a handler type"))
	}
	return errs
}

func validatePortNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Type == intstr.Int {
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(p, port.IntValue(), msg))
		}
		return errs
	}
	for _, msg := range validation.IsValidPortName(port.StrVal) {
		errs = append(errs, field.Invalid(p, port.StrVal, msg))
	}
	return errs
}

func validateDNSConfig(c *corev1.PodDNSConfig, policy corev1.DNSPolicy, p *field.Path) field.ErrorList {
	if policy == corev1.DNSNone {
		if c == nil {
			return field.ErrorList{field.Required(p, "must provide `dnsConfig` when `dnsPolicy` is None")}
		}
		if len(c.Nameservers) == 0 {
			return field.ErrorList{field.Required(p.Child("nameservers"), "must provide at least one DNS nameserver when `dnsPolicy` is None")}
		}
	}
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	if len(c.Nameservers) > 3 {
		errs = append(errs, field.Invalid(p.Child("nameservers"), c.Nameservers, "must not have more than 3 nameservers"))
	}
	for i, ns := range c.Nameservers {
		errs = append(errs, validation.IsValidIPForLegacyField(p.Child("nameservers").Index(i), ns, true, nil)...)
	}
	if len(c.Searches) > 32 {
		errs = append(errs, field.Invalid(p.Child("searches"), c.Searches, "must not have more than 32 search paths"))
	}
	if len(strings.Join(c.Searches, " ")) > 2048 {
		errs = append(errs, field.Invalid(p.Child("searches"), c.Searches, "must not have more than 2048 characters (including spaces) in the search list"))
	}
	for i, s := range c.Searches {
		if s == "." {
			continue
		}
		s = strings.TrimSuffix(s, ".")
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(s) {
			errs = append(errs, field.Invalid(p.Child("searches").Index(i), s, msg))
		}
	}
	for i, o := range c.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(p.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

func validateTolerations(ts []corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		tp := p.Index(i)
		if t.Key != "" {
			errs = append(errs, metavalidation.ValidateLabelName(t.Key, tp.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(tp.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(tp.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
				errs = append(errs, field.Invalid(tp.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(tp.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		case "Lt", "Gt":
			errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator, []string{"Equal", "Exists", "Lt", "Gt"}))
		default:
			errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator, []string{"Equal", "Exists"}))
		}
		if t.Effect != "" {
			switch t.Effect {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			default:
				errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
			}
		}
	}
	return errs
}

func validatePodSecurityContext(sc *corev1.PodSecurityContext, p *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			errs = append(errs, field.Invalid(p.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	if sc.RunAsUser != nil {
		for _, msg := range validation.IsValidUserID(*sc.RunAsUser) {
			errs = append(errs, field.Invalid(p.Child("runAsUser"), *sc.RunAsUser, msg))
		}
	}
	if sc.RunAsGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.RunAsGroup) {
			errs = append(errs, field.Invalid(p.Child("runAsGroup"), *sc.RunAsGroup, msg))
		}
	}
	for i, g := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(g) {
			errs = append(errs, field.Invalid(p.Child("supplementalGroups").Index(i), g, msg))
		}
	}
	if pol := sc.FSGroupChangePolicy; pol != nil && *pol != corev1.FSGroupChangeAlways && *pol != corev1.FSGroupChangeOnRootMismatch {
		errs = append(errs, field.NotSupported(p.Child("fsGroupChangePolicy"), pol, []string{"Always", "OnRootMismatch"}))
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, p.Child("seccompProfile"))...)
	return append(errs, validateAppArmorProfile(sc.AppArmorProfile, p.Child("appArmorProfile"))...)
}

func validateSeccompProfile(sp *corev1.SeccompProfile, p *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	switch sp.Type {
	case corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
	case "":
		errs = append(errs, field.Required(p.Child("type"), "type is required when seccompProfile is set"))
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), sp.Type, []string{"Localhost", "RuntimeDefault", "Unconfined"}))
	}
	if sp.Type == corev1.SeccompProfileTypeLocalhost {
		if sp.LocalhostProfile == nil {
			errs = append(errs, field.Required(p.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
		} else {
			errs = append(errs, localDescendingPath(*sp.LocalhostProfile, p.Child("localhostProfile"))...)
		}
	} else if sp.LocalhostProfile != nil {
		errs = append(errs, field.Invalid(p.Child("localhostProfile"), internalSeccompProfile(sp), "can only be set when seccomp type is Localhost"))
	}
	return errs
}

func validateSecurityContext(sc *corev1.SecurityContext, hostUsers bool, p *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	if sc.Privileged != nil && *sc.Privileged && !AllowPrivileged {
		errs = append(errs, field.Forbidden(p.Child("privileged"), "disallowed by cluster policy"))
	}
	if sc.RunAsUser != nil {
		for _, msg := range validation.IsValidUserID(*sc.RunAsUser) {
			errs = append(errs, field.Invalid(p.Child("runAsUser"), *sc.RunAsUser, msg))
		}
	}
	if sc.RunAsGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.RunAsGroup) {
			errs = append(errs, field.Invalid(p.Child("runAsGroup"), *sc.RunAsGroup, msg))
		}
	}
	if pm := sc.ProcMount; pm != nil {
		switch *pm {
		case corev1.DefaultProcMount, corev1.UnmaskedProcMount:
			if hostUsers && *pm == corev1.UnmaskedProcMount {
				errs = append(errs, field.Invalid(p.Child("procMount"), pm, "`hostUsers` must be false to use `Unmasked`"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("procMount"), *pm, []string{"Default", "Unmasked"}))
		}
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, p.Child("seccompProfile"))...)
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, field.Invalid(p, internalSecurityContext(sc), "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if c == "CAP_SYS_ADMIN" {
					errs = append(errs, field.Invalid(p, internalSecurityContext(sc), "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
	return append(errs, validateAppArmorProfile(sc.AppArmorProfile, p.Child("appArmorProfile"))...)
}

// kube-apiserver renders a whole security context or seccomp profile in an
// error as its internal type (Go field names, no omitted fields); these
// mirror those types so that svcnet's errors read the same.
type (
	internalCapabilities struct{ Add, Drop []corev1.Capability }
	internalSELinux      struct{ User, Role, Type, Level string }
	internalWindows      struct {
		GMSACredentialSpecName, GMSACredentialSpec, RunAsUserName *string
		HostProcess                                               *bool
	}
	internalProfile struct {
		Type             string
		LocalhostProfile *string
	}
	internalSecurity struct {
		Capabilities                                                   *internalCapabilities
		Privileged                                                     *bool
		SELinuxOptions                                                 *internalSELinux
		WindowsOptions                                                 *internalWindows
		RunAsUser, RunAsGroup                                          *int64
		RunAsNonRoot, ReadOnlyRootFilesystem, AllowPrivilegeEscalation *bool
		ProcMount                                                      *corev1.ProcMountType
		SeccompProfile, AppArmorProfile                                *internalProfile
	}
)

func internalSeccompProfile(sp *corev1.SeccompProfile) *internalProfile {
	if sp == nil {
		return nil
	}
	return &internalProfile{Type: string(sp.Type), LocalhostProfile: sp.LocalhostProfile}
}

func internalSecurityContext(sc *corev1.SecurityContext) *internalSecurity {
	out := &internalSecurity{Privileged: sc.Privileged, RunAsUser: sc.RunAsUser, RunAsGroup: sc.RunAsGroup,
		RunAsNonRoot: sc.RunAsNonRoot, ReadOnlyRootFilesystem: sc.ReadOnlyRootFilesystem,
		AllowPrivilegeEscalation: sc.AllowPrivilegeEscalation, ProcMount: sc.ProcMount,
		SeccompProfile: internalSeccompProfile(sc.SeccompProfile)}
	if c := sc.Capabilities; c != nil {
		out.Capabilities = &internalCapabilities{Add: c.Add, Drop: c.Drop}
	}
	if o := sc.SELinuxOptions; o != nil {
		out.SELinuxOptions = &internalSELinux{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
	}
	if w := sc.WindowsOptions; w != nil {
		out.WindowsOptions = &internalWindows{GMSACredentialSpecName: w.GMSACredentialSpecName, GMSACredentialSpec: w.GMSACredentialSpec,
			RunAsUserName: w.RunAsUserName, HostProcess: w.HostProcess}
	}
	if a := sc.AppArmorProfile; a != nil {
		out.AppArmorProfile = &internalProfile{Type: string(a.Type), LocalhostProfile: a.LocalhostProfile}
	}
	return out
}

// podUpdatableFields are the fields of a Pod's spec an update may change.
var podUpdatableFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// validatePodUpdate is kube-apiserver's update of a Pod: the create rules
// on the new pod (no ephemeral containers check: those come through their
// own subresource), then what may change: images, a shorter active
// deadline, added tolerations, removed scheduling gates, and for a gated
// pod added node selectors. Anything else is refused with the changed spec
// as a diff (of the v1 types; kube-apiserver diffs its internal types, so
// the text after the first line reads differently).
func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	spec := field.NewPath("spec")
	ann := field.NewPath("metadata", "annotations")
	errs := validatePodAnnotations(pod.Annotations, &pod.Spec, ann)
	errs = append(errs, validatePodSpec(&pod.Spec, spec, podSpecOptions{isPod: true, podName: pod.Name}.withOldSpec(&old.Spec))...)
	if pod.Spec.ServiceAccountName == "" {
		errs = append(errs, projectedTokenErrors(pod, spec)...)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	errs = append(errs, imageWhitespace(pod, spec)...)
	errs = append(errs, validatePodAnnotationUpdates(pod.Annotations, old.Annotations, ann)...)
	errs = append(errs, validatePodAnnotations(pod.Annotations, &pod.Spec, ann)...)
	for _, l := range []struct {
		name     string
		cur, was []corev1.Container
	}{{"containers", pod.Spec.Containers, old.Spec.Containers}, {"initContainers", pod.Spec.InitContainers, old.Spec.InitContainers}} {
		lp := spec.Child(l.name)
		if len(l.cur) != len(l.was) {
			return append(errs, field.Forbidden(lp, "pod updates may not add or remove containers"))
		}
		for i, c := range l.cur {
			if c.Image == "" {
				errs = append(errs, field.Required(lp.Index(i).Child("image"), ""))
			}
			if len(strings.TrimSpace(c.Image)) != len(c.Image) {
				errs = append(errs, field.Invalid(lp.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
			}
		}
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil {
		if *d < 0 || *d > math.MaxInt32 {
			return append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if o := old.Spec.ActiveDeadlineSeconds; o != nil && *o < *d {
			return append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *d, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), pod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}
	errs = append(errs, validateAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, spec.Child("tolerations"))...)
	errs = append(errs, validateDeletedSchedulingGates(pod.Spec.SchedulingGates, old.Spec.SchedulingGates, spec.Child("schedulingGates"))...)
	if equality.Semantic.DeepEqual(pod.Spec, old.Spec) {
		return errs
	}
	munged := pod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	munged.SchedulingGates = old.Spec.SchedulingGates
	munged.Tolerations = old.Spec.Tolerations
	if og := old.Spec.TerminationGracePeriodSeconds; og != nil && *og < 0 {
		if g := munged.TerminationGracePeriodSeconds; g != nil && *g == 1 {
			munged.TerminationGracePeriodSeconds = og
		}
	}
	if len(old.Spec.SchedulingGates) > 0 && !equality.Semantic.DeepEqual(munged.NodeSelector, old.Spec.NodeSelector) {
		for k, v := range old.Spec.NodeSelector {
			if nv, ok := munged.NodeSelector[k]; !ok || nv != v {
				errs = append(errs, field.Invalid(spec.Child("nodeSelector"), munged.NodeSelector, "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
				break
			}
		}
		munged.NodeSelector = old.Spec.NodeSelector
	}
	if len(old.Spec.SchedulingGates) > 0 {
		// A gated pod's node affinity may change as kube-apiserver allows
		// (svcnet does not check the narrowing: its scheduler is the
		// node agent's nodeName).
		var na *corev1.NodeAffinity
		if old.Spec.Affinity != nil {
			na = old.Spec.Affinity.NodeAffinity
		}
		switch {
		case munged.Affinity == nil && na != nil:
			munged.Affinity = &corev1.Affinity{NodeAffinity: na}
		case munged.Affinity != nil && old.Spec.Affinity == nil && munged.Affinity.PodAffinity == nil && munged.Affinity.PodAntiAffinity == nil:
			munged.Affinity = nil
		case munged.Affinity != nil:
			munged.Affinity.NodeAffinity = na
		}
	}
	if !equality.Semantic.DeepEqual(*munged, old.Spec) {
		errs = append(errs, field.Forbidden(spec, fmt.Sprintf("pod updates may not change fields other than %s\n%v",
			strings.Join(podUpdatableFields, ","), diff.Diff(old.Spec, *munged))))
	}
	return errs
}

func projectedTokenErrors(pod *corev1.Pod, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for j, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				errs = append(errs, field.Forbidden(spec.Child("volumes").Index(i).Child("projected", "sources").Index(j).Child("serviceAccountToken"),
					"must not be specified when serviceAccountName is not set"))
			}
		}
	}
	return errs
}

func imageWhitespace(pod *corev1.Pod, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		cs   []corev1.Container
	}{{"containers", pod.Spec.Containers}, {"initContainers", pod.Spec.InitContainers}} {
		for i, c := range list.cs {
			if len(c.Image) != len(strings.TrimSpace(c.Image)) {
				errs = append(errs, field.Invalid(spec.Child(list.name).Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
			}
		}
	}
	return errs
}

// validatePodAnnotationUpdates: the mirror-pod annotation and the
// deprecated AppArmor ones may not be added, changed or removed.
func validatePodAnnotationUpdates(cur, old map[string]string, p *field.Path) field.ErrorList {
	const mirror = "kubernetes.io/config.mirror"
	const appArmor = "container.apparmor.security.beta.kubernetes.io/"
	var errs field.ErrorList
	for _, k := range sortedKeys(old) {
		if v, ok := cur[k]; ok && v == old[k] {
			continue
		}
		if strings.HasPrefix(k, appArmor) {
			errs = append(errs, field.Forbidden(p.Key(k), "may not remove or update AppArmor annotations"))
		}
		if k == mirror {
			errs = append(errs, field.Forbidden(p.Key(k), "may not remove or update mirror pod annotation"))
		}
	}
	for _, k := range sortedKeys(cur) {
		if _, ok := old[k]; ok {
			continue
		}
		if strings.HasPrefix(k, appArmor) {
			errs = append(errs, field.Forbidden(p.Key(k), "may not add AppArmor annotations"))
		}
		if k == mirror {
			errs = append(errs, field.Forbidden(p.Key(k), "may not add mirror pod annotation"))
		}
	}
	return errs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// validateAddedTolerations: existing tolerations stay (their
// tolerationSeconds may change); the new list is checked again.
func validateAddedTolerations(cur, old []corev1.Toleration, p *field.Path) field.ErrorList {
	for _, o := range old {
		found := false
		for _, t := range cur {
			o.TolerationSeconds = t.TolerationSeconds
			if reflect.DeepEqual(o, t) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(p, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return validateTolerations(cur, p)
}

// validateDeletedSchedulingGates: gates may only go. (kube-apiserver
// reports new ones in map order; svcnet in list order.)
func validateDeletedSchedulingGates(cur, old []corev1.PodSchedulingGate, p *field.Path) field.ErrorList {
	was := sets.New[string]()
	for _, g := range old {
		was.Insert(g.Name)
	}
	last := map[string]int{}
	for i, g := range cur {
		last[g.Name] = i
	}
	var errs field.ErrorList
	for i, g := range cur {
		if was.Has(g.Name) || last[g.Name] != i {
			continue
		}
		errs = append(errs, field.Forbidden(p.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
	}
	return errs
}

func validateAffinity(a *corev1.Affinity, p *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		np := p.Child("nodeAffinity")
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			tp := np.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			if len(req.NodeSelectorTerms) == 0 {
				errs = append(errs, field.Required(tp, "must have at least one node selector term"))
			}
			for i, t := range req.NodeSelectorTerms {
				errs = append(errs, validateNodeSelectorTerm(t, false, tp.Index(i))...)
			}
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			tp := np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if t.Weight <= 0 || t.Weight > 100 {
				errs = append(errs, field.Invalid(tp.Child("weight"), t.Weight, "must be in the range 1-100"))
			}
			errs = append(errs, validateNodeSelectorTerm(t.Preference, true, tp.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAntiAffinity"))...)
	}
	return errs
}

func validateNodeSelectorTerm(t corev1.NodeSelectorTerm, allowBadValues bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, r := range t.MatchExpressions {
		rp := p.Child("matchExpressions").Index(j)
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(r.Values) == 0 {
				errs = append(errs, field.Required(rp.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				errs = append(errs, field.Forbidden(rp.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			if len(r.Values) != 1 {
				errs = append(errs, field.Required(rp.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
			}
		default:
			errs = append(errs, field.Invalid(rp.Child("operator"), r.Operator, "not a valid selector operator"))
		}
		errs = append(errs, metavalidation.ValidateLabelName(r.Key, rp.Child("key"))...)
		if !allowBadValues {
			for k, v := range r.Values {
				for _, msg := range validation.IsValidLabelValue(v) {
					errs = append(errs, field.Invalid(rp.Child("values").Index(k), v, msg))
				}
			}
		}
	}
	for j, r := range t.MatchFields {
		rp := p.Child("matchFields").Index(j)
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(r.Values) != 1 {
				errs = append(errs, field.Required(rp.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
			}
		default:
			errs = append(errs, field.Invalid(rp.Child("operator"), r.Operator, "not a valid selector operator"))
		}
		if r.Key != "metadata.name" {
			errs = append(errs, field.Invalid(rp.Child("key"), r.Key, "not a valid field selector key"))
			continue
		}
		for k, v := range r.Values {
			for _, msg := range validation.IsDNS1123Subdomain(v) {
				errs = append(errs, field.Invalid(rp.Child("values").Index(k), v, msg))
			}
		}
	}
	return errs
}

func validatePodAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range required {
		errs = append(errs, validatePodAffinityTerm(t, p.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i, t := range preferred {
		tp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if t.Weight <= 0 || t.Weight > 100 {
			errs = append(errs, field.Invalid(tp.Child("weight"), t.Weight, "must be in the range 1-100"))
		}
		errs = append(errs, validatePodAffinityTerm(t.PodAffinityTerm, tp.Child("podAffinityTerm"))...)
	}
	return errs
}

func validatePodAffinityTerm(t corev1.PodAffinityTerm, p *field.Path) field.ErrorList {
	opts := metavalidation.LabelSelectorValidationOptions{}
	errs := metavalidation.ValidateLabelSelector(t.LabelSelector, opts, p.Child("labelSelector"))
	errs = append(errs, metavalidation.ValidateLabelSelector(t.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	for _, ns := range t.Namespaces {
		// kube-apiserver names the list "namespace".
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(p.Child("namespace"), ns, msg))
		}
	}
	errs = append(errs, validateMatchLabelKeys(p, t.MatchLabelKeys, t.MismatchLabelKeys, t.LabelSelector)...)
	if t.TopologyKey == "" {
		errs = append(errs, field.Required(p.Child("topologyKey"), "can not be empty"))
	}
	return append(errs, metavalidation.ValidateLabelName(t.TopologyKey, p.Child("topologyKey"))...)
}

// validateMatchLabelKeys: label names, only with a selector, not already
// in the selector (after a Pod's create merged them into it: a key the
// user also wrote in the selector appears twice), not in both lists. As
// kube-apiserver, the repeat is reported at p[i].
func validateMatchLabelKeys(p *field.Path, match, mismatch []string, sel *metav1.LabelSelector) field.ErrorList {
	var errs field.ErrorList
	for _, l := range []struct {
		name string
		keys []string
	}{{"matchLabelKeys", match}, {"mismatchLabelKeys", mismatch}} {
		if len(l.keys) == 0 {
			continue
		}
		if sel == nil {
			errs = append(errs, field.Forbidden(p.Child(l.name), "must not be specified when labelSelector is not set"))
			continue
		}
		for i, k := range l.keys {
			errs = append(errs, metavalidation.ValidateLabelName(k, p.Child(l.name).Index(i))...)
		}
	}
	if sel != nil {
		index := map[string]int{}
		for i, k := range match {
			index[k] = i
		}
		seen := sets.New[string]()
		for k := range sel.MatchLabels {
			seen.Insert(k)
		}
		for _, e := range sel.MatchExpressions {
			if i, ok := index[e.Key]; ok && seen.Has(e.Key) {
				errs = append(errs, field.Invalid(p.Index(i), e.Key, "exists in both matchLabelKeys and labelSelector"))
			}
			seen.Insert(e.Key)
		}
	}
	mis := sets.New(mismatch...)
	for i, k := range match {
		if mis.Has(k) {
			errs = append(errs, field.Invalid(p.Child("matchLabelKeys").Index(i), k, "exists in both matchLabelKeys and mismatchLabelKeys"))
		}
	}
	return errs
}

func validateTopologySpread(cs []corev1.TopologySpreadConstraint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range cs {
		cp := p.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(cp.Child("maxSkew"), int64(c.MaxSkew), "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(cp.Child("topologyKey"), "can not be empty"))
		}
		if c.WhenUnsatisfiable != corev1.DoNotSchedule && c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			errs = append(errs, field.NotSupported(cp.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, []string{"DoNotSchedule", "ScheduleAnyway"}))
		}
		for _, rest := range cs[i+1:] {
			if c.TopologyKey == rest.TopologyKey && c.WhenUnsatisfiable == rest.WhenUnsatisfiable {
				errs = append(errs, field.Duplicate(cp.Child("{topologyKey, whenUnsatisfiable}"), fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
				break
			}
		}
		if m := c.MinDomains; m != nil {
			if *m <= 0 {
				errs = append(errs, field.Invalid(cp.Child("minDomains"), int64(*m), "must be greater than zero"))
			}
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				errs = append(errs, field.Invalid(cp.Child("minDomains"), m, fmt.Sprintf("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not %s", c.WhenUnsatisfiable)))
			}
		}
		for _, pol := range []struct {
			name string
			v    *corev1.NodeInclusionPolicy
		}{{"nodeAffinityPolicy", c.NodeAffinityPolicy}, {"nodeTaintsPolicy", c.NodeTaintsPolicy}} {
			if pol.v != nil && *pol.v != corev1.NodeInclusionPolicyHonor && *pol.v != corev1.NodeInclusionPolicyIgnore {
				errs = append(errs, field.NotSupported(cp.Child(pol.name), pol.v, []string{"Honor", "Ignore"}))
			}
		}
		errs = append(errs, validateMatchLabelKeys(cp, c.MatchLabelKeys, nil, c.LabelSelector)...)
		errs = append(errs, metavalidation.ValidateLabelSelector(c.LabelSelector, metavalidation.LabelSelectorValidationOptions{}, cp.Child("labelSelector"))...)
	}
	return errs
}

// mergeMatchLabelKeys is what kube-apiserver does to a new Pod's affinity
// terms and spread constraints: each matchLabelKeys key the pod carries
// becomes an In requirement of the selector (mismatchLabelKeys a NotIn).
func mergeMatchLabelKeys(pod *corev1.Pod) {
	add := func(sel *metav1.LabelSelector, keys []string, op metav1.LabelSelectorOperator) {
		for _, k := range keys {
			if v, ok := pod.Labels[k]; ok {
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: op, Values: []string{v}})
			}
		}
	}
	term := func(t *corev1.PodAffinityTerm) {
		if t.LabelSelector == nil || len(t.MatchLabelKeys)+len(t.MismatchLabelKeys) == 0 {
			return
		}
		add(t.LabelSelector, t.MatchLabelKeys, metav1.LabelSelectorOpIn)
		add(t.LabelSelector, t.MismatchLabelKeys, metav1.LabelSelectorOpNotIn)
	}
	if a := pod.Spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
				term(&pa.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
			}
			for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				term(&pa.RequiredDuringSchedulingIgnoredDuringExecution[i])
			}
		}
		if pa := a.PodAntiAffinity; pa != nil {
			for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
				term(&pa.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
			}
			for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				term(&pa.RequiredDuringSchedulingIgnoredDuringExecution[i])
			}
		}
	}
	for i := range pod.Spec.TopologySpreadConstraints {
		c := &pod.Spec.TopologySpreadConstraints[i]
		if c.LabelSelector != nil && len(c.MatchLabelKeys) > 0 {
			add(c.LabelSelector, c.MatchLabelKeys, metav1.LabelSelectorOpIn)
		}
	}
}
