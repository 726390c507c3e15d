package speaker

import (
	"bytes"
	"crypto/sha256"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// EndpointCanServe is MetalLB's test for an endpoint that takes traffic:
// ready (or readiness unknown), or still serving while it terminates.
func EndpointCanServe(c discoveryv1.EndpointConditions) bool {
	if c.Ready == nil || *c.Ready {
		return true
	}
	return c.Serving != nil && *c.Serving
}

// HasServingEndpoint reports whether any endpoint of the slices can serve.
func HasServingEndpoint(slices []*discoveryv1.EndpointSlice) bool {
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if EndpointCanServe(ep.Conditions) {
				return true
			}
		}
	}
	return false
}

// NodesWithServingEndpoint is the set of node names that host at least one
// endpoint that can serve (endpoints without a nodeName count for none).
func NodesWithServingEndpoint(slices []*discoveryv1.EndpointSlice) map[string]bool {
	out := map[string]bool{}
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.NodeName != nil && EndpointCanServe(ep.Conditions) {
				out[*ep.NodeName] = true
			}
		}
	}
	return out
}

// NodeUsable reports whether a node may announce LoadBalancer addresses at
// all: it exists, its Ready condition is True, its NetworkUnavailable
// condition is not True, and it is not labelled
// node.kubernetes.io/exclude-from-external-load-balancers (MetalLB's rules,
// plus Ready, which the issue asks for). why says which rule failed.
func NodeUsable(n *corev1.Node) (ok bool, why string) { return NodeUsableWith(n, false) }

// NodeUsableWith is NodeUsable where ignoreExcludeLB (the speaker's
// --ignore-exclude-lb, as MetalLB's) disregards the
// exclude-from-external-load-balancers label; the other rules still apply.
func NodeUsableWith(n *corev1.Node, ignoreExcludeLB bool) (ok bool, why string) {
	if n == nil {
		return false, "no Node object"
	}
	if _, excluded := n.Labels[corev1.LabelNodeExcludeBalancers]; excluded && !ignoreExcludeLB {
		return false, "labelled " + corev1.LabelNodeExcludeBalancers
	}
	ready := false
	for _, c := range n.Status.Conditions {
		switch c.Type {
		case corev1.NodeNetworkUnavailable:
			if c.Status == corev1.ConditionTrue {
				return false, "NetworkUnavailable"
			}
		case corev1.NodeReady:
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return false, "not Ready"
	}
	return true, ""
}

// NodeSelectorsMatch reports whether a node matches an advertisement's
// nodeSelectors: no selector matches every node, otherwise any one must
// match. An invalid selector matches nothing.
func NodeSelectorsMatch(sels []metav1.LabelSelector, n *corev1.Node) bool {
	if len(sels) == 0 {
		return true
	}
	if n == nil {
		return false
	}
	for i := range sels {
		s, err := metav1.LabelSelectorAsSelector(&sels[i])
		if err != nil {
			continue
		}
		if s.Matches(labels.Set(n.Labels)) {
			return true
		}
	}
	return false
}

// SortCandidates orders candidate node names for the address ip as every
// MetalLB speaker does: by sha256(node + "#" + ip), smallest first. The
// first one announces. Every node computes the same order from the same
// inputs, so no coordination is needed beyond agreeing on the candidates.
func SortCandidates(nodes []string, ip netip.Addr) { SortCandidatesByScore(nodes, ip, nil) }

// SortCandidatesByScore is SortCandidates with preference scores first:
// a higher score sorts earlier, and nodes of equal score (a node missing
// from scores has 0) keep the sha256 order among themselves.
func SortCandidatesByScore(nodes []string, ip netip.Addr, scores map[string]int64) {
	key := ip.String()
	sort.Slice(nodes, func(i, j int) bool {
		if si, sj := scores[nodes[i]], scores[nodes[j]]; si != sj {
			return si > sj
		}
		hi := sha256.Sum256([]byte(nodes[i] + "#" + key))
		hj := sha256.Sum256([]byte(nodes[j] + "#" + key))
		if c := bytes.Compare(hi[:], hj[:]); c != 0 {
			return c < 0
		}
		return nodes[i] < nodes[j]
	})
}

// LabelSelectorsMatch reports whether any of sels matches the labels; no
// selector matches everything. An invalid selector matches nothing.
func LabelSelectorsMatch(sels []metav1.LabelSelector, l map[string]string) bool {
	if len(sels) == 0 {
		return true
	}
	for i := range sels {
		s, err := metav1.LabelSelectorAsSelector(&sels[i])
		if err == nil && s.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}
