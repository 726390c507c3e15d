package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Resources of the BGP and status kinds.
var (
	BGPAdvertisementsResource  = SchemeGroupVersion.WithResource("bgpadvertisements")
	CommunitiesResource        = SchemeGroupVersion.WithResource("communities")
	ServiceL2StatusesResource  = SchemeGroupVersion.WithResource("servicel2statuses")
	ServiceBGPStatusesResource = SchemeGroupVersion.WithResource("servicebgpstatuses")
)

// BGPAdvertisement announces the addresses of some pools to BGP peers.
type BGPAdvertisement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BGPAdvertisementSpec   `json:"spec,omitempty"`
	Status BGPAdvertisementStatus `json:"status,omitempty"`
}

// BGPAdvertisementSpec says what to announce, to which peers, from which
// nodes and with which attributes.
type BGPAdvertisementSpec struct {
	// AggregationLength is the prefix length of the IPv4 route announced
	// for an address (default 32): a shorter one rolls many Service
	// addresses into one route.
	AggregationLength *int32 `json:"aggregationLength,omitempty"`
	// AggregationLengthV6 is the same for IPv6 (default 128).
	AggregationLengthV6 *int32 `json:"aggregationLengthV6,omitempty"`
	// LocalPref is the LOCAL_PREF attribute (sent to iBGP peers only).
	LocalPref uint32 `json:"localPref,omitempty"`
	// Communities are "65535:65282" standard communities,
	// "large:1:2:3" large communities, or names of Community aliases.
	Communities []string `json:"communities,omitempty"`
	// IPAddressPools and IPAddressPoolSelectors select pools; none of
	// either means every pool.
	IPAddressPools         []string               `json:"ipAddressPools,omitempty"`
	IPAddressPoolSelectors []metav1.LabelSelector `json:"ipAddressPoolSelectors,omitempty"`
	// NodeSelectors limits the nodes that announce (next hops); empty
	// means every node.
	NodeSelectors []metav1.LabelSelector `json:"nodeSelectors,omitempty"`
	// Peers limits the BGPPeers (by name) the routes go to; empty means
	// every peer.
	Peers []string `json:"peers,omitempty"`
	// ServiceSelectors limits the Services announced; only with the
	// default aggregation lengths.
	ServiceSelectors []metav1.LabelSelector `json:"serviceSelectors,omitempty"`
}

// BGPAdvertisementStatus is empty, as in MetalLB.
type BGPAdvertisementStatus struct{}

// BGPAdvertisementList is a list of BGPAdvertisements.
type BGPAdvertisementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPAdvertisement `json:"items"`
}

// Community names BGP community values, so that BGPAdvertisements can
// refer to them by name.
type Community struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CommunitySpec   `json:"spec,omitempty"`
	Status CommunityStatus `json:"status,omitempty"`
}

// CommunitySpec holds the aliases.
type CommunitySpec struct {
	Communities []CommunityAlias `json:"communities,omitempty"`
}

// CommunityAlias is one name for one community value ("1234:1234" or
// "large:1:2:3").
type CommunityAlias struct {
	Name  string `json:"name,omitempty"`
	Value string `json:"value,omitempty"`
}

// CommunityStatus is empty, as in MetalLB.
type CommunityStatus struct{}

// CommunityList is a list of Communities.
type CommunityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Community `json:"items"`
}

// ServiceL2Status reports which node answers ARP/NDP for a Service's
// addresses in layer 2 mode. The announcing speaker creates one per
// Service (in its own namespace, generateName "l2-", labels
// metallb.io/node, metallb.io/service-name and
// metallb.io/service-namespace) and fills it through /status.
type ServiceL2Status struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServiceL2StatusSpec    `json:"spec,omitempty"`
	Status MetalLBServiceL2Status `json:"status,omitempty"`
}

// ServiceL2StatusSpec is empty, as in MetalLB.
type ServiceL2StatusSpec struct{}

// MetalLBServiceL2Status is the announcing node and its interfaces.
// Node, ServiceName and ServiceNamespace are immutable once set.
type MetalLBServiceL2Status struct {
	Node             string          `json:"node,omitempty"`
	ServiceName      string          `json:"serviceName,omitempty"`
	ServiceNamespace string          `json:"serviceNamespace,omitempty"`
	Interfaces       []InterfaceInfo `json:"interfaces,omitempty"`
}

// InterfaceInfo names one interface that answers.
type InterfaceInfo struct {
	Name string `json:"name,omitempty"`
}

// ServiceL2StatusList is a list of ServiceL2Statuses.
type ServiceL2StatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceL2Status `json:"items"`
}

// ServiceBGPStatus reports, per node, the BGPPeers a Service is
// announced to (configured, whatever the session state).
type ServiceBGPStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServiceBGPStatusSpec    `json:"spec,omitempty"`
	Status MetalLBServiceBGPStatus `json:"status,omitempty"`
}

// ServiceBGPStatusSpec is empty, as in MetalLB.
type ServiceBGPStatusSpec struct{}

// MetalLBServiceBGPStatus is the node, the Service and the peer names.
// Node, ServiceName and ServiceNamespace are immutable once set.
type MetalLBServiceBGPStatus struct {
	Node             string   `json:"node,omitempty"`
	ServiceName      string   `json:"serviceName,omitempty"`
	ServiceNamespace string   `json:"serviceNamespace,omitempty"`
	Peers            []string `json:"peers,omitempty"`
}

// ServiceBGPStatusList is a list of ServiceBGPStatuses.
type ServiceBGPStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceBGPStatus `json:"items"`
}

// Labels MetalLB puts on ServiceL2Status and ServiceBGPStatus objects.
const (
	LabelNode             = "metallb.io/node"
	LabelServiceName      = "metallb.io/service-name"
	LabelServiceNamespace = "metallb.io/service-namespace"
)
