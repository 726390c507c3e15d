package main

import (
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The deprecated seccomp and AppArmor annotations as users still write them
// next to (or instead of) the profile fields: agreeing with the fields or
// not, values that name no profile, annotations of containers the pod does
// not have, and profile fields right and wrong. On a new Pod kube-apiserver
// turns AppArmor annotations into container fields (and warns); on a Pod
// and a pod template it refuses an annotation that says something other
// than the field that applies.

var (
	appArmorAnnotationValues = []string{"runtime/default", "unconfined", "localhost/p1", "localhost/p2", "", "localhost/", "localhost/ p1"}
	seccompAnnotationValues  = []string{corev1.SeccompProfileRuntimeDefault, corev1.DeprecatedSeccompProfileDockerDefault, "unconfined",
		"localhost/profile.json", "localhost/other.json"}
)

func randAppArmorProfile(r *rand.Rand) *corev1.AppArmorProfile {
	switch r.Intn(10) {
	case 0, 1:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	case 2:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	case 3, 4:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr(pick(r, "p1", "p2"))}
	case 5:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: pick(r, nil, ptr(""), ptr(" p1"))}
	case 6:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault, LocalhostProfile: ptr("p1")}
	case 7:
		return &corev1.AppArmorProfile{Type: pick[corev1.AppArmorProfileType](r, "", "Bogus", "runtime/default")}
	}
	return nil
}

func randSeccompProfile(r *rand.Rand) *corev1.SeccompProfile {
	switch r.Intn(4) {
	case 0:
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	case 1:
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	case 2:
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("profile.json")}
	}
	return nil
}

// addSecurityAnnotations writes profile fields and annotations of a pod or
// pod template. At most one annotation per kind (seccomp, AppArmor) names
// a missing container or holds a malformed value: kube-apiserver reports
// those as it walks the annotations map, in Go's random order.
func addSecurityAnnotations(r *rand.Rand, s *corev1.PodSpec, m *metav1.ObjectMeta) {
	if len(s.Containers) == 0 {
		return
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	if maybe(r, 0.4) {
		if s.SecurityContext == nil {
			s.SecurityContext = &corev1.PodSecurityContext{}
		}
		s.SecurityContext.AppArmorProfile = randAppArmorProfile(r)
	}
	if maybe(r, 0.2) {
		if s.SecurityContext == nil {
			s.SecurityContext = &corev1.PodSecurityContext{}
		}
		s.SecurityContext.SeccompProfile = randSeccompProfile(r)
	}
	if maybe(r, 0.3) {
		m.Annotations[corev1.SeccompPodAnnotationKey] = pick(r, append(seccompAnnotationValues, "bogus", "localhost/../x")...)
	}
	// Annotations of containers whose names are valid and unique (others
	// would make invalid or shared annotation keys).
	count := map[string]int{}
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for _, c := range list {
			count[c.Name]++
		}
	}
	var named []string
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range list {
			c := &list[i]
			if count[c.Name] > 1 || len(validation.IsDNS1123Label(c.Name)) > 0 {
				continue
			}
			named = append(named, c.Name)
			if maybe(r, 0.3) {
				if c.SecurityContext == nil {
					c.SecurityContext = &corev1.SecurityContext{}
				}
				c.SecurityContext.AppArmorProfile = randAppArmorProfile(r)
			}
			if maybe(r, 0.6) {
				m.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name] = pick(r, appArmorAnnotationValues...)
			}
			if maybe(r, 0.2) {
				if c.SecurityContext == nil {
					c.SecurityContext = &corev1.SecurityContext{}
				}
				c.SecurityContext.SeccompProfile = randSeccompProfile(r)
			}
			if maybe(r, 0.2) {
				m.Annotations[corev1.SeccompContainerAnnotationKeyPrefix+c.Name] = pick(r, seccompAnnotationValues...)
			}
		}
	}
	if len(named) == 0 {
		return
	}
	switch r.Intn(6) {
	case 0:
		m.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"missing"] = pick(r, "runtime/default", "bogus")
	case 1:
		m.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+pick(r, named...)] = pick(r, "bogus", "docker/default", "Localhost/p1")
	case 2:
		m.Annotations[corev1.SeccompContainerAnnotationKeyPrefix+pick(r, named...)] = pick(r, "bogus", "localhost/../x", "localhost//abs")
	}
}
