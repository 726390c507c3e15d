package bgp

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/apis/metallb/v1beta1"
)

// TestShouldAnnounceIgnoreExcludeLB: the speaker's --ignore-exclude-lb
// (ServiceInput.IgnoreExcludeLB) lets a node labelled
// node.kubernetes.io/exclude-from-external-load-balancers announce in BGP
// mode, as MetalLB's; a NetworkUnavailable node still does not.
func TestShouldAnnounceIgnoreExcludeLB(t *testing.T) {
	all := []*v1beta1.BGPAdvertisement{ad("all", nil)}
	in := input(t, corev1.ServiceExternalTrafficPolicyCluster, "n2")
	in.Nodes["n1"].Labels[corev1.LabelNodeExcludeBalancers] = ""
	if got := ShouldAnnounce(in, all); got != "nodeLabeledExcludeBalancers" {
		t.Errorf("excluded node: %q, want nodeLabeledExcludeBalancers", got)
	}
	in.IgnoreExcludeLB = true
	if got := ShouldAnnounce(in, all); got != "" {
		t.Errorf("excluded node with --ignore-exclude-lb: %q, want it to announce", got)
	}
	in.Nodes["n1"].Status.Conditions = append(in.Nodes["n1"].Status.Conditions,
		corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue})
	if got := ShouldAnnounce(in, all); got != "nodeNetworkUnavailable" {
		t.Errorf("NetworkUnavailable with --ignore-exclude-lb: %q, want nodeNetworkUnavailable", got)
	}
}
