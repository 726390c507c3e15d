package bgp

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	metallbv1beta2 "github.com/svcnet/svcnet/apis/metallb/v1beta2"
	"github.com/svcnet/svcnet/apis/metallb/validation"
	"github.com/svcnet/svcnet/speaker"
)

// Announcement is a route and the peers (BGPPeer names) it goes to; no
// peers means every peer of the node.
type Announcement struct {
	Route
	Peers []string
}

// NodeIP is the node's first IPv4 InternalIP (else its first InternalIP):
// the default router ID.
func NodeIP(n *corev1.Node) netip.Addr {
	var first netip.Addr
	if n == nil {
		return first
	}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		if ip.Is4() {
			return ip
		}
		if !first.IsValid() {
			first = ip
		}
	}
	return first
}

// PeersFor returns the sessions node runs: one per BGPPeer whose
// nodeSelectors match it and that the webhook would accept. Peers it must
// skip are returned as errors (the speaker logs them).
func PeersFor(peers []*metallbv1beta2.BGPPeer, node *corev1.Node) ([]PeerConfig, []error) {
	var out []PeerConfig
	var errs []error
	for _, p := range peers {
		if !speaker.NodeSelectorsMatch(p.Spec.NodeSelectors, node) {
			continue
		}
		if err := validation.Peer(p); err != nil {
			errs = append(errs, fmt.Errorf("BGPPeer %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		if p.Spec.PasswordSecret.Name != "" {
			errs = append(errs, fmt.Errorf("BGPPeer %s/%s: passwordSecret is not supported by svcnet's speaker; use password", p.Namespace, p.Name))
			continue
		}
		t, _ := validation.PeerTimers(p)
		c := PeerConfig{
			Name:         p.Namespace + "/" + p.Name,
			PeerName:     p.Name,
			MyASN:        p.Spec.MyASN,
			PeerASN:      p.Spec.ASN,
			Address:      netip.MustParseAddr(p.Spec.Address),
			Port:         p.Spec.Port,
			HoldTime:     t.Hold,
			Keepalive:    t.Keepalive,
			Password:     p.Spec.Password,
			EBGPMultiHop: p.Spec.EBGPMultiHop,
			RouterID:     NodeIP(node),
		}
		if c.Port == 0 {
			c.Port = 179
		}
		if p.Spec.ConnectTime != nil {
			c.ConnectTime = p.Spec.ConnectTime.Duration
		}
		if p.Spec.SrcAddress != "" {
			c.SourceAddress = netip.MustParseAddr(p.Spec.SrcAddress)
		}
		if p.Spec.RouterID != "" {
			c.RouterID = netip.MustParseAddr(p.Spec.RouterID)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errs
}

// AdsFor returns the BGPAdvertisements that announce the Service from
// this node: they select its pool, match this node's labels
// (nodeSelectors) and the Service's labels (serviceSelectors).
func AdsFor(in *speaker.ServiceInput, ads []*metallbv1beta1.BGPAdvertisement) []*metallbv1beta1.BGPAdvertisement {
	var out []*metallbv1beta1.BGPAdvertisement
	for _, ad := range ads {
		if !speaker.AdvertisementSelectsPool(ad.Namespace, ad.Spec.IPAddressPools, ad.Spec.IPAddressPoolSelectors, in.Pool) {
			continue
		}
		if !speaker.NodeSelectorsMatch(ad.Spec.NodeSelectors, in.Nodes[in.MyNode]) {
			continue
		}
		if !selectorsMatch(ad.Spec.ServiceSelectors, in.Service.Labels) {
			continue
		}
		out = append(out, ad)
	}
	return out
}

// poolAdsSelectNode reports whether an advertisement of the Service's pool
// selects this node, whatever its serviceSelectors.
func poolAdsSelectNode(in *speaker.ServiceInput, ads []*metallbv1beta1.BGPAdvertisement) bool {
	for _, ad := range ads {
		if speaker.AdvertisementSelectsPool(ad.Namespace, ad.Spec.IPAddressPools, ad.Spec.IPAddressPoolSelectors, in.Pool) &&
			speaker.NodeSelectorsMatch(ad.Spec.NodeSelectors, in.Nodes[in.MyNode]) {
			return true
		}
	}
	return false
}

// ConflictingAds checks the advertisements applying to one Service from
// one node (AdsFor) as MetalLB's speaker does: two of them with different
// localPref conflict when they can send the same update, that is when
// their aggregation lengths are the same for the pool's address families
// and their peers overlap (no peers means every peer). The webhook cannot
// refuse this when serviceSelectors are involved, since which Services an
// advertisement will carry is not known then.
func ConflictingAds(pool *speaker.Pool, ads []*metallbv1beta1.BGPAdvertisement) error {
	for i, a := range ads {
		for _, b := range ads[i+1:] {
			if a.Spec.LocalPref != b.Spec.LocalPref && sameUpdate(pool, a, b) {
				return fmt.Errorf("advertisements '%s' and '%s' have conflicting LOCAL_PREF (%d vs %d)", a.Name, b.Name, a.Spec.LocalPref, b.Spec.LocalPref)
			}
		}
	}
	return nil
}

// sameUpdate: both advertisements apply on this node already, so they
// share a node; they make the same route unless an aggregation length
// differs in every family the pool has (a pool without addresses counts as
// differing), and reach the same peer unless their peer lists are disjoint.
func sameUpdate(pool *speaker.Pool, a, b *metallbv1beta1.BGPAdvertisement) bool {
	var has4, has6 bool
	if pool != nil && pool.Pool != nil {
		for _, r := range pool.Ranges {
			if r.From.Is4() {
				has4 = true
			} else {
				has6 = true
			}
		}
	}
	a4, a6 := validation.AggregationLengths(&a.Spec)
	b4, b6 := validation.AggregationLengths(&b.Spec)
	switch {
	case !has4 && !has6:
		return false
	case !has6 && a4 != b4, !has4 && a6 != b6, a4 != b4 && a6 != b6:
		return false
	}
	if len(a.Spec.Peers) == 0 || len(b.Spec.Peers) == 0 {
		return true
	}
	for _, p := range a.Spec.Peers {
		if slices.Contains(b.Spec.Peers, p) {
			return true
		}
	}
	return false
}

func selectorsMatch(sels []metav1.LabelSelector, l map[string]string) bool {
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

// ShouldAnnounce is MetalLB's BGP decision for one node, with its reasons,
// in MetalLB's order: some advertisement of the pool must select this node
// ("notOwner"), and one of those must apply to the Service by its
// serviceSelectors ("noMatchingAdvertisement"); the advertisements
// applying must not send one route with two LOCAL_PREFs
// ("conflictingAdvertisements", see ConflictingAds); the node must
// not be NetworkUnavailable ("nodeNetworkUnavailable") or labelled
// node.kubernetes.io/exclude-from-external-load-balancers
// ("nodeLabeledExcludeBalancers"); with externalTrafficPolicy Local the
// node needs a local endpoint that can serve ("noLocalEndpoints"), with
// Cluster the Service needs one anywhere ("noEndpoints"). Unlike layer 2
// there is no election: every node that passes announces, and the router
// spreads traffic over them (ECMP).
func ShouldAnnounce(in *speaker.ServiceInput, ads []*metallbv1beta1.BGPAdvertisement) string {
	if !poolAdsSelectNode(in, ads) {
		return "notOwner"
	}
	svcAds := AdsFor(in, ads)
	if len(svcAds) == 0 {
		return "noMatchingAdvertisement"
	}
	if ConflictingAds(in.Pool, svcAds) != nil {
		return "conflictingAdvertisements"
	}
	n := in.Nodes[in.MyNode]
	if n != nil {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionTrue {
				return "nodeNetworkUnavailable"
			}
		}
		if _, ok := n.Labels[corev1.LabelNodeExcludeBalancers]; ok && !in.IgnoreExcludeLB {
			return "nodeLabeledExcludeBalancers"
		}
	}
	if in.Service.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		if !speaker.NodesWithServingEndpoint(in.Slices)[in.MyNode] {
			return "noLocalEndpoints"
		}
	} else if !speaker.HasServingEndpoint(in.Slices) {
		return "noEndpoints"
	}
	return ""
}

// Announcements are the routes for the Service's addresses: per address
// and advertisement, the address masked to the advertisement's
// aggregation length, its communities (aliases resolved; an unknown alias
// is skipped and returned as an error) and local preference, to its
// peers.
func Announcements(in *speaker.ServiceInput, ads []*metallbv1beta1.BGPAdvertisement, aliases map[string]validation.Community) ([]Announcement, []error) {
	var out []Announcement
	var errs []error
	for _, ad := range AdsFor(in, ads) {
		v4, v6 := validation.AggregationLengths(&ad.Spec)
		var comms []validation.Community
		for _, c := range ad.Spec.Communities {
			v, err := validation.ResolveCommunity(c, aliases)
			if err != nil {
				errs = append(errs, fmt.Errorf("BGPAdvertisement %s/%s: community %q: %w", ad.Namespace, ad.Name, c, err))
				continue
			}
			comms = append(comms, v)
		}
		for _, ip := range in.IPs {
			bits := v4
			if ip.Is6() {
				bits = v6
			}
			pfx, err := ip.Prefix(bits)
			if err != nil {
				errs = append(errs, fmt.Errorf("BGPAdvertisement %s/%s: %w", ad.Namespace, ad.Name, err))
				continue
			}
			out = append(out, Announcement{
				Route: Route{Prefix: pfx, Communities: slices.Clone(comms), LocalPref: ad.Spec.LocalPref},
				Peers: slices.Clone(ad.Spec.Peers),
			})
		}
	}
	return out, errs
}

// RoutesFor merges the announcements of every Service into the route set
// of one peer: routes with the same prefix and attributes are one route.
func RoutesFor(peer PeerConfig, anns []Announcement) []Route {
	seen := map[string]bool{}
	var out []Route
	for _, a := range anns {
		if len(a.Peers) > 0 && !slices.Contains(a.Peers, peer.PeerName) {
			continue
		}
		if k := a.Route.key(); !seen[k] {
			seen[k] = true
			out = append(out, a.Route)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}
