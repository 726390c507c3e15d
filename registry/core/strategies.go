package core

import (
	"context"
	"reflect"
	"slices"
	"strings"

	// Digests in image references are validated with the registered hash.
	_ "crypto/sha256"
	_ "crypto/sha512"

	"github.com/distribution/reference"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/events"
)

// LabelMetadataName is the label every namespace carries with its own name.
const LabelMetadataName = "kubernetes.io/metadata.name"

// NewNamespaceStrategy: namespaces get the kubernetes.io/metadata.name label,
// the "kubernetes" finalizer and phase Active; names are DNS labels. As in
// kube-apiserver, spec.finalizers changes only through the finalize
// subresource, a delete only marks a namespace (Terminating) while it has
// spec.finalizers, and the write that removes the last one deletes it: the
// namespace controller empties the namespace and then removes "kubernetes".
func NewNamespaceStrategy() registry.Strategy {
	return &namespaceStrategy{&Basic{
		HasStatus: true,
		NameFunc:  dnsLabel,
		Defaulter: func(obj runtime.Object) {
			ns := obj.(*corev1.Namespace)
			if ns.Name != "" {
				if ns.Labels == nil {
					ns.Labels = map[string]string{}
				}
				ns.Labels[LabelMetadataName] = ns.Name
			}
			if ns.Status.Phase == "" {
				ns.Status.Phase = corev1.NamespaceActive
			}
		},
		// A new namespace is Active and always has the "kubernetes"
		// finalizer (the namespace controller's), after any it was given.
		OnCreate: func(obj runtime.Object) {
			ns := obj.(*corev1.Namespace)
			ns.Status.Phase = corev1.NamespaceActive
			if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
				ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
			}
		},
		// As kube-apiserver's ValidateNamespace, which reports every bad
		// finalizer at spec.finalizers (no index); an update checks the
		// metadata (the name too) again.
		Validator: validateNamespaceFinalizers,
		UpdateValidator: func(obj, _ runtime.Object) field.ErrorList {
			errs := metavalidation.ValidateObjectMeta(&obj.(*corev1.Namespace).ObjectMeta, false, metavalidation.ValidateNamespaceName, field.NewPath("metadata"))
			return append(errs, validateNamespaceFinalizers(obj)...)
		},
		// As Kubernetes' namespace registry, "name" stays in the set (a
		// historical bug kept for compatibility) although the conversion
		// rejects it.
		FieldsFunc: func(obj runtime.Object) map[string]string {
			ns := obj.(*corev1.Namespace)
			return map[string]string{"metadata.name": ns.Name, "status.phase": string(ns.Status.Phase), "name": ns.Name}
		},
		FieldLabels: registry.SupportedFieldLabels(nil, "status.phase", "metadata.name"),
	}}
}

type namespaceStrategy struct{ *Basic }

// ValidateDeclaratively: kube-apiserver 1.37 validates namespaces (and
// their /status and /finalize) declaratively; the only rules are ObjectMeta's.
func (s *namespaceStrategy) ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	return ObjectMetaDeclarative(ctx, op, obj, old)
}

func (s *namespaceStatusStrategy) ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	return ObjectMetaDeclarative(ctx, op, obj, old)
}

func (s *namespaceFinalizeStrategy) ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	return ObjectMetaDeclarative(ctx, op, obj, old)
}

func validateNamespaceFinalizers(obj runtime.Object) field.ErrorList {
	var errs field.ErrorList
	for _, f := range obj.(*corev1.Namespace).Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), field.NewPath("spec", "finalizers"))...)
	}
	return errs
}

// validateFinalizerName: a qualified name, and one without a "/" must be a
// standard finalizer (kubernetes, orphan, foregroundDeletion).
func validateFinalizerName(f string, p *field.Path) field.ErrorList {
	errs := metavalidation.ValidateFinalizerName(f, p)
	if !strings.Contains(f, "/") && f != string(corev1.FinalizerKubernetes) && f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
		errs = append(errs, field.Invalid(p, f, "name is neither a standard finalizer name nor is it fully qualified"))
	}
	return errs
}

var (
	_ registry.SpecFinalizer      = (*namespaceStrategy)(nil)
	_ registry.FinalizeStrategist = (*namespaceStrategy)(nil)
)

// PrepareForUpdate keeps status and spec.finalizers: those change through
// /status and /finalize only.
func (s *namespaceStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.Basic.PrepareForUpdate(ctx, obj, old)
	obj.(*corev1.Namespace).Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
}

// StatusStrategy: a status write keeps the spec; the phase must agree with
// deletionTimestamp (Active without, Terminating with), as kube-apiserver
// validates.
func (s *namespaceStrategy) StatusStrategy() registry.Strategy {
	return &namespaceStatusStrategy{statusStrategy{s.Basic}}
}

// FinalizeStrategy: a finalize write changes spec.finalizers and metadata,
// never status; each finalizer is a qualified name or a standard one.
func (s *namespaceStrategy) FinalizeStrategy() registry.Strategy {
	return &namespaceFinalizeStrategy{s.Basic}
}

// Finalized implements registry.SpecFinalizer.
func (s *namespaceStrategy) Finalized(obj runtime.Object) bool {
	return len(obj.(*corev1.Namespace).Spec.Finalizers) == 0
}

// MarkDeleting implements registry.SpecFinalizer: a namespace being deleted
// is Terminating; kube-apiserver sets no deletion grace period on it.
func (s *namespaceStrategy) MarkDeleting(obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status.Phase = corev1.NamespaceTerminating
	ns.DeletionGracePeriodSeconds = nil
}

type namespaceStatusStrategy struct{ statusStrategy }

func (s *namespaceStatusStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	ns := obj.(*corev1.Namespace)
	p := field.NewPath("status", "Phase")
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != corev1.NamespaceActive {
			return field.ErrorList{field.Invalid(p, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty")}
		}
	} else if ns.Status.Phase != corev1.NamespaceTerminating {
		return field.ErrorList{field.Invalid(p, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")}
	}
	return nil
}

type namespaceFinalizeStrategy struct{ *Basic }

func (s *namespaceFinalizeStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*corev1.Namespace).Status = old.(*corev1.Namespace).Status
}

func (s *namespaceFinalizeStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "finalizers")
	for i, f := range obj.(*corev1.Namespace).Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), p.Index(i))...)
	}
	return errs
}

// DefaultPodSpec applies Kubernetes' defaults to a pod spec.
func DefaultPodSpec(s *corev1.PodSpec) {
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := int64(corev1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &g
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	roundUpMilli(s.Overhead)
	// serviceAccount is the deprecated alias of serviceAccountName; the two
	// are kept equal, serviceAccountName winning (Kubernetes 1.37 does this
	// in the v1 defaults; before, its conversion did the same).
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount
	}
	s.DeprecatedServiceAccount = s.ServiceAccountName
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range list {
			defaultContainer(&list[i])
		}
	}
	for i := range s.EphemeralContainers {
		defaultContainer((*corev1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon))
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i].VolumeSource)
	}
}

// DefaultPod applies the defaults Kubernetes gives a Pod beyond those of its
// spec (a pod template does not get these): enableServiceLinks true, a
// negative terminationGracePeriodSeconds becomes 1, container requests
// default to their limits, host-network pods get hostPort = containerPort,
// and status.podIP and status.podIPs are kept in step (podIP wins).
func DefaultPod(pod *corev1.Pod) {
	spec := &pod.Spec
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		one := int64(1)
		spec.TerminationGracePeriodSeconds = &one
	}
	DefaultPodSpec(spec)
	if spec.EnableServiceLinks == nil {
		t := corev1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &t
	}
	for _, list := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range list {
			c := &list[i]
			for name, limit := range c.Resources.Limits {
				if c.Resources.Requests == nil {
					c.Resources.Requests = corev1.ResourceList{}
				}
				if _, ok := c.Resources.Requests[name]; !ok {
					c.Resources.Requests[name] = limit.DeepCopy()
				}
			}
			if spec.HostNetwork {
				for j := range c.Ports {
					if c.Ports[j].HostPort == 0 {
						c.Ports[j].HostPort = c.Ports[j].ContainerPort
					}
				}
			}
		}
	}
	st := &pod.Status
	switch {
	case st.PodIP != "" && len(st.PodIPs) == 0:
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	case st.PodIP == "" && len(st.PodIPs) > 0:
		st.PodIP = st.PodIPs[0].IP
	case st.PodIP != "" && st.PodIPs[0].IP != st.PodIP:
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	}
}

func defaultContainer(c *corev1.Container) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	// Resource quantities are rounded up to milli-units.
	for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		for name, q := range l {
			q.RoundUp(-3)
			l[name] = q
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	if lc := c.Lifecycle; lc != nil {
		for _, h := range []*corev1.LifecycleHandler{lc.PostStart, lc.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil {
			continue
		}
		if p.TimeoutSeconds == 0 {
			p.TimeoutSeconds = 1
		}
		if p.PeriodSeconds == 0 {
			p.PeriodSeconds = 10
		}
		if p.SuccessThreshold == 0 {
			p.SuccessThreshold = 1
		}
		if p.FailureThreshold == 0 {
			p.FailureThreshold = 3
		}
		defaultHTTPGet(p.HTTPGet)
		if p.GRPC != nil && p.GRPC.Service == nil {
			p.GRPC.Service = new(string)
		}
	}
}

// defaultPullPolicy is Always for an image whose tag is "latest" (which a
// reference with neither tag nor digest implicitly has) and IfNotPresent
// otherwise, also for a reference that does not parse, as Kubernetes decides
// it (with the same parser).
func defaultPullPolicy(image string) corev1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return corev1.PullIfNotPresent
	}
	tagged, hasTag := named.(reference.Tagged)
	_, hasDigest := named.(reference.Digested)
	if (hasTag && tagged.Tag() == "latest") || (!hasTag && !hasDigest) {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// defaultHTTPGet: path "/" and scheme HTTP, in probes and lifecycle hooks alike.
func defaultHTTPGet(g *corev1.HTTPGetAction) {
	if g == nil {
		return
	}
	if g.Path == "" {
		g.Path = "/"
	}
	if g.Scheme == "" {
		g.Scheme = corev1.URISchemeHTTP
	}
}

// NewPodStrategy: pods get Kubernetes' spec defaults, phase Pending on create,
// the pod field selectors (spec.nodeName, status.phase, ...), and graceful
// deletion once bound to a node.
func NewPodStrategy() registry.Strategy {
	return WithDeclarative(&Basic{
		Namespaced: true,
		HasStatus:  true,
		// Kubernetes defaults enableServiceLinks (and the rest of DefaultPod)
		// on Pods only, never on the pod templates of Deployments and
		// ReplicaSets (where it would change the pod-template-hash).
		Defaulter: func(obj runtime.Object) { DefaultPod(obj.(*corev1.Pod)) },
		Admit:     admitPod,
		// kube-apiserver warns on creates and /status writes, never on
		// updates of the pod itself (a frequent path nobody reads).
		// AppArmor annotations become fields, with kube-apiserver's
		// warning from its PrepareForCreate (ahead of WarningsOnCreate's).
		OnCreateContext: func(ctx context.Context, obj runtime.Object) {
			for _, w := range applyAppArmorAnnotations(obj.(*corev1.Pod)) {
				registry.Warn(ctx, w)
			}
		},
		CreateWarnings:       podCreateWarnings,
		StatusUpdateWarnings: podStatusWarnings,
		OnCreate: func(obj runtime.Object) {
			pod := obj.(*corev1.Pod)
			// As kube-apiserver: generation 1 (the store keeps it), phase
			// Pending and the QoS class of the spec.
			pod.Generation = 1
			dropDisabledVolumeFields(&pod.Spec, nil)
			mergeMatchLabelKeys(pod)
			pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: podQOS(&pod.Spec)}
			if len(pod.Spec.SchedulingGates) > 0 {
				pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					LastTransitionTime: metav1.Now(), Reason: corev1.PodReasonSchedulingGated,
					Message: "Scheduling is blocked due to non-empty scheduling gates"}}
			}
		},
		Validator: func(obj runtime.Object) field.ErrorList {
			return validatePodCreate(obj.(*corev1.Pod))
		},
		// As kube-apiserver's pod strategy (the store would do the same
		// after PrepareForUpdate): a changed spec is a new generation.
		OnUpdate: func(obj, old runtime.Object) {
			pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
			dropDisabledVolumeFields(&pod.Spec, &oldPod.Spec)
			if !equality.Semantic.DeepEqual(pod.Spec, oldPod.Spec) {
				pod.Generation = oldPod.Generation + 1
			}
		},
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
			return validatePodUpdate(pod, oldPod)
		},
		// The conversion accepts status.podIPs but, as in Kubernetes, the
		// field set has no such entry, so it compares against "".
		FieldLabels: registry.SupportedFieldLabels(map[string]string{"spec.host": "spec.nodeName"},
			"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
			"spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
			"status.nominatedNodeName"),
		FieldsFunc: func(obj runtime.Object) map[string]string {
			pod := obj.(*corev1.Pod)
			podIP := ""
			if len(pod.Status.PodIPs) > 0 {
				podIP = pod.Status.PodIPs[0].IP
			}
			return map[string]string{
				"metadata.name":            pod.Name,
				"metadata.namespace":       pod.Namespace,
				"spec.nodeName":            pod.Spec.NodeName,
				"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
				"spec.schedulerName":       pod.Spec.SchedulerName,
				"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
				"spec.hostNetwork":         boolString(pod.Spec.HostNetwork),
				"status.phase":             string(pod.Status.Phase),
				"status.podIP":             podIP,
				"status.nominatedNodeName": pod.Status.NominatedNodeName,
			}
		},
		Graceful: func(obj runtime.Object, requested *int64) (int64, bool) {
			pod := obj.(*corev1.Pod)
			if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				return 0, false
			}
			grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
			if pod.Spec.TerminationGracePeriodSeconds != nil {
				grace = *pod.Spec.TerminationGracePeriodSeconds
			}
			if requested != nil {
				grace = *requested
			}
			if grace <= 0 {
				return 0, false
			}
			return grace, true
		},
	}, ObjectMetaDeclarative)
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// NewEventStrategy is core/v1 Events': the involvedObject.* field
// selectors kubectl describe uses, and kube-apiserver's legacy Event
// validation (package registry/events, shared with events.k8s.io/v1).
func NewEventStrategy() registry.Strategy {
	return &Basic{
		Namespaced: true,
		FieldLabels: registry.SupportedFieldLabels(nil, "involvedObject.kind", "involvedObject.namespace",
			"involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
			"involvedObject.fieldPath", "reason", "reportingComponent", "source", "type", "metadata.namespace", "metadata.name"),
		FieldsFunc: func(obj runtime.Object) map[string]string { return events.Fields(obj.(*corev1.Event)) },
		Validator:  func(obj runtime.Object) field.ErrorList { return events.ValidateCreate(obj.(*corev1.Event), false) },
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			return events.ValidateUpdate(obj.(*corev1.Event), old.(*corev1.Event), false)
		},
	}
}

// NewConfigMapStrategy: configmaps have no status; validated as
// kube-apiserver 1.37's ValidateConfigMap and ValidateConfigMapUpdate (keys,
// a key in both data and binaryData, 1 MiB in all, nothing changes once
// immutable) and declaratively (ObjectMeta's rules).
func NewConfigMapStrategy() registry.Strategy {
	return WithDeclarative(&Basic{
		Namespaced: true,
		Defaulter: func(obj runtime.Object) {
			if cm := obj.(*corev1.ConfigMap); cm.Data == nil {
				cm.Data = map[string]string{}
			}
		},
		Validator: func(obj runtime.Object) field.ErrorList { return validateConfigMap(obj.(*corev1.ConfigMap)) },
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			cm, o := obj.(*corev1.ConfigMap), old.(*corev1.ConfigMap)
			var errs field.ErrorList
			if o.Immutable != nil && *o.Immutable {
				const msg = "field is immutable when `immutable` is set"
				if cm.Immutable == nil || !*cm.Immutable {
					errs = append(errs, field.Forbidden(field.NewPath("immutable"), msg))
				}
				if !reflect.DeepEqual(cm.Data, o.Data) {
					errs = append(errs, field.Forbidden(field.NewPath("data"), msg))
				}
				if !reflect.DeepEqual(cm.BinaryData, o.BinaryData) {
					errs = append(errs, field.Forbidden(field.NewPath("binaryData"), msg))
				}
			}
			errs = append(errs, metavalidation.ValidateObjectMeta(&cm.ObjectMeta, true, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
			return append(errs, validateConfigMap(cm)...)
		},
	}, ObjectMetaDeclarative)
}

// maxConfigMapSize is the most data and binaryData may hold together.
const maxConfigMapSize = 1 << 20

func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for k, v := range cm.Data {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, msg))
		}
		if _, dup := cm.BinaryData[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, "duplicate of key present in binaryData"))
		}
		size += len(v)
	}
	for k, v := range cm.BinaryData {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, msg))
		}
		size += len(v)
	}
	if size > maxConfigMapSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxConfigMapSize))
	}
	return errs
}

// NewLeaseStrategy: coordination leases (node heartbeats, leader
// election), validated as kube-apiserver 1.37's ValidateLease (a positive
// duration, transitions not negative) and declaratively (ObjectMeta's
// rules). Its CoordinatedLeaderElection fields (strategy, preferredHolder)
// are off, as the gate is by default: dropped unless stored.
func NewLeaseStrategy() registry.Strategy {
	return WithDeclarative(&Basic{
		Namespaced: true,
		OnCreate: func(obj runtime.Object) {
			l := obj.(*coordinationv1.Lease)
			l.Spec.Strategy, l.Spec.PreferredHolder = nil, nil
		},
		OnUpdate: func(obj, old runtime.Object) {
			l, o := obj.(*coordinationv1.Lease), old.(*coordinationv1.Lease)
			if o.Spec.Strategy == nil {
				l.Spec.Strategy = nil
			}
			if o.Spec.PreferredHolder == nil {
				l.Spec.PreferredHolder = nil
			}
		},
		Validator: func(obj runtime.Object) field.ErrorList { return validateLeaseSpec(&obj.(*coordinationv1.Lease).Spec) },
	}, ObjectMetaDeclarative)
}

func validateLeaseSpec(spec *coordinationv1.LeaseSpec) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec")
	if d := spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(p.Child("leaseDurationSeconds"), d, "must be greater than 0"))
	}
	if t := spec.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(p.Child("leaseTransitions"), t, "must be greater than or equal to 0"))
	}
	if s := spec.Strategy; s != nil {
		// kube-apiserver's path, "strategy" twice.
		sp := p.Child("strategy", "strategy")
		if !strings.Contains(string(*s), "/") {
			if *s != coordinationv1.OldestEmulationVersion {
				errs = append(errs, field.NotSupported(sp, *s, []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}))
			}
		} else {
			for _, msg := range validation.IsQualifiedName(string(*s)) {
				errs = append(errs, field.Invalid(sp, *s, msg))
			}
		}
	}
	if h := spec.PreferredHolder; h != nil && *h != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(p.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// NewServiceAccountStrategy: ServiceAccounts are validated as kube-apiserver
// 1.37's ValidateServiceAccount (ObjectMeta's rules, the name a DNS
// subdomain), and their secret references keep only the name, as its
// strategy's cleanSecretReferences does on create and update.
func NewServiceAccountStrategy() registry.Strategy {
	clean := func(obj runtime.Object) {
		sa := obj.(*corev1.ServiceAccount)
		for i, s := range sa.Secrets {
			sa.Secrets[i] = corev1.ObjectReference{Name: s.Name}
		}
	}
	// ValidateServiceAccount is ObjectMeta's validation (the generic
	// registry runs its generic part on create) with kube's finalizer rule;
	// an update validates the new object whole again.
	validate := func(obj runtime.Object) field.ErrorList {
		return validateKubeFinalizers(&obj.(*corev1.ServiceAccount).ObjectMeta)
	}
	return WithDeclarative(&Basic{
		Namespaced:     true,
		CreateWarnings: func(obj runtime.Object) []string { return serviceAccountWarnings(obj, nil) },
		UpdateWarnings: serviceAccountWarnings,
		OnCreate:       clean,
		OnUpdate:       func(obj, _ runtime.Object) { clean(obj) },
		Validator:      validate,
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			m := &obj.(*corev1.ServiceAccount).ObjectMeta
			errs := metavalidation.ValidateObjectMetaUpdate(m, &old.(*corev1.ServiceAccount).ObjectMeta, field.NewPath("metadata"))
			errs = append(errs, validateKubeFinalizers(m)...)
			return append(errs, metavalidation.ValidateObjectMeta(m, true, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
		},
	}, ObjectMetaDeclarative)
}
