// Package v1beta2 holds MetalLB's BGPPeer kind as metallb.io/v1beta2
// serves it (its storage version since MetalLB 0.13), field for field as
// MetalLB 0.16 defines it. svcnet serves only this version of BGPPeer.
package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is MetalLB's API group.
const GroupName = "metallb.io"

// SchemeGroupVersion is metallb.io/v1beta2.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta2"}

// BGPPeersResource is the served resource.
var BGPPeersResource = SchemeGroupVersion.WithResource("bgppeers")

var (
	// SchemeBuilder registers the kinds.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds BGPPeer and BGPPeerList to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &BGPPeer{}, &BGPPeerList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// BGPPeer is a BGP router the speakers of the selected nodes peer with.
type BGPPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BGPPeerSpec   `json:"spec,omitempty"`
	Status BGPPeerStatus `json:"status,omitempty"`
}

// DynamicASNMode is "internal" or "external".
type DynamicASNMode string

// Dynamic ASN modes.
const (
	InternalASNMode DynamicASNMode = "internal"
	ExternalASNMode DynamicASNMode = "external"
)

// BGPPeerSpec is one session's configuration.
type BGPPeerSpec struct {
	// MyASN is the local AS number (required).
	MyASN uint32 `json:"myASN"`
	// ASN is the peer's AS number; equal to MyASN for iBGP.
	ASN uint32 `json:"peerASN,omitempty"`
	// LocalASN (FRR modes only in MetalLB) is the AS announced to this
	// peer instead of MyASN.
	LocalASN uint32 `json:"localASN,omitempty"`
	// DynamicASN accepts the peer's AS from its OPEN (FRR modes only).
	DynamicASN DynamicASNMode `json:"dynamicASN,omitempty"`
	// Address to dial.
	Address string `json:"peerAddress,omitempty"`
	// Interface for unnumbered BGP (FRR modes only).
	Interface string `json:"interface,omitempty"`
	// SrcAddress is the local address of the session.
	SrcAddress string `json:"sourceAddress,omitempty"`
	// Port to dial (default 179).
	Port uint16 `json:"peerPort,omitempty"`
	// HoldTime and KeepaliveTime as in RFC 4271 (default 90s, hold/3).
	HoldTime      *metav1.Duration `json:"holdTime,omitempty"`
	KeepaliveTime *metav1.Duration `json:"keepaliveTime,omitempty"`
	// ConnectTime is the wait between connection attempts.
	ConnectTime *metav1.Duration `json:"connectTime,omitempty"`
	// RouterID to send (default: the node's address).
	RouterID string `json:"routerID,omitempty"`
	// NodeSelectors: only nodes matching one of them peer (empty: all).
	NodeSelectors []metav1.LabelSelector `json:"nodeSelectors,omitempty"`
	// Password for TCP MD5 signatures (RFC 2385).
	Password string `json:"password,omitempty"`
	// PasswordSecret names a kubernetes.io/basic-auth Secret holding the
	// password under "password".
	PasswordSecret corev1.SecretReference `json:"passwordSecret,omitempty"`
	// BFDProfile enables BFD (FRR modes only).
	BFDProfile string `json:"bfdProfile,omitempty"`
	// EnableGracefulRestart (FRR modes only); immutable.
	EnableGracefulRestart bool `json:"enableGracefulRestart,omitempty"`
	// EBGPMultiHop: the peer is more than one hop away (TTL 255).
	EBGPMultiHop bool `json:"ebgpMultiHop,omitempty"`
	// VRFName (FRR modes only).
	VRFName string `json:"vrf,omitempty"`
	// DisableMP is deprecated and has no effect.
	DisableMP bool `json:"disableMP,omitempty"`
	// DualStackAddressFamily (FRR modes only).
	DualStackAddressFamily bool `json:"dualStackAddressFamily,omitempty"`
}

// BGPPeerStatus is empty, as in MetalLB.
type BGPPeerStatus struct{}

// BGPPeerList is a list of BGPPeers.
type BGPPeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPPeer `json:"items"`
}

// DeepCopyInto copies the receiver into out.
func (in *BGPPeerSpec) DeepCopyInto(out *BGPPeerSpec) {
	*out = *in
	for _, d := range []struct {
		dst **metav1.Duration
		src *metav1.Duration
	}{
		{&out.HoldTime, in.HoldTime}, {&out.KeepaliveTime, in.KeepaliveTime}, {&out.ConnectTime, in.ConnectTime},
	} {
		if d.src != nil {
			v := *d.src
			*d.dst = &v
		}
	}
	if in.NodeSelectors != nil {
		out.NodeSelectors = make([]metav1.LabelSelector, len(in.NodeSelectors))
		for i := range in.NodeSelectors {
			in.NodeSelectors[i].DeepCopyInto(&out.NodeSelectors[i])
		}
	}
}

// DeepCopyInto copies the receiver into out.
func (in *BGPPeer) DeepCopyInto(out *BGPPeer) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *BGPPeer) DeepCopy() *BGPPeer {
	if in == nil {
		return nil
	}
	out := new(BGPPeer)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *BGPPeer) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *BGPPeerList) DeepCopyInto(out *BGPPeerList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]BGPPeer, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy (nil for nil).
func (in *BGPPeerList) DeepCopy() *BGPPeerList {
	if in == nil {
		return nil
	}
	out := new(BGPPeerList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *BGPPeerList) DeepCopyObject() runtime.Object { return in.DeepCopy() }
