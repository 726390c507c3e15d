package core

import (
	"cmp"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePodTemplateSpec is kube-apiserver's validation of a pod template
// (Deployments, ReplicaSets): its labels and annotations, its pod spec, and
// no ephemeral containers. p is the template's path (spec.template); old is
// the stored template's spec on update (nil on create).
func validatePodTemplateSpec(t *corev1.PodTemplateSpec, old *corev1.PodSpec, p *field.Path) field.ErrorList {
	errs := metavalidation.ValidateLabels(t.Labels, p.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, p.Child("annotations"))...)
	errs = append(errs, validatePodAnnotations(t.Annotations, &t.Spec, p.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&t.Spec, p.Child("spec"), podSpecOptions{}.withOldSpec(old))...)
	errs = append(errs, validateSecurityAnnotationsMatch(&t.ObjectMeta, &t.Spec, p.Child("spec"))...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(p.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}

// podQOS is the quality-of-service class kube-apiserver records in a new
// Pod's status: per container (init containers first), a resource (CPU,
// memory) whose request equals its limit is Guaranteed when non-zero and
// BestEffort when both are zero, anything else Burstable; a container with
// no requests and no limits at all is BestEffort. One Burstable resource or
// container makes the pod Burstable, and so does a mix of Guaranteed and
// BestEffort.
func podQOS(spec *corev1.PodSpec) corev1.PodQOSClass {
	var class corev1.PodQOSClass
	merge := func(c corev1.PodQOSClass) bool {
		switch {
		case c == corev1.PodQOSBurstable || (class != "" && class != c):
			class = corev1.PodQOSBurstable
			return false
		default:
			class = c
			return true
		}
	}
	containerQOS := func(r *corev1.ResourceRequirements) corev1.PodQOSClass {
		if len(r.Requests) == 0 && len(r.Limits) == 0 {
			return corev1.PodQOSBestEffort
		}
		var c corev1.PodQOSClass
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, lim := r.Requests[name], r.Limits[name]
			rc := corev1.PodQOSGuaranteed
			switch {
			case !req.Equal(lim):
				return corev1.PodQOSBurstable
			case req.IsZero():
				rc = corev1.PodQOSBestEffort
			}
			if c != "" && c != rc {
				return corev1.PodQOSBurstable
			}
			c = rc
		}
		return c
	}
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if !merge(containerQOS(&list[i].Resources)) {
				return class
			}
		}
	}
	if class == "" {
		return corev1.PodQOSBestEffort
	}
	return class
}

// defaultVolume gives a volume Kubernetes' v1 defaults: no source at all
// means an emptyDir; secret, configMap, downwardAPI and projected volumes
// get file mode 0644; a hostPath gets type "" (no check); a downward API
// field reference gets apiVersion v1, a projected token an hour and an
// image volume a container image's pull policy.
func defaultVolume(v *corev1.VolumeSource) {
	if reflect.DeepEqual(*v, corev1.VolumeSource{}) {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	mode := func(m **int32) {
		if *m == nil {
			d := corev1.ConfigMapVolumeSourceDefaultMode
			*m = &d
		}
	}
	fieldRefs := func(items []corev1.DownwardAPIVolumeFile) {
		for i := range items {
			if f := items[i].FieldRef; f != nil && f.APIVersion == "" {
				f.APIVersion = "v1"
			}
		}
	}
	// The v1 defaults of the in-tree volume plugins' sources.
	if r := v.RBD; r != nil {
		r.RBDPool = cmp.Or(r.RBDPool, "rbd")
		r.RadosUser = cmp.Or(r.RadosUser, "admin")
		r.Keyring = cmp.Or(r.Keyring, "/etc/ceph/keyring")
	}
	if i := v.ISCSI; i != nil {
		i.ISCSIInterface = cmp.Or(i.ISCSIInterface, "default")
	}
	if a := v.AzureDisk; a != nil {
		if a.CachingMode == nil {
			m := corev1.AzureDataDiskCachingReadWrite
			a.CachingMode = &m
		}
		if a.FSType == nil {
			fs := "ext4"
			a.FSType = &fs
		}
		if a.ReadOnly == nil {
			ro := false
			a.ReadOnly = &ro
		}
		if a.Kind == nil {
			k := corev1.AzureSharedBlobDisk
			a.Kind = &k
		}
	}
	if sc := v.ScaleIO; sc != nil {
		sc.StorageMode = cmp.Or(sc.StorageMode, "ThinProvisioned")
		sc.FSType = cmp.Or(sc.FSType, "xfs")
	}
	// An image volume's pull policy defaults as a container's does.
	if im := v.Image; im != nil && im.PullPolicy == "" {
		im.PullPolicy = defaultPullPolicy(im.Reference)
	}
	if v.HostPath != nil && v.HostPath.Type == nil {
		t := corev1.HostPathUnset
		v.HostPath.Type = &t
	}
	if v.Secret != nil {
		mode(&v.Secret.DefaultMode)
	}
	if v.ConfigMap != nil {
		mode(&v.ConfigMap.DefaultMode)
	}
	if v.DownwardAPI != nil {
		mode(&v.DownwardAPI.DefaultMode)
		fieldRefs(v.DownwardAPI.Items)
	}
	if v.Projected != nil {
		mode(&v.Projected.DefaultMode)
		for _, src := range v.Projected.Sources {
			if src.DownwardAPI != nil {
				fieldRefs(src.DownwardAPI.Items)
			}
			if t := src.ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				h := int64(3600)
				t.ExpirationSeconds = &h
			}
		}
	}
	// An ephemeral volume's claim template gets a claim's spec defaults:
	// volumeMode Filesystem, sizes rounded up to milli-units.
	if e := v.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		spec := &e.VolumeClaimTemplate.Spec
		if spec.VolumeMode == nil {
			m := corev1.PersistentVolumeFilesystem
			spec.VolumeMode = &m
		}
		roundUpMilli(spec.Resources.Limits)
		roundUpMilli(spec.Resources.Requests)
	}
}

// roundUpMilli rounds a resource list's quantities up to milli-units, as
// Kubernetes' v1 defaults do.
func roundUpMilli(l corev1.ResourceList) {
	for name, q := range l {
		q.RoundUp(-3)
		l[name] = q
	}
}
