package speaker

import (
	"context"
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/controller/lbipam"
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
	// Recorder records announceFailed (default: the Speaker's recorder).
	Recorder record.EventRecorder
	// Interfaces lists this node's interface names (default: all of them,
	// from the kernel), for announceFailed.
	Interfaces func() ([]string, error)

	set map[types.NamespacedName]string // what the responder has, to skip no-op updates
}

var _ Protocol = (*Layer2)(nil)

// Name implements Protocol.
func (*Layer2) Name() string { return "layer2" }

// ElectL2 is the layer-2 election for one Service, the same on every node:
//   - no endpoint that can serve: nobody announces ("notOwner");
//   - the advertisements considered are those selecting the pool whose
//     serviceSelectors match the Service (L2AdsForService); none:
//     "noMatchingAdvertisement";
//   - a Service with the allow-shared-ip annotation one of whose
//     advertisements has serviceSelectors is announced by nobody
//     ("sharedIPWithServiceSelector"): Services sharing the address could
//     otherwise elect different nodes;
//   - candidates are the nodes with a live speaker that are usable
//     (NodeUsable) and match some advertisement's nodeSelectors; with
//     externalTrafficPolicy Local, only those of them hosting a serving
//     endpoint;
//   - candidates are ordered by PreferenceScores (highest first), then by
//     SortCandidates on the first address, and the first one wins.
//
// It returns the winner ("" if none), and the reason when there is none.
func ElectL2(in *ServiceInput) (winner string, reason string) {
	if !HasServingEndpoint(in.Slices) {
		return "", "notOwner"
	}
	ads := L2AdsForService(in.L2Advertisements, in.Service)
	if ServiceSharesIP(in.Service) && adsHaveServiceSelectors(ads) {
		return "", "sharedIPWithServiceSelector"
	}
	if len(ads) == 0 || len(in.IPs) == 0 {
		return "", "noMatchingAdvertisement"
	}
	var local map[string]bool
	if in.Service.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		local = NodesWithServingEndpoint(in.Slices)
	}
	var cands []string
	for name := range in.Speakers {
		n := in.Nodes[name]
		if ok, _ := NodeUsableWith(n, in.IgnoreExcludeLB); !ok {
			continue
		}
		if local != nil && !local[name] {
			continue
		}
		if adsMatchNode(ads, n) {
			cands = append(cands, name)
		}
	}
	if len(cands) == 0 {
		return "", "notOwner"
	}
	SortCandidatesByScore(cands, in.IPs[0], PreferenceScores(ads, cands, in.Nodes))
	return cands[0], ""
}

// L2AdsForService returns the advertisements (of those selecting the
// Service's pool) that apply to svc: those without serviceSelectors and
// those with one matching the Service's labels.
func L2AdsForService(ads []*metallbv1beta1.L2Advertisement, svc *corev1.Service) []*metallbv1beta1.L2Advertisement {
	var lbls map[string]string
	if svc != nil {
		lbls = svc.Labels
	}
	var out []*metallbv1beta1.L2Advertisement
	for _, ad := range ads {
		if LabelSelectorsMatch(ad.Spec.ServiceSelectors, lbls) {
			out = append(out, ad)
		}
	}
	return out
}

// ServiceSharesIP reports whether svc carries the allow-shared-ip
// annotation, under the metallb.io/ or the older metallb.universe.tf/
// prefix, with any value.
func ServiceSharesIP(svc *corev1.Service) bool {
	if svc == nil {
		return false
	}
	for _, k := range []string{lbipam.AnnotationAllowSharedIP, legacyAllowSharedIP} {
		if _, ok := svc.Annotations[k]; ok {
			return true
		}
	}
	return false
}

const legacyAllowSharedIP = "metallb.universe.tf/allow-shared-ip"

func adsHaveServiceSelectors(ads []*metallbv1beta1.L2Advertisement) bool {
	for _, ad := range ads {
		if len(ad.Spec.ServiceSelectors) > 0 {
			return true
		}
	}
	return false
}

// PreferenceScores sums, for each candidate, the weights of the
// preferredNodeSelectors its labels match, over every advertisement whose
// nodeSelectors select it (a preference for a node its advertisement does
// not select counts for nothing). Candidates scoring 0 are left out; nil
// when none scores.
func PreferenceScores(ads []*metallbv1beta1.L2Advertisement, cands []string, nodes map[string]*corev1.Node) map[string]int64 {
	var scores map[string]int64
	for _, ad := range ads {
		if len(ad.Spec.PreferredNodeSelectors) == 0 {
			continue
		}
		for _, name := range cands {
			n := nodes[name]
			if n == nil || !NodeSelectorsMatch(ad.Spec.NodeSelectors, n) {
				continue
			}
			for i := range ad.Spec.PreferredNodeSelectors {
				pref := &ad.Spec.PreferredNodeSelectors[i]
				sel, err := metav1.LabelSelectorAsSelector(&pref.Preference)
				if err != nil || !sel.Matches(labels.Set(n.Labels)) {
					continue
				}
				if scores == nil {
					scores = map[string]int64{}
				}
				scores[name] += int64(pref.Weight)
			}
		}
	}
	return scores
}

func adsMatchNode(ads []*metallbv1beta1.L2Advertisement, n *corev1.Node) bool {
	for _, ad := range ads {
		if NodeSelectorsMatch(ad.Spec.NodeSelectors, n) {
			return true
		}
	}
	return false
}

// ShouldAnnounce implements Protocol, with MetalLB's reasons in MetalLB's
// order: "notOwner" without a serving endpoint, then
// "sharedIPWithServiceSelector", then "noMatchingAdvertisement" when no
// advertisement applying to the Service selects this node, then the
// election.
func (l *Layer2) ShouldAnnounce(in *ServiceInput) string {
	if !HasServingEndpoint(in.Slices) {
		return "notOwner"
	}
	ads := L2AdsForService(in.L2Advertisements, in.Service)
	if ServiceSharesIP(in.Service) && adsHaveServiceSelectors(ads) {
		return "sharedIPWithServiceSelector"
	}
	if !adsMatchNode(ads, in.Nodes[in.MyNode]) {
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

// L2Interfaces is the interfaces this node announces on, from the
// advertisements applying to the Service (L2AdsForService) that select
// this node: nil (every interface) if one of them names none, else the
// union of their interfaces.
func L2Interfaces(in *ServiceInput) []string {
	var ifs []string
	for _, ad := range L2AdsForService(in.L2Advertisements, in.Service) {
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
	failed := l.announceFailed(in, ifs)
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
	if l.Status != nil && !failed {
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
