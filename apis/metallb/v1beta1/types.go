// Package v1beta1 holds Go types for MetalLB's metallb.io/v1beta1 kinds
// (IPAddressPool, L2Advertisement, BGPAdvertisement, Community and the
// ServiceL2Status and ServiceBGPStatus status kinds), field for field as
// MetalLB 0.16 defines them, so that MetalLB manifests apply to svcnet
// verbatim. BGPPeer is served as metallb.io/v1beta2 (package v1beta2).
// DeepCopy methods are written by hand; AddToScheme registers the kinds;
// Client is a small typed client over the dynamic client.
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is MetalLB's API group.
const GroupName = "metallb.io"

// SchemeGroupVersion is metallb.io/v1beta1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

// Resources served for these kinds.
var (
	IPAddressPoolsResource   = SchemeGroupVersion.WithResource("ipaddresspools")
	L2AdvertisementsResource = SchemeGroupVersion.WithResource("l2advertisements")
)

var (
	// SchemeBuilder registers the kinds.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's kinds (and their lists) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &IPAddressPool{}, &IPAddressPoolList{}, &L2Advertisement{}, &L2AdvertisementList{},
		&BGPAdvertisement{}, &BGPAdvertisementList{}, &Community{}, &CommunityList{},
		&ServiceL2Status{}, &ServiceL2StatusList{}, &ServiceBGPStatus{}, &ServiceBGPStatusList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// IPAddressPool is a set of addresses MetalLB may hand to LoadBalancer
// Services.
type IPAddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPAddressPoolSpec   `json:"spec"`
	Status IPAddressPoolStatus `json:"status,omitempty"`
}

// IPAddressPoolSpec is the pool's configuration.
type IPAddressPoolSpec struct {
	// Addresses are CIDRs ("192.168.1.0/24") or inclusive ranges
	// ("192.168.1.10-192.168.1.20"), IPv4 or IPv6.
	Addresses []string `json:"addresses"`
	// AutoAssign lets the pool serve Services that do not ask for it by
	// name or address. Default true.
	AutoAssign *bool `json:"autoAssign,omitempty"`
	// AvoidBuggyIPs skips addresses ending in .0 and .255.
	AvoidBuggyIPs bool `json:"avoidBuggyIPs,omitempty"`
	// AllocateTo restricts and orders which Services the pool serves.
	AllocateTo *ServiceAllocation `json:"serviceAllocation,omitempty"`
}

// ServiceAllocation restricts a pool to some namespaces or Services, and
// orders pools (lower priority numbers first; 0 means unset, last).
type ServiceAllocation struct {
	Priority           int                    `json:"priority,omitempty"`
	Namespaces         []string               `json:"namespaces,omitempty"`
	NamespaceSelectors []metav1.LabelSelector `json:"namespaceSelectors,omitempty"`
	ServiceSelectors   []metav1.LabelSelector `json:"serviceSelectors,omitempty"`
}

// IPAddressPoolStatus reports usage.
type IPAddressPoolStatus struct {
	AssignedIPv4  int64 `json:"assignedIPv4"`
	AssignedIPv6  int64 `json:"assignedIPv6"`
	AvailableIPv4 int64 `json:"availableIPv4"`
	AvailableIPv6 int64 `json:"availableIPv6"`
}

// IPAddressPoolList is a list of pools.
type IPAddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressPool `json:"items"`
}

// L2Advertisement announces the addresses of some pools with ARP/NDP.
type L2Advertisement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   L2AdvertisementSpec   `json:"spec,omitempty"`
	Status L2AdvertisementStatus `json:"status,omitempty"`
}

// L2AdvertisementSpec selects pools, nodes and interfaces. Empty pool lists
// mean every pool.
type L2AdvertisementSpec struct {
	IPAddressPools         []string               `json:"ipAddressPools,omitempty"`
	IPAddressPoolSelectors []metav1.LabelSelector `json:"ipAddressPoolSelectors,omitempty"`
	NodeSelectors          []metav1.LabelSelector `json:"nodeSelectors,omitempty"`
	Interfaces             []string               `json:"interfaces,omitempty"`
	// ServiceSelectors limits the Services the advertisement applies to
	// (any selector matching the Service's labels); none means every
	// Service of the selected pools. A Service with the allow-shared-ip
	// annotation whose advertisements have serviceSelectors is announced by
	// no node.
	ServiceSelectors []metav1.LabelSelector `json:"serviceSelectors,omitempty"`
	// PreferredNodeSelectors are soft preferences in the layer-2
	// election: a node eligible under NodeSelectors scores the weights of
	// the preferences its labels match, summed over every advertisement
	// applying to the Service, and the highest score announces.
	PreferredNodeSelectors []PreferredNodeSelector `json:"preferredNodeSelectors,omitempty"`
}

// PreferredNodeSelector is one weighted preference (weight 1 to 100, as in
// a Pod's preferred node affinity term); an empty preference selects every
// node.
type PreferredNodeSelector struct {
	Weight     int32                `json:"weight"`
	Preference metav1.LabelSelector `json:"preference"`
}

// L2AdvertisementStatus is empty, as in MetalLB.
type L2AdvertisementStatus struct{}

// L2AdvertisementList is a list of L2Advertisements.
type L2AdvertisementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []L2Advertisement `json:"items"`
}
