// Package scheduler is svcnet's minimal scheduler: it binds every pending
// pod that has no spec.nodeName and asks for the default scheduler (empty
// schedulerName or "default-scheduler") to a node.
//
// A node is feasible when it is Ready, not spec.unschedulable, has no
// NoSchedule/NoExecute taint the pod does not tolerate, matches the pod's
// nodeSelector, and has none of the pod's hostPorts (port, protocol, host
// IP overlap) in use by a pod already on it. Among feasible nodes the one
// with the fewest non-terminal pods wins (ties by name). The binding goes
// through the pods/binding subresource; if the API server does not serve it
// (404 for the subresource, 405) and FallbackUpdate is set, spec.nodeName is
// written with an update instead. Events: Scheduled "Successfully assigned
// ns/pod to node", FailedScheduling "0/N nodes are available: ...".
package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/controller/internal/podutil"
	"github.com/svcnet/svcnet/controller/internal/worker"
)

// SchedulerName is the schedulerName this scheduler serves.
const SchedulerName = corev1.DefaultSchedulerName

// Options configure the scheduler.
type Options struct {
	// FallbackUpdate writes spec.nodeName with a pod update when the
	// binding subresource is not served.
	FallbackUpdate bool
	// BindMode is "binding" (default: subresource, fallback per
	// FallbackUpdate) or "update" (always update).
	BindMode string
}

// Scheduler binds pods. Create with New, then Run (one worker: decisions
// depend on each other).
type Scheduler struct {
	client   kubernetes.Interface
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	opts     Options
	log      *slog.Logger

	mu sync.Mutex
	// assumed maps pod key -> node for bindings the cache has not shown
	// yet, so consecutive decisions see each other.
	assumed map[string]assumedPod
}

type assumedPod struct {
	node string
	pod  *corev1.Pod
}

// New wires the scheduler to the factory's Pod and Node informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, opts Options, log *slog.Logger) *Scheduler {
	if log == nil {
		log = slog.Default()
	}
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	s := &Scheduler{
		client:   client,
		pods:     podInf.Lister(),
		nodes:    nodeInf.Lister(),
		synced:   []cache.InformerSynced{podInf.Informer().HasSynced, nodeInf.Informer().HasSynced},
		queue:    worker.NewQueue("scheduler"),
		recorder: recorder,
		opts:     opts,
		log:      log.With("controller", "scheduler"),
		assumed:  map[string]assumedPod{},
	}
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.onPod,
		UpdateFunc: func(_, obj any) { s.onPod(obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				s.mu.Lock()
				delete(s.assumed, key)
				s.mu.Unlock()
			}
			// A freed node may fit a pending pod.
			s.requeuePending()
		},
	})
	nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.requeuePending() },
		UpdateFunc: func(any, any) { s.requeuePending() },
	})
	return s
}

func (s *Scheduler) onPod(obj any) {
	pod := obj.(*corev1.Pod)
	key := pod.Namespace + "/" + pod.Name
	if pod.Spec.NodeName != "" {
		s.mu.Lock()
		delete(s.assumed, key)
		s.mu.Unlock()
		return
	}
	if responsible(pod) {
		s.queue.Add(key)
	}
}

func responsible(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && !podutil.IsPodTerminal(pod) &&
		(pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == SchedulerName)
}

func (s *Scheduler) requeuePending() {
	pods, _ := s.pods.List(labels.Everything())
	for _, p := range pods {
		if responsible(p) {
			s.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
}

// Run waits for caches and schedules until ctx is cancelled.
func (s *Scheduler) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return fmt.Errorf("scheduler: caches did not sync")
	}
	worker.Run(ctx, s.log, s.queue, 1, s.schedule)
	return nil
}

func (s *Scheduler) schedule(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := s.pods.Pods(ns).Get(name)
	if err != nil || !responsible(pod) {
		return nil
	}
	s.mu.Lock()
	_, already := s.assumed[key]
	s.mu.Unlock()
	if already {
		return nil
	}
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	// The assumed bindings are read before the pods: a binding leaves
	// assumed only after the informer's cache shows it, so every binding is
	// in one of the two. Read the other way round, an event landing between
	// the two reads would hide a pod from the decision.
	assumed := s.assumedPods()
	all, err := s.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	node, reason := pick(pod, nodes, all, assumed)
	if node == "" {
		if s.recorder != nil {
			s.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", reason)
		}
		// Nodes or pods changing requeue it; nothing to retry now.
		return nil
	}
	if err := s.bind(ctx, pod, node); err != nil {
		return err
	}
	s.mu.Lock()
	s.assumed[key] = assumedPod{node: node, pod: pod}
	s.mu.Unlock()
	if s.recorder != nil {
		s.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node)
	}
	return nil
}

func (s *Scheduler) bind(ctx context.Context, pod *corev1.Pod, node string) error {
	if s.opts.BindMode != "update" {
		err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		unsupported := apierrors.IsMethodNotSupported(err) || (apierrors.IsNotFound(err) && subresourceMissing(err))
		if !unsupported || !s.opts.FallbackUpdate {
			return fmt.Errorf("bind %s/%s to %s: %w", pod.Namespace, pod.Name, node, err)
		}
	}
	cur, err := s.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if cur.Spec.NodeName != "" {
		return nil
	}
	cur.Spec.NodeName = node
	if _, err := s.client.CoreV1().Pods(pod.Namespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("assign %s/%s to %s: %w", pod.Namespace, pod.Name, node, err)
	}
	return nil
}

// subresourceMissing tells a 404 for the binding subresource from a 404 for
// the pod itself.
func subresourceMissing(err error) bool {
	var st apierrors.APIStatus
	if !asStatus(err, &st) {
		return true
	}
	d := st.Status().Details
	return d == nil || d.Kind != "pods" || !strings.Contains(st.Status().Message, "pods \"")
}

func asStatus(err error, out *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*out = s
	}
	return ok
}

func (s *Scheduler) assumedPods() map[string]assumedPod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.assumed)
}

// Pick returns the node pod should run on, or "" and a FailedScheduling
// message, given the pods of the cache and the bindings it has not shown
// yet.
func (s *Scheduler) Pick(pod *corev1.Pod, nodes []*corev1.Node, pods []*corev1.Pod) (string, string) {
	return pick(pod, nodes, pods, s.assumedPods())
}

func pick(pod *corev1.Pod, nodes []*corev1.Node, pods []*corev1.Pod, assumed map[string]assumedPod) (string, string) {
	onNode := map[string][]*corev1.Pod{}
	seen := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && !podutil.IsPodTerminal(p) {
			onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], p)
			seen[p.Namespace+"/"+p.Name] = true
		}
	}
	for k, a := range assumed {
		if !seen[k] {
			onNode[a.node] = append(onNode[a.node], a.pod)
		}
	}
	var notReady, unschedulable, selector, taints, ports int
	type cand struct {
		name string
		n    int
	}
	var cands []cand
	sel := labels.SelectorFromSet(pod.Spec.NodeSelector)
	for _, n := range nodes {
		switch {
		case !nodeReady(n):
			notReady++
		case n.Spec.Unschedulable:
			unschedulable++
		case !sel.Matches(labels.Set(n.Labels)):
			selector++
		case !tolerates(pod, n):
			taints++
		case portConflict(pod, onNode[n.Name]):
			ports++
		default:
			cands = append(cands, cand{n.Name, len(onNode[n.Name])})
		}
	}
	if len(cands) == 0 {
		var why []string
		add := func(n int, msg string) {
			if n > 0 {
				why = append(why, fmt.Sprintf("%d %s", n, msg))
			}
		}
		add(ports, "node(s) didn't have free ports for the requested pod ports")
		add(selector, "node(s) didn't match Pod's node affinity/selector")
		add(notReady, "node(s) had untolerated taint {node.kubernetes.io/not-ready: }")
		add(unschedulable, "node(s) were unschedulable")
		add(taints, "node(s) had untolerated taint(s)")
		sort.Strings(why)
		msg := fmt.Sprintf("0/%d nodes are available", len(nodes))
		if len(why) > 0 {
			msg += ": " + strings.Join(why, ", ")
		}
		return "", msg + ". preemption: 0/" + fmt.Sprint(len(nodes)) + " nodes are available: " + fmt.Sprint(len(nodes)) + " Preemption is not helpful for scheduling."
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].n != cands[j].n {
			return cands[i].n < cands[j].n
		}
		return cands[i].name < cands[j].name
	})
	return cands[0].name, ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func tolerates(pod *corev1.Pod, n *corev1.Node) bool {
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
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
			return false
		}
	}
	return true
}

type hostPort struct {
	ip    string
	proto corev1.Protocol
	port  int32
}

func hostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.HostPort <= 0 {
				continue
			}
			proto := cp.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			ip := cp.HostIP
			if ip == "" {
				ip = "0.0.0.0"
			}
			out = append(out, hostPort{ip, proto, cp.HostPort})
		}
	}
	return out
}

func portConflict(pod *corev1.Pod, existing []*corev1.Pod) bool {
	want := hostPorts(pod)
	if len(want) == 0 {
		return false
	}
	for _, p := range existing {
		for _, h := range hostPorts(p) {
			for _, w := range want {
				if h.port == w.port && h.proto == w.proto && (h.ip == w.ip || h.ip == "0.0.0.0" || w.ip == "0.0.0.0") {
					return true
				}
			}
		}
	}
	return false
}
