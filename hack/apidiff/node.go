package main

import (
	"math/rand"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	api "k8s.io/kubernetes/pkg/apis/core"
	k8snode "k8s.io/kubernetes/pkg/registry/core/node"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// Nodes: create, update and /status through kube-apiserver's node
// strategies and svcnet's. Not generated: the legacy taint and avoid-pods
// annotations, configSource and podPreemptionPolicy.

func randTaint(r *rand.Rand) corev1.Taint {
	return corev1.Taint{
		Key:    pick(r, "dedicated", "dedicated", "node.kubernetes.io/unreachable", "bad key!", ""),
		Value:  pick(r, "", "gpu", "bad value!"),
		Effect: pick(r, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule, "", "NoScheduleNoAdmit"),
	}
}

var podCIDRPool = []string{"10.244.1.0/24", "10.244.1.0/24", "fd00:244:1::/64", "10.244.1.1/24", "010.244.1.0/24", "bad", "", "10.244.2.0/24"}

func randNodeStatus(r *rand.Rand) corev1.NodeStatus {
	var st corev1.NodeStatus
	// At most one bad quantity per list: resources are checked in map order.
	if maybe(r, 0.5) {
		st.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
		if maybe(r, 0.3) {
			name := pick[corev1.ResourceName](r, corev1.ResourcePods, "example.com/gpu", "memory", "hugepages-2Mi", "kubernetes.io/thing")
			st.Capacity[name] = resource.MustParse(pick(r, "1", "-1", "500m", "1.5"))
		}
	}
	if maybe(r, 0.2) {
		st.Allocatable = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(pick(r, "1Gi", "-1Gi"))}
	}
	for i, n := 0, r.Intn(4); i < n; i++ {
		st.Addresses = append(st.Addresses, corev1.NodeAddress{
			Type:    pick(r, corev1.NodeInternalIP, corev1.NodeHostName, corev1.NodeExternalIP),
			Address: pick(r, "10.1.0.1", "10.1.0.1", "node-a", "fd00::1"),
		})
	}
	if maybe(r, 0.1) {
		st.NodeInfo.Swap = &corev1.NodeSwapStatus{Capacity: ptr(pick[int64](r, 0, 1024, -1))}
	}
	if maybe(r, 0.1) {
		st.DeclaredFeatures = pick(r, []string{"FeatureA", "FeatureB"}, []string{"FeatureB", "FeatureA"}, []string{"FeatureA", "FeatureA"},
			[]string{"bad-feature"}, []string{"Feature/sub"}, []string{strings.Repeat("F", 254)})
	}
	if maybe(r, 0.3) {
		st.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: pick(r, corev1.ConditionTrue, corev1.ConditionFalse)}}
	}
	return st
}

func randNode(r *rand.Rand) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pick(r, "node-a", "node-a", "node-a.example.com", "Node_A", strings.Repeat("n", 254))}}
	if maybe(r, 0.2) {
		n.Labels = map[string]string{pick(r, "topology.kubernetes.io/zone", "bad key!"): pick(r, "zone-a", "bad value!")}
	}
	for i, k := 0, pick(r, 0, 0, 1, 2, 3); i < k; i++ {
		n.Spec.Taints = append(n.Spec.Taints, randTaint(r))
	}
	for i, k := 0, pick(r, 0, 0, 1, 2, 3); i < k; i++ {
		n.Spec.PodCIDRs = append(n.Spec.PodCIDRs, pick(r, podCIDRPool...))
	}
	if len(n.Spec.PodCIDRs) > 0 {
		n.Spec.PodCIDR = n.Spec.PodCIDRs[0]
	}
	if maybe(r, 0.3) {
		n.Spec.ProviderID = pick(r, "kind://node-a", "aws:///i-1")
	}
	n.Spec.Unschedulable = maybe(r, 0.1)
	n.Status = randNodeStatus(r)
	return n
}

func storedNode(r *rand.Rand) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-7", ResourceVersion: "14"},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.0.1"}},
		},
	}
	if maybe(r, 0.5) {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24"}
	}
	if maybe(r, 0.5) {
		n.Spec.ProviderID = "kind://node-a"
	}
	if maybe(r, 0.2) {
		n.Spec.DoNotUseExternalID = "ext-1"
	}
	return n
}

func nodeCreateCase(r *rand.Rand) string {
	return compareCreate(randNode(r), "", "nodes", false, true, k8snode.Strategy, core.NewNodeStrategy(),
		func() runtime.Object { return &api.Node{} }, func() runtime.Object { return &corev1.Node{} })
}

func nodeUpdate(r *rand.Rand) (in, old *corev1.Node) {
	old = storedNode(r)
	in = old.DeepCopy()
	for _, k := range r.Perm(7)[:1+r.Intn(3)] {
		switch k {
		case 0:
			in.Spec.Taints = append(in.Spec.Taints, randTaint(r), randTaint(r))
		case 1:
			in.Spec.PodCIDRs = pick(r, nil, []string{"10.244.2.0/24"}, []string{"10.244.1.0/24", "fd00:244:1::/64"}, []string{"bad"})
			if len(in.Spec.PodCIDRs) > 0 {
				in.Spec.PodCIDR = in.Spec.PodCIDRs[0]
			} else {
				in.Spec.PodCIDR = ""
			}
		case 2:
			in.Spec.ProviderID = pick(r, "", "kind://node-b", "kind://node-a")
		case 3:
			in.Status = randNodeStatus(r)
		case 4:
			in.Spec.DoNotUseExternalID = pick(r, "", "ext-2")
		case 5:
			in.Labels = map[string]string{pick(r, "env", "bad key!"): "x"}
		case 6:
			in.Spec.Unschedulable = !in.Spec.Unschedulable
		}
	}
	return in, old
}

func nodeUpdateCase(r *rand.Rand) string {
	in, old := nodeUpdate(r)
	return withInput(compareNodeUpdate(in, old, "", k8snode.Strategy, core.NewNodeStrategy()), in, old)
}

func nodeStatusCase(r *rand.Rand) string {
	in, old := nodeUpdate(r)
	st := core.NewNodeStrategy().(interface{ StatusStrategy() registry.Strategy }).StatusStrategy()
	return withInput(compareNodeUpdate(in, old, "status", k8snode.StatusStrategy, st), in, old)
}

func compareNodeUpdate(in, old *corev1.Node, sub string, kst genericrest.RESTUpdateStrategy, st registry.Strategy) string {
	return compareUpdate(in, old, "", "nodes", sub, false, kst, st,
		func() (runtime.Object, runtime.Object) { return &api.Node{}, &api.Node{} },
		func() runtime.Object { return &corev1.Node{} })
}
