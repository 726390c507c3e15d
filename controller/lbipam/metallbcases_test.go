package lbipam

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
)

// Cases where MetalLB v0.15.2's controller decides in a way the interop
// differential does not exercise (found by reading its code, and by
// running its allocator on the same calls).
func TestMetalLBAllocatorCases(t *testing.T) {
	web := []Port{{"TCP", 80}}
	selected := func(name, addr string, prio int) *Pool {
		p := pool(name, nil, addr)
		p.Spec.AllocateTo = &metallbv1beta1.ServiceAllocation{Priority: prio,
			ServiceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}}}
		return mustPool(t, p)
	}
	req := Request{Key: "default/web", Namespace: "default", Labels: map[string]string{"app": "web"}, Ports: web, Policy: corev1.IPFamilyPolicySingleStack}

	// Two selecting pools without a priority: MetalLB's comparison ranks
	// them both ways and its sort leaves the later name first.
	a := NewAllocator()
	a.SetPools([]*Pool{selected("pool-a", "10.1.0.0/30", 0), selected("pool-b", "10.2.0.0/30", 0)})
	if ips, err := a.Allocate(req, IPv4); err != nil || ips[0] != netip.MustParseAddr("10.2.0.0") {
		t.Errorf("tie between unprioritized pools: %v %v, want 10.2.0.0 (pool-b)", ips, err)
	}
	// With a priority set: b (3) first, then c and a (unset) as MetalLB
	// orders them; b full, so c.
	a = NewAllocator()
	a.SetPools([]*Pool{selected("a", "10.1.0.0/32", 0), selected("b", "10.2.0.0/32", 3), selected("c", "10.3.0.0/32", 0)})
	_, _ = a.Allocate(Request{Key: "default/first", Namespace: "default", Labels: map[string]string{"app": "web"}, Ports: web, Policy: corev1.IPFamilyPolicySingleStack}, IPv4)
	if ips, err := a.Allocate(req, IPv4); err != nil || ips[0] != netip.MustParseAddr("10.3.0.0") {
		t.Errorf("after the prioritized pool: %v %v, want 10.3.0.0 (c)", ips, err)
	}

	// PreferDualStack with IPv6 first and no pool of both families: the
	// IPv6 pool.
	a = NewAllocator()
	a.SetPools([]*Pool{mustPool(t, pool("v4", nil, "10.0.0.0/30")), mustPool(t, pool("v6", nil, "fd00::/126"))})
	pds := Request{Key: "default/ds", Namespace: "default", Ports: web, Policy: corev1.IPFamilyPolicyPreferDualStack, V6First: true}
	if ips, err := a.Allocate(pds, DualStack); err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("fd00::") {
		t.Errorf("PreferDualStack, IPv6 first: %v %v, want [fd00::]", ips, err)
	}
	pds.Key, pds.V6First = "default/ds4", false
	if ips, err := a.Allocate(pds, DualStack); err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("10.0.0.0") {
		t.Errorf("PreferDualStack, IPv4 first: %v %v, want [10.0.0.0]", ips, err)
	}

	// A pool deleted and made again: its Services count from zero.
	a = NewAllocator()
	p := mustPool(t, pool("p", nil, "10.9.0.0/30"))
	a.SetPools([]*Pool{p})
	for _, k := range []string{"default/x", "default/y"} {
		if _, err := a.Allocate(Request{Key: k, Namespace: "default", Ports: web, Policy: corev1.IPFamilyPolicySingleStack}, IPv4); err != nil {
			t.Fatal(err)
		}
	}
	a.SetPools(nil)
	a.SetPools([]*Pool{mustPool(t, pool("p", nil, "10.9.0.0/30"))})
	if _, err := a.Allocate(Request{Key: "default/z", Namespace: "default", Ports: web, Policy: corev1.IPFamilyPolicySingleStack}, IPv4); err != nil {
		t.Fatal(err)
	}
	if u := a.usage["p"]; u == nil || u.services != 1 || u.v4 != 1 {
		t.Errorf("pool p after delete and create: %+v, want one Service on one address", u)
	}

	// The fingerprint moves with what decides, not with anything else.
	before := a.Fingerprint()
	a.SetPools([]*Pool{mustPool(t, pool("p", nil, "10.9.0.0/30"))})
	if a.Fingerprint() != before {
		t.Error("fingerprint changed for the same pools")
	}
	sp := selected("p", "10.9.0.0/30", 0)
	sp.Allocation.namespaceSelectors = nil
	a.SetPools([]*Pool{sp})
	if a.Fingerprint() == before {
		t.Error("fingerprint unchanged after the pool got a serviceAllocation")
	}
}

func TestMetalLBAddressMessages(t *testing.T) {
	svc := func(ann, spec string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		if ann != "" {
			s.Annotations[AnnotationLoadBalancerIPs] = ann
		}
		s.Spec.LoadBalancerIP = spec
		return s
	}
	for _, c := range []struct{ ann, spec, want string }{
		{"10.0.0.1,10.0.0.2", "", `IPFamilyForAddresses: same address family ["10.0.0.1" "10.0.0.2"]`},
		{"10.0.0.1,fd00::1,10.0.0.3", "", `IPFamilyForAddresses: invalid ips length 3 ["10.0.0.1" "fd00::1" "10.0.0.3"]`},
		{"fd00::5%eth0", "", `invalid metallb.io/loadBalancerIPs: "fd00::5%eth0"`},
		{"", "fe80::1%eth0", `invalid spec.loadBalancerIP "fe80::1%eth0"`},
		{"10.0.0.1", "10.0.0.1", "service can not have both metallb.io/loadBalancerIPs and svc.Spec.LoadBalancerIP"},
	} {
		_, _, err := desiredIPs(svc(c.ann, c.spec))
		if err == nil || err.Error() != c.want {
			t.Errorf("%q/%q: %v, want %s", c.ann, c.spec, err, c.want)
		}
	}
	ips, f, err := desiredIPs(svc("fd00::10,10.0.0.10", ""))
	if err != nil || f != DualStack || len(ips) != 2 {
		t.Errorf("a dual-stack pair: %v %v %v", ips, f, err)
	}
}
