package netpol

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/knftables"
)

// scaleInput is a cluster of n pods in 10 namespaces on 10 nodes, and one
// policy per pod label value (p policies), each allowing from a namespace.
func scaleInput(n, p int) Input {
	in := Input{Node: "node0"}
	for i := 0; i < 10; i++ {
		in.Namespaces = append(in.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns%d", i), Labels: map[string]string{"team": fmt.Sprint(i % 3)}}})
	}
	for i := 0; i < n; i++ {
		ip := fmt.Sprintf("10.%d.%d.%d", 244+i/65536%2, i/256%256, i%256)
		in.Pods = append(in.Pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%10), Name: fmt.Sprintf("pod%d", i), Labels: map[string]string{"app": fmt.Sprint(i % p)}},
			Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("node%d", i%10)},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
		})
	}
	for j := 0; j < p; j++ {
		in.Policies = append(in.Policies, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", j%10), Name: fmt.Sprintf("pol%d", j)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint(j)}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "1"}}}}}}},
		})
	}
	return in
}

// TestPerPacketWorkIsPerPod: however many policies and pods the cluster
// has, a packet to an isolated pod walks one map lookup, that pod's chain
// (one jump per policy selecting it) and those policies' rules; pods are
// set elements, not rules.
func TestPerPacketWorkIsPerPod(t *testing.T) {
	for _, size := range []struct{ pods, policies int }{{1000, 10}, {10000, 100}} {
		st, err := Compile(scaleInput(size.pods, size.policies))
		if err != nil {
			t.Fatal(err)
		}
		rules := 0
		for name, c := range st.Chains {
			rules += len(c)
			if len(name) > 3 && name[:3] == "in-" && len(c) != 2 {
				t.Errorf("%d pods/%d policies: pod chain %s has %d rules, want 2 (one policy selects it, then drop)", size.pods, size.policies, name, len(c))
			}
			if len(name) > 4 && name[:4] == "pol-" && len(c) != 1 {
				t.Errorf("policy chain %s has %d rules, want 1", name, len(c))
			}
		}
		t.Logf("%d pods, %d policies: %d local isolated pods, %d chains, %d rules, %d sets", size.pods, size.policies,
			len(st.Sets[ingressPodsMap].elems), len(st.Chains), rules, len(st.Sets))
	}
}

// TestIncrementalSyncIsSmall: adding one pod to a big cluster writes a few
// elements, not the table.
func TestIncrementalSyncIsSmall(t *testing.T) {
	in := scaleInput(5000, 50)
	prev, err := Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	fake := knftables.NewFake(knftables.InetFamily, TableName)
	tx := fake.NewTransaction()
	fullSync(tx, prev)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatalf("full sync: %v", err)
	}
	in.Pods = append(in.Pods, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "new", Labels: map[string]string{"app": "0"}},
		Spec:       corev1.PodSpec{NodeName: "node3"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.250.0.1"},
	})
	start := time.Now()
	st, err := Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	tx = fake.NewTransaction()
	n := incrementalSync(tx, prev, st)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatalf("incremental sync: %v\n%s", err, tx)
	}
	t.Logf("one new remote pod in a 5000-pod, 50-policy cluster: %d operations, compile+diff %v", n, time.Since(start))
	// The new pod (namespace ns1, team label 1) is a peer of every policy
	// with a local target: one element per such policy's peer set.
	if n == 0 || n > 50 {
		t.Errorf("%d operations for one pod", n)
	}
}
