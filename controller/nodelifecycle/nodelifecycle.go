// Package nodelifecycle is the node lifecycle controller's health check,
// as kube-controller-manager's node-lifecycle-controller does it: a Node
// whose agent has posted neither a status heartbeat nor a Lease renewal
// for the grace period (--node-monitor-grace-period, 50 s) gets every
// condition set to Unknown ("Kubelet stopped posting node status."), the
// node.kubernetes.io/unreachable taints (NoSchedule and NoExecute), and its
// pods' Ready condition set to False, so that they leave the Services'
// ready endpoints. When the agent posts Ready again the taints go; the
// agent itself reports its pods ready again.
//
// Not done: taint-based eviction (the NoExecute taint is set, but no pod is
// evicted after its toleration runs out) and zone disruption modes.
package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// Defaults of kube-controller-manager 1.37.
const (
	DefaultGracePeriod   = 50 * time.Second
	DefaultMonitorPeriod = 5 * time.Second
	leaseNamespace       = "kube-node-lease"
)

// The condition texts kube-controller-manager writes.
const (
	reasonUnknown      = "NodeStatusUnknown"
	messageUnknown     = "Kubelet stopped posting node status."
	reasonNeverUpdated = "NodeStatusNeverUpdated"
	messageNever       = "Kubelet never posted node status."
)

// UnreachableTaints are what an unreachable Node gets.
var UnreachableTaints = []v1.Taint{
	{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute},
}

// Controller watches Nodes, node Leases and pods.
type Controller struct {
	client        kubernetes.Interface
	nodes         corelisters.NodeLister
	leases        coordlisters.LeaseLister
	pods          cache.Indexer
	synced        []cache.InformerSynced
	grace, period time.Duration
	now           func() time.Time
	log           *slog.Logger
}

const byNode = "spec.nodeName"

// New returns a controller; grace and period of 0 take the defaults.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, grace, period time.Duration, log *slog.Logger) *Controller {
	if grace <= 0 {
		grace = DefaultGracePeriod
	}
	if period <= 0 {
		period = DefaultMonitorPeriod
	}
	podInf := factory.Core().V1().Pods().Informer()
	_ = podInf.AddIndexers(cache.Indexers{byNode: func(o any) ([]string, error) {
		if p, ok := o.(*v1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	nodeInf := factory.Core().V1().Nodes()
	leaseInf := factory.Coordination().V1().Leases()
	return &Controller{
		client: client, nodes: nodeInf.Lister(), leases: leaseInf.Lister(), pods: podInf.GetIndexer(),
		synced: []cache.InformerSynced{podInf.HasSynced, nodeInf.Informer().HasSynced, leaseInf.Informer().HasSynced},
		grace:  grace, period: period, now: time.Now, log: log.With("controller", "node-lifecycle"),
	}
}

// Run checks every Node each period until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("node lifecycle: caches not synced")
	}
	t := time.NewTicker(c.period)
	defer t.Stop()
	for {
		c.monitor(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// lastHeard is the newest sign of life of the node's agent: its Ready
// condition's heartbeat or its Lease's renewal.
func (c *Controller) lastHeard(n *v1.Node) time.Time {
	var t time.Time
	if r := readyCondition(n); r != nil {
		t = r.LastHeartbeatTime.Time
	}
	if l, err := c.leases.Leases(leaseNamespace).Get(n.Name); err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(t) {
		t = l.Spec.RenewTime.Time
	}
	if t.IsZero() {
		t = n.CreationTimestamp.Time
	}
	return t
}

func readyCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func (c *Controller) monitor(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	now := c.now()
	for _, n := range nodes {
		ready := readyCondition(n)
		silent := now.Sub(c.lastHeard(n)) > c.grace
		switch {
		case silent && (ready == nil || ready.Status != v1.ConditionUnknown):
			if err := c.markUnknown(ctx, n.Name, now); err != nil {
				c.log.Warn("mark node status unknown", "node", n.Name, "err", err)
				continue
			}
			c.log.Info("node stopped posting status: conditions Unknown, tainted unreachable, pods not ready", "node", n.Name,
				"lastHeard", c.lastHeard(n).Format(time.RFC3339))
			c.markPodsNotReady(ctx, n.Name, now)
		case silent:
			// The taints failed after the status update, or someone removed
			// them while the node is still silent: put them back.
			if !hasUnreachableTaint(n) {
				if err := c.setTaints(ctx, n.Name, true, now); err != nil {
					c.log.Warn("taint unreachable node", "node", n.Name, "err", err)
				}
			}
			// Pods bound while the node was already unreachable.
			c.markPodsNotReady(ctx, n.Name, now)
		case ready != nil && ready.Status == v1.ConditionTrue && hasUnreachableTaint(n):
			if err := c.setTaints(ctx, n.Name, false, now); err != nil {
				c.log.Warn("remove unreachable taints", "node", n.Name, "err", err)
			} else {
				c.log.Info("node ready again: unreachable taints removed", "node", n.Name)
			}
		}
	}
}

func hasUnreachableTaint(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1.TaintNodeUnreachable {
			return true
		}
	}
	return false
}

// markUnknown sets every condition the agent reports to Unknown (adding
// the standard ones it never posted) and taints the node.
func (c *Controller) markUnknown(ctx context.Context, name string, now time.Time) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		t := metav1.NewTime(now)
		seen := map[v1.NodeConditionType]bool{}
		for i := range n.Status.Conditions {
			cond := &n.Status.Conditions[i]
			seen[cond.Type] = true
			if cond.Status != v1.ConditionUnknown {
				cond.Status, cond.Reason, cond.Message, cond.LastTransitionTime = v1.ConditionUnknown, reasonUnknown, messageUnknown, t
			}
		}
		for _, ct := range []v1.NodeConditionType{v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
			if !seen[ct] {
				n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: ct, Status: v1.ConditionUnknown,
					Reason: reasonNeverUpdated, Message: messageNever, LastHeartbeatTime: n.CreationTimestamp, LastTransitionTime: t})
			}
		}
		_, err = c.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	return c.setTaints(ctx, name, true, now)
}

// setTaints adds or removes the unreachable taints.
func (c *Controller) setTaints(ctx context.Context, name string, add bool, now time.Time) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var taints []v1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != v1.TaintNodeUnreachable {
				taints = append(taints, t)
			}
		}
		if add {
			for _, t := range UnreachableTaints {
				if t.Effect == v1.TaintEffectNoExecute {
					t.TimeAdded = &metav1.Time{Time: now}
				}
				taints = append(taints, t)
			}
		}
		n.Spec.Taints = taints
		_, err = c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// markPodsNotReady sets the Ready condition of the node's pods to False,
// as kube-controller-manager does: their endpoints stop being ready.
func (c *Controller) markPodsNotReady(ctx context.Context, node string, now time.Time) {
	objs, _ := c.pods.ByIndex(byNode, node)
	for _, o := range objs {
		p := o.(*v1.Pod)
		if !podReady(p) || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		p = p.DeepCopy()
		for i := range p.Status.Conditions {
			if cond := &p.Status.Conditions[i]; cond.Type == v1.PodReady {
				cond.Status, cond.LastTransitionTime = v1.ConditionFalse, metav1.NewTime(now)
			}
		}
		if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			c.log.Warn("mark pod not ready", "pod", p.Namespace+"/"+p.Name, "err", err)
		}
	}
}

func podReady(p *v1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == v1.PodReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}
