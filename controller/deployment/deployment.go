// Package deployment is svcnet's Deployment controller: each Deployment
// owns ReplicaSets named "<deployment>-<pod-template-hash>", one per pod
// template it has run, and moves replicas from the old ones to the current
// one according to its strategy, as Kubernetes' deployment-controller does.
//
//   - The pod-template-hash is a hash of the pod template (and
//     status.collisionCount); it is added to the ReplicaSet's selector,
//     template labels and name, so ReplicaSets of one Deployment never
//     fight over pods.
//   - RollingUpdate (default maxSurge 25% rounded up, maxUnavailable 25%
//     rounded down, never both 0): the new ReplicaSet grows while the total
//     stays within replicas+maxSurge; old ones shrink while availability
//     stays at or above replicas-maxUnavailable, unhealthy old replicas
//     first.
//   - Recreate: old ReplicaSets go to 0 and their pods must be gone before
//     the new one is scaled up.
//   - Scaling a Deployment (spec.replicas differs from an active
//     ReplicaSet's desired-replicas annotation), or syncing a paused one,
//     only resizes: a single active ReplicaSet (or, with none, the newest)
//     is set to spec.replicas; a saturated new ReplicaSet makes the old ones
//     go to 0; otherwise, for RollingUpdate, replicas+maxSurge minus the
//     current total is shared out in proportion to each active ReplicaSet's
//     size over its max-replicas annotation (rounded half away from zero),
//     largest first (newest first on ties when growing, oldest first when
//     shrinking), the rounding leftover going to the first — as Kubernetes'
//     scale() in pkg/controller/deployment/sync.go.
//   - ReplicaSets carry deployment.kubernetes.io/revision,
//     desired-replicas and max-replicas annotations; old ReplicaSets with no
//     replicas beyond revisionHistoryLimit (default 10) are deleted.
//   - Status: replicas, updatedReplicas, readyReplicas, availableReplicas,
//     unavailableReplicas, observedGeneration, and conditions Available and
//     Progressing with Kubernetes' reasons and messages.
//   - Events: ScalingReplicaSet "Scaled up replica set X from a to b".
package deployment

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/davecgh/go-spew/spew"

	"github.com/svcnet/svcnet/controller/internal/worker"
)

// Annotation keys Kubernetes uses on Deployments and ReplicaSets.
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	// ControllerName names the controller in logs.
	ControllerName = "deployment-controller"
)

var (
	deployKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	rsKind     = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
)

// Controller reconciles Deployments. Create with New, then Run.
type Controller struct {
	client   kubernetes.Interface
	deploys  appslisters.DeploymentLister
	rsets    appslisters.ReplicaSetLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	log      *slog.Logger
	now      func() time.Time
}

// New wires the controller to the factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	dInf := factory.Apps().V1().Deployments()
	rsInf := factory.Apps().V1().ReplicaSets()
	podInf := factory.Core().V1().Pods()
	c := &Controller{
		client:   client,
		deploys:  dInf.Lister(),
		rsets:    rsInf.Lister(),
		pods:     podInf.Lister(),
		synced:   []cache.InformerSynced{dInf.Informer().HasSynced, rsInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue:    worker.NewQueue("deployment"),
		recorder: recorder,
		log:      log.With("controller", ControllerName),
		now:      time.Now,
	}
	dInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	onRS := func(obj any) {
		rs, ok := obj.(*appsv1.ReplicaSet)
		if !ok {
			tomb, ok := obj.(cache.DeletedFinalStateUnknown)
			if !ok {
				return
			}
			if rs, ok = tomb.Obj.(*appsv1.ReplicaSet); !ok {
				return
			}
		}
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.Kind == "Deployment" {
			c.queue.Add(rs.Namespace + "/" + ref.Name)
		}
	}
	rsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onRS, UpdateFunc: func(_, obj any) { onRS(obj) }, DeleteFunc: onRS,
	})
	// Recreate waits for old pods to disappear.
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			ref := metav1.GetControllerOf(pod)
			if ref == nil || ref.Kind != "ReplicaSet" {
				return
			}
			if rs, err := c.rsets.ReplicaSets(pod.Namespace).Get(ref.Name); err == nil {
				onRS(rs)
			}
		},
	})
	return c
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// Run waits for caches and syncs until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("deployment controller: caches did not sync")
	}
	worker.Run(ctx, c.log, c.queue, workers, c.sync)
	return nil
}

// PodTemplateHash returns the pod-template-hash label value for a template
// and collision count, computed exactly as Kubernetes' ComputeHash: FNV-32a
// over a go-spew "%#v" dump of the PodTemplateSpec value (one-space indent,
// sorted map keys, Stringer/error methods not called, map keys dumped with
// spew), then, when collisionCount is non-nil, its value as 8 bytes (the low
// 4 little-endian, the rest zero), and the decimal sum rendered with
// rand.SafeEncodeString. The template is hashed as given: the caller passes
// the Deployment's stored template, so the same manifest on the same API
// level gives the same ReplicaSet name as a real cluster. Struct type names
// and field sets are part of the dump, so the value is specific to the
// k8s.io/api version svcnet is built with (v0.37 = Kubernetes 1.37).
func PodTemplateHash(t *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	templateHasher.Fprintf(h, "%#v", *t)
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// templateHasher is the spew configuration of Kubernetes' DeepHashObject.
var templateHasher = spew.ConfigState{
	Indent:         " ",
	SortKeys:       true,
	DisableMethods: true,
	SpewKeys:       true,
}

// equalIgnoreHash compares two templates ignoring the pod-template-hash
// label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	d, err := c.deploys.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	d = d.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		if c.recorder != nil {
			c.recorder.Event(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		}
		return nil
	}
	if d.DeletionTimestamp != nil {
		return nil
	}
	all, err := c.rsets.ReplicaSets(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	var owned []*appsv1.ReplicaSet
	for _, rs := range all {
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == d.UID {
			// Copies: scale and syncRevision update them in place, and the
			// informer cache must never be written.
			owned = append(owned, rs.DeepCopy())
		}
	}
	sort.Slice(owned, func(i, j int) bool {
		if !owned[i].CreationTimestamp.Equal(&owned[j].CreationTimestamp) {
			return owned[i].CreationTimestamp.Before(&owned[j].CreationTimestamp)
		}
		return owned[i].Name < owned[j].Name
	})
	var newRS *appsv1.ReplicaSet
	var olds []*appsv1.ReplicaSet
	for _, rs := range owned {
		if newRS == nil && equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			newRS = rs
			continue
		}
		olds = append(olds, rs)
	}

	// Paused, or a change of spec.replicas (some active ReplicaSet's
	// desired-replicas annotation differs): only resize, proportionally,
	// without creating a ReplicaSet or advancing the rollout — Kubernetes'
	// sync() path.
	if d.Spec.Paused || isScalingEvent(d, newRS, olds) {
		if err := c.scaleAll(ctx, d, newRS, olds); err != nil {
			return err
		}
		return c.syncStatus(ctx, d, newRS, olds, "")
	}

	created := false
	if newRS == nil {
		newRS, err = c.createNewRS(ctx, d, olds)
		if err != nil {
			return err
		}
		if newRS == nil {
			// Hash collision: status.collisionCount was bumped; requeue.
			return nil
		}
		created = true
	}
	revision := maxRevision(olds) + 1
	if err := c.syncRevision(ctx, d, newRS, revision); err != nil {
		return err
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		err = c.recreate(ctx, d, newRS, olds)
	} else {
		err = c.rollingUpdate(ctx, d, newRS, olds)
	}
	if err != nil {
		return err
	}
	c.cleanup(ctx, d, olds)
	reason := ""
	if created {
		reason = "NewReplicaSetCreated"
	}
	return c.syncStatus(ctx, d, newRS, olds, reason)
}

func allZero(rss []*appsv1.ReplicaSet) bool {
	for _, rs := range rss {
		if replicas(rs.Spec.Replicas) != 0 {
			return false
		}
	}
	return true
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var max int64
	for _, rs := range rss {
		if v, err := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64); err == nil && v > max {
			max = v
		}
	}
	return max
}

func (c *Controller) createNewRS(ctx context.Context, d *appsv1.Deployment, olds []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	hash := PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	tmpl := d.Spec.Template.DeepCopy()
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	lbls := map[string]string{}
	for k, v := range d.Spec.Template.Labels {
		lbls[k] = v
	}
	lbls[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	want := replicas(d.Spec.Replicas)
	initial := want
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType && !allZero(olds) {
		initial = newRSReplicas(d, olds, 0)
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType && !allZero(olds) {
		initial = 0
	}
	annotations := map[string]string{}
	for k, v := range d.Annotations {
		if k == RevisionAnnotation || k == corev1.LastAppliedConfigAnnotation || k == "kubectl.kubernetes.io/last-applied-configuration" {
			continue
		}
		annotations[k] = v
	}
	annotations[RevisionAnnotation] = strconv.FormatInt(maxRevision(olds)+1, 10)
	annotations[DesiredReplicasAnnotation] = strconv.Itoa(int(want))
	annotations[MaxReplicasAnnotation] = strconv.Itoa(int(want + maxSurge(d)))
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			Labels:          lbls,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, deployKind)},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        &initial,
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        sel,
			Template:        *tmpl,
		},
	}
	got, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, gerr := c.client.AppsV1().ReplicaSets(d.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		if gerr == nil {
			if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == d.UID && equalIgnoreHash(&existing.Spec.Template, &d.Spec.Template) {
				return existing, nil
			}
		}
		// A different template hashes to the same name: bump the collision
		// count so the next hash differs.
		cp := d.DeepCopy()
		n := int32(0)
		if cp.Status.CollisionCount != nil {
			n = *cp.Status.CollisionCount
		}
		n++
		cp.Status.CollisionCount = &n
		if _, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("bump collision count of %s/%s: %w", d.Namespace, d.Name, err)
		}
		return nil, nil
	}
	if err != nil {
		if c.recorder != nil {
			c.recorder.Eventf(d, corev1.EventTypeWarning, "FailedCreate", "Failed to create new replica set %q: %v", rs.Name, err)
		}
		return nil, fmt.Errorf("create replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	if initial > 0 && c.recorder != nil {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", got.Name, initial)
	}
	return got, nil
}

// syncRevision keeps the new ReplicaSet's and the Deployment's revision
// annotations current.
func (c *Controller) syncRevision(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet, revision int64) error {
	rev := strconv.FormatInt(revision, 10)
	if cur, err := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64); err == nil && cur >= revision {
		rev = rs.Annotations[RevisionAnnotation]
	} else {
		cp := rs.DeepCopy()
		if cp.Annotations == nil {
			cp.Annotations = map[string]string{}
		}
		cp.Annotations[RevisionAnnotation] = rev
		got, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update revision of %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		*rs = *got
	}
	if d.Annotations[RevisionAnnotation] != rev {
		cp, err := c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		if cp.Annotations == nil {
			cp.Annotations = map[string]string{}
		}
		cp.Annotations[RevisionAnnotation] = rev
		// Through /status, as kube-controller-manager writes it: a
		// Deployment's annotations are part of its generation (they are
		// copied to its ReplicaSets), and /status keeps the generation.
		got, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update revision of deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		d.Annotations = got.Annotations
		d.ResourceVersion = got.ResourceVersion
	}
	return nil
}

func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet, n int32) (*appsv1.ReplicaSet, error) {
	old := replicas(rs.Spec.Replicas)
	want := replicas(d.Spec.Replicas)
	maxR := strconv.Itoa(int(want + maxSurge(d)))
	if old == n && rs.Annotations[DesiredReplicasAnnotation] == strconv.Itoa(int(want)) && rs.Annotations[MaxReplicasAnnotation] == maxR {
		return rs, nil
	}
	cp := rs.DeepCopy()
	cp.Spec.Replicas = &n
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[DesiredReplicasAnnotation] = strconv.Itoa(int(want))
	cp.Annotations[MaxReplicasAnnotation] = maxR
	got, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("scale replicaset %s/%s to %d: %w", rs.Namespace, rs.Name, n, err)
	}
	if old != n && c.recorder != nil {
		dir := "up"
		if n < old {
			dir = "down"
		}
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", dir, rs.Name, old, n)
	}
	*rs = *got
	return got, nil
}

// resolve turns an absolute or percentage value into a count of total.
func resolve(v *intstr.IntOrString, def string, total int32, roundUp bool) int32 {
	x := intstr.FromString(def)
	if v != nil {
		x = *v
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&x, int(total), roundUp)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

func surgeAndUnavailable(d *appsv1.Deployment) (int32, int32) {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return 0, 0
	}
	var ms, mu *intstr.IntOrString
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		ms, mu = ru.MaxSurge, ru.MaxUnavailable
	}
	r := replicas(d.Spec.Replicas)
	s := resolve(ms, "25%", r, true)
	u := resolve(mu, "25%", r, false)
	if s == 0 && u == 0 {
		u = 1
	}
	return s, u
}

func maxSurge(d *appsv1.Deployment) int32 { s, _ := surgeAndUnavailable(d); return s }

// newRSReplicas is how many replicas the new ReplicaSet may have now.
func newRSReplicas(d *appsv1.Deployment, olds []*appsv1.ReplicaSet, newCur int32) int32 {
	want := replicas(d.Spec.Replicas)
	surge, _ := surgeAndUnavailable(d)
	total := newCur
	for _, rs := range olds {
		total += replicas(rs.Spec.Replicas)
	}
	maxTotal := want + surge
	if total >= maxTotal {
		return newCur
	}
	up := min(maxTotal-total, want-newCur)
	if up < 0 {
		up = 0
	}
	return newCur + up
}

func (c *Controller) rollingUpdate(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) error {
	want := replicas(d.Spec.Replicas)
	cur := replicas(newRS.Spec.Replicas)
	// Not mid-rollout: a plain scale.
	if allZero(olds) {
		_, err := c.scale(ctx, d, newRS, want)
		return err
	}
	switch {
	case cur > want:
		if _, err := c.scale(ctx, d, newRS, want); err != nil {
			return err
		}
	case cur < want:
		if _, err := c.scale(ctx, d, newRS, newRSReplicas(d, olds, cur)); err != nil {
			return err
		}
	}
	// Scale down old ReplicaSets as availability allows.
	_, unavailable := surgeAndUnavailable(d)
	minAvailable := want - unavailable
	var allPods int32 = replicas(newRS.Spec.Replicas)
	for _, rs := range olds {
		allPods += replicas(rs.Spec.Replicas)
	}
	newUnavailable := replicas(newRS.Spec.Replicas) - newRS.Status.AvailableReplicas
	maxDown := allPods - minAvailable - newUnavailable
	if maxDown <= 0 {
		return nil
	}
	// First the old replicas that are not available anyway.
	var scaled int32
	for _, rs := range olds {
		if scaled >= maxDown {
			break
		}
		r := replicas(rs.Spec.Replicas)
		unhealthy := r - rs.Status.AvailableReplicas
		if r == 0 || unhealthy <= 0 {
			continue
		}
		down := min(unhealthy, maxDown-scaled)
		if _, err := c.scale(ctx, d, rs, r-down); err != nil {
			return err
		}
		scaled += down
	}
	// Then available ones, keeping minAvailable.
	var available int32 = newRS.Status.AvailableReplicas
	for _, rs := range olds {
		available += min(rs.Status.AvailableReplicas, replicas(rs.Spec.Replicas))
	}
	if available <= minAvailable {
		return nil
	}
	total := available - minAvailable
	var done int32
	for _, rs := range olds {
		if done >= total {
			break
		}
		r := replicas(rs.Spec.Replicas)
		if r == 0 {
			continue
		}
		down := min(r, total-done)
		if _, err := c.scale(ctx, d, rs, r-down); err != nil {
			return err
		}
		done += down
	}
	return nil
}

func (c *Controller) recreate(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) error {
	for _, rs := range olds {
		if replicas(rs.Spec.Replicas) != 0 {
			if _, err := c.scale(ctx, d, rs, 0); err != nil {
				return err
			}
		}
	}
	// Wait until no old pod is left running.
	for _, rs := range olds {
		if rs.Status.Replicas > 0 {
			return nil
		}
		pods, err := c.pods.Pods(d.Namespace).List(labels.Everything())
		if err != nil {
			return err
		}
		for _, p := range pods {
			if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == rs.UID && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return nil
			}
		}
	}
	_, err := c.scale(ctx, d, newRS, replicas(d.Spec.Replicas))
	return err
}

// cleanup deletes the oldest old ReplicaSets with no replicas beyond the
// revision history limit.
func (c *Controller) cleanup(ctx context.Context, d *appsv1.Deployment, olds []*appsv1.ReplicaSet) {
	limit := int32(10)
	if d.Spec.RevisionHistoryLimit != nil {
		limit = *d.Spec.RevisionHistoryLimit
	}
	var idle []*appsv1.ReplicaSet
	for _, rs := range olds {
		if replicas(rs.Spec.Replicas) == 0 && rs.Status.Replicas == 0 && rs.DeletionTimestamp == nil {
			idle = append(idle, rs)
		}
	}
	for i := 0; i < len(idle)-int(limit); i++ {
		err := c.client.AppsV1().ReplicaSets(d.Namespace).Delete(ctx, idle[i].Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			c.log.Warn("cleanup of old replica set failed", "replicaset", idle[i].Name, "err", err)
		}
	}
}

// CalculateStatus returns the Deployment status implied by its ReplicaSets.
func CalculateStatus(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet, createdReason string, now time.Time) appsv1.DeploymentStatus {
	st := *d.Status.DeepCopy()
	st.ObservedGeneration = d.Generation
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.UpdatedReplicas = 0, 0, 0, 0
	all := append([]*appsv1.ReplicaSet{}, olds...)
	if newRS != nil {
		all = append(all, newRS)
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	var specified int32
	for _, rs := range all {
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
		specified += replicas(rs.Spec.Replicas)
	}
	st.TerminatingReplicas = terminatingReplicas(all)
	want := replicas(d.Spec.Replicas)
	// Unavailable counts against what the ReplicaSets are asked to run now,
	// not the Deployment's target: kube-controller-manager's rule, so that
	// a scale-up reports no unavailable replicas before it is acted on.
	st.UnavailableReplicas = max(0, specified-st.AvailableReplicas)
	_, unavailable := surgeAndUnavailable(d)
	if st.AvailableReplicas >= want-unavailable {
		setCondition(&st, appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability.", now)
	} else {
		setCondition(&st, appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.", now)
	}
	if newRS != nil {
		complete := st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want && replicas(newRS.Spec.Replicas) == want
		switch {
		case d.Spec.Paused:
			setCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionUnknown, "DeploymentPaused", "Deployment is paused", now)
		case complete:
			setCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable",
				fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name), now)
		case createdReason == "NewReplicaSetCreated":
			setCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetCreated",
				fmt.Sprintf("Created new replica set %q", newRS.Name), now)
		default:
			setCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated",
				fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name), now)
		}
	}
	return st
}

// terminatingReplicas sums the ReplicaSets' status.terminatingReplicas. A
// ReplicaSet its controller has not synced yet counts for nothing; one that
// was synced but does not report the field makes the sum unknown (nil), as
// in kube-controller-manager.
func terminatingReplicas(all []*appsv1.ReplicaSet) *int32 {
	var n int32
	for _, rs := range all {
		switch {
		case rs.Status.TerminatingReplicas != nil:
			n += *rs.Status.TerminatingReplicas
		case rs.Status.ObservedGeneration == 0:
		default:
			return nil
		}
	}
	return &n
}

// setCondition sets a condition, keeping lastTransitionTime when the status
// does not change and lastUpdateTime when nothing changes at all.
func setCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string, now time.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status == s && c.Reason == reason && c.Message == msg {
			return
		}
		// Kubernetes keeps a completed rollout's reason until a new one
		// starts.
		if c.Status == s && c.Reason == "NewReplicaSetAvailable" && reason == "ReplicaSetUpdated" {
			return
		}
		if c.Status != s {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message = s, reason, msg
		c.LastUpdateTime = metav1.NewTime(now)
		return
	}
	st.Conditions = append(st.Conditions, appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg,
		LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)})
}

func (c *Controller) syncStatus(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet, reason string) error {
	st := CalculateStatus(d, newRS, olds, reason, c.now())
	if apiequality.Semantic.DeepEqual(st, d.Status) {
		return nil
	}
	cp := d.DeepCopy()
	cp.Status = st
	_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		if apierrors.IsConflict(err) {
			return errors.New("deployment changed while updating status; retrying")
		}
		return fmt.Errorf("update status of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}

// active returns the ReplicaSets with spec.replicas > 0, skipping nil.
func active(rss ...*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && replicas(rs.Spec.Replicas) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// isScalingEvent reports whether spec.replicas changed since the active
// ReplicaSets were last sized: one of them carries a desired-replicas
// annotation that differs. ReplicaSets without a parsable annotation do not
// count.
func isScalingEvent(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) bool {
	for _, rs := range active(append([]*appsv1.ReplicaSet{newRS}, olds...)...) {
		v, err := strconv.ParseInt(rs.Annotations[DesiredReplicasAnnotation], 10, 32)
		if err != nil {
			continue
		}
		if int32(v) != replicas(d.Spec.Replicas) {
			return true
		}
	}
	return false
}

// olderFirst orders by creation time, then name.
func olderFirst(a, b *appsv1.ReplicaSet) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// saturated reports whether rs already runs the whole Deployment: its
// replicas, desired-replicas annotation and available replicas all equal
// spec.replicas.
func saturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	want := replicas(d.Spec.Replicas)
	v, err := strconv.ParseInt(rs.Annotations[DesiredReplicasAnnotation], 10, 32)
	return err == nil && int32(v) == want && replicas(rs.Spec.Replicas) == want && rs.Status.AvailableReplicas == want
}

// scaleAll resizes the Deployment's ReplicaSets after a change of
// spec.replicas (see the package doc); newRS may be nil.
func (c *Controller) scaleAll(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) error {
	want := replicas(d.Spec.Replicas)
	newestFirst := append([]*appsv1.ReplicaSet(nil), olds...)
	sort.SliceStable(newestFirst, func(i, j int) bool { return olderFirst(newestFirst[j], newestFirst[i]) })
	act := active(append(newestFirst, newRS)...)
	var only *appsv1.ReplicaSet
	switch {
	case len(act) == 1:
		only = act[0]
	case len(act) == 0 && newRS != nil:
		only = newRS
	case len(act) == 0 && len(newestFirst) > 0:
		only = newestFirst[0]
	}
	if only != nil {
		// Unlike Kubernetes, an unchanged size still refreshes stale
		// replica annotations (scale writes nothing when they match), so
		// the scaling event cannot repeat and hold back a rollout.
		_, err := c.scale(ctx, d, only, want)
		return err
	}
	if len(act) == 0 {
		return nil
	}
	if saturated(d, newRS) {
		for _, rs := range active(olds...) {
			if _, err := c.scale(ctx, d, rs, 0); err != nil {
				return err
			}
		}
		return nil
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return nil
	}
	var total int32
	for _, rs := range act {
		total += replicas(rs.Spec.Replicas)
	}
	var allowed int32
	if want > 0 {
		allowed = want + maxSurge(d)
	}
	toAdd := allowed - total
	switch {
	case toAdd > 0:
		sort.SliceStable(act, func(i, j int) bool {
			ri, rj := replicas(act[i].Spec.Replicas), replicas(act[j].Spec.Replicas)
			if ri != rj {
				return ri > rj
			}
			return olderFirst(act[j], act[i])
		})
	case toAdd < 0:
		sort.SliceStable(act, func(i, j int) bool {
			ri, rj := replicas(act[i].Spec.Replicas), replicas(act[j].Spec.Replicas)
			if ri != rj {
				return ri > rj
			}
			return olderFirst(act[i], act[j])
		})
	}
	sizes := make([]int32, len(act))
	var added int32
	for i, rs := range act {
		sizes[i] = replicas(rs.Spec.Replicas)
		if toAdd != 0 {
			p := proportion(d, rs, toAdd, added)
			sizes[i] += p
			added += p
		}
	}
	if toAdd != 0 {
		sizes[0] = max(sizes[0]+toAdd-added, 0)
	}
	for i, rs := range act {
		if _, err := c.scale(ctx, d, rs, sizes[i]); err != nil {
			return err
		}
	}
	return nil
}

// proportion is rs's share of toAdd (of which added is already handed out):
// its size scaled by (replicas+maxSurge)/max-replicas annotation, rounded
// half away from zero, capped by what remains. Without a usable annotation
// status.replicas is the base, and with that 0 the share is 0. Scaling to 0
// takes the whole ReplicaSet.
func proportion(d *appsv1.Deployment, rs *appsv1.ReplicaSet, toAdd, added int32) int32 {
	size := replicas(rs.Spec.Replicas)
	if size == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	var frac int32
	if want := replicas(d.Spec.Replicas); want == 0 {
		frac = -size
	} else {
		before, err := strconv.ParseInt(rs.Annotations[MaxReplicasAnnotation], 10, 32)
		if err != nil || before == 0 {
			before = int64(d.Status.Replicas)
		}
		if before != 0 {
			frac = int32(math.Round(float64(size)*float64(want+maxSurge(d))/float64(before))) - size
		}
	}
	allowed := toAdd - added
	if toAdd > 0 {
		return min(frac, allowed)
	}
	return max(frac, allowed)
}
