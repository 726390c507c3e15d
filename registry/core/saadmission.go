package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

const (
	// DefaultServiceAccountName is the service account of a pod that names none.
	DefaultServiceAccountName = "default"
	// ServiceAccountTokenMountPath is where every container finds its token,
	// CA and namespace (client-go's in-cluster configuration reads them there).
	ServiceAccountTokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// ServiceAccountVolumePrefix starts the name of the token volume.
	ServiceAccountVolumePrefix = "kube-api-access"
	// RootCAConfigMap is the ConfigMap, in every namespace, holding the
	// cluster CA (key ca.crt); the root CA publisher controller keeps it.
	RootCAConfigMap = "kube-root-ca.crt"
	// TokenVolumeExpirationSeconds is the lifetime the token volume asks
	// for; the API server extends such pod-bound tokens and warns after it.
	TokenVolumeExpirationSeconds      = 3607
	enforceMountableSecretsAnnotation = "kubernetes.io/enforce-mountable-secrets"
)

// admitServiceAccount is the ServiceAccount plugin: its mutation, then its
// validation (which kube's plugin runs at the end of its mutating pass).
func (a *PodAdmission) admitServiceAccount(ctx context.Context, pod *corev1.Pod, forbidden func(string, ...any) error) error {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		// A mirror pod's spec is the kubelet's static pod: it is not
		// changed, and may not use what only the API can give it.
		if pod.Spec.ServiceAccountName != "" {
			return forbidden("a mirror pod may not reference service accounts")
		}
		if podReferencesSecrets(pod) {
			return forbidden("a mirror pod may not reference secrets")
		}
		for _, v := range pod.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					return forbidden("a mirror pod may not use ServiceAccountToken volume projections")
				}
			}
		}
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = DefaultServiceAccountName
		pod.Spec.DeprecatedServiceAccount = DefaultServiceAccountName
	}
	sa, err := a.lookupServiceAccount(ctx, pod.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return forbidden("error looking up service account %s/%s: %w", pod.Namespace, pod.Spec.ServiceAccountName, err)
	}
	if shouldAutomount(sa, pod) {
		a.mountServiceAccountToken(pod)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 {
		pod.Spec.ImagePullSecrets = make([]corev1.LocalObjectReference, len(sa.ImagePullSecrets))
		for i, s := range sa.ImagePullSecrets {
			pod.Spec.ImagePullSecrets[i].Name = s.Name
		}
	}
	// The plugin's validation ends its mutating pass, before the plugins
	// after it.
	if enforceMountableSecrets(sa) {
		if err := limitSecretReferences(sa, pod); err != nil {
			return forbidden("%w", err)
		}
	}
	return nil
}

// lookupServiceAccount gets the service account; a missing "default" is
// asked for ten times, 100–200 ms apart, as the plugin's live lookups do
// (the service account controller creates it just after its namespace).
func (a *PodAdmission) lookupServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	attempts := 1
	if name == DefaultServiceAccountName {
		attempts = 10
	}
	sleep := a.Sleep
	if sleep == nil {
		sleep = time.Sleep
	}
	interval := time.Duration(100+rand.IntN(100)) * time.Millisecond
	for i := 0; i < attempts; i++ {
		if i > 0 {
			sleep(interval)
		}
		sa, err := a.ServiceAccounts(ctx, namespace, name)
		if err == nil {
			return sa, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccount"), name)
}

// shouldAutomount: the pod's automountServiceAccountToken wins, then the
// service account's, then true.
func shouldAutomount(sa *corev1.ServiceAccount, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountServiceAccountToken adds the token volume (reusing a volume already
// named kube-api-access-*) and mounts it in every init and app container
// that has nothing mounted at the token path.
func (a *PodAdmission) mountServiceAccountToken(pod *corev1.Pod) {
	volName, haveVolume := "", false
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, ServiceAccountVolumePrefix+"-") {
			volName, haveVolume = v.Name, true
			break
		}
	}
	if volName == "" {
		gen := a.GenerateName
		if gen == nil {
			gen = func(prefix string) string { return prefix + utilrand.String(5) }
		}
		volName = gen(ServiceAccountVolumePrefix + "-")
	}
	mount := corev1.VolumeMount{Name: volName, ReadOnly: true, MountPath: ServiceAccountTokenMountPath}
	needed := false
	add := func(cs []corev1.Container) {
		for i := range cs {
			mounted := false
			for _, m := range cs[i].VolumeMounts {
				if m.MountPath == ServiceAccountTokenMountPath {
					mounted = true
					break
				}
			}
			if !mounted {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	if !haveVolume && needed {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volName,
			VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}})
	}
}

// TokenVolumeSource is the projected volume every pod's token comes in:
// the token (3607 s), the cluster CA from kube-root-ca.crt and the
// namespace, files of mode 0644.
func TokenVolumeSource() *corev1.ProjectedVolumeSource {
	mode := corev1.ProjectedVolumeSourceDefaultMode
	seconds := int64(TokenVolumeExpirationSeconds)
	return &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &seconds}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: RootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}
}

func enforceMountableSecrets(sa *corev1.ServiceAccount) bool {
	v, ok := sa.Annotations[enforceMountableSecretsAnnotation]
	if !ok {
		return false
	}
	b, _ := strconv.ParseBool(v)
	return b
}

// limitSecretReferences: with the service account's enforce-mountable-
// secrets annotation, a pod may only use the secrets the service account
// lists (volumes, env and envFrom of every container, image pull secrets).
func limitSecretReferences(sa *corev1.ServiceAccount, pod *corev1.Pod) error {
	mountable := map[string]bool{}
	for _, s := range sa.Secrets {
		mountable[s.Name] = true
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && !mountable[v.Secret.SecretName] {
			return fmt.Errorf("volume with secret.secretName=\"%s\" is not allowed because service account %s does not reference that secret", v.Secret.SecretName, sa.Name)
		}
	}
	check := func(kind string, cs []corev1.Container) error {
		for _, c := range cs {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !mountable[e.ValueFrom.SecretKeyRef.Name] {
					return fmt.Errorf("%s %s with envVar %s referencing secret.secretName=\"%s\" is not allowed because service account %s does not reference that secret", kind, c.Name, e.Name, e.ValueFrom.SecretKeyRef.Name, sa.Name)
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil && !mountable[ef.SecretRef.Name] {
					return fmt.Errorf("%s %s with envFrom referencing secret.secretName=\"%s\" is not allowed because service account %s does not reference that secret", kind, c.Name, ef.SecretRef.Name, sa.Name)
				}
			}
		}
		return nil
	}
	if err := check("init container", pod.Spec.InitContainers); err != nil {
		return err
	}
	if err := check("container", pod.Spec.Containers); err != nil {
		return err
	}
	pull := map[string]bool{}
	for _, s := range sa.ImagePullSecrets {
		pull[s.Name] = true
	}
	for i, ref := range pod.Spec.ImagePullSecrets {
		if !pull[ref.Name] {
			return fmt.Errorf(`imagePullSecrets[%d].name="%s" is not allowed because service account %s does not reference that imagePullSecret`, i, ref.Name, sa.Name)
		}
	}
	return nil
}

// podReferencesSecrets reports whether a pod names any secret, where
// kube's VisitPodSecretNames looks (empty names do not count): image pull
// secrets, secret volumes and projections, the secret references of volume
// plugins, and env and envFrom of every container.
func podReferencesSecrets(pod *corev1.Pod) bool {
	ref := func(r *corev1.LocalObjectReference) bool { return r != nil && r.Name != "" }
	for _, s := range pod.Spec.ImagePullSecrets {
		if s.Name != "" {
			return true
		}
	}
	for _, v := range pod.Spec.Volumes {
		s := v.VolumeSource
		switch {
		case s.Secret != nil && s.Secret.SecretName != "",
			s.AzureFile != nil && s.AzureFile.SecretName != "",
			s.CephFS != nil && ref(s.CephFS.SecretRef),
			s.Cinder != nil && ref(s.Cinder.SecretRef),
			s.FlexVolume != nil && ref(s.FlexVolume.SecretRef),
			s.RBD != nil && ref(s.RBD.SecretRef),
			s.ScaleIO != nil && ref(s.ScaleIO.SecretRef),
			s.ISCSI != nil && ref(s.ISCSI.SecretRef),
			s.StorageOS != nil && ref(s.StorageOS.SecretRef),
			s.CSI != nil && ref(s.CSI.NodePublishSecretRef):
			return true
		}
		if s.Projected != nil {
			for _, src := range s.Projected.Sources {
				if src.Secret != nil && src.Secret.Name != "" {
					return true
				}
			}
		}
	}
	cs := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, e := range pod.Spec.EphemeralContainers {
		cs = append(cs, corev1.Container(e.EphemeralContainerCommon))
	}
	for _, c := range cs {
		for _, ef := range c.EnvFrom {
			if ef.SecretRef != nil && ef.SecretRef.Name != "" {
				return true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
				return true
			}
		}
	}
	return false
}
