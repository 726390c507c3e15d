package core

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The deprecated seccomp and AppArmor annotations as kube-apiserver 1.37
// treats them: their values are checked, they must agree with the profile
// fields a new Pod or a pod template sets, and a new Pod's AppArmor
// annotations become its containers' appArmorProfile fields (with a
// deprecation warning).

// validateAppArmorProfile is an appArmorProfile field (a pod's or a
// container's security context's).
func validateAppArmorProfile(ap *corev1.AppArmorProfile, p *field.Path) field.ErrorList {
	if ap == nil {
		return nil
	}
	var errs field.ErrorList
	switch ap.Type {
	case corev1.AppArmorProfileTypeLocalhost:
		lp := p.Child("localhostProfile")
		if ap.LocalhostProfile == nil {
			return field.ErrorList{field.Required(lp, "must be set when AppArmor type is Localhost")}
		}
		name := *ap.LocalhostProfile
		if trimmed := strings.TrimSpace(name); trimmed != name {
			errs = append(errs, field.Invalid(lp, name, "must not be padded with whitespace"))
		} else if trimmed == "" {
			errs = append(errs, field.Required(lp, "must be set when AppArmor type is Localhost"))
		}
		// PATH_MAX - 1.
		if len(name) > 4095 {
			errs = append(errs, field.TooLong(lp, "", 4095))
		}
	case corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined:
		if ap.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(p.Child("localhostProfile"), ap.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
		}
	case "":
		errs = append(errs, field.Required(p.Child("type"), "type is required when appArmorProfile is set"))
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), ap.Type, []corev1.AppArmorProfileType{
			corev1.AppArmorProfileTypeLocalhost, corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined}))
	}
	return errs
}

// validateSecurityAnnotations checks the values of the deprecated seccomp
// annotations (a profile: runtime/default, docker/default, unconfined or
// localhost/<relative path>) and AppArmor annotations (a container of the
// pod; runtime/default, unconfined, localhost/... or empty).
// kube-apiserver walks the annotations in Go's random map order; svcnet in
// key order (which matters only for several wrong annotations).
func validateSecurityAnnotations(ann map[string]string, spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v, ok := ann[corev1.SeccompPodAnnotationKey]; ok {
		errs = append(errs, validateSeccompAnnotation(v, p.Child(corev1.SeccompPodAnnotationKey))...)
	}
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, corev1.SeccompContainerAnnotationKeyPrefix) {
			// As kube-apiserver: a child path, not a key.
			errs = append(errs, validateSeccompAnnotation(ann[k], p.Child(k))...)
		}
	}
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix)
		if !ok {
			continue
		}
		if !hasContainer(spec, name) {
			errs = append(errs, field.Invalid(p.Key(k), name, "container not found"))
		}
		v := ann[k]
		if v != "" && v != corev1.DeprecatedAppArmorBetaProfileRuntimeDefault && v != corev1.DeprecatedAppArmorBetaProfileNameUnconfined &&
			!strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix) {
			errs = append(errs, field.Invalid(p.Key(k), v, fmt.Sprintf("invalid AppArmor profile name: %q", v)))
		}
	}
	return errs
}

func validateSeccompAnnotation(v string, p *field.Path) field.ErrorList {
	switch {
	case v == corev1.SeccompProfileRuntimeDefault || v == corev1.DeprecatedSeccompProfileDockerDefault || v == corev1.SeccompProfileNameUnconfined:
		return nil
	case strings.HasPrefix(v, corev1.SeccompLocalhostProfileNamePrefix):
		return localDescendingPath(strings.TrimPrefix(v, corev1.SeccompLocalhostProfileNamePrefix), p)
	}
	return field.ErrorList{field.Invalid(p, v, "must be a valid seccomp profile")}
}

// hasContainer: an init, app or ephemeral container of that name.
func hasContainer(spec *corev1.PodSpec, name string) bool {
	found := false
	visitContainers(spec, nil, func(c *corev1.Container, _ *field.Path) {
		found = found || c.Name == name
	})
	return found
}

// validateSecurityAnnotationsMatch: on a new Pod or a pod template, a
// deprecated seccomp or AppArmor annotation must say what the profile field
// that applies to it says (the pod's seccomp field for the pod annotation, a
// container's own seccomp field, a container's AppArmor field or else the
// pod's; Windows pods have no AppArmor).
func validateSecurityAnnotationsMatch(meta *metav1.ObjectMeta, spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sc := spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		if v, ok := meta.Annotations[corev1.SeccompPodAnnotationKey]; ok {
			errs = append(errs, seccompMismatch(v, sc.SeccompProfile, p.Child("securityContext", "seccompProfile"))...)
		}
	}
	visitContainers(spec, p, func(c *corev1.Container, cp *field.Path) {
		if c.SecurityContext == nil || c.SecurityContext.SeccompProfile == nil {
			return
		}
		if v, ok := meta.Annotations[corev1.SeccompContainerAnnotationKeyPrefix+c.Name]; ok {
			errs = append(errs, seccompMismatch(v, c.SecurityContext.SeccompProfile, cp.Child("securityContext", "seccompProfile"))...)
		}
	})
	if spec.OS != nil && spec.OS.Name == corev1.Windows {
		return errs
	}
	var podProfile *corev1.AppArmorProfile
	if spec.SecurityContext != nil {
		podProfile = spec.SecurityContext.AppArmorProfile
	}
	visitContainers(spec, p, func(c *corev1.Container, cp *field.Path) {
		profile := podProfile
		if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
			profile = c.SecurityContext.AppArmorProfile
		}
		v, ok := meta.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]
		if profile == nil || !ok {
			return
		}
		ap := cp.Child("securityContext", "appArmorProfile")
		const typeMismatch, profileMismatch = "apparmor type in annotation and field must match", "apparmor profile in annotation and field must match"
		switch profile.Type {
		case corev1.AppArmorProfileTypeUnconfined:
			if v != corev1.DeprecatedAppArmorBetaProfileNameUnconfined {
				errs = append(errs, field.Forbidden(ap.Child("type"), typeMismatch))
			}
		case corev1.AppArmorProfileTypeRuntimeDefault:
			if v != corev1.DeprecatedAppArmorBetaProfileRuntimeDefault {
				errs = append(errs, field.Forbidden(ap.Child("type"), typeMismatch))
			}
		case corev1.AppArmorProfileTypeLocalhost:
			name, ok := strings.CutPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
			switch {
			case !ok:
				errs = append(errs, field.Forbidden(ap.Child("type"), typeMismatch))
			case profile.LocalhostProfile == nil || name != *profile.LocalhostProfile:
				errs = append(errs, field.Forbidden(ap.Child("localhostProfile"), profileMismatch))
			}
		}
	})
	return errs
}

func seccompMismatch(v string, sp *corev1.SeccompProfile, p *field.Path) field.ErrorList {
	const typeMismatch = "seccomp type in annotation and field must match"
	switch sp.Type {
	case corev1.SeccompProfileTypeUnconfined:
		if v != corev1.SeccompProfileNameUnconfined {
			return field.ErrorList{field.Forbidden(p.Child("type"), typeMismatch)}
		}
	case corev1.SeccompProfileTypeRuntimeDefault:
		if v != corev1.SeccompProfileRuntimeDefault && v != corev1.DeprecatedSeccompProfileDockerDefault {
			return field.ErrorList{field.Forbidden(p.Child("type"), typeMismatch)}
		}
	case corev1.SeccompProfileTypeLocalhost:
		name, ok := strings.CutPrefix(v, corev1.SeccompLocalhostProfileNamePrefix)
		if !ok {
			return field.ErrorList{field.Forbidden(p.Child("type"), typeMismatch)}
		}
		if sp.LocalhostProfile == nil || name != *sp.LocalhostProfile {
			return field.ErrorList{field.Forbidden(p.Child("localhostProfile"), "seccomp profile in annotation and field must match")}
		}
	}
	return nil
}

// applyAppArmorAnnotations is kube-apiserver's AppArmor version skew on a
// new Pod (not on Windows): a container with an AppArmor annotation and no
// appArmorProfile field of its own gets the field the annotation stands for,
// unless the pod's field says the same already. It returns the warnings
// kube-apiserver gives then: for each annotation copied, and for each whose
// value stands for no valid profile (not copied).
func applyAppArmorAnnotations(pod *corev1.Pod) []string {
	if pod.Spec.OS != nil && pod.Spec.OS.Name == corev1.Windows {
		return nil
	}
	var podProfile *corev1.AppArmorProfile
	if pod.Spec.SecurityContext != nil {
		podProfile = pod.Spec.SecurityContext.AppArmorProfile
	}
	ap := field.NewPath("metadata", "annotations")
	var w []string
	visitContainers(&pod.Spec, nil, func(c *corev1.Container, _ *field.Path) {
		key := corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + c.Name
		v, ok := pod.Annotations[key]
		if !ok || (c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil) {
			return
		}
		profile := appArmorProfileOfAnnotation(v)
		if len(validateAppArmorProfile(profile, &field.Path{})) > 0 {
			profile = nil
		}
		warn := profile == nil
		if profile != nil && !equality.Semantic.DeepEqual(profile, podProfile) {
			if c.SecurityContext == nil {
				c.SecurityContext = &corev1.SecurityContext{}
			}
			c.SecurityContext.AppArmorProfile = profile
			warn = true
		}
		if warn {
			w = append(w, fmt.Sprintf(`%s: deprecated since v1.30; use the "appArmorProfile" field instead`, ap.Key(key)))
		}
	})
	return w
}
