package main

import (
	"math/rand"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/apps"
	k8sdeployment "k8s.io/kubernetes/pkg/registry/apps/deployment"
	k8sreplicaset "k8s.io/kubernetes/pkg/registry/apps/replicaset"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// Deployments and ReplicaSets (apps/v1): create, update and /status through
// kube-apiserver's apps strategies (rest.ValidateCreate / ValidateUpdate,
// with the group's declarative validation) and svcnet's store path.
//
// Inputs are realistic objects with at most two faults each: replicas,
// selectors (nil, empty, not matching, bad keys and values, bad
// expressions), template labels and annotations, restartPolicy,
// activeDeadlineSeconds, the rollout strategy (bad type, Recreate with
// rollingUpdate, maxSurge/maxUnavailable of every shape), minReadySeconds,
// revisionHistoryLimit, progressDeadlineSeconds, the deprecated rollback
// annotation, names, labels and finalizers; updates change the selector,
// the name, annotations or the spec and carry a status (which is kept);
// status writes carry counts (negative, above replicas, a smaller
// collisionCount) and spec or label changes (which are dropped). The pod
// template's spec stays simple and valid: pod spec validation has its own
// kinds. Maps get at most one bad entry, as their errors come out in map
// order.

// appsLabels are the labels the base objects select.
func appsLabels() map[string]string { return map[string]string{"app": "web"} }

func appsTemplate(r *rand.Rand) corev1.PodTemplateSpec {
	c := corev1.Container{Name: "app", Image: "nginx"}
	if maybe(r, 0.4) {
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}
	}
	t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: appsLabels()}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	if maybe(r, 0.3) {
		t.Labels["tier"] = "frontend"
	}
	if maybe(r, 0.2) {
		t.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	return t
}

var intOrPercentPool = []*intstr.IntOrString{nil, ptr(intstr.FromInt32(0)), ptr(intstr.FromInt32(1)), ptr(intstr.FromInt32(3)),
	ptr(intstr.FromInt32(-1)), ptr(intstr.FromString("25%")), ptr(intstr.FromString("0%")), ptr(intstr.FromString("100%")),
	ptr(intstr.FromString("150%")), ptr(intstr.FromString("abc")), ptr(intstr.FromString("5")), ptr(intstr.FromString("%")),
	ptr(intstr.FromString("-10%")), ptr(intstr.FromString("")), ptr(intstr.FromString("<1%")), ptr(intstr.FromString("0"))}

// appsFault changes one thing common to Deployments and ReplicaSets (the
// metadata, the selector, the template, replicas, minReadySeconds); false
// when k is not such a fault.
func appsFault(r *rand.Rand, k int, m *metav1.ObjectMeta, sel **metav1.LabelSelector, t *corev1.PodTemplateSpec, replicas **int32, minReady *int32) bool {
	if *sel == nil && k >= 2 && k <= 4 {
		*sel = &metav1.LabelSelector{}
	}
	switch k {
	case 0:
		*replicas = pick(r, nil, ptr[int32](0), ptr[int32](-1), ptr[int32](5))
	case 1:
		*sel = pick(r, nil, &metav1.LabelSelector{}, &metav1.LabelSelector{MatchLabels: map[string]string{}})
	case 2:
		(*sel).MatchLabels = map[string]string{"app": pick(r, "other", "web", "Bad Value", "", strings.Repeat("v", 64))}
	case 3:
		(*sel).MatchLabels = map[string]string{pick(r, "bad key!", "example.com/app", "a/b/c", strings.Repeat("k", 64), "tier"): "web"}
	case 4:
		e := metav1.LabelSelectorRequirement{
			Key:      pick(r, "app", "tier", "bad key!", ""),
			Operator: pick(r, metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist, "Equals", ""),
		}
		for j, n := 0, r.Intn(3); j < n; j++ {
			e.Values = append(e.Values, pick(r, "web", "db", "bad value!", ""))
		}
		(*sel).MatchExpressions = append((*sel).MatchExpressions, e)
		if maybe(r, 0.3) {
			(*sel).MatchLabels = nil
		}
	case 5:
		t.Labels = pick(r, nil, map[string]string{}, map[string]string{"app": "api"}, map[string]string{"app": "web", "bad key!": "x"},
			map[string]string{"app": "web", "tier": "Bad Value!"}, map[string]string{"app": "web", strings.Repeat("k", 64): "x"})
	case 6:
		t.Spec.RestartPolicy = pick(r, corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways)
	case 7:
		t.Spec.ActiveDeadlineSeconds = pick(r, ptr[int64](30), ptr[int64](600))
	case 8:
		*minReady = pick[int32](r, -1, 5, 600, 700)
	case 9:
		m.Name = randObjectName(r)
	case 10:
		m.Labels = map[string]string{pick(r, "team", "bad key!", "example.com/owner"): pick(r, "a", "Bad Value!", "")}
	case 11:
		m.Finalizers = []string{pick(r, "custom", "example.com/cleanup", metav1.FinalizerOrphanDependents, "bad/finalizer/x")}
	case 12:
		t.Annotations = map[string]string{pick(r, "note", "bad key!", "example.com/x"): "v"}
	case 13:
		// two template faults at once
		t.Spec.RestartPolicy = corev1.RestartPolicyNever
		t.Labels = map[string]string{"app": "other"}
	default:
		return false
	}
	return true
}

func randDeployment(r *rand.Rand) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: pick(r, nil, ptr[int32](3)),
			Selector: &metav1.LabelSelector{MatchLabels: appsLabels()},
			Template: appsTemplate(r),
		},
	}
	if maybe(r, 0.2) {
		d.Labels = map[string]string{"app": "web"}
	}
	if maybe(r, 0.1) {
		d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}}
	}
	for _, k := range r.Perm(24)[:pick(r, 0, 1, 1, 1, 2, 2)] {
		if appsFault(r, k, &d.ObjectMeta, &d.Spec.Selector, &d.Spec.Template, &d.Spec.Replicas, &d.Spec.MinReadySeconds) {
			continue
		}
		switch k {
		case 14:
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: pick[appsv1.DeploymentStrategyType](r, "Bogus", "recreate", "")}
			if maybe(r, 0.5) {
				d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: pick(r, intOrPercentPool...), MaxUnavailable: pick(r, intOrPercentPool...)}
			}
		case 15:
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
			if maybe(r, 0.6) {
				d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: pick(r, intOrPercentPool...)}
			}
		case 16, 17:
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: pick[appsv1.DeploymentStrategyType](r, "", appsv1.RollingUpdateDeploymentStrategyType),
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: pick(r, intOrPercentPool...), MaxUnavailable: pick(r, intOrPercentPool...)}}
		case 18:
			d.Spec.RevisionHistoryLimit = pick(r, ptr[int32](-1), ptr[int32](0), ptr[int32](2))
		case 19:
			d.Spec.ProgressDeadlineSeconds = pick(r, ptr[int32](0), ptr[int32](-1), ptr[int32](5), ptr[int32](30))
			if maybe(r, 0.5) {
				d.Spec.MinReadySeconds = pick[int32](r, 5, 30, 60)
			}
		case 20:
			d.Spec.Paused = true
		case 21:
			d.Annotations = map[string]string{appsv1.DeprecatedRollbackTo: pick(r, "2", "-1", "", "007", "0")}
		case 22:
			d.Annotations = map[string]string{pick(r, "kubernetes.io/change-cause", "bad key!", "example.com/x"): "v"}
		case 23:
			d.Status = appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 9, ObservedGeneration: 4, CollisionCount: ptr[int32](2)}
		}
	}
	templateWarningFaults(r, &d.ObjectMeta, &d.Spec.Template)
	return d
}

// templateWarningFaults adds to a pod template what draws warnings (see
// podwarnings.go), and sometimes a name that is no DNS label.
func templateWarningFaults(r *rand.Rand, m *metav1.ObjectMeta, t *corev1.PodTemplateSpec) {
	if maybe(r, 0.35) {
		addPodWarnings(r, &t.Spec, &t.ObjectMeta)
	}
	if maybe(r, 0.1) {
		addAppArmorAnnotations(r, &t.Spec, &t.ObjectMeta)
	}
	if maybe(r, 0.2) {
		addVolumes(r, &t.Spec)
	}
	if maybe(r, 0.15) {
		addSecurityAnnotations(r, &t.Spec, &t.ObjectMeta)
	}
	if maybe(r, 0.05) {
		m.Name = pick(r, "web.v2", strings.Repeat("w", 64))
	}
}

func randReplicaSet(r *rand.Rand) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f8", Namespace: namespace},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: pick(r, nil, ptr[int32](3)),
			Selector: &metav1.LabelSelector{MatchLabels: appsLabels()},
			Template: appsTemplate(r),
		},
	}
	if maybe(r, 0.2) {
		rs.Labels = map[string]string{"app": "web", "pod-template-hash": "5d4f8"}
	}
	for _, k := range r.Perm(16)[:pick(r, 0, 1, 1, 1, 2, 2)] {
		if appsFault(r, k, &rs.ObjectMeta, &rs.Spec.Selector, &rs.Spec.Template, &rs.Spec.Replicas, &rs.Spec.MinReadySeconds) {
			continue
		}
		switch k {
		case 14:
			rs.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 9, ObservedGeneration: 4}
		case 15:
			rs.Annotations = map[string]string{"deployment.kubernetes.io/revision": "2"}
		}
	}
	templateWarningFaults(r, &rs.ObjectMeta, &rs.Spec.Template)
	return rs
}

// storedDeployment is a valid Deployment as the store holds it: defaulted,
// with a generation and a status.
func storedDeployment(r *rand.Rand) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace, UID: "uid-11", ResourceVersion: "21", Generation: 3,
			Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: appsLabels()},
			Template: appsTemplate(r),
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
	}
	if maybe(r, 0.3) {
		d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	}
	if maybe(r, 0.3) {
		d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "3"}
	}
	if maybe(r, 0.3) {
		d.Status.CollisionCount = ptr[int32](pick[int32](r, 0, 2))
	}
	if maybe(r, 0.2) {
		d.Status.TerminatingReplicas = ptr[int32](1)
	}
	if maybe(r, 0.2) {
		// Stored with what draws warnings (which an update that keeps
		// the generation does not repeat).
		addStoredPodWarnings(r, &d.Spec.Template.Spec, &d.Spec.Template.ObjectMeta)
	}
	if maybe(r, 0.15) {
		addStoredVolumes(r, &d.Spec.Template.Spec)
	}
	legacyscheme.Scheme.Default(d)
	return d
}

func storedReplicaSet(r *rand.Rand) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f8", Namespace: namespace, UID: "uid-12", ResourceVersion: "22", Generation: 2,
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: appsLabels()},
			Template: appsTemplate(r),
		},
		Status: appsv1.ReplicaSetStatus{ObservedGeneration: 2, Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
	}
	if maybe(r, 0.2) {
		rs.Status.TerminatingReplicas = ptr[int32](0)
	}
	if maybe(r, 0.2) {
		addStoredPodWarnings(r, &rs.Spec.Template.Spec, &rs.Spec.Template.ObjectMeta)
	}
	if maybe(r, 0.15) {
		addStoredVolumes(r, &rs.Spec.Template.Spec)
	}
	legacyscheme.Scheme.Default(rs)
	return rs
}

func deploymentCreateCase(r *rand.Rand) string {
	return compareAppsCreate(randDeployment(r), "deployments", k8sdeployment.Strategy, core.NewDeploymentStrategy(),
		func() runtime.Object { return &apps.Deployment{} }, func() runtime.Object { return &appsv1.Deployment{} })
}

func replicaSetCreateCase(r *rand.Rand) string {
	return compareAppsCreate(randReplicaSet(r), "replicasets", k8sreplicaset.Strategy, core.NewReplicaSetStrategy(),
		func() runtime.Object { return &apps.ReplicaSet{} }, func() runtime.Object { return &appsv1.ReplicaSet{} })
}

// deploymentUpdate is an update of a stored Deployment: one or two spec or
// metadata changes, or none (a write of what is stored, or of a new status).
func deploymentUpdate(r *rand.Rand) (in, old *appsv1.Deployment) {
	old = storedDeployment(r)
	in = old.DeepCopy()
	next := randDeployment(r)
	for _, k := range r.Perm(13)[:pick(r, 0, 1, 1, 2)] {
		switch k {
		case 12:
			changeVolumes(r, &in.Spec.Template.Spec)
		case 0:
			// A new selector the template matches: still immutable.
			in.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "frontend"}}
			in.Spec.Template.Labels = map[string]string{"app": "web", "tier": "frontend"}
		case 1:
			in.Spec.Selector = next.Spec.Selector
			in.Spec.Template.Labels = next.Spec.Template.Labels
		case 2:
			in.Name = pick(r, "web-2", "Bad_Name")
		case 3:
			in.Spec.Replicas = pick(r, ptr[int32](5), ptr[int32](-1), ptr[int32](3))
		case 4:
			in.Spec.Strategy = next.Spec.Strategy
		case 5:
			in.Spec.Template = next.Spec.Template
		case 6:
			in.Annotations = pick(r, nil, map[string]string{"kubernetes.io/change-cause": "rollout"},
				map[string]string{appsv1.DeprecatedRollbackTo: pick(r, "1", "-2", "", "01")}, map[string]string{"deployment.kubernetes.io/revision": "3"})
		case 7:
			in.Labels = pick(r, nil, map[string]string{"app": "web", "env": "prod"}, map[string]string{"bad key!": "x"})
		case 8:
			in.Status = appsv1.DeploymentStatus{Replicas: 1, AvailableReplicas: 7}
		case 9:
			in.Spec.MinReadySeconds, in.Spec.ProgressDeadlineSeconds = next.Spec.MinReadySeconds, next.Spec.ProgressDeadlineSeconds
			in.Spec.RevisionHistoryLimit, in.Spec.Paused = next.Spec.RevisionHistoryLimit, next.Spec.Paused
		case 10:
			in.Finalizers = []string{pick(r, "custom", "example.com/cleanup")}
		case 11:
			in.Spec.Paused = !in.Spec.Paused
		}
	}
	return in, old
}

func deploymentUpdateCase(r *rand.Rand) string {
	in, old := deploymentUpdate(r)
	return withInput(compareAppsUpdate(in, old, "deployments", "", k8sdeployment.Strategy, core.NewDeploymentStrategy()), in, old)
}

func deploymentStatusCase(r *rand.Rand) string {
	in, old := deploymentUpdate(r)
	s := &in.Status
	*s = old.Status
	for _, k := range r.Perm(7)[:pick(r, 0, 1, 1, 2)] {
		switch k {
		case 0:
			s.Replicas = pick[int32](r, 0, 2, -1)
		case 1:
			s.UpdatedReplicas, s.ReadyReplicas = pick[int32](r, -1, 5), pick[int32](r, 1, 4)
		case 2:
			s.AvailableReplicas, s.UnavailableReplicas = pick[int32](r, -1, 2, 4), pick[int32](r, -3, 1)
		case 3:
			s.CollisionCount = pick(r, nil, ptr[int32](0), ptr[int32](1), ptr[int32](3), ptr[int32](-1))
		case 4:
			s.ObservedGeneration = pick[int64](r, -1, 4)
		case 5:
			s.TerminatingReplicas = pick(r, nil, ptr[int32](-1), ptr[int32](2))
		case 6:
			s.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}
		}
	}
	st := core.NewDeploymentStrategy().(interface{ StatusStrategy() registry.Strategy }).StatusStrategy()
	return withInput(compareAppsUpdate(in, old, "deployments", "status", k8sdeployment.StatusStrategy, st), in, old)
}

func replicaSetUpdate(r *rand.Rand) (in, old *appsv1.ReplicaSet) {
	old = storedReplicaSet(r)
	in = old.DeepCopy()
	next := randReplicaSet(r)
	for _, k := range r.Perm(10)[:pick(r, 0, 1, 1, 2)] {
		switch k {
		case 9:
			changeVolumes(r, &in.Spec.Template.Spec)
		case 0:
			in.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "frontend"}}
			in.Spec.Template.Labels = map[string]string{"app": "web", "tier": "frontend"}
		case 1:
			in.Spec.Selector = next.Spec.Selector
			in.Spec.Template.Labels = next.Spec.Template.Labels
		case 2:
			in.Name = pick(r, "web-2", "Bad_Name")
		case 3:
			in.Spec.Replicas = pick(r, ptr[int32](5), ptr[int32](-1), ptr[int32](0))
		case 4:
			in.Spec.Template = next.Spec.Template
		case 5:
			in.Annotations = pick(r, nil, map[string]string{"deployment.kubernetes.io/revision": "2"})
		case 6:
			in.Labels = pick(r, nil, map[string]string{"app": "web", "env": "prod"}, map[string]string{"bad key!": "x"})
		case 7:
			in.Status = appsv1.ReplicaSetStatus{Replicas: 1, AvailableReplicas: 7}
		case 8:
			in.Spec.MinReadySeconds = pick[int32](r, -1, 10)
		}
	}
	return in, old
}

func replicaSetUpdateCase(r *rand.Rand) string {
	in, old := replicaSetUpdate(r)
	return withInput(compareAppsUpdate(in, old, "replicasets", "", k8sreplicaset.Strategy, core.NewReplicaSetStrategy()), in, old)
}

func replicaSetStatusCase(r *rand.Rand) string {
	in, old := replicaSetUpdate(r)
	s := &in.Status
	*s = old.Status
	for _, k := range r.Perm(6)[:pick(r, 0, 1, 1, 2)] {
		switch k {
		case 0:
			s.Replicas = pick[int32](r, 0, 2, -1)
		case 1:
			s.FullyLabeledReplicas = pick[int32](r, -1, 4)
		case 2:
			s.ReadyReplicas, s.AvailableReplicas = pick[int32](r, -1, 2, 4), pick[int32](r, -3, 1, 4)
		case 3:
			s.ObservedGeneration = pick[int64](r, -1, 3)
		case 4:
			s.TerminatingReplicas = pick(r, nil, ptr[int32](-1), ptr[int32](2))
		case 5:
			s.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate"}}
		}
	}
	st := core.NewReplicaSetStrategy().(interface{ StatusStrategy() registry.Strategy }).StatusStrategy()
	return withInput(compareAppsUpdate(in, old, "replicasets", "status", k8sreplicaset.StatusStrategy, st), in, old)
}

// appsPrepared undoes an artifact of kube-apiserver's conversion of a
// Deployment back to v1, which always allocates metadata.annotations: an
// empty map there is no annotations (nothing a client can see).
func appsPrepared(o runtime.Object) runtime.Object {
	if d, ok := o.(*appsv1.Deployment); ok && len(d.Annotations) == 0 {
		d.Annotations = nil
	}
	return o
}

// compareAppsCreate is compareCreate for the apps group, with appsPrepared
// applied to Kubernetes' prepared object.
func compareAppsCreate(in runtime.Object, resource string, kst genericrest.RESTCreateStrategy, st registry.Strategy,
	internal, versioned func() runtime.Object) string {
	ctx := requestCtx("create", "apps", "v1", resource, "", in.(metav1.Object).GetName())

	kv := in.DeepCopyObject()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopyObject()
	ki := internal()
	toInternal(kv, ki)
	kst.PrepareForCreate(ctx, ki)
	kErrs := genericrest.ValidateCreate(ctx, ki, kst)
	kPrepared := versioned()
	toInternal(ki, kPrepared)

	sv := in.DeepCopyObject()
	st.Default(sv)
	sDefaulted := sv.DeepCopyObject()
	st.PrepareForCreate(ctx, sv)
	sErrs := registry.ValidateCreate(ctx, st, true, sv)
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings("create", kst.WarningsOnCreate(ctx, ki), createWarnings(ctx, st, sv))
	}
	return withInput(joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), compareObjs("prepared", appsPrepared(kPrepared), sv),
		compareErrs("create", kErrs, sErrs), warnDiff), in)
}

// compareAppsUpdate is compareUpdate for the apps group (subresource sub),
// with appsPrepared applied to Kubernetes' prepared object.
func compareAppsUpdate(in, old runtime.Object, resource, sub string, kst genericrest.RESTUpdateStrategy, st registry.Strategy) string {
	ctx := requestCtx("update", "apps", "v1", resource, sub, in.(metav1.Object).GetName())
	newInternal := func() (runtime.Object, runtime.Object, runtime.Object) {
		if _, ok := in.(*appsv1.Deployment); ok {
			return &apps.Deployment{}, &apps.Deployment{}, &appsv1.Deployment{}
		}
		return &apps.ReplicaSet{}, &apps.ReplicaSet{}, &appsv1.ReplicaSet{}
	}

	kv := in.DeepCopyObject()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopyObject()
	ki, kold, kPrepared := newInternal()
	toInternal(kv, ki)
	toInternal(old.DeepCopyObject(), kold)
	kst.PrepareForUpdate(ctx, ki, kold)
	kErrs := genericrest.ValidateUpdate(ctx, ki, kold, kst)
	toInternal(ki, kPrepared)

	sv := in.DeepCopyObject()
	st.Default(sv)
	sDefaulted := sv.DeepCopyObject()
	st.PrepareForUpdate(ctx, sv, old.DeepCopyObject())
	sErrs := registry.ValidateUpdate(ctx, st, true, sv, old.DeepCopyObject())
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings(strings.TrimSpace("update "+sub), kst.WarningsOnUpdate(ctx, ki, kold), updateWarnings(ctx, st, sv, old))
	}
	return joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), compareObjs("prepared", appsPrepared(kPrepared), sv),
		compareErrs(strings.TrimSpace("update "+sub), kErrs, sErrs), warnDiff)
}
