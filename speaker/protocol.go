package speaker

import (
	"context"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/controller/lbipam"
)

// Protocol announces Services' addresses one way (layer2, bgp). The speaker
// calls it from one goroutine only.
type Protocol interface {
	// Name is the protocol as MetalLB names it in events: "layer2", "bgp".
	Name() string
	// ShouldAnnounce returns "" when this node must announce in.IPs for
	// in.Key, or the reason it must not (MetalLB's reasons: "notOwner",
	// "noMatchingAdvertisement", ...).
	ShouldAnnounce(in *ServiceInput) string
	// SetBalancer starts, or updates, announcing in.IPs from this node. It
	// is called on every sync of an announced Service, so it must be cheap
	// when nothing changed.
	SetBalancer(ctx context.Context, in *ServiceInput) error
	// DeleteBalancer stops announcing the Service's addresses.
	DeleteBalancer(ctx context.Context, key types.NamespacedName, reason string) error
}

// Runner is implemented by protocols with work of their own (watching their
// own configuration kinds, keeping sessions). Run is started once the
// speaker's caches have synced and runs until ctx ends; the protocol calls
// resync whenever its configuration changes, and every Service is then
// decided again.
type Runner interface {
	Run(ctx context.Context, resync func()) error
}

// Pool is an IPAddressPool as the speaker uses it: lbipam's parsed form
// (the same parsing as the allocator) with the object's namespace and labels
// (which advertisements' ipAddressPoolSelectors match).
type Pool struct {
	*lbipam.Pool
	Namespace string
	Labels    map[string]string
}

// ContainsAll reports whether every address is inside the pool.
func (p *Pool) ContainsAll(ips []netip.Addr) bool {
	for _, ip := range ips {
		in := false
		for _, r := range p.Ranges {
			if r.Contains(ip) {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	return len(ips) > 0
}

// AdvertisementSelectsPool reports whether an advertisement with these
// ipAddressPools and ipAddressPoolSelectors (L2Advertisement and
// BGPAdvertisement share the fields) applies to pool: neither set means
// every pool of the namespace; otherwise a name or a selector must match.
func AdvertisementSelectsPool(adNamespace string, names []string, sels []metav1.LabelSelector, pool *Pool) bool {
	if adNamespace != pool.Namespace {
		return false
	}
	if len(names) == 0 && len(sels) == 0 {
		return true
	}
	if slices.Contains(names, pool.Name) {
		return true
	}
	for i := range sels {
		s, err := metav1.LabelSelectorAsSelector(&sels[i])
		if err == nil && s.Matches(labels.Set(pool.Labels)) {
			return true
		}
	}
	return false
}

// ServiceInput is everything a protocol decides on for one Service. It is
// a snapshot: protocols must not modify it.
type ServiceInput struct {
	Key     types.NamespacedName
	Service *corev1.Service
	// IPs are status.loadBalancer.ingress[].ip, in order.
	IPs  []netip.Addr
	Pool *Pool
	// L2Advertisements are those selecting Pool.
	L2Advertisements []*metallbv1beta1.L2Advertisement
	// Slices are the Service's EndpointSlices.
	Slices []*discoveryv1.EndpointSlice
	// Nodes are all Nodes by name.
	Nodes map[string]*corev1.Node
	// Speakers are the nodes whose speaker is alive (its Lease is fresh).
	Speakers map[string]bool
	// MyNode is this speaker's node.
	MyNode string
	// IgnoreExcludeLB (the speaker's --ignore-exclude-lb): nodes labelled
	// node.kubernetes.io/exclude-from-external-load-balancers are not
	// skipped (NodeUsableWith).
	IgnoreExcludeLB bool
}
