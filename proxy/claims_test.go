package proxy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var claimEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// claimService is a Service created at minute age after claimEpoch with
// port 80/TCP ("p") and the given externalIPs and LoadBalancer ingress IPs.
func claimService(name, clusterIP string, minute int, ext []string, lb []string) *v1.Service {
	svc := testService("default", name, clusterIP, v1.ServicePort{Name: "p", Port: 80, Protocol: v1.ProtocolTCP})
	svc.CreationTimestamp = metav1.NewTime(claimEpoch.Add(time.Duration(minute) * time.Minute))
	svc.Spec.ExternalIPs = ext
	if len(lb) > 0 {
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		for _, ip := range lb {
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
	return svc
}

// owners lists, per address of the map's ports, "namespace/name:port as
// kind" of the ports it is programmed for: what every mode sends a new
// connection to.
func owners(m ServicePortMap) string {
	var out []string
	for _, p := range m {
		for _, ip := range p.ClusterIPs {
			out = append(out, fmt.Sprintf("%s:%d %s cluster", ip, p.Port, p.Name.Name))
		}
		for _, ip := range p.LoadBalancerVIPs {
			out = append(out, fmt.Sprintf("%s:%d %s lb", ip, p.Port, p.Name.Name))
		}
		for _, ip := range p.ExternalIPs {
			out = append(out, fmt.Sprintf("%s:%d %s ext", ip, p.Port, p.Name.Name))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// resolvedWhole builds the ServicePortMap of the Services at once and
// resolves its claims.
func resolvedWhole(live map[string]*v1.Service) ServicePortMap {
	whole := ServicePortMap{}
	for _, svc := range live {
		for _, p := range NewServicePorts(svc) {
			whole[p.Name] = p
		}
	}
	ResolveClaims(whole)
	return whole
}

// The one table of who reaches a shared destination: every mode programs
// what the tracker leaves in the map, so every mode follows it.
func TestSharedDestinationWinner(t *testing.T) {
	type step struct {
		what    string
		apply   []*v1.Service // created or replaced
		delete  []string
		want    []string // lines of owners(), only those for 192.0.2.x
		changed []string // Services the step reports as updated
	}
	steps := []step{
		{what: "b claims X first", apply: []*v1.Service{claimService("b", "10.96.0.2", 0, []string{"192.0.2.1"}, nil)},
			want: []string{"192.0.2.1:80 b ext"}, changed: []string{"b"}},
		{what: "a, newer, claims X too: b keeps it although a sorts first",
			apply: []*v1.Service{claimService("a", "10.96.0.1", 5, []string{"192.0.2.1", "192.0.2.2"}, nil)},
			want:  []string{"192.0.2.1:80 b ext", "192.0.2.2:80 a ext"}, changed: []string{"a"}},
		{what: "c, newest, gets X from a load balancer: it wins over both externalIPs",
			apply: []*v1.Service{claimService("c", "10.96.0.3", 9, nil, []string{"192.0.2.1"})},
			want:  []string{"192.0.2.1:80 c lb", "192.0.2.2:80 a ext"}, changed: []string{"b", "c"}},
		{what: "the load balancer lets go of X: b, the oldest externalIP, has it again",
			apply: []*v1.Service{claimService("c", "10.96.0.3", 9, nil, nil)},
			want:  []string{"192.0.2.1:80 b ext", "192.0.2.2:80 a ext"}, changed: []string{"b", "c"}},
		{what: "b is deleted: a has X", delete: []string{"b"},
			want: []string{"192.0.2.1:80 a ext", "192.0.2.2:80 a ext"}, changed: []string{"a", "b"}},
		{what: "d's ClusterIP is Y: a's externalIP Y loses to it",
			apply: []*v1.Service{claimService("d", "192.0.2.2", 20, nil, nil)},
			want:  []string{"192.0.2.1:80 a ext", "192.0.2.2:80 d cluster"}, changed: []string{"a", "d"}},
		{what: "e lists its own ClusterIP as an externalIP: the ClusterIP only",
			apply: []*v1.Service{claimService("e", "192.0.2.5", 21, []string{"192.0.2.5", "192.0.2.6"}, nil)},
			want:  []string{"192.0.2.1:80 a ext", "192.0.2.2:80 d cluster", "192.0.2.5:80 e cluster", "192.0.2.6:80 e ext"}, changed: []string{"e"}},
		{what: "f and g, same age, same address: the first in name order",
			apply:   []*v1.Service{claimService("g", "10.96.0.7", 30, []string{"192.0.2.9"}, nil), claimService("f", "10.96.0.6", 30, []string{"192.0.2.9"}, nil)},
			want:    []string{"192.0.2.1:80 a ext", "192.0.2.2:80 d cluster", "192.0.2.5:80 e cluster", "192.0.2.6:80 e ext", "192.0.2.9:80 f ext"},
			changed: []string{"f", "g"}},
	}
	tr := NewServiceChangeTracker()
	m := ServicePortMap{}
	live := map[string]*v1.Service{}
	for _, s := range steps {
		for _, svc := range s.apply {
			tr.Update(live[svc.Name], svc)
			live[svc.Name] = svc
		}
		for _, n := range s.delete {
			tr.Update(live[n], nil)
			delete(live, n)
		}
		res := tr.Apply(m)
		var got []string
		for _, l := range strings.Split(owners(m), "\n") {
			if strings.HasPrefix(l, "192.0.2.") {
				got = append(got, l)
			}
		}
		if !slices.Equal(got, s.want) {
			t.Errorf("%s:\n got %q\nwant %q", s.what, got, s.want)
		}
		var changed []string
		for nn := range res.UpdatedServices {
			changed = append(changed, nn.Name)
		}
		slices.Sort(changed)
		if !slices.Equal(changed, s.changed) {
			t.Errorf("%s: updated Services %v, want %v", s.what, changed, s.changed)
		}
		// A map built whole gives the same answer.
		if a, b := owners(m), owners(resolvedWhole(live)); a != b {
			t.Errorf("%s: incremental\n%s\nwhole\n%s", s.what, a, b)
		}
	}
}

// A deleted port that had lost a destination is reported as it was
// programmed: a mode removing it must not remove the winner's address.
func TestSharedDestinationDeletedAsProgrammed(t *testing.T) {
	tr := NewServiceChangeTracker()
	m := ServicePortMap{}
	old := claimService("old", "10.96.0.1", 0, []string{"192.0.2.1"}, nil)
	young := claimService("young", "10.96.0.2", 1, []string{"192.0.2.1", "192.0.2.2"}, nil)
	tr.Update(nil, old)
	tr.Update(nil, young)
	tr.Apply(m)
	tr.Update(young, nil)
	res := tr.Apply(m)
	if len(res.Deleted) != 1 {
		t.Fatalf("deleted %v", res.Deleted)
	}
	if got := res.Deleted[0].ExternalIPs; !slices.Equal(got, []netip.Addr{netip.MustParseAddr("192.0.2.2")}) {
		t.Errorf("deleted port's externalIPs %v, want only the one it had won", got)
	}
	if res.UpdatedServices.Has(types.NamespacedName{Namespace: "default", Name: "old"}) {
		t.Errorf("the winner is reported changed though it keeps what it had")
	}
}

// Claims on other ports or protocols do not compete.
func TestSharedDestinationOtherPorts(t *testing.T) {
	a := claimService("a", "10.96.0.1", 0, []string{"192.0.2.1"}, nil)
	b := claimService("b", "10.96.0.2", 1, []string{"192.0.2.1"}, nil)
	b.Spec.Ports[0].Port = 81
	c := claimService("c", "10.96.0.3", 2, []string{"192.0.2.1"}, nil)
	c.Spec.Ports[0].Protocol = v1.ProtocolUDP
	m := ServicePortMap{}
	tr := NewServiceChangeTracker()
	for _, s := range []*v1.Service{a, b, c} {
		tr.Update(nil, s)
	}
	tr.Apply(m)
	for _, p := range m {
		if len(p.ExternalIPs) != 1 {
			t.Errorf("%s lost its externalIP on another port or protocol", p.Name)
		}
	}
}

// Random changes applied one batch at a time always leave the map a map
// built whole from the same Services would be.
func TestSharedDestinationIncrementalEqualsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	addr := func() string { return fmt.Sprintf("192.0.2.%d", 1+rng.IntN(4)) }
	tr := NewServiceChangeTracker()
	m := ServicePortMap{}
	live := map[string]*v1.Service{}
	for step := 0; step < 400; step++ {
		for k := 0; k < 1+rng.IntN(3); k++ {
			name := fmt.Sprintf("s%d", rng.IntN(8))
			if rng.IntN(5) == 0 {
				if old := live[name]; old != nil {
					tr.Update(old, nil)
					delete(live, name)
				}
				continue
			}
			var ext, lb []string
			for i := rng.IntN(3); i > 0; i-- {
				ext = append(ext, addr())
			}
			if rng.IntN(2) == 0 {
				lb = append(lb, addr())
			}
			cip := fmt.Sprintf("10.96.0.%d", 1+rng.IntN(8))
			if rng.IntN(10) == 0 {
				cip = addr()
			}
			svc := claimService(name, cip, rng.IntN(3), ext, lb)
			if rng.IntN(3) == 0 {
				svc.Spec.Ports[0].Port = 81
			}
			tr.Update(live[name], svc)
			live[name] = svc
		}
		tr.Apply(m)
		if a, b := owners(m), owners(resolvedWhole(live)); a != b {
			t.Fatalf("step %d: incremental\n%s\nwhole\n%s", step, a, b)
		}
	}
}
