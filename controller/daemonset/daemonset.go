// Package daemonset is svcnet's DaemonSet controller: it runs one pod of
// each DaemonSet on every eligible node, as Kubernetes' daemonset-controller
// does, and reports status (desiredNumberScheduled, currentNumberScheduled,
// numberMisscheduled, numberReady, updatedNumberScheduled, numberAvailable,
// numberUnavailable, observedGeneration) through /status.
//
// A node is eligible when the DaemonSet's pod for it (the template plus the
// tolerations the controller adds: not-ready and unreachable NoExecute,
// disk-, memory- and pid-pressure and unschedulable NoSchedule, and
// network-unavailable NoSchedule for host-network pods) matches the node
// (spec.nodeName of the template, nodeSelector, required node affinity) and
// tolerates its NoSchedule and NoExecute taints. A pod already on a node
// that is no longer eligible stays while it matches the node and tolerates
// its NoExecute taints, and counts as misscheduled.
//
// Pods are created with generateName "<ds>-", a controller owner reference,
// the labels controller-revision-hash (a hash of the template; svcnet serves
// no ControllerRevisions) and pod-template-generation, and kube's required
// node affinity `matchFields metadata.name In [node]`. Where kube 1.37 then
// lets the scheduler bind the pod, svcnet's controller also sets
// spec.nodeName itself (svcnet's scheduler neither reads node affinity nor
// places pods on not-ready nodes, which daemon pods tolerate).
//
// Extra pods on a node (all but the oldest), failed pods and pods on nodes
// that are no longer eligible are deleted. A RollingUpdate replaces out of
// date pods node by node: with maxSurge 0, at most maxUnavailable nodes are
// without an available pod at any time (out-of-date pods that are not
// available are replaced at once); with maxSurge > 0, up to maxSurge nodes
// get a new pod next to the old one, which is deleted once the new one is
// available. OnDelete leaves out-of-date pods alone.
//
// A DaemonSet annotated NodeAgentAnnotation: "true" describes a per-node
// service that svcnet's node agents run as static pods (kube-proxy:
// svcnet's proxy, `svcnet up`): the controller creates no pods for it and
// reports its eligible nodes as desired, those with a mirror pod its
// selector matches as current and updated, and those whose mirror pod is
// Ready as ready and available.
package daemonset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
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
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/controller/internal/expectations"
	"github.com/svcnet/svcnet/controller/internal/podutil"
	"github.com/svcnet/svcnet/controller/internal/worker"
)

// ControllerName names the controller in logs and events.
const ControllerName = "daemonset-controller"

// NodeAgentAnnotation marks a DaemonSet whose pods svcnet's node agents
// run as static pods: value "true" makes the controller create no pods for
// it and report its status from the matching mirror pods.
const NodeAgentAnnotation = "svcnet.io/node-agent"

// Labels the controller puts on the pods it creates, as kube's does.
const (
	RevisionHashLabel       = appsv1.DefaultDaemonSetUniqueLabelKey // controller-revision-hash
	TemplateGenerationLabel = "pod-template-generation"
)

// BurstPods bounds the creations or deletions of one sync.
const BurstPods = 250

var dsKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}

// Controller reconciles DaemonSets. Create with New, then Run.
type Controller struct {
	client   kubernetes.Interface
	dsets    appslisters.DaemonSetLister
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
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
	dsInf := factory.Apps().V1().DaemonSets()
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	c := &Controller{
		client:   client,
		dsets:    dsInf.Lister(),
		pods:     podInf.Lister(),
		nodes:    nodeInf.Lister(),
		synced:   []cache.InformerSynced{dsInf.Informer().HasSynced, podInf.Informer().HasSynced, nodeInf.Informer().HasSynced},
		queue:    worker.NewQueue("daemonset"),
		recorder: recorder,
		exp:      expectations.New(),
		log:      log.With("controller", ControllerName),
		now:      time.Now,
	}
	dsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
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
			if key := ownerKey(pod); key != "" {
				c.exp.Observed(key, pod.DeletionTimestamp == nil)
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
				if key := ownerKey(n); key != "" {
					c.exp.Observed(key, false)
				}
			}
			for _, p := range []*corev1.Pod{o, n} {
				if key := ownerKey(p); key != "" {
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
			if key := ownerKey(pod); key != "" {
				if pod.DeletionTimestamp == nil {
					c.exp.Observed(key, false)
				}
				c.queue.Add(key)
			} else {
				c.enqueueMatching(pod)
			}
		},
	})
	// Any node change can change where DaemonSets run (and the status of
	// node-agent DaemonSets): requeue them all.
	nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			if o.ResourceVersion != n.ResourceVersion || o.ResourceVersion == "" {
				c.enqueueAll()
			}
		},
		DeleteFunc: func(any) { c.enqueueAll() },
	})
	return c
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

func (c *Controller) enqueueAll() {
	all, _ := c.dsets.List(labels.Everything())
	for _, ds := range all {
		c.queue.Add(ds.Namespace + "/" + ds.Name)
	}
}

// ownerKey returns the key of the DaemonSet controlling pod, or "".
func ownerKey(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		return ""
	}
	return pod.Namespace + "/" + ref.Name
}

// enqueueMatching queues DaemonSets that could adopt an orphan pod, and the
// node-agent DaemonSets whose status counts a mirror pod.
func (c *Controller) enqueueMatching(pod *corev1.Pod) {
	_, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]
	if metav1.GetControllerOf(pod) != nil && !mirror {
		return
	}
	dss, _ := c.dsets.DaemonSets(pod.Namespace).List(labels.Everything())
	for _, ds := range dss {
		if mirror != IsNodeAgent(ds) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			c.queue.Add(ds.Namespace + "/" + ds.Name)
		}
	}
}

// Run waits for caches and syncs until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("daemonset controller: caches did not sync")
	}
	worker.Run(ctx, c.log, c.queue, workers, c.sync)
	return nil
}

// IsNodeAgent reports whether ds is run by svcnet's node agents.
func IsNodeAgent(ds *appsv1.DaemonSet) bool { return ds.Annotations[NodeAgentAnnotation] == "true" }

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	ds, err := c.dsets.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() {
		// The API server rejects these; never act on a selector that
		// would match every pod.
		return nil
	}
	all, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	if IsNodeAgent(ds) {
		var mirrors []*corev1.Pod
		for _, p := range all {
			if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok && sel.Matches(labels.Set(p.Labels)) {
				mirrors = append(mirrors, p)
			}
		}
		return c.updateStatus(ctx, ds, NodeAgentStatus(ds, nodes, mirrors))
	}
	owned, err := podutil.ClaimPods(ctx, c.client, ds, dsKind, sel, all)
	if err != nil {
		return err
	}
	hash := TemplateHash(&ds.Spec.Template)
	byNode := podsByNode(owned)
	var manageErr error
	if c.exp.Satisfied(key) && ds.DeletionTimestamp == nil {
		manageErr = c.manage(ctx, ds, nodes, byNode, hash, key)
	}
	now := c.now()
	st := CalculateStatus(ds, nodes, byNode, hash, now)
	if err := c.updateStatus(ctx, ds, st); err != nil {
		return errors.Join(manageErr, err)
	}
	// Requeue to flip availability once minReadySeconds pass.
	if manageErr == nil && ds.Spec.MinReadySeconds > 0 && st.NumberReady != st.NumberAvailable {
		c.queue.AddAfter(key, time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

// podNode is the node a daemon pod is on, or is meant for (the matchFields
// node affinity the controller sets).
func podNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range t.MatchFields {
				if r.Key == metav1.ObjectNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
					return r.Values[0]
				}
			}
		}
	}
	return ""
}

// podsByNode groups pods by node, oldest first.
func podsByNode(pods []*corev1.Pod) map[string][]*corev1.Pod {
	m := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if n := podNode(p); n != "" {
			m[n] = append(m[n], p)
		}
	}
	for _, ps := range m {
		sort.SliceStable(ps, func(i, j int) bool { return olderFirst(ps[i], ps[j]) })
	}
	return m
}

// olderFirst orders pods oldest first (running before others on a tie).
func olderFirst(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if ra, rb := a.Status.Phase == corev1.PodRunning, b.Status.Phase == corev1.PodRunning; ra != rb {
		return ra
	}
	return a.Name < b.Name
}

// TemplateHash is the controller-revision-hash of a pod template.
func TemplateHash(t *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	h := fnv.New32a()
	h.Write(b)
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// templateGeneration is the DaemonSet's template generation, or "" when it
// has none.
func templateGeneration(ds *appsv1.DaemonSet) string {
	v := ds.Annotations[appsv1.DeprecatedTemplateGeneration]
	if _, err := strconv.ParseInt(v, 10, 64); err != nil {
		return ""
	}
	return v
}

// IsPodUpdated reports whether pod runs ds's current template: its
// revision hash or its template generation label is the current one.
func IsPodUpdated(pod *corev1.Pod, ds *appsv1.DaemonSet, hash string) bool {
	if pod.Labels[RevisionHashLabel] == hash {
		return true
	}
	tg := templateGeneration(ds)
	return tg != "" && pod.Labels[TemplateGenerationLabel] == tg
}

// daemonTolerations are the tolerations every daemon pod gets.
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// addToleration puts t into the spec's tolerations, replacing one with the
// same key, operator, value and effect.
func addToleration(spec *corev1.PodSpec, t corev1.Toleration) {
	for i := range spec.Tolerations {
		if t.MatchToleration(&spec.Tolerations[i]) {
			spec.Tolerations[i] = t
			return
		}
	}
	spec.Tolerations = append(spec.Tolerations, t)
}

// AddDaemonTolerations adds the tolerations of daemon pods to spec.
func AddDaemonTolerations(spec *corev1.PodSpec) {
	for _, t := range daemonTolerations {
		addToleration(spec, t)
	}
	if spec.HostNetwork {
		addToleration(spec, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
}

// NewPod returns the pod ds runs on node (node "" for the eligibility
// check: no placement).
func NewPod(ds *appsv1.DaemonSet, node, hash string) *corev1.Pod {
	t := ds.Spec.Template.DeepCopy()
	l := make(map[string]string, len(t.Labels)+2)
	for k, v := range t.Labels {
		l[k] = v
	}
	l[RevisionHashLabel] = hash
	if tg := templateGeneration(ds); tg != "" {
		l[TemplateGenerationLabel] = tg
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ds.Name + "-",
			Namespace:       ds.Namespace,
			Labels:          l,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, dsKind)},
		},
		Spec: t.Spec,
	}
	AddDaemonTolerations(&pod.Spec)
	if node != "" {
		pod.Spec.Affinity = nodeNameAffinity(pod.Spec.Affinity, node)
		pod.Spec.NodeName = node
	}
	return pod
}

// nodeNameAffinity sets the required node affinity to the one term
// `matchFields metadata.name In [node]`, as kube's controller does.
func nodeNameAffinity(a *corev1.Affinity, node string) *corev1.Affinity {
	req := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
	if a == nil {
		a = &corev1.Affinity{}
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = req
	return a
}

// ShouldRun reports whether ds should run a pod on node, and whether a pod
// already there may continue running.
func ShouldRun(ds *appsv1.DaemonSet, node *corev1.Node) (run, keep bool) {
	pod := NewPod(ds, "", "")
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return false, false
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return false, false
	}
	if untolerated(pod, node, false) {
		return false, !untolerated(pod, node, true)
	}
	return true, true
}

// untolerated reports whether node has a NoExecute taint (and, unless
// noExecuteOnly, a NoSchedule one) that pod does not tolerate.
func untolerated(pod *corev1.Pod, node *corev1.Node, noExecuteOnly bool) bool {
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoExecute && (noExecuteOnly || t.Effect != corev1.TaintEffectNoSchedule) {
			continue
		}
		ok := false
		for j := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[j].ToleratesTaint(klog.Background(), t, false) {
				ok = true
				break
			}
		}
		if !ok {
			return true
		}
	}
	return false
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
	return !c.LastTransitionTime.IsZero() && !c.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second).After(now)
}

func (c *Controller) manage(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash, key string) error {
	now := c.now()
	create, del := placement(ds, nodes, byNode, hash, now)
	// Rolling updates go ahead only once the placement is right.
	if len(create) == 0 && len(del) == 0 && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		create, del = rollingUpdate(ds, nodes, byNode, hash, now)
	}
	create = create[:min(len(create), BurstPods)]
	del = del[:min(len(del), BurstPods)]
	if len(create) == 0 && len(del) == 0 {
		return nil
	}
	c.exp.Expect(key, len(create), len(del))
	var errs []error
	for _, node := range create {
		pod := NewPod(ds, node, hash)
		got, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			c.exp.Observed(key, true)
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				continue
			}
			c.event(ds, corev1.EventTypeWarning, "FailedCreate", fmt.Sprintf("Error creating: %v", err))
			errs = append(errs, fmt.Errorf("create pod for %s/%s on %s: %w", ds.Namespace, ds.Name, node, err))
			continue
		}
		c.event(ds, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+got.Name)
	}
	for _, p := range del {
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil {
			c.exp.Observed(key, false)
			if apierrors.IsNotFound(err) {
				continue
			}
			c.event(ds, corev1.EventTypeWarning, "FailedDelete", fmt.Sprintf("Error deleting: %v", err))
			errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
			continue
		}
		c.event(ds, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: "+p.Name)
	}
	return errors.Join(errs...)
}

// placement returns the nodes that need a daemon pod and the pods to
// delete: on nodes that may no longer run one, finished ones, and all but
// one (or, while surging, one old and one new) on each node.
func placement(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, now time.Time) (create []string, del []*corev1.Pod) {
	_, surge := rollingBudget(ds, 1)
	for _, n := range nodes {
		run, keep := ShouldRun(ds, n)
		pods := byNode[n.Name]
		switch {
		case run && len(pods) == 0:
			create = append(create, n.Name)
		case keep:
			var running []*corev1.Pod
			for _, p := range pods {
				switch {
				case p.DeletionTimestamp != nil:
				case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
					// Replaced once it is gone.
					del = append(del, p)
				default:
					running = append(running, p)
				}
			}
			if surge == 0 {
				// Keep the oldest.
				if len(running) > 1 {
					del = append(del, running[1:]...)
				}
				continue
			}
			if len(running) == 0 && run {
				create = append(create, n.Name)
				continue
			}
			var oldest, newest *corev1.Pod
			for _, p := range running {
				switch {
				case IsPodUpdated(p, ds, hash) && newest == nil:
					newest = p
				case !IsPodUpdated(p, ds, hash) && oldest == nil:
					oldest = p
				default:
					del = append(del, p)
				}
			}
			if oldest != nil && newest != nil && (!podutil.IsPodReady(oldest) || IsPodAvailable(newest, ds.Spec.MinReadySeconds, now)) {
				del = append(del, oldest)
			}
		default:
			for _, p := range pods {
				if p.DeletionTimestamp == nil {
					del = append(del, p)
				}
			}
		}
	}
	return create, del
}

// rollingBudget returns maxUnavailable and maxSurge scaled to desired
// nodes (percentages rounded up; both 0 means maxUnavailable 1). Only a
// RollingUpdate surges.
func rollingBudget(ds *appsv1.DaemonSet, desired int) (unavailable, surge int) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil {
		return 1, 0
	}
	scaled := func(v *intstr.IntOrString) int {
		if v == nil {
			return 0
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(v, desired, true)
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	unavailable, surge = scaled(ru.MaxUnavailable), scaled(ru.MaxSurge)
	if unavailable == 0 && surge == 0 {
		unavailable = 1
	}
	return unavailable, surge
}

// updatedAndOld returns a node's new and old pod (not being deleted); ok
// is false when there is more than one of either.
func updatedAndOld(ds *appsv1.DaemonSet, pods []*corev1.Pod, hash string) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if IsPodUpdated(p, ds, hash) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = p
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = p
		}
	}
	return newPod, oldPod, true
}

// rollingUpdate returns the nodes that get a new pod (while surging) and
// the out-of-date pods to delete now. Out-of-date pods that are not
// available are replaced at once; the others within the budget.
func rollingUpdate(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, now time.Time) (create []string, del []*corev1.Pod) {
	desired := 0
	for _, n := range nodes {
		if run, _ := ShouldRun(ds, n); run {
			desired++
		}
	}
	maxUnavailable, maxSurge := rollingBudget(ds, desired)
	available := func(p *corev1.Pod) bool { return IsPodAvailable(p, ds.Spec.MinReadySeconds, now) }
	if maxSurge == 0 {
		unavailable := 0
		var candidates []*corev1.Pod
		for _, n := range nodes {
			pods, ok := byNode[n.Name]
			if !ok {
				continue
			}
			newPod, oldPod, ok := updatedAndOld(ds, pods, hash)
			switch {
			case !ok, oldPod == nil && newPod == nil, oldPod != nil && newPod != nil:
				// Placement sorts these out; count them as unavailable.
				unavailable++
			case newPod != nil:
				if !available(newPod) {
					unavailable++
				}
			case !available(oldPod):
				del = append(del, oldPod)
			case unavailable < maxUnavailable:
				candidates = append(candidates, oldPod)
			}
		}
		n := max(0, min(maxUnavailable-unavailable, len(candidates)))
		return nil, append(del, candidates[:n]...)
	}
	surged := 0
	var candidates []string
	for _, n := range nodes {
		pods, ok := byNode[n.Name]
		if !ok {
			continue
		}
		newPod, oldPod, ok := updatedAndOld(ds, pods, hash)
		switch {
		case !ok:
			surged++
		case oldPod == nil:
		case newPod == nil:
			switch {
			case !available(oldPod):
				create = append(create, n.Name)
			case surged < maxSurge:
				candidates = append(candidates, n.Name)
			}
		case !available(newPod):
			surged++
		default:
			del = append(del, oldPod)
		}
	}
	k := max(0, min(maxSurge-surged, len(candidates)))
	return append(create, candidates[:k]...), del
}

// CalculateStatus computes a DaemonSet's status from the nodes and its
// pods by node (oldest first).
func CalculateStatus(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, now time.Time) appsv1.DaemonSetStatus {
	st := *ds.Status.DeepCopy()
	st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberMisscheduled = 0, 0, 0
	st.NumberReady, st.UpdatedNumberScheduled, st.NumberAvailable = 0, 0, 0
	for _, n := range nodes {
		run, _ := ShouldRun(ds, n)
		pods := byNode[n.Name]
		if !run {
			if len(pods) > 0 {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(pods) == 0 {
			continue
		}
		st.CurrentNumberScheduled++
		p := pods[0]
		if podutil.IsPodReady(p) {
			st.NumberReady++
			if IsPodAvailable(p, ds.Spec.MinReadySeconds, now) {
				st.NumberAvailable++
			}
		}
		if IsPodUpdated(p, ds, hash) {
			st.UpdatedNumberScheduled++
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	st.ObservedGeneration = ds.Generation
	return st
}

// NodeAgentStatus is the status of a node-agent DaemonSet from the mirror
// pods its selector matches (the node agents' static pods): its eligible
// nodes are desired; those with such a pod are current and updated, those
// whose pod is Ready are ready and available; a pod on a node the
// DaemonSet would not run on is misscheduled.
func NodeAgentStatus(ds *appsv1.DaemonSet, nodes []*corev1.Node, mirrors []*corev1.Pod) appsv1.DaemonSetStatus {
	st := *ds.Status.DeepCopy()
	st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberMisscheduled = 0, 0, 0
	st.NumberReady, st.UpdatedNumberScheduled, st.NumberAvailable = 0, 0, 0
	byNode := podsByNode(mirrors)
	for _, n := range nodes {
		pods := byNode[n.Name]
		if run, _ := ShouldRun(ds, n); !run {
			if len(pods) > 0 {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(pods) == 0 {
			continue
		}
		st.CurrentNumberScheduled++
		for _, p := range pods {
			if podReady(p) {
				st.NumberReady++
				break
			}
		}
	}
	st.UpdatedNumberScheduled, st.NumberAvailable = st.CurrentNumberScheduled, st.NumberReady
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	st.ObservedGeneration = ds.Generation
	return st
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil
		}
	}
	return false
}

func (c *Controller) event(ds *appsv1.DaemonSet, typ, reason, msg string) {
	if c.recorder != nil {
		c.recorder.Event(ds, typ, reason, msg)
	}
}

func (c *Controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, st appsv1.DaemonSetStatus) error {
	if apiequality.Semantic.DeepEqual(ds.Status, st) {
		return nil
	}
	cp := ds.DeepCopy()
	cp.Status = st
	_, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	return nil
}
