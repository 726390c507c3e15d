// Package namespace is svcnet's namespace controller, the counterpart of
// kube-controller-manager's: a namespace that has a deletionTimestamp and
// still carries the "kubernetes" finalizer in spec.finalizers is emptied
// (every namespaced resource the API server serves with the delete verb,
// pods first), its status conditions NamespaceDeletion*/Namespace*Remaining
// say how far that got, and once nothing is left the finalizer is removed
// through the namespaces/finalize subresource, which lets the API server
// delete the namespace.
//
// The API server only marks a namespace (deletionTimestamp, phase
// Terminating); without this controller a deleted namespace stays
// Terminating, as on a cluster without kube-controller-manager.
//
// Failures (discovery, a list or delete the API refuses, an object that
// does not go) are logged, shown in the conditions and retried with
// per-namespace exponential backoff (5 ms up to 60 s), without giving up.
// Content still on its way out (pods within their grace period, objects
// held by finalizers) is not a failure: the namespace is looked at again
// after RecheckDelay.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// ControllerName is the controller's name in logs.
const ControllerName = "namespace-controller"

// RecheckDelay is how long the controller waits before it looks again at a
// namespace whose content is still going away.
const RecheckDelay = 2 * time.Second

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// Controller finalizes deleted namespaces. Create it with New, then Run.
type Controller struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *slog.Logger
	// RecheckDelay overrides the package's RecheckDelay when set.
	RecheckDelay time.Duration
}

// New wires the controller to the factory's namespace informer; the caller
// starts the factory after New.
func New(client kubernetes.Interface, dyn dynamic.Interface, factory informers.SharedInformerFactory, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		client: client,
		dyn:    dyn,
		// Never dropped: a namespace is retried until it is gone.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 60*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"}),
		log: log.With("controller", ControllerName),
	}
	inf := factory.Core().V1().Namespaces().Informer()
	enqueue := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	c.synced = inf.HasSynced
	return c
}

// Run processes deleted namespaces with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return ctx.Err()
	}
	if workers < 1 {
		workers = 1
	}
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for c.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	for range workers {
		<-done
	}
	return nil
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	err := c.Sync(ctx, name)
	var remaining *RemainingError
	switch {
	case err == nil:
		c.queue.Forget(name)
	case errors.As(err, &remaining):
		c.queue.Forget(name)
		delay := c.RecheckDelay
		if delay <= 0 {
			delay = RecheckDelay
		}
		c.log.Debug("namespace content remains", "namespace", name, "err", err)
		c.queue.AddAfter(name, delay)
	case ctx.Err() != nil:
	default:
		c.log.Warn("namespace deletion failed, retrying", "namespace", name, "attempt", c.queue.NumRequeues(name)+1, "err", err)
		c.queue.AddRateLimited(name)
	}
	return true
}

// RemainingError says that content is still being removed from a
// namespace: nothing failed, the namespace is looked at again later.
type RemainingError struct{ Namespace string }

func (e *RemainingError) Error() string {
	return fmt.Sprintf("some content remains in namespace %s", e.Namespace)
}

// Sync does one round of finalization of the namespace name.
func (c *Controller) Sync(ctx context.Context, name string) error {
	nsClient := c.client.CoreV1().Namespaces()
	ns, err := nsClient.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil {
		return nil
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		ns, err = c.updateNamespace(ctx, ns, func(ns *corev1.Namespace) bool {
			if ns.Status.Phase == corev1.NamespaceTerminating {
				return false
			}
			ns.Status.Phase = corev1.NamespaceTerminating
			return true
		}, nsClient.UpdateStatus)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}
	remaining, err := c.deleteContent(ctx, ns)
	if err != nil {
		return err
	}
	if remaining {
		return &RemainingError{Namespace: name}
	}
	_, err = c.updateNamespace(ctx, ns, func(ns *corev1.Namespace) bool {
		if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			return false
		}
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		return true
	}, nsClient.Finalize)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		c.log.Info("namespace finalized", "namespace", name)
	}
	return err
}

// updateNamespace applies change to ns and writes it with write, re-reading
// the namespace after a conflict.
func (c *Controller) updateNamespace(ctx context.Context, ns *corev1.Namespace, change func(*corev1.Namespace) bool,
	write func(context.Context, *corev1.Namespace, metav1.UpdateOptions) (*corev1.Namespace, error)) (*corev1.Namespace, error) {
	cur := ns.DeepCopy()
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, err := c.client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = fresh
		}
		first = false
		if !change(cur) {
			return nil
		}
		out, err := write(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			cur = out
		}
		return err
	})
	return cur, err
}

// resource is one namespaced resource the controller empties.
type resource struct {
	gvr        schema.GroupVersionResource
	collection bool // deletecollection is served
}

// deleteContent deletes what namespace ns holds, pods first, records the
// outcome in the namespace's conditions and reports whether content
// remains. Failures of some resources do not stop the others.
func (c *Controller) deleteContent(ctx context.Context, ns *corev1.Namespace) (bool, error) {
	var (
		errs  []error
		conds conditions
	)
	lists, err := c.client.Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		// Partial discovery still lets the controller delete what it found.
		errs = append(errs, err)
		conds.discoveryFailed(err)
	}
	var resources []resource
	var gvErrs []error
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			gvErrs = append(gvErrs, err)
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			resources = append(resources, resource{gvr: gv.WithResource(r.Name), collection: slices.Contains(r.Verbs, "deletecollection")})
		}
	}
	if len(gvErrs) > 0 {
		err := errors.Join(gvErrs...)
		errs = append(errs, err)
		conds.groupVersionFailed(err)
	}
	// Pods go first: their processes may still use what the namespace holds
	// (Services, config) while they terminate.
	sort.SliceStable(resources, func(i, j int) bool { return resources[i].gvr == podsGVR && resources[j].gvr != podsGVR })
	totals := remaining{byResource: map[schema.GroupVersionResource]int{}, byFinalizer: map[string]int{}}
	for i, r := range resources {
		if i > 0 && resources[i-1].gvr == podsGVR && totals.byResource[podsGVR] > 0 {
			break
		}
		if err := c.deleteAll(ctx, r, ns.Name, &totals); err != nil {
			if r.gvr == podsGVR {
				err = fmt.Errorf("failed to delete pods for namespace: %s, err: %w", ns.Name, err)
			}
			errs = append(errs, err)
			conds.contentFailed(err)
		}
	}
	conds.remaining(totals)
	if updated := ns.DeepCopy(); conds.apply(&updated.Status, metav1.Now()) {
		if _, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			c.log.Warn("cannot update namespace conditions", "namespace", ns.Name, "err", err)
		}
	}
	return len(totals.byResource) > 0, errors.Join(errs...)
}

// remaining counts what is left after a round, by resource and by finalizer.
type remaining struct {
	byResource  map[schema.GroupVersionResource]int
	byFinalizer map[string]int
}

// deleteAll deletes every object of r in namespace ns (background
// propagation, so that the garbage collector puts no orphan finalizer on
// them), then counts what is left into totals. An object left that is not
// being deleted is an error: the delete should have marked or removed it.
func (c *Controller) deleteAll(ctx context.Context, r resource, ns string, totals *remaining) error {
	client := c.dyn.Resource(r.gvr).Namespace(ns)
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	unsupported := func(err error) bool { return apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) }
	collected := false
	if r.collection {
		err := client.DeleteCollection(ctx, opts, metav1.ListOptions{})
		if err != nil && !unsupported(err) {
			return err
		}
		collected = err == nil
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if unsupported(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !collected {
		for _, it := range list.Items {
			if it.GetDeletionTimestamp() != nil {
				continue
			}
			if err := client.Delete(ctx, it.GetName(), opts); err != nil && !unsupported(err) {
				return err
			}
		}
		if list, err = client.List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
	}
	if len(list.Items) == 0 {
		return nil
	}
	totals.byResource[r.gvr] += len(list.Items)
	unexpected := 0
	for _, it := range list.Items {
		for _, f := range it.GetFinalizers() {
			totals.byFinalizer[f]++
		}
		if it.GetDeletionTimestamp() == nil {
			unexpected++
		}
	}
	if unexpected > 0 {
		return fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", ns, r.gvr)
	}
	return nil
}

// conditions collects a round's outcome as namespace conditions. The types,
// reasons and messages are kube-controller-manager's, so that tools reading
// them (kubectl describe, scripts waiting on a condition) see the same.
type conditions struct {
	failures       []corev1.NamespaceCondition
	contentErrors  []string
	remainingConds []corev1.NamespaceCondition
}

// conditionTypes are the conditions the controller maintains, each with the
// reason and message of its healthy (False) state.
var conditionTypes = []struct {
	typ             corev1.NamespaceConditionType
	reason, message string
}{
	{corev1.NamespaceDeletionDiscoveryFailure, "ResourcesDiscovered", "All resources successfully discovered"},
	{corev1.NamespaceDeletionGVParsingFailure, "ParsedGroupVersions", "All legacy kube types successfully parsed"},
	{corev1.NamespaceDeletionContentFailure, "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	{corev1.NamespaceContentRemaining, "ContentRemoved", "All content successfully removed"},
	{corev1.NamespaceFinalizersRemaining, "ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

func (c *conditions) discoveryFailed(err error) {
	msg := err.Error()
	var gdf *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &gdf) {
		msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(gdf.Groups), err)
	}
	c.failures = append(c.failures, corev1.NamespaceCondition{Type: corev1.NamespaceDeletionDiscoveryFailure, Status: corev1.ConditionTrue, Reason: "DiscoveryFailed", Message: msg})
}

func (c *conditions) groupVersionFailed(err error) {
	c.failures = append(c.failures, corev1.NamespaceCondition{Type: corev1.NamespaceDeletionGVParsingFailure, Status: corev1.ConditionTrue, Reason: "GroupVersionParsingFailed", Message: err.Error()})
}

func (c *conditions) contentFailed(err error) { c.contentErrors = append(c.contentErrors, err.Error()) }

func (c *conditions) remaining(r remaining) {
	if len(r.byResource) > 0 {
		var parts []string
		for gvr, n := range r.byResource {
			parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
		}
		sort.Strings(parts)
		c.remainingConds = append(c.remainingConds, corev1.NamespaceCondition{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue,
			Reason: "SomeResourcesRemain", Message: "Some resources are remaining: " + strings.Join(parts, ", ")})
	}
	if len(r.byFinalizer) > 0 {
		var parts []string
		for f, n := range r.byFinalizer {
			parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
		}
		sort.Strings(parts)
		c.remainingConds = append(c.remainingConds, corev1.NamespaceCondition{Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionTrue,
			Reason: "SomeFinalizersRemain", Message: "Some content in the namespace has finalizers remaining: " + strings.Join(parts, ", ")})
	}
}

// apply sets every maintained condition on status (the failure found in
// this round, else the healthy state) and reports whether anything changed.
// A condition's lastTransitionTime moves only when its status does.
func (c *conditions) apply(status *corev1.NamespaceStatus, now metav1.Time) bool {
	found := slices.Concat(c.failures, c.remainingConds)
	if len(c.contentErrors) > 0 {
		msgs := slices.Clone(c.contentErrors)
		sort.Strings(msgs)
		found = append(found, corev1.NamespaceCondition{Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue, Reason: "ContentDeletionFailed",
			Message: fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", "))})
	}
	changed := false
	for _, ct := range conditionTypes {
		want := corev1.NamespaceCondition{Type: ct.typ, Status: corev1.ConditionFalse, Reason: ct.reason, Message: ct.message}
		if i := slices.IndexFunc(found, func(f corev1.NamespaceCondition) bool { return f.Type == ct.typ }); i >= 0 {
			want = found[i]
		}
		i := slices.IndexFunc(status.Conditions, func(f corev1.NamespaceCondition) bool { return f.Type == ct.typ })
		if i < 0 {
			want.LastTransitionTime = now
			status.Conditions = append(status.Conditions, want)
			changed = true
			continue
		}
		have := &status.Conditions[i]
		if have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
			continue
		}
		if have.Status != want.Status {
			have.LastTransitionTime = now
		}
		have.Status, have.Reason, have.Message = want.Status, want.Reason, want.Message
		changed = true
	}
	return changed
}
