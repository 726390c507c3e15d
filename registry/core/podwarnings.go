package core

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// The Warning headers kube-apiserver 1.37 returns for writes of Pods and of
// the kinds that hold a pod template (Deployments, ReplicaSets, DaemonSets):
// its GetWarningsForPod / GetWarningsForPodTemplate, plus what the kinds'
// strategies add. The order is kube-apiserver's, check by check; the one
// place where it iterates a map (the nodeSelector), svcnet goes through the
// keys in sorted order (kube-apiserver's order there is random).

// podCreateWarnings is a created Pod's warnings: a name that is no DNS
// label (it becomes the hostname), then the pod's spec and metadata.
// kube-apiserver gives none on updates of the pod itself.
func podCreateWarnings(obj runtime.Object) []string {
	pod := obj.(*corev1.Pod)
	var w []string
	if msgs := utilvalidation.IsDNS1123Label(pod.Name); len(msgs) > 0 {
		w = append(w, fmt.Sprintf("metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: %v", msgs))
	}
	return append(w, podSpecWarnings(nil, &pod.Spec, &pod.ObjectMeta)...)
}

// podStatusWarnings: pod and host IPs of a /status write in a non-standard
// form. (An address that does not parse at all is the validation's
// business, not a warning.)
func podStatusWarnings(obj, _ runtime.Object) []string {
	st := &obj.(*corev1.Pod).Status
	var w []string
	p := field.NewPath("status", "podIPs")
	for i, ip := range st.PodIPs {
		w = append(w, ipWarnings(p.Index(i).Child("ip"), ip.IP)...)
	}
	p = field.NewPath("status", "hostIPs")
	for i, ip := range st.HostIPs {
		w = append(w, ipWarnings(p.Index(i).Child("ip"), ip.IP)...)
	}
	return w
}

// ipWarnings is GetWarningsForIP for a value that parses as an address.
func ipWarnings(p *field.Path, ip string) []string {
	if netutils.ParseIPSloppy(ip) == nil {
		return nil
	}
	return utilvalidation.GetWarningsForIP(p, ip)
}

// templateNameWarnings: the objects whose name starts their pods' names
// (Deployments, ReplicaSets) warn about a name that is no DNS label.
func templateNameWarnings(name string) []string {
	if msgs := utilvalidation.IsDNS1123Label(name); len(msgs) > 0 {
		return []string{fmt.Sprintf("metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: %v", msgs)}
	}
	return nil
}

// podTemplateWarnings are the warnings about the pod template at
// spec.template.
func podTemplateWarnings(t *corev1.PodTemplateSpec) []string {
	return podSpecWarnings(field.NewPath("spec", "template"), &t.Spec, &t.ObjectMeta)
}

func deploymentCreateWarnings(obj runtime.Object) []string {
	d := obj.(*appsv1.Deployment)
	return append(templateNameWarnings(d.Name), podTemplateWarnings(&d.Spec.Template)...)
}

// deploymentUpdateWarnings: only an update that moves the generation (a
// spec change) warns, and only about the template.
func deploymentUpdateWarnings(obj, old runtime.Object) []string {
	d := obj.(*appsv1.Deployment)
	if d.Generation == old.(*appsv1.Deployment).Generation {
		return nil
	}
	return podTemplateWarnings(&d.Spec.Template)
}

func replicaSetCreateWarnings(obj runtime.Object) []string {
	rs := obj.(*appsv1.ReplicaSet)
	return append(templateNameWarnings(rs.Name), podTemplateWarnings(&rs.Spec.Template)...)
}

func replicaSetUpdateWarnings(obj, old runtime.Object) []string {
	rs := obj.(*appsv1.ReplicaSet)
	if rs.Generation == old.(*appsv1.ReplicaSet).Generation {
		return nil
	}
	return podTemplateWarnings(&rs.Spec.Template)
}

// A DaemonSet's name is no pod's hostname: only its template warns, on
// update only when the template (its generation) changed.
func daemonSetCreateWarnings(obj runtime.Object) []string {
	return podTemplateWarnings(&obj.(*appsv1.DaemonSet).Spec.Template)
}

func daemonSetUpdateWarnings(obj, old runtime.Object) []string {
	ds := obj.(*appsv1.DaemonSet)
	if templateGeneration(ds) == templateGeneration(old.(*appsv1.DaemonSet)) {
		return nil
	}
	return podTemplateWarnings(&ds.Spec.Template)
}

// deprecatedNodeLabels are node labels that are deprecated (or were never
// set by Kubernetes), with what to use instead.
var deprecatedNodeLabels = map[string]string{
	"beta.kubernetes.io/arch":                       `deprecated since v1.14; use "kubernetes.io/arch" instead`,
	"beta.kubernetes.io/os":                         `deprecated since v1.14; use "kubernetes.io/os" instead`,
	"failure-domain.beta.kubernetes.io/region":      `deprecated since v1.17; use "topology.kubernetes.io/region" instead`,
	"failure-domain.beta.kubernetes.io/zone":        `deprecated since v1.17; use "topology.kubernetes.io/zone" instead`,
	"beta.kubernetes.io/instance-type":              `deprecated since v1.17; use "node.kubernetes.io/instance-type" instead`,
	"app.kubernetes.io/created-by":                  `deprecated since v1.9`,
	"scheduler.alpha.kubernetes.io/preferAvoidPods": `deprecated since v1.22; use Taints and Tolerations instead`,
	"node-role.kubernetes.io/master":                `use "node-role.kubernetes.io/control-plane" instead`,
}

// deprecatedPodAnnotations are pod annotations that no longer do anything,
// in the order they are reported.
var deprecatedPodAnnotations = []struct{ key, msg string }{
	{"scheduler.alpha.kubernetes.io/critical-pod", `non-functional in v1.16+; use the "priorityClassName" field instead`},
	{"security.alpha.kubernetes.io/sysctls", `non-functional in v1.11+; use the "sysctls" field instead`},
	{"security.alpha.kubernetes.io/unsafe-sysctls", `non-functional in v1.11+; use the "sysctls" field instead`},
}

const nullPodSelector = "a null labelSelector results in matching no pod"

// podSpecWarnings are the warnings about a pod's spec and metadata; base is
// nil for a Pod and the template's path for a pod template.
func podSpecWarnings(base *field.Path, spec *corev1.PodSpec, meta *metav1.ObjectMeta) []string {
	var w []string
	sp := base.Child("spec")
	ap := base.Child("metadata", "annotations")

	// Deprecated node labels where pods select nodes.
	for _, k := range sets.List(sets.KeySet(spec.NodeSelector)) {
		if msg, ok := deprecatedNodeLabels[k]; ok {
			w = append(w, fmt.Sprintf("%s: %s", sp.Child("nodeSelector").Key(k), msg))
		}
	}
	if spec.Affinity != nil && spec.Affinity.NodeAffinity != nil {
		na := spec.Affinity.NodeAffinity
		np := sp.Child("affinity", "nodeAffinity")
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			tp := np.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			for i := range req.NodeSelectorTerms {
				w = append(w, nodeSelectorTermWarnings(&req.NodeSelectorTerms[i], false, tp.Index(i))...)
			}
		}
		pp := np.Child("preferredDuringSchedulingIgnoredDuringExecution")
		for i := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			w = append(w, nodeSelectorTermWarnings(&na.PreferredDuringSchedulingIgnoredDuringExecution[i].Preference, true, pp.Index(i).Child("preference"))...)
		}
	}
	for i, c := range spec.TopologySpreadConstraints {
		cp := sp.Child("topologySpreadConstraints").Index(i)
		if msg, ok := deprecatedNodeLabels[c.TopologyKey]; ok {
			w = append(w, fmt.Sprintf("%s: %s is %s", cp.Child("topologyKey"), c.TopologyKey, msg))
		}
		if c.LabelSelector == nil {
			w = append(w, fmt.Sprintf("%s: %s", cp.Child("labelSelector"), nullPodSelector))
		}
	}

	for _, a := range deprecatedPodAnnotations {
		if _, ok := meta.Annotations[a.key]; ok {
			w = append(w, fmt.Sprintf("%s: %s", ap.Key(a.key), a.msg))
		}
	}

	// Volume plugins that are deprecated or gone.
	for i := range spec.Volumes {
		w = append(w, volumeWarnings(&spec.Volumes[i].VolumeSource, sp.Child("volumes").Index(i))...)
	}
	w = append(w, overlappingPathWarnings(spec.Volumes)...)

	if len(spec.HostAliases) > 1 {
		seen := sets.New[string]()
		for i, a := range spec.HostAliases {
			if seen.Has(a.IP) {
				w = append(w, fmt.Sprintf("%s: duplicate ip %q", sp.Child("hostAliases").Index(i).Child("ip"), a.IP))
			}
			seen.Insert(a.IP)
		}
	}
	if len(spec.ImagePullSecrets) > 1 {
		seen := sets.New[string]()
		for i, s := range spec.ImagePullSecrets {
			if seen.Has(s.Name) {
				w = append(w, fmt.Sprintf("%s: duplicate name %q", sp.Child("imagePullSecrets").Index(i).Child("name"), s.Name))
			}
			seen.Insert(s.Name)
		}
	}
	for i, s := range spec.ImagePullSecrets {
		if s.Name == "" {
			w = append(w, fmt.Sprintf("%s: invalid empty name %q", sp.Child("imagePullSecrets").Index(i).Child("name"), s.Name))
		}
	}

	for _, name := range []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := spec.Overhead[name]; ok {
			w = append(w, fractionalBytes(sp.Child("overhead").Key(string(name)), q)...)
		}
	}

	// Seccomp annotations are no longer read: a warning when the field
	// they stood for is not set.
	if spec.SecurityContext == nil || spec.SecurityContext.SeccompProfile == nil {
		if _, ok := meta.Annotations[corev1.SeccompPodAnnotationKey]; ok {
			w = append(w, fmt.Sprintf(`%s: non-functional in v1.27+; use the "seccompProfile" field instead`, ap.Key(corev1.SeccompPodAnnotationKey)))
		}
	}
	var podAppArmor *corev1.AppArmorProfile
	if spec.SecurityContext != nil {
		podAppArmor = spec.SecurityContext.AppArmorProfile
	}

	visitContainers(spec, sp, func(c *corev1.Container, cp *field.Path) {
		if c.SecurityContext == nil || c.SecurityContext.SeccompProfile == nil {
			key := corev1.SeccompContainerAnnotationKeyPrefix + c.Name
			if _, ok := meta.Annotations[key]; ok {
				w = append(w, fmt.Sprintf(`%s: non-functional in v1.27+; use the "seccompProfile" field instead`, ap.Key(key)))
			}
		}
		// The deprecated AppArmor annotations: a Pod's are turned into
		// fields when it is created (which warns there); a template's are
		// reported here unless a field says the same.
		if base != nil && (c.SecurityContext == nil || c.SecurityContext.AppArmorProfile == nil) {
			key := corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + c.Name
			if v, ok := meta.Annotations[key]; ok {
				if podAppArmor == nil || !equality.Semantic.DeepEqual(podAppArmor, appArmorProfileOfAnnotation(v)) {
					w = append(w, fmt.Sprintf(`%s: deprecated since v1.30; use the "appArmorProfile" field instead`, ap.Key(key)))
				}
			}
		}
		rp := cp.Child("resources")
		for _, r := range []struct {
			name corev1.ResourceName
			kind string
			list corev1.ResourceList
		}{
			{corev1.ResourceMemory, "limits", c.Resources.Limits},
			{corev1.ResourceMemory, "requests", c.Resources.Requests},
			{corev1.ResourceEphemeralStorage, "limits", c.Resources.Limits},
			{corev1.ResourceEphemeralStorage, "requests", c.Resources.Requests},
		} {
			if q, ok := r.list[r.name]; ok {
				w = append(w, fractionalBytes(rp.Child(r.kind).Key(string(r.name)), q)...)
			}
		}
		w = append(w, envWarnings(c.Env, cp.Child("env"))...)
	})

	w = append(w, portWarnings(spec, sp)...)

	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		w = append(w, fmt.Sprintf("%s: must be >= 0; negative values are invalid and will be treated as 1", sp.Child("terminationGracePeriodSeconds")))
	}

	if a := spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			p := sp.Child("affinity", "podAffinity")
			w = append(w, podAffinityWarnings(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p)...)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			p := sp.Child("affinity", "podAntiAffinity")
			w = append(w, podAffinityWarnings(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p)...)
		}
	}

	// Addresses written in a non-standard form.
	if spec.DNSConfig != nil {
		for i, ns := range spec.DNSConfig.Nameservers {
			w = append(w, ipWarnings(sp.Child("dnsConfig", "nameservers").Index(i), ns)...)
		}
	}
	for i, a := range spec.HostAliases {
		w = append(w, ipWarnings(sp.Child("hostAliases").Index(i).Child("ip"), a.IP)...)
	}
	return w
}

// nodeSelectorTermWarnings: deprecated node labels in a term's expressions
// and, for preferred terms, values that are no valid label values.
func nodeSelectorTermWarnings(t *corev1.NodeSelectorTerm, checkValues bool, p *field.Path) []string {
	var w []string
	for i, e := range t.MatchExpressions {
		ep := p.Child("matchExpressions").Index(i)
		if msg, ok := deprecatedNodeLabels[e.Key]; ok {
			w = append(w, fmt.Sprintf("%s: %s is %s", ep.Child("key"), e.Key, msg))
		}
		if !checkValues {
			continue
		}
		for j, v := range e.Values {
			for _, msg := range utilvalidation.IsValidLabelValue(v) {
				w = append(w, fmt.Sprintf("%s: %s is invalid, %s", ep.Child("values").Index(j), v, msg))
			}
		}
	}
	return w
}

// volumeWarnings: volume plugins deprecated or removed, and fractional
// storage sizes in an ephemeral volume's claim template.
func volumeWarnings(v *corev1.VolumeSource, p *field.Path) []string {
	var w []string
	if v.PhotonPersistentDisk != nil {
		w = append(w, fmt.Sprintf("%s: deprecated in v1.11, non-functional in v1.16+", p.Child("photonPersistentDisk")))
	}
	if v.GitRepo != nil {
		// The GitRepoVolumeDriver feature is off (locked) in 1.37.
		w = append(w, fmt.Sprintf("%s: deprecated in v1.11, and disabled by default in v1.33+", p.Child("gitRepo")))
	}
	if v.ScaleIO != nil {
		w = append(w, fmt.Sprintf("%s: deprecated in v1.16, non-functional in v1.22+", p.Child("scaleIO")))
	}
	if v.Flocker != nil {
		w = append(w, fmt.Sprintf("%s: deprecated in v1.22, non-functional in v1.25+", p.Child("flocker")))
	}
	if v.StorageOS != nil {
		w = append(w, fmt.Sprintf("%s: deprecated in v1.22, non-functional in v1.25+", p.Child("storageOS")))
	}
	if v.Quobyte != nil {
		w = append(w, fmt.Sprintf("%s: deprecated in v1.22, non-functional in v1.25+", p.Child("quobyte")))
	}
	if v.Glusterfs != nil {
		w = append(w, fmt.Sprintf("%s: deprecated in v1.25, non-functional in v1.26+", p.Child("glusterfs")))
	}
	if e := v.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		res := &e.VolumeClaimTemplate.Spec.Resources
		cp := p.Child("ephemeral", "volumeClaimTemplate", "spec", "resources")
		// A missing size is zero, which is whole.
		w = append(w, fractionalBytes(cp.Child("requests").Key(string(corev1.ResourceStorage)), res.Requests[corev1.ResourceStorage])...)
		w = append(w, fractionalBytes(cp.Child("limits").Key(string(corev1.ResourceStorage)), res.Limits[corev1.ResourceStorage])...)
	}
	if v.CephFS != nil {
		w = append(w, fmt.Sprintf("%s: deprecated in v1.28, non-functional in v1.31+", p.Child("cephfs")))
	}
	if v.RBD != nil {
		w = append(w, fmt.Sprintf("%s: deprecated in v1.28, non-functional in v1.31+", p.Child("rbd")))
	}
	return w
}

// fractionalBytes warns about a byte quantity that is not a whole number.
func fractionalBytes(p *field.Path, q resource.Quantity) []string {
	if q.MilliValue()%1000 == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: fractional byte value %q is invalid, must be an integer", p, q.String())}
}

// visitContainers calls fn for the init, regular and ephemeral containers,
// in that order, with their paths under sp.
func visitContainers(spec *corev1.PodSpec, sp *field.Path, fn func(c *corev1.Container, p *field.Path)) {
	for i := range spec.InitContainers {
		fn(&spec.InitContainers[i], sp.Child("initContainers").Index(i))
	}
	for i := range spec.Containers {
		fn(&spec.Containers[i], sp.Child("containers").Index(i))
	}
	for i := range spec.EphemeralContainers {
		fn((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon), sp.Child("ephemeralContainers").Index(i))
	}
}

// appArmorProfileOfAnnotation is the profile field a deprecated AppArmor
// annotation value stands for, or nil for a value that names none.
func appArmorProfileOfAnnotation(v string) *corev1.AppArmorProfile {
	switch {
	case v == corev1.DeprecatedAppArmorBetaProfileNameUnconfined:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	case v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	case strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix) && len(v) > len(corev1.DeprecatedAppArmorBetaProfileNamePrefix):
		name := strings.TrimPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
	}
	return nil
}

// envWarnings: a variable defined again hides the earlier definition (which
// a client-side or server-side apply may then drop), unless the new value
// builds on the old one ("$(X)" inside a longer value).
func envWarnings(env []corev1.EnvVar, p *field.Path) []string {
	if len(env) < 2 {
		return nil
	}
	var w []string
	seen := sets.New[string]()
	for i, e := range env {
		if !seen.Has(e.Name) {
			seen.Insert(e.Name)
			continue
		}
		ref := "$(" + e.Name + ")"
		if e.ValueFrom != nil || e.Value == ref || !strings.Contains(e.Value, ref) {
			w = append(w, fmt.Sprintf("%s: hides previous definition of %q, which may be dropped when using apply", p.Index(i), e.Name))
		}
	}
	return w
}

// portString renders a container port as kube-apiserver does (its internal
// type with %+v).
func portString(p corev1.ContainerPort) string {
	return fmt.Sprintf("{Name:%s HostPort:%d ContainerPort:%d Protocol:%s HostIP:%s}", p.Name, p.HostPort, p.ContainerPort, p.Protocol, p.HostIP)
}

// portWarnings: a hostIP without a hostPort; ports of all containers that
// repeat, overlap or are ambiguous with an earlier one of the same number
// and protocol; then port names used twice.
func portWarnings(spec *corev1.PodSpec, sp *field.Path) []string {
	var w []string
	type seenPort struct {
		path *field.Path
		port corev1.ContainerPort
	}
	byKey := map[string][]seenPort{}
	visitContainers(spec, sp, func(c *corev1.Container, cp *field.Path) {
		for i, port := range c.Ports {
			pp := cp.Child("ports").Index(i)
			if port.HostIP != "" && port.HostPort == 0 {
				w = append(w, fmt.Sprintf("%s: hostIP set without hostPort: %s", pp, portString(port)))
			}
			k := fmt.Sprintf("%d/%s", port.ContainerPort, port.Protocol)
			for _, o := range byKey[k] {
				switch noIP, otherNoIP := port.HostIP == "", o.port.HostIP == ""; {
				case port.HostIP == o.port.HostIP && port.HostPort == o.port.HostPort:
					w = append(w, fmt.Sprintf("%s: duplicate port definition with %s", pp, o.path))
				case port.HostPort == 0 || o.port.HostPort == 0:
					w = append(w, fmt.Sprintf("%s: overlapping port definition with %s", pp, o.path))
				case port.HostPort == o.port.HostPort && noIP != otherNoIP:
					w = append(w, fmt.Sprintf("%s: dangerously ambiguous port definition with %s", pp, o.path))
				}
			}
			byKey[k] = append(byKey[k], seenPort{pp, port})
		}
	})
	names := map[string]*field.Path{}
	visitContainers(spec, sp, func(c *corev1.Container, cp *field.Path) {
		for i, port := range c.Ports {
			if port.Name == "" {
				continue
			}
			pp := cp.Child("ports").Index(i)
			if o, ok := names[port.Name]; ok {
				w = append(w, fmt.Sprintf("%s: duplicate port name %q with %s, services and probes that select ports by name will use %s", pp, port.Name, o, o))
			} else {
				names[port.Name] = pp
			}
		}
	})
	return w
}

// podAffinityWarnings: (anti-)affinity terms without a label selector
// select no pod.
func podAffinityWarnings(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm, p *field.Path) []string {
	var w []string
	for i, t := range req {
		if t.LabelSelector == nil {
			w = append(w, fmt.Sprintf("%s: %s", p.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i).Child("labelSelector"), nullPodSelector))
		}
	}
	for i, t := range pref {
		if t.PodAffinityTerm.LabelSelector == nil {
			w = append(w, fmt.Sprintf("%s: %s", p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i).Child("podAffinityTerm", "labelSelector"), nullPodSelector))
		}
	}
	return w
}

// projectedPath is a file a volume writes, with where it comes from (for
// the messages).
type projectedPath struct {
	path, source string
}

func (p projectedPath) String() string {
	if p.source != "" {
		return fmt.Sprintf("%q (%s)", p.path, p.source)
	}
	return fmt.Sprintf("%q", p.path)
}

// overlappingPathWarnings: within one configMap, secret, downwardAPI or
// projected volume, two files with the same path, or one inside the other's
// path (the second write fails or wins); and projected sources that are
// empty.
func overlappingPathWarnings(vols []corev1.Volume) []string {
	var w []string
	warn := func(vol, desc, body string) {
		w = append(w, fmt.Sprintf("volume %q (%s): overlapping paths: %s", vol, desc, body))
	}
	keyPaths := func(items []corev1.KeyToPath, source string) []projectedPath {
		out := make([]projectedPath, 0, len(items))
		for _, it := range items {
			out = append(out, projectedPath{it.Path, source})
		}
		return out
	}
	downwardPaths := func(items []corev1.DownwardAPIVolumeFile, source string) []projectedPath {
		out := make([]projectedPath, 0, len(items))
		for _, it := range items {
			out = append(out, projectedPath{it.Path, source})
		}
		return out
	}
	// check adds each path in turn, reporting every earlier one it overlaps.
	check := func(all *[]projectedPath, paths []projectedPath, report func(string)) {
		for _, ps := range paths {
			ps.path = strings.TrimRight(ps.path, "/")
			for _, o := range pathOverlaps(*all, ps) {
				report(fmt.Sprintf("%s with %s", ps, o))
			}
			*all = append(*all, ps)
		}
	}
	for _, v := range vols {
		if v.ConfigMap != nil && v.ConfigMap.Items != nil {
			var all []projectedPath
			check(&all, keyPaths(v.ConfigMap.Items, ""), func(s string) { warn(v.Name, fmt.Sprintf("ConfigMap %q", v.ConfigMap.Name), s) })
		}
		if v.Secret != nil && v.Secret.Items != nil {
			var all []projectedPath
			check(&all, keyPaths(v.Secret.Items, ""), func(s string) { warn(v.Name, fmt.Sprintf("Secret %q", v.Secret.SecretName), s) })
		}
		if v.DownwardAPI != nil && v.DownwardAPI.Items != nil {
			var all []projectedPath
			check(&all, downwardPaths(v.DownwardAPI.Items, ""), func(s string) { warn(v.Name, "DownwardAPI", s) })
		}
		if v.Projected == nil {
			continue
		}
		var all []projectedPath
		for _, src := range v.Projected.Sources {
			if src.Secret == nil && src.DownwardAPI == nil && src.ConfigMap == nil && src.ServiceAccountToken == nil &&
				src.ClusterTrustBundle == nil && src.PodCertificate == nil {
				w = append(w, fmt.Sprintf("volume %q (Projected) has no sources provided", v.Name))
				continue
			}
			var paths []projectedPath
			switch {
			case src.ConfigMap != nil && src.ConfigMap.Items != nil:
				paths = keyPaths(src.ConfigMap.Items, fmt.Sprintf("ConfigMap %q", src.ConfigMap.Name))
			case src.Secret != nil && src.Secret.Items != nil:
				paths = keyPaths(src.Secret.Items, fmt.Sprintf("Secret %q", src.Secret.Name))
			case src.DownwardAPI != nil && src.DownwardAPI.Items != nil:
				paths = downwardPaths(src.DownwardAPI.Items, "DownwardAPI")
			case src.ServiceAccountToken != nil:
				paths = []projectedPath{{src.ServiceAccountToken.Path, "ServiceAccountToken"}}
			case src.ClusterTrustBundle != nil:
				var name string
				if n := src.ClusterTrustBundle.Name; n != nil {
					name = *n
				} else if s := src.ClusterTrustBundle.SignerName; s != nil {
					name = *s
				}
				paths = []projectedPath{{src.ClusterTrustBundle.Path, fmt.Sprintf("ClusterTrustBundle %q", name)}}
			case src.PodCertificate != nil:
				pc := src.PodCertificate
				for _, f := range []projectedPath{{pc.CertificateChainPath, "PodCertificate chain"}, {pc.KeyPath, "PodCertificate key"},
					{pc.CredentialBundlePath, "PodCertificate credential bundle"}} {
					if f.path != "" {
						paths = append(paths, f)
					}
				}
			}
			check(&all, paths, func(s string) { warn(v.Name, "Projected", s) })
		}
	}
	return w
}

// pathOverlaps returns the paths of seen that p repeats or that lie inside
// p or contain it (an empty path overlaps nothing).
func pathOverlaps(seen []projectedPath, p projectedPath) []projectedPath {
	if p.path == "" {
		return nil
	}
	var out []projectedPath
	for _, s := range seen {
		switch {
		case s.path == "":
		case s == p,
			strings.HasPrefix(s.path+"/", p.path+"/"),
			strings.HasPrefix(p.path+"/", s.path+"/"):
			out = append(out, s)
		}
	}
	return out
}
