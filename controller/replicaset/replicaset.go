// Package replicaset is svcnet's ReplicaSet controller: it keeps
// spec.replicas active pods (not terminal, not being deleted) matching each
// ReplicaSet, created from its pod template with generateName "<rs>-" and a
// controller owner reference, and reports status (replicas,
// fullyLabeledReplicas, readyReplicas, availableReplicas,
// observedGeneration), as Kubernetes' replicaset-controller does.
//
// Orphan pods whose labels match are adopted; owned pods whose labels no
// longer match are released. When scaling down, the least useful pods go
// first: unscheduled before scheduled, pending before running, not ready
// before ready, more recently ready before longer ready, newer before older.
// Pending creations and deletions are tracked so that a stale cache never
// causes a second round. Events: SuccessfulCreate, FailedCreate,
// SuccessfulDelete, FailedDelete.
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/controller/internal/expectations"
	"github.com/svcnet/svcnet/controller/internal/podutil"
	"github.com/svcnet/svcnet/controller/internal/worker"
)

// ControllerName names the controller in logs and events.
const ControllerName = "replicaset-controller"

// BurstReplicas bounds the creations or deletions of one sync.
const BurstReplicas = 500

var rsKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}

// Controller reconciles ReplicaSets. Create with New, then Run.
type Controller struct {
	client   kubernetes.Interface
	rsets    appslisters.ReplicaSetLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	exp      *expectations.Expectations
	log      *slog.Logger
	// now is replaceable in tests.
	now func() time.Time
}

// New wires the controller to the factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	rsInf := factory.Apps().V1().ReplicaSets()
	podInf := factory.Core().V1().Pods()
	c := &Controller{
		client:   client,
		rsets:    rsInf.Lister(),
		pods:     podInf.Lister(),
		synced:   []cache.InformerSynced{rsInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue:    worker.NewQueue("replicaset"),
		recorder: recorder,
		exp:      expectations.New(),
		log:      log.With("controller", ControllerName),
		now:      time.Now,
	}
	rsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.exp.Delete(key)
				c.queue.Add(key)
			}
		},
	})
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			pod := obj.(*corev1.Pod)
			if key := c.ownerKey(pod); key != "" {
				if pod.DeletionTimestamp != nil {
					c.exp.Observed(key, false)
				} else {
					c.exp.Observed(key, true)
				}
				c.queue.Add(key)
				return
			}
			c.enqueueMatching(pod)
		},
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Pod), cur.(*corev1.Pod)
			if o.ResourceVersion == n.ResourceVersion && o.ResourceVersion != "" {
				return
			}
			if n.DeletionTimestamp != nil && o.DeletionTimestamp == nil {
				if key := c.ownerKey(n); key != "" {
					c.exp.Observed(key, false)
				}
			}
			for _, p := range []*corev1.Pod{o, n} {
				if key := c.ownerKey(p); key != "" {
					c.queue.Add(key)
				} else {
					c.enqueueMatching(p)
				}
			}
		},
		DeleteFunc: func(obj any) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				tomb, ok := obj.(cache.DeletedFinalStateUnknown)
				if !ok {
					return
				}
				if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
					return
				}
			}
			if key := c.ownerKey(pod); key != "" {
				if pod.DeletionTimestamp == nil {
					c.exp.Observed(key, false)
				}
				c.queue.Add(key)
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

// ownerKey returns the key of the ReplicaSet controlling pod, or "".
func (c *Controller) ownerKey(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return ""
	}
	rs, err := c.rsets.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return pod.Namespace + "/" + ref.Name
	}
	return pod.Namespace + "/" + rs.Name
}

// enqueueMatching queues ReplicaSets that could adopt an orphan pod.
func (c *Controller) enqueueMatching(pod *corev1.Pod) {
	if metav1.GetControllerOf(pod) != nil {
		return
	}
	rss, _ := c.rsets.ReplicaSets(pod.Namespace).List(labels.Everything())
	for _, rs := range rss {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			c.queue.Add(rs.Namespace + "/" + rs.Name)
		}
	}
}

// Run waits for caches and syncs until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("replicaset controller: caches did not sync")
	}
	worker.Run(ctx, c.log, c.queue, workers, c.sync)
	return nil
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	rs, err := c.rsets.ReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil || sel.Empty() {
		// The API server rejects these; never act on a selector that
		// would match every pod.
		return nil
	}
	all, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	owned, err := podutil.ClaimPods(ctx, c.client, rs, rsKind, sel, all)
	if err != nil {
		return err
	}
	var active []*corev1.Pod
	var terminating int32
	for _, p := range owned {
		switch {
		case podutil.IsPodActive(p):
			active = append(active, p)
		case p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed:
			// Deleted but still running (its grace period): reported as
			// status.terminatingReplicas, as kube-controller-manager does
			// since DeploymentReplicaSetTerminatingReplicas went beta (1.35).
			terminating++
		}
	}
	var manageErr error
	if c.exp.Satisfied(key) && rs.DeletionTimestamp == nil {
		manageErr = c.manage(ctx, rs, active, key)
	}
	st := CalculateStatus(rs, active, terminating, manageErr, c.now())
	if err := c.updateStatus(ctx, rs, st); err != nil {
		return errors.Join(manageErr, err)
	}
	// Requeue to flip availability once minReadySeconds pass.
	if manageErr == nil && rs.Spec.MinReadySeconds > 0 && st.ReadyReplicas != st.AvailableReplicas {
		c.queue.AddAfter(key, time.Duration(rs.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

func (c *Controller) manage(ctx context.Context, rs *appsv1.ReplicaSet, active []*corev1.Pod, key string) error {
	want := int32(1)
	if rs.Spec.Replicas != nil {
		want = *rs.Spec.Replicas
	}
	diff := len(active) - int(want)
	switch {
	case diff < 0:
		n := min(-diff, BurstReplicas)
		c.exp.Expect(key, n, 0)
		// Slow start: batches of 1, 2, 4, ... so a failing create (quota,
		// admission) fails fast instead of n times.
		created, batch := 0, 1
		var firstErr error
		for created < n && firstErr == nil {
			b := min(batch, n-created)
			var wg sync.WaitGroup
			var mu sync.Mutex
			for i := 0; i < b; i++ {
				wg.Go(func() {
					err := c.createPod(ctx, rs)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						c.exp.Observed(key, true)
						if firstErr == nil {
							firstErr = err
						}
					}
				})
			}
			wg.Wait()
			created += b
			batch *= 2
		}
		// Creations never attempted will not be observed.
		for i := created; i < n; i++ {
			c.exp.Observed(key, true)
		}
		return firstErr
	case diff > 0:
		n := min(diff, BurstReplicas)
		victims := append([]*corev1.Pod(nil), active...)
		sort.SliceStable(victims, func(i, j int) bool { return lessUseful(victims[i], victims[j], c.now()) })
		victims = victims[:n]
		c.exp.Expect(key, 0, n)
		var errs []error
		for _, p := range victims {
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				c.exp.Observed(key, false)
				c.event(rs, corev1.EventTypeWarning, "FailedDelete", fmt.Sprintf("Error deleting: %v", err))
				errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
				continue
			}
			if apierrors.IsNotFound(err) {
				c.exp.Observed(key, false)
			}
			c.event(rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: "+p.Name)
		}
		return errors.Join(errs...)
	}
	return nil
}

func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet) error {
	pod := PodFromTemplate(rs)
	got, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		c.event(rs, corev1.EventTypeWarning, "FailedCreate", fmt.Sprintf("Error creating: %v", err))
		return fmt.Errorf("create pod for %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	c.event(rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+got.Name)
	return nil
}

func (c *Controller) event(rs *appsv1.ReplicaSet, typ, reason, msg string) {
	if c.recorder != nil {
		c.recorder.Event(rs, typ, reason, msg)
	}
}

// PodFromTemplate returns the pod a ReplicaSet creates: the template's
// labels, annotations and spec, generateName "<rs>-", and a controller
// owner reference to the ReplicaSet.
func PodFromTemplate(rs *appsv1.ReplicaSet) *corev1.Pod {
	t := rs.Spec.Template.DeepCopy()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name + "-",
			Namespace:       rs.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, rsKind)},
		},
		Spec: t.Spec,
	}
}

// lessUseful orders pods for deletion, the first being deleted first.
func lessUseful(a, b *corev1.Pod, now time.Time) bool {
	// Unassigned < assigned.
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	// Pending < Unknown < Running.
	rank := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}
	if rank[a.Status.Phase] != rank[b.Status.Phase] {
		return rank[a.Status.Phase] < rank[b.Status.Phase]
	}
	// Not ready < ready.
	ra, rb := podutil.IsPodReady(a), podutil.IsPodReady(b)
	if ra != rb {
		return !ra
	}
	// Ready for less time < ready for longer.
	if ra && rb {
		ta := podutil.GetPodCondition(&a.Status, corev1.PodReady).LastTransitionTime
		tb := podutil.GetPodCondition(&b.Status, corev1.PodReady).LastTransitionTime
		if !ta.Equal(&tb) {
			return tb.Before(&ta)
		}
	}
	// More restarts < fewer.
	if ca, cb := restarts(a), restarts(b); ca != cb {
		return ca > cb
	}
	// Newer < older.
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// IsPodAvailable reports whether a pod has been ready for at least
// minReadySeconds at now.
func IsPodAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	if !podutil.IsPodReady(p) {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	c := podutil.GetPodCondition(&p.Status, corev1.PodReady)
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second).Before(now)
}

// CalculateStatus computes a ReplicaSet's status from its active pods and
// the number of its pods that are terminating.
func CalculateStatus(rs *appsv1.ReplicaSet, active []*corev1.Pod, terminating int32, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	st := *rs.Status.DeepCopy()
	st.Replicas = int32(len(active))
	st.TerminatingReplicas = &terminating
	st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas = 0, 0, 0
	tmpl := labels.Set(rs.Spec.Template.Labels)
	for _, p := range active {
		if labels.SelectorFromSet(tmpl).Matches(labels.Set(p.Labels)) {
			st.FullyLabeledReplicas++
		}
		if podutil.IsPodReady(p) {
			st.ReadyReplicas++
			if IsPodAvailable(p, rs.Spec.MinReadySeconds, now) {
				st.AvailableReplicas++
			}
		}
	}
	st.ObservedGeneration = rs.Generation
	var conds []appsv1.ReplicaSetCondition
	for _, c := range st.Conditions {
		if c.Type != appsv1.ReplicaSetReplicaFailure {
			conds = append(conds, c)
		}
	}
	if manageErr != nil {
		reason := "FailedCreate"
		want := int32(1)
		if rs.Spec.Replicas != nil {
			want = *rs.Spec.Replicas
		}
		if int32(len(active)) > want {
			reason = "FailedDelete"
		}
		conds = append(conds, appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: manageErr.Error()})
	}
	st.Conditions = conds
	return st
}

func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, st appsv1.ReplicaSetStatus) error {
	if apiequality.Semantic.DeepEqual(rs.Status, st) {
		return nil
	}
	cp := rs.DeepCopy()
	cp.Status = st
	_, err := c.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	return nil
}
