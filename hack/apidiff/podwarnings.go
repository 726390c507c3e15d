package main

import (
	"math/rand"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	k8spod "k8s.io/kubernetes/pkg/registry/core/pod"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// Pod-spec warnings (kube-apiserver's GetWarningsForPod and
// GetWarningsForPodTemplate): podWarningFaults write what a manifest may
// hold that is accepted but draws a warning (deprecated node labels,
// selectors that select nothing, deprecated annotations and volume types,
// overlapping volume paths, duplicates, fractional byte values,
// non-canonical addresses...). They keep the object valid, mostly, so that
// the warnings are compared: they are compared only when neither side
// refused the write. They apply to pods (pod-create, and the template of
// deployment-podtemplate) and to the templates of the apps kinds.

// deprecatedNodeLabelPool mixes deprecated node labels with current ones.
var deprecatedNodeLabelPool = []string{"beta.kubernetes.io/arch", "beta.kubernetes.io/os", "failure-domain.beta.kubernetes.io/zone",
	"failure-domain.beta.kubernetes.io/region", "beta.kubernetes.io/instance-type", "app.kubernetes.io/created-by",
	"scheduler.alpha.kubernetes.io/preferAvoidPods", "node-role.kubernetes.io/master", "kubernetes.io/arch",
	"topology.kubernetes.io/zone", "disktype"}

// nonCanonicalIPPool: addresses in canonical and non-canonical forms (the
// IPv4 forms with leading zeros or mapped into IPv6 are invalid in 1.37).
var nonCanonicalIPPool = []string{"10.0.0.10", "fd00::10", "fd00:0:0::10", "FD00::10", "fd00:0000::a", "2001:db8:0:0:0:0:0:1", "::ffff:10.0.0.1", "010.0.0.10"}

func randNodeSelectorRequirement(r *rand.Rand) corev1.NodeSelectorRequirement {
	req := corev1.NodeSelectorRequirement{Key: pick(r, deprecatedNodeLabelPool...), Operator: pick(r, corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists)}
	if req.Operator != corev1.NodeSelectorOpExists {
		for i, n := 0, 1+r.Intn(2); i < n; i++ {
			req.Values = append(req.Values, pick(r, "amd64", "us-east-1a", "bad value!", strings.Repeat("v", 64), "-x"))
		}
	}
	return req
}

func randPodAffinityTerm(r *rand.Rand) corev1.PodAffinityTerm {
	t := corev1.PodAffinityTerm{TopologyKey: pick(r, "kubernetes.io/hostname", "topology.kubernetes.io/zone")}
	if maybe(r, 0.4) {
		t.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	return t
}

func keyPaths(r *rand.Rand) []corev1.KeyToPath {
	var items []corev1.KeyToPath
	for i, n := 0, 1+r.Intn(3); i < n; i++ {
		items = append(items, corev1.KeyToPath{Key: pick(r, "a", "b", "c"), Path: pick(r, "conf", "conf/app", "conf/", "other", "conf/app/x", "confx")})
	}
	return items
}

var podWarningFaults = []func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta){
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		// Several deprecated labels at once: their order is the map's.
		s.NodeSelector = map[string]string{}
		for i, n := 0, 1+r.Intn(3); i < n; i++ {
			s.NodeSelector[pick(r, deprecatedNodeLabelPool...)] = pick(r, "amd64", "linux", "a")
		}
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		na := &corev1.NodeAffinity{}
		if maybe(r, 0.6) {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
			for i, n := 0, 1+r.Intn(2); i < n; i++ {
				t := corev1.NodeSelectorTerm{}
				for j, k := 0, 1+r.Intn(2); j < k; j++ {
					t.MatchExpressions = append(t.MatchExpressions, randNodeSelectorRequirement(r))
				}
				na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, t)
			}
		}
		if maybe(r, 0.6) {
			for i, n := 0, 1+r.Intn(2); i < n; i++ {
				t := corev1.PreferredSchedulingTerm{Weight: pick[int32](r, 1, 50)}
				for j, k := 0, 1+r.Intn(2); j < k; j++ {
					t.Preference.MatchExpressions = append(t.Preference.MatchExpressions, randNodeSelectorRequirement(r))
				}
				na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, t)
			}
		}
		if s.Affinity == nil {
			s.Affinity = &corev1.Affinity{}
		}
		s.Affinity.NodeAffinity = na
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		s.TopologySpreadConstraints = nil
		for i, n := 0, 1+r.Intn(2); i < n; i++ {
			c := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: pick(r, deprecatedNodeLabelPool[:8]...), WhenUnsatisfiable: corev1.ScheduleAnyway}
			if maybe(r, 0.5) {
				c.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
			}
			s.TopologySpreadConstraints = append(s.TopologySpreadConstraints, c)
		}
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		a := s.Affinity
		if a == nil {
			a = &corev1.Affinity{}
		}
		pa, paa := &corev1.PodAffinity{}, &corev1.PodAntiAffinity{}
		for i, n := 0, r.Intn(3); i < n; i++ {
			pa.RequiredDuringSchedulingIgnoredDuringExecution = append(pa.RequiredDuringSchedulingIgnoredDuringExecution, randPodAffinityTerm(r))
		}
		for i, n := 0, r.Intn(3); i < n; i++ {
			pa.PreferredDuringSchedulingIgnoredDuringExecution = append(pa.PreferredDuringSchedulingIgnoredDuringExecution, corev1.WeightedPodAffinityTerm{Weight: 10, PodAffinityTerm: randPodAffinityTerm(r)})
		}
		for i, n := 0, r.Intn(3); i < n; i++ {
			paa.RequiredDuringSchedulingIgnoredDuringExecution = append(paa.RequiredDuringSchedulingIgnoredDuringExecution, randPodAffinityTerm(r))
		}
		for i, n := 0, r.Intn(2); i < n; i++ {
			paa.PreferredDuringSchedulingIgnoredDuringExecution = append(paa.PreferredDuringSchedulingIgnoredDuringExecution, corev1.WeightedPodAffinityTerm{Weight: 10, PodAffinityTerm: randPodAffinityTerm(r)})
		}
		a.PodAffinity, a.PodAntiAffinity = pa, paa
		s.Affinity = a
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		for i, n := 0, 1+r.Intn(3); i < n; i++ {
			switch r.Intn(6) {
			case 0:
				m.Annotations["scheduler.alpha.kubernetes.io/critical-pod"] = ""
			case 1:
				m.Annotations["security.alpha.kubernetes.io/sysctls"] = "kernel.shm_rmid_forced=1"
			case 2:
				m.Annotations["security.alpha.kubernetes.io/unsafe-sysctls"] = "net.core.somaxconn=1024"
			case 3:
				m.Annotations[corev1.SeccompPodAnnotationKey] = pick(r, corev1.SeccompProfileRuntimeDefault, "unconfined", "localhost/profile.json")
				if maybe(r, 0.3) {
					if s.SecurityContext == nil {
						s.SecurityContext = &corev1.PodSecurityContext{}
					}
					s.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
					m.Annotations[corev1.SeccompPodAnnotationKey] = corev1.SeccompProfileRuntimeDefault
				}
			case 4, 5:
				c := &s.Containers[r.Intn(len(s.Containers))]
				m.Annotations[corev1.SeccompContainerAnnotationKeyPrefix+pick(r, c.Name, "missing")] = pick(r, corev1.SeccompProfileRuntimeDefault, "unconfined")
				if maybe(r, 0.3) {
					if c.SecurityContext == nil {
						c.SecurityContext = &corev1.SecurityContext{}
					}
					c.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
					m.Annotations[corev1.SeccompContainerAnnotationKeyPrefix+c.Name] = "unconfined"
				}
			}
		}
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		v := corev1.Volume{Name: pick(r, "old", "legacy")}
		switch r.Intn(10) {
		case 0:
			v.GitRepo = &corev1.GitRepoVolumeSource{Repository: "https://example.com/repo.git", Revision: pick(r, "", "main")}
		case 1:
			v.PhotonPersistentDisk = &corev1.PhotonPersistentDiskVolumeSource{PdID: "pd-1"}
		case 2:
			v.ScaleIO = &corev1.ScaleIOVolumeSource{Gateway: "https://gw", System: "sys", VolumeName: "vol", SecretRef: &corev1.LocalObjectReference{Name: "s"}}
		case 3:
			v.Flocker = &corev1.FlockerVolumeSource{DatasetName: "ds"}
		case 4:
			v.StorageOS = &corev1.StorageOSVolumeSource{VolumeName: "vol"}
		case 5:
			v.Quobyte = &corev1.QuobyteVolumeSource{Registry: "registry:7861", Volume: "vol"}
		case 6:
			v.Glusterfs = &corev1.GlusterfsVolumeSource{EndpointsName: "gluster", Path: "vol"}
		case 7:
			v.CephFS = &corev1.CephFSVolumeSource{Monitors: []string{"10.0.0.1:6789"}}
		case 8:
			v.RBD = &corev1.RBDVolumeSource{CephMonitors: []string{"10.0.0.1:6789"}, RBDImage: "img"}
		case 9:
			spec := corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(pick(r, "1Gi", "1.5", "2500m", "0.5Gi"))}}}
			if maybe(r, 0.4) {
				spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(pick(r, "2Gi", "4.5", "10"))}
			}
			v.Ephemeral = &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: spec}}
			if m.Name != "" && maybe(r, 0.2) {
				// A Pod's volume that names the claim the ephemeral one
				// creates.
				s.Volumes = append(s.Volumes, corev1.Volume{Name: "claim", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.Name + "-" + v.Name}}})
			}
		}
		s.Volumes = append(s.Volumes, v)
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		v := corev1.Volume{Name: pick(r, "cfg", "files")}
		switch r.Intn(4) {
		case 0:
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Items: keyPaths(r)}
		case 1:
			v.Secret = &corev1.SecretVolumeSource{SecretName: "s", Items: keyPaths(r)}
		case 2:
			v.DownwardAPI = &corev1.DownwardAPIVolumeSource{}
			for i, n := 0, 1+r.Intn(3); i < n; i++ {
				v.DownwardAPI.Items = append(v.DownwardAPI.Items, corev1.DownwardAPIVolumeFile{Path: pick(r, "labels", "labels/x", "annotations"),
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: pick(r, "metadata.labels", "metadata.annotations")}})
			}
		case 3:
			v.Projected = &corev1.ProjectedVolumeSource{}
			// Two sources may not write the same path (exactly: "conf"
			// and "conf/" only overlap).
			used := map[string]bool{}
			distinct := func(items []corev1.KeyToPath) []corev1.KeyToPath {
				var out []corev1.KeyToPath
				for _, it := range items {
					if !used[it.Path] {
						used[it.Path] = true
						out = append(out, it)
					}
				}
				return out
			}
			for i, n := 0, 1+r.Intn(3); i < n; i++ {
				var src corev1.VolumeProjection
				switch r.Intn(5) {
				case 0:
					src.ConfigMap = &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Items: distinct(keyPaths(r))}
				case 1:
					src.Secret = &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Items: distinct(keyPaths(r))}
				case 2:
					p := pick(r, "conf", "labels", "conf/labels/")
					if used[p] {
						continue
					}
					used[p] = true
					src.DownwardAPI = &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: p,
						FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}
				case 3:
					// (A token needs a service account, on a Pod.)
					src.ServiceAccountToken = &corev1.ServiceAccountTokenProjection{Path: pick(r, "token", "conf/token", "conf")}
					s.ServiceAccountName = "builder"
				case 4:
					// An empty source.
				}
				v.Projected.Sources = append(v.Projected.Sources, src)
			}
		}
		s.Volumes = append(s.Volumes, v)
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		for i, n := 0, 2+r.Intn(2); i < n; i++ {
			s.HostAliases = append(s.HostAliases, corev1.HostAlias{IP: pick(r, nonCanonicalIPPool[:6]...), Hostnames: []string{"db.local"}})
		}
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		for i, n := 0, 1+r.Intn(3); i < n; i++ {
			s.ImagePullSecrets = append(s.ImagePullSecrets, corev1.LocalObjectReference{Name: pick(r, "regcred", "regcred", "other", "")})
		}
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		c := &s.Containers[r.Intn(len(s.Containers))]
		if maybe(r, 0.3) && len(s.InitContainers) > 0 {
			c = &s.InitContainers[0]
		}
		q := func() resource.Quantity {
			return resource.MustParse(pick(r, "1.5", "64Mi", "100m", "1", "0.5Gi", "2500m"))
		}
		c.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
		if maybe(r, 0.6) {
			c.Resources.Limits[corev1.ResourceMemory] = q()
		}
		if maybe(r, 0.4) {
			c.Resources.Requests[corev1.ResourceMemory] = c.Resources.Limits[corev1.ResourceMemory]
		}
		if maybe(r, 0.4) {
			c.Resources.Limits[corev1.ResourceEphemeralStorage] = q()
			c.Resources.Requests[corev1.ResourceEphemeralStorage] = c.Resources.Limits[corev1.ResourceEphemeralStorage]
		}
		for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
			for k, v := range l {
				if v.IsZero() {
					delete(l, k)
				}
			}
		}
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		s.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(pick(r, "1.5", "120Mi", "10")),
			corev1.ResourceCPU: resource.MustParse("250m")}
		if maybe(r, 0.5) {
			s.Overhead[corev1.ResourceEphemeralStorage] = resource.MustParse(pick(r, "1Gi", "0.5"))
		}
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		c := &s.Containers[r.Intn(len(s.Containers))]
		for i, n := 0, 2+r.Intn(3); i < n; i++ {
			e := corev1.EnvVar{Name: pick(r, "MODE", "LEVEL", "MODE")}
			switch r.Intn(5) {
			case 0:
				e.Value = "prod"
			case 1:
				e.Value = "$(" + e.Name + ")"
			case 2:
				e.Value = "$(" + e.Name + "):extra"
			case 3:
				e.ValueFrom = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
			case 4:
			}
			c.Env = append(c.Env, e)
		}
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		// More ports of the same number and protocol, in this container,
		// another or an init container; names used twice.
		port := func() corev1.ContainerPort {
			return corev1.ContainerPort{Name: pick(r, "", "", "http", "metrics"), ContainerPort: pick[int32](r, 80, 80, 9090),
				Protocol: pick(r, corev1.Protocol(""), corev1.ProtocolUDP), HostPort: pick[int32](r, 0, 0, 8080, 8081),
				HostIP: pick(r, "", "", "10.0.0.1", "10.0.0.2")}
		}
		for i, n := 0, 1+r.Intn(3); i < n; i++ {
			switch r.Intn(3) {
			case 0:
				c := &s.Containers[r.Intn(len(s.Containers))]
				c.Ports = append(c.Ports, port())
			case 1:
				s.Containers = append(s.Containers, corev1.Container{Name: pick(r, "extra", "extra2"), Image: "busybox", Ports: []corev1.ContainerPort{port()}})
			case 2:
				s.InitContainers = append(s.InitContainers, corev1.Container{Name: pick(r, "proxy", "proxy2"), Image: "envoy",
					RestartPolicy: pick(r, nil, ptr(corev1.ContainerRestartPolicyAlways)), Ports: []corev1.ContainerPort{port()}})
			}
		}
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		s.TerminationGracePeriodSeconds = ptr(pick[int64](r, -1, -30, 0, 5))
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		s.DNSConfig = &corev1.PodDNSConfig{}
		for i, n := 0, 1+r.Intn(3); i < n; i++ {
			s.DNSConfig.Nameservers = append(s.DNSConfig.Nameservers, pick(r, nonCanonicalIPPool[:6]...))
		}
		if maybe(r, 0.3) {
			s.DNSPolicy = corev1.DNSNone
		}
	},
	func(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
		// Addresses kube-apiserver refuses in 1.37 (the warnings never
		// come).
		if maybe(r, 0.5) {
			s.HostAliases = append(s.HostAliases, corev1.HostAlias{IP: pick(r, nonCanonicalIPPool[6:]...), Hostnames: []string{"db.local"}})
		} else {
			s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{pick(r, nonCanonicalIPPool[6:]...)}}
		}
	},
}

// addPodWarnings applies one to three warning faults.
func addPodWarnings(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
	if len(s.Containers) == 0 {
		return
	}
	for i, n := 0, 1+r.Intn(3); i < n; i++ {
		podWarningFaults[r.Intn(len(podWarningFaults))](r, s, m)
	}
	matchSecurityAnnotations(s, m)
}

// addStoredPodWarnings is addPodWarnings for an object already stored, so
// valid: without the values kube-apiserver refuses on create (and then
// tolerates on updates of an object that already has them).
func addStoredPodWarnings(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
	addPodWarnings(r, s, m)
	if a := s.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				for i := range e.Values {
					e.Values[i] = "amd64"
				}
			}
		}
	}
	valid := func(ip string) bool { return !slices.Contains(nonCanonicalIPPool[6:], ip) }
	s.HostAliases = slices.DeleteFunc(s.HostAliases, func(a corev1.HostAlias) bool { return !valid(a.IP) })
	if s.DNSConfig != nil {
		s.DNSConfig.Nameservers = slices.DeleteFunc(s.DNSConfig.Nameservers, func(ip string) bool { return !valid(ip) })
	}
}

// matchSecurityAnnotations makes the deprecated seccomp and AppArmor
// annotations say what the fields they stand for say, where both are set,
// as validation requires (svcnet does not check that: it only warns).
func matchSecurityAnnotations(s *corev1.PodSpec, m *metav1.ObjectMeta) {
	seccomp := func(key string, p *corev1.SeccompProfile) {
		if _, ok := m.Annotations[key]; !ok || p == nil {
			return
		}
		switch p.Type {
		case corev1.SeccompProfileTypeUnconfined:
			m.Annotations[key] = "unconfined"
		case corev1.SeccompProfileTypeRuntimeDefault:
			m.Annotations[key] = corev1.SeccompProfileRuntimeDefault
		case corev1.SeccompProfileTypeLocalhost:
			delete(m.Annotations, key)
		}
	}
	appArmor := func(key string, p *corev1.AppArmorProfile) {
		if _, ok := m.Annotations[key]; !ok || p == nil {
			return
		}
		switch p.Type {
		case corev1.AppArmorProfileTypeUnconfined:
			m.Annotations[key] = "unconfined"
		case corev1.AppArmorProfileTypeRuntimeDefault:
			m.Annotations[key] = "runtime/default"
		case corev1.AppArmorProfileTypeLocalhost:
			if p.LocalhostProfile == nil {
				delete(m.Annotations, key)
			} else {
				m.Annotations[key] = "localhost/" + *p.LocalhostProfile
			}
		}
	}
	var podSeccomp *corev1.SeccompProfile
	var podAppArmor *corev1.AppArmorProfile
	if sc := s.SecurityContext; sc != nil {
		podSeccomp, podAppArmor = sc.SeccompProfile, sc.AppArmorProfile
	}
	seccomp(corev1.SeccompPodAnnotationKey, podSeccomp)
	// Containers of the same name (invalid) share their annotations; an
	// invalid name makes their keys invalid too (and the order of errors
	// about annotations is the map's: one at most).
	count := map[string]int{}
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for _, c := range list {
			count[c.Name]++
		}
	}
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for _, c := range list {
			if count[c.Name] > 1 || len(validation.IsDNS1123Label(c.Name)) > 0 {
				delete(m.Annotations, corev1.SeccompContainerAnnotationKeyPrefix+c.Name)
				delete(m.Annotations, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name)
				continue
			}
			ownSeccomp, ownAppArmor := (*corev1.SeccompProfile)(nil), podAppArmor
			if sc := c.SecurityContext; sc != nil {
				ownSeccomp = sc.SeccompProfile
				if sc.AppArmorProfile != nil {
					ownAppArmor = sc.AppArmorProfile
				}
			}
			seccomp(corev1.SeccompContainerAnnotationKeyPrefix+c.Name, ownSeccomp)
			appArmor(corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name, ownAppArmor)
		}
	}
}

// addAppArmorAnnotations writes the deprecated AppArmor annotations a pod
// template may still carry, with or without the pod's profile field saying
// the same (addSecurityAnnotations writes disagreeing ones too, on Pods
// and templates).
func addAppArmorAnnotations(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
	if len(s.Containers) == 0 {
		return
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	var profile *corev1.AppArmorProfile
	switch r.Intn(4) {
	case 1:
		profile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	case 2:
		profile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr("p1")}
	case 3:
		profile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	}
	if profile != nil {
		if s.SecurityContext == nil {
			s.SecurityContext = &corev1.PodSecurityContext{}
		}
		s.SecurityContext.AppArmorProfile = profile
	}
	annotation := func(p *corev1.AppArmorProfile) string {
		switch p.Type {
		case corev1.AppArmorProfileTypeRuntimeDefault:
			return "runtime/default"
		case corev1.AppArmorProfileTypeUnconfined:
			return "unconfined"
		}
		return "localhost/" + *p.LocalhostProfile
	}
	for i := range s.Containers {
		c := &s.Containers[i]
		key := corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + c.Name
		switch r.Intn(4) {
		case 0:
		case 1:
			// Validation wants an annotation to say what the field
			// that applies says.
			if profile != nil {
				m.Annotations[key] = annotation(profile)
			} else {
				m.Annotations[key] = pick(r, "runtime/default", "unconfined", "localhost/p1", "")
			}
		case 2, 3:
			own := pick(r, &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
				&corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr("p2")})
			if c.SecurityContext == nil {
				c.SecurityContext = &corev1.SecurityContext{}
			}
			c.SecurityContext.AppArmorProfile = own
			m.Annotations[key] = annotation(own)
		}
	}
	matchSecurityAnnotations(s, m)
}

// podStatusWarningsCase writes a /status of old with pod and host IPs in
// canonical and non-canonical forms and compares the status strategies'
// warnings (svcnet validates no pod status: they are compared when
// kube-apiserver accepts the write).
func podStatusWarningsCase(r *rand.Rand, old *corev1.Pod) string {
	in := old.DeepCopy()
	in.Status.PodIP, in.Status.PodIPs, in.Status.HostIP, in.Status.HostIPs = "", nil, "", nil
	for i, n := 0, r.Intn(3); i < n; i++ {
		in.Status.PodIPs = append(in.Status.PodIPs, corev1.PodIP{IP: pick(r, "10.244.1.5", "fd00::5", "fd00:0::5", "2001:DB8::5", "::ffff:10.1.1.1")})
	}
	if len(in.Status.PodIPs) > 0 {
		in.Status.PodIP = in.Status.PodIPs[0].IP
	}
	for i, n := 0, r.Intn(3); i < n; i++ {
		in.Status.HostIPs = append(in.Status.HostIPs, corev1.HostIP{IP: pick(r, "192.168.0.5", "fd01::1", "fd01:0:0::1", "FD01::2")})
	}
	if len(in.Status.HostIPs) > 0 {
		in.Status.HostIP = in.Status.HostIPs[0].IP
	}
	ctx := requestCtx("update", "", "v1", "pods", "status", in.Name)
	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	ki, kold := &api.Pod{}, &api.Pod{}
	toInternal(kv, ki)
	toInternal(old.DeepCopy(), kold)
	k8spod.StatusStrategy.PrepareForUpdate(ctx, ki, kold)
	if len(genericrest.ValidateUpdate(ctx, ki, kold, k8spod.StatusStrategy)) > 0 {
		return ""
	}
	st := core.NewPodStrategy().(interface{ StatusStrategy() registry.Strategy }).StatusStrategy()
	sv := in.DeepCopyObject()
	st.Default(sv)
	st.PrepareForUpdate(ctx, sv, old.DeepCopyObject())
	return withInput(compareWarnings("status", k8spod.StatusStrategy.WarningsOnUpdate(ctx, ki, kold), updateWarnings(ctx, st, sv, old)), in, old)
}
