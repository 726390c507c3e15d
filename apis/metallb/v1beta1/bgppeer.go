package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metallbv1beta2 "github.com/svcnet/svcnet/apis/metallb/v1beta2"
)

// BGPPeersResource is metallb.io/v1beta1 bgppeers: MetalLB's CRD serves
// BGPPeer in v1beta1 and v1beta2 and stores v1beta2, converting by its
// webhook. svcnet serves v1beta1 from the stored v1beta2 objects with
// PeerFromV1beta2 and PeerToV1beta2 (MetalLB's own controller and speaker
// register and cache the v1beta1 kind).
var BGPPeersResource = SchemeGroupVersion.WithResource("bgppeers")

// BGPPeer is the v1beta1 form of a BGP peer: fewer fields than v1beta2,
// node selectors in a form of their own, and hold and keepalive times
// that are always present (zero when unset).
type BGPPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BGPPeerSpec   `json:"spec,omitempty"`
	Status BGPPeerStatus `json:"status,omitempty"`
}

// BGPPeerSpec is v1beta1's peer configuration.
type BGPPeerSpec struct {
	MyASN         uint32          `json:"myASN"`
	ASN           uint32          `json:"peerASN"`
	Address       string          `json:"peerAddress"`
	SrcAddress    string          `json:"sourceAddress,omitempty"`
	Port          uint16          `json:"peerPort,omitempty"`
	HoldTime      metav1.Duration `json:"holdTime,omitempty"`
	KeepaliveTime metav1.Duration `json:"keepaliveTime,omitempty"`
	RouterID      string          `json:"routerID,omitempty"`
	NodeSelectors []NodeSelector  `json:"nodeSelectors,omitempty"`
	Password      string          `json:"password,omitempty"`
	BFDProfile    string          `json:"bfdProfile,omitempty"`
	EBGPMultiHop  bool            `json:"ebgpMultiHop,omitempty"`
}

// BGPPeerStatus is empty.
type BGPPeerStatus struct{}

// NodeSelector is v1beta1's node selector: a label selector's two parts.
type NodeSelector struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchExpressions []MatchExpression `json:"matchExpressions,omitempty"`
}

// MatchExpression is one requirement of a NodeSelector.
type MatchExpression struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// PeerToV1beta2 converts a v1beta1 peer to the stored version, as
// MetalLB's conversion does: hold and keepalive times are carried over
// even when zero, and an empty node selector matches everything.
func PeerToV1beta2(in *BGPPeer) *metallbv1beta2.BGPPeer {
	out := &metallbv1beta2.BGPPeer{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = metallbv1beta2.SchemeGroupVersion.String(), "BGPPeer"
	s := in.Spec
	hold, keepalive := s.HoldTime, s.KeepaliveTime
	out.Spec = metallbv1beta2.BGPPeerSpec{
		MyASN: s.MyASN, ASN: s.ASN, Address: s.Address, SrcAddress: s.SrcAddress, Port: s.Port,
		HoldTime: &hold, KeepaliveTime: &keepalive, RouterID: s.RouterID, Password: s.Password,
		BFDProfile: s.BFDProfile, EBGPMultiHop: s.EBGPMultiHop,
	}
	for _, ns := range s.NodeSelectors {
		var sel metav1.LabelSelector
		if len(ns.MatchLabels)+len(ns.MatchExpressions) > 0 {
			sel.MatchLabels = map[string]string{}
			for k, v := range ns.MatchLabels {
				sel.MatchLabels[k] = v
			}
			for _, e := range ns.MatchExpressions {
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
					Key: e.Key, Operator: metav1.LabelSelectorOperator(e.Operator), Values: e.Values,
				})
			}
		}
		out.Spec.NodeSelectors = append(out.Spec.NodeSelectors, sel)
	}
	return out
}

// PeerFromV1beta2 converts a stored peer to v1beta1; what v1beta1 cannot
// hold (local and dynamic ASNs, interface, connect time, password
// secret, graceful restart, VRF, the address-family switches) is lost, as
// through MetalLB's conversion.
func PeerFromV1beta2(in *metallbv1beta2.BGPPeer) *BGPPeer {
	out := &BGPPeer{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = SchemeGroupVersion.String(), "BGPPeer"
	s := in.Spec
	out.Spec = BGPPeerSpec{
		MyASN: s.MyASN, ASN: s.ASN, Address: s.Address, SrcAddress: s.SrcAddress, Port: s.Port,
		RouterID: s.RouterID, Password: s.Password, BFDProfile: s.BFDProfile, EBGPMultiHop: s.EBGPMultiHop,
	}
	if s.HoldTime != nil {
		out.Spec.HoldTime = *s.HoldTime
	}
	if s.KeepaliveTime != nil {
		out.Spec.KeepaliveTime = *s.KeepaliveTime
	}
	if s.NodeSelectors != nil {
		out.Spec.NodeSelectors = []NodeSelector{}
	}
	for _, sel := range s.NodeSelectors {
		ns := NodeSelector{MatchLabels: map[string]string{}, MatchExpressions: []MatchExpression{}}
		for k, v := range sel.MatchLabels {
			ns.MatchLabels[k] = v
		}
		for _, e := range sel.MatchExpressions {
			ns.MatchExpressions = append(ns.MatchExpressions, MatchExpression{Key: e.Key, Operator: string(e.Operator), Values: append([]string{}, e.Values...)})
		}
		out.Spec.NodeSelectors = append(out.Spec.NodeSelectors, ns)
	}
	return out
}
