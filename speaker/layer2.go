package speaker

import (
	"context"
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
)

// L2Responder answers ARP and NDP for the addresses it is given, on the
// named interfaces (nil: every eligible interface). Package speaker/l2
// implements it with real packets.
type L2Responder interface {
	SetBalancer(key string, ips []netip.Addr, interfaces []string)
	DeleteBalancer(key string)
}

// L2StatusWriter records which node announces a Service in layer 2 and on
// which interfaces, as MetalLB's ServiceL2Status objects do. Optional.
type L2StatusWriter interface {
	Announcing(ctx context.Context, svc *corev1.Service, interfaces []string) error
	NotAnnouncing(ctx context.Context, key types.NamespacedName) error
}

// Layer2 is MetalLB's layer2 mode: one elected node answers ARP (IPv4) and
// NDP (IPv6) for a Service's addresses.
type Layer2 struct {
	Responder L2Responder
	Status    L2StatusWriter

	set map[types.NamespacedName]string // what the responder has, to skip no-op updates
}

var _ Protocol = (*Layer2)(nil)

// Name implements Protocol.
func (*Layer2) Name() string { return "layer2" }

// ElectL2 is the layer-2 election for one Service, the same on every node:
//   - no endpoint that can serve: nobody announces ("notOwner");
//   - no L2Advertisement selects the pool: "noMatchingAdvertisement";
//   - candidates are the nodes with a live speaker that are usable
//     (NodeUsable) and match some advertisement's nodeSelectors; with
//     externalTrafficPolicy Local, only those of them hosting a serving
//     endpoint;
//   - candidates are ordered by SortCandidates on the first address and the
//     first one wins.
//
// It returns the winner ("" if none), and the reason when there is none.
func ElectL2(in *ServiceInput) (winner string, reason string) {
	if !HasServingEndpoint(in.Slices) {
		return "", "notOwner"
	}
	if len(in.L2Advertisements) == 0 || len(in.IPs) == 0 {
		return "", "noMatchingAdvertisement"
	}
	var local map[string]bool
	if in.Service.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		local = NodesWithServingEndpoint(in.Slices)
	}
	var cands []string
	for name := range in.Speakers {
		n := in.Nodes[name]
		if ok, _ := NodeUsable(n); !ok {
			continue
		}
		if local != nil && !local[name] {
			continue
		}
		if adsMatchNode(in.L2Advertisements, n) {
			cands = append(cands, name)
		}
	}
	if len(cands) == 0 {
		return "", "notOwner"
	}
	SortCandidates(cands, in.IPs[0])
	return cands[0], ""
}

func adsMatchNode(ads []*metallbv1beta1.L2Advertisement, n *corev1.Node) bool {
	for _, ad := range ads {
		if NodeSelectorsMatch(ad.Spec.NodeSelectors, n) {
			return true
		}
	}
	return false
}

// ShouldAnnounce implements Protocol.
func (l *Layer2) ShouldAnnounce(in *ServiceInput) string {
	if !adsMatchNode(in.L2Advertisements, in.Nodes[in.MyNode]) {
		return "noMatchingAdvertisement"
	}
	winner, reason := ElectL2(in)
	if reason != "" {
		return reason
	}
	if winner != in.MyNode {
		return "notOwner"
	}
	return ""
}

// L2Interfaces is the interfaces this node announces on: nil (every
// interface) if an advertisement matching the node names none, else the
// union of their interfaces.
func L2Interfaces(in *ServiceInput) []string {
	var ifs []string
	for _, ad := range in.L2Advertisements {
		if !NodeSelectorsMatch(ad.Spec.NodeSelectors, in.Nodes[in.MyNode]) {
			continue
		}
		if len(ad.Spec.Interfaces) == 0 {
			return nil
		}
		ifs = append(ifs, ad.Spec.Interfaces...)
	}
	sort.Strings(ifs)
	return slices.Compact(ifs)
}

// SetBalancer implements Protocol.
func (l *Layer2) SetBalancer(ctx context.Context, in *ServiceInput) error {
	ifs := L2Interfaces(in)
	state := ""
	for _, ip := range in.IPs {
		state += ip.String() + ","
	}
	state += "|"
	for _, i := range ifs {
		state += i + ","
	}
	if l.set == nil {
		l.set = map[types.NamespacedName]string{}
	}
	if l.set[in.Key] != state {
		l.Responder.SetBalancer(in.Key.String(), in.IPs, ifs)
		l.set[in.Key] = state
	}
	if l.Status != nil {
		return l.Status.Announcing(ctx, in.Service, ifs)
	}
	return nil
}

// DeleteBalancer implements Protocol.
func (l *Layer2) DeleteBalancer(ctx context.Context, key types.NamespacedName, _ string) error {
	l.Responder.DeleteBalancer(key.String())
	delete(l.set, key)
	if l.Status != nil {
		return l.Status.NotAnnouncing(ctx, key)
	}
	return nil
}
