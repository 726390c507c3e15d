package main

import (
	"math/rand"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/apps"
	k8sdaemonset "k8s.io/kubernetes/pkg/registry/apps/daemonset"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// DaemonSets (apps/v1): create, update and /status through kube-apiserver's
// daemonset strategies (rest.ValidateCreate / ValidateUpdate, with the
// group's declarative validation) and svcnet's store path.
//
// Inputs are realistic node agents (a log shipper, a proxy on the host
// network, a monitoring exporter) with at most two faults each: the faults
// Deployments and ReplicaSets share (selectors, template labels,
// restartPolicy, activeDeadlineSeconds, minReadySeconds, metadata), the
// update strategy (bad type, OnDelete with rollingUpdate, maxSurge and
// maxUnavailable of every shape), revisionHistoryLimit and the deprecated
// template-generation annotation (numeric: a non-numeric one fails
// kube-apiserver's decoding, before the strategy); updates change the
// selector, the template (which moves the template generation), the
// strategy, annotations (including the template generation) or labels and
// carry a status (which is kept); status writes carry counts (negative, a
// smaller collisionCount) and spec, annotation or label changes.

// dsLabels are the labels the base DaemonSets select.
func dsLabels() map[string]string { return map[string]string{"app": "agent"} }

func dsTemplate(r *rand.Rand) corev1.PodTemplateSpec {
	c := corev1.Container{Name: "agent", Image: pick(r, "fluent/fluent-bit:3.1", "registry.k8s.io/kube-proxy:v1.37.2", "prom/node-exporter:v1.8.2")}
	t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: dsLabels()}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	if maybe(r, 0.3) {
		t.Spec.HostNetwork = true
		t.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100, HostPort: 9100}}
	}
	if maybe(r, 0.3) {
		t.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	}
	if maybe(r, 0.3) {
		t.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	if maybe(r, 0.2) {
		t.Spec.PriorityClassName = "system-node-critical"
	}
	if maybe(r, 0.2) {
		t.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	return t
}

func randDaemonSet(r *rand.Rand) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: namespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: dsLabels()},
			Template: dsTemplate(r),
		},
	}
	if maybe(r, 0.2) {
		ds.Labels = map[string]string{"app": "agent"}
	}
	var replicas *int32
	for _, k := range r.Perm(24)[:pick(r, 0, 1, 1, 1, 2, 2)] {
		if k == 0 {
			k = 13
		}
		if k <= 13 {
			// Faults shared with Deployments and ReplicaSets; the selector
			// ones are matched by dsLabels.
			appsFault(r, k, &ds.ObjectMeta, &ds.Spec.Selector, &ds.Spec.Template, &replicas, &ds.Spec.MinReadySeconds)
			if k == 2 && ds.Spec.Selector.MatchLabels["app"] == "web" {
				ds.Spec.Selector.MatchLabels["app"] = "agent"
			}
			continue
		}
		switch k {
		case 14:
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: pick[appsv1.DaemonSetUpdateStrategyType](r, "Bogus", "rollingUpdate", "")}
			if maybe(r, 0.5) {
				ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxSurge: pick(r, intOrPercentPool...), MaxUnavailable: pick(r, intOrPercentPool...)}
			}
		case 15:
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
			if maybe(r, 0.5) {
				ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxSurge: pick(r, intOrPercentPool...)}
			}
		case 16, 17:
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: pick[appsv1.DaemonSetUpdateStrategyType](r, "", appsv1.RollingUpdateDaemonSetStrategyType),
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: pick(r, intOrPercentPool...), MaxUnavailable: pick(r, intOrPercentPool...)}}
		case 18:
			ds.Spec.RevisionHistoryLimit = pick(r, ptr[int32](-1), ptr[int32](0), ptr[int32](2))
		case 19:
			ds.Annotations = map[string]string{appsv1.DeprecatedTemplateGeneration: pick(r, "3", "-2", "0", "007", "1")}
		case 20:
			ds.Annotations = map[string]string{pick(r, "kubernetes.io/description", "bad key!", "example.com/x"): "v"}
		case 21:
			ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, NumberReady: 9, ObservedGeneration: 4, CollisionCount: ptr[int32](2)}
		case 22:
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "node-role.kubernetes.io/control-plane", Operator: pick(r, corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpExists)}}}}}}}
		case 23:
			ds.Spec.MinReadySeconds = pick[int32](r, 10, -5)
			ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
		}
	}
	templateWarningFaults(r, &ds.ObjectMeta, &ds.Spec.Template)
	return ds
}

// storedDaemonSet is a valid DaemonSet as the store holds it: defaulted,
// with generations and a status.
func storedDaemonSet(r *rand.Rand) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: namespace, UID: "uid-13", ResourceVersion: "23", Generation: 2,
			Labels: map[string]string{"app": "agent"}, Annotations: map[string]string{appsv1.DeprecatedTemplateGeneration: pick(r, "1", "2")}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: dsLabels()},
			Template: dsTemplate(r),
		},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 3,
			UpdatedNumberScheduled: 3, NumberAvailable: 3},
	}
	if maybe(r, 0.1) {
		// Stored without the annotation (by something that does not write it).
		ds.Annotations = nil
	}
	if maybe(r, 0.3) {
		ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
	}
	if maybe(r, 0.3) {
		ds.Status.CollisionCount = ptr[int32](pick[int32](r, 0, 2))
	}
	if maybe(r, 0.2) {
		// Stored with what draws warnings (which an update that keeps
		// the template does not repeat).
		addStoredPodWarnings(r, &ds.Spec.Template.Spec, &ds.Spec.Template.ObjectMeta)
	}
	if maybe(r, 0.15) {
		addStoredVolumes(r, &ds.Spec.Template.Spec)
	}
	legacyscheme.Scheme.Default(ds)
	return ds
}

func daemonSetCreateCase(r *rand.Rand) string {
	return compareAppsCreate(randDaemonSet(r), "daemonsets", k8sdaemonset.Strategy, core.NewDaemonSetStrategy(),
		func() runtime.Object { return &apps.DaemonSet{} }, func() runtime.Object { return &appsv1.DaemonSet{} })
}

// daemonSetUpdate is an update of a stored DaemonSet: one or two spec or
// metadata changes, or none (a write of what is stored, or of a new status).
func daemonSetUpdate(r *rand.Rand) (in, old *appsv1.DaemonSet) {
	old = storedDaemonSet(r)
	in = old.DeepCopy()
	next := randDaemonSet(r)
	for _, k := range r.Perm(13)[:pick(r, 0, 1, 1, 2)] {
		switch k {
		case 12:
			changeVolumes(r, &in.Spec.Template.Spec)
		case 0:
			// A new selector the template matches: still immutable.
			in.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent", "tier": "node"}}
			in.Spec.Template.Labels = map[string]string{"app": "agent", "tier": "node"}
		case 1:
			in.Spec.Selector = next.Spec.Selector
			in.Spec.Template.Labels = next.Spec.Template.Labels
		case 2:
			in.Name = pick(r, "agent-2", "Bad_Name")
		case 3:
			in.Spec.Template.Spec.Containers[0].Image = pick(r, "fluent/fluent-bit:3.2", in.Spec.Template.Spec.Containers[0].Image)
		case 4:
			in.Spec.UpdateStrategy = next.Spec.UpdateStrategy
		case 5:
			in.Spec.Template = next.Spec.Template
		case 6:
			in.Annotations = pick(r, nil, map[string]string{"kubernetes.io/description": "agent"},
				map[string]string{appsv1.DeprecatedTemplateGeneration: pick(r, "5", "0", "-1", "2")})
		case 7:
			in.Labels = pick(r, nil, map[string]string{"app": "agent", "env": "prod"}, map[string]string{"bad key!": "x"})
		case 8:
			in.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, NumberAvailable: 7}
		case 9:
			in.Spec.MinReadySeconds, in.Spec.RevisionHistoryLimit = next.Spec.MinReadySeconds, next.Spec.RevisionHistoryLimit
		case 10:
			in.Finalizers = []string{pick(r, "custom", "example.com/cleanup")}
		case 11:
			in.Spec.Template.Spec.RestartPolicy = pick(r, corev1.RestartPolicyNever, corev1.RestartPolicyAlways)
		}
	}
	return in, old
}

func daemonSetUpdateCase(r *rand.Rand) string {
	in, old := daemonSetUpdate(r)
	return withInput(compareDaemonSetUpdate(in, old, "", k8sdaemonset.Strategy, core.NewDaemonSetStrategy()), in, old)
}

func daemonSetStatusCase(r *rand.Rand) string {
	in, old := daemonSetUpdate(r)
	s := &in.Status
	*s = old.Status
	for _, k := range r.Perm(7)[:pick(r, 0, 1, 1, 2)] {
		switch k {
		case 0:
			s.DesiredNumberScheduled, s.CurrentNumberScheduled = pick[int32](r, 0, 2, -1), pick[int32](r, 2, -3)
		case 1:
			s.NumberMisscheduled, s.NumberReady = pick[int32](r, -1, 1), pick[int32](r, 1, -4, 5)
		case 2:
			s.NumberAvailable, s.NumberUnavailable = pick[int32](r, -1, 2, 4), pick[int32](r, -3, 1)
		case 3:
			s.CollisionCount = pick(r, nil, ptr[int32](0), ptr[int32](1), ptr[int32](3), ptr[int32](-1))
		case 4:
			s.ObservedGeneration = pick[int64](r, -1, 4)
		case 5:
			s.UpdatedNumberScheduled = pick[int32](r, -2, 3)
		case 6:
			s.Conditions = []appsv1.DaemonSetCondition{{Type: "Progressing", Status: corev1.ConditionTrue, Reason: "Rolling"}}
		}
	}
	st := core.NewDaemonSetStrategy().(interface{ StatusStrategy() registry.Strategy }).StatusStrategy()
	return withInput(compareDaemonSetUpdate(in, old, "status", k8sdaemonset.StatusStrategy, st), in, old)
}

// compareDaemonSetUpdate is compareAppsUpdate for DaemonSets.
func compareDaemonSetUpdate(in, old *appsv1.DaemonSet, sub string, kst genericrest.RESTUpdateStrategy, st registry.Strategy) string {
	ctx := requestCtx("update", "apps", "v1", "daemonsets", sub, in.Name)

	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopy()
	ki, kold, kPrepared := &apps.DaemonSet{}, &apps.DaemonSet{}, &appsv1.DaemonSet{}
	toInternal(kv, ki)
	toInternal(old.DeepCopy(), kold)
	kst.PrepareForUpdate(ctx, ki, kold)
	kErrs := genericrest.ValidateUpdate(ctx, ki, kold, kst)
	toInternal(ki, kPrepared)

	sv := in.DeepCopy()
	st.Default(sv)
	sDefaulted := sv.DeepCopy()
	st.PrepareForUpdate(ctx, sv, old.DeepCopy())
	sErrs := registry.ValidateUpdate(ctx, st, true, sv, old.DeepCopy())
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings(strings.TrimSpace("update "+sub), kst.WarningsOnUpdate(ctx, ki, kold), updateWarnings(ctx, st, sv, old))
	}
	return joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), compareObjs("prepared", kPrepared, sv),
		compareErrs(strings.TrimSpace("update "+sub), kErrs, sErrs), warnDiff)
}
