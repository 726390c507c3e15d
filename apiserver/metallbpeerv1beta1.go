package apiserver

import (
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	metallbv1beta2 "github.com/svcnet/svcnet/apis/metallb/v1beta2"
	"github.com/svcnet/svcnet/apis/metallb/validation"
)

// peerV1beta1Codec stores metallb.io/v1beta1 BGPPeers as the v1beta2
// objects of /registry/metallb.io/bgppeers, converting on the way in and
// out, as kube-apiserver does through MetalLB's conversion webhook: both
// versions read and write the same peers.
type peerV1beta1Codec struct{}

func (peerV1beta1Codec) Encode(obj runtime.Object, w io.Writer) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("metallb.io/v1beta1 bgppeers storage: unexpected %T", obj)
	}
	var in metallbv1beta1.BGPPeer
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &in); err != nil {
		return err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(metallbv1beta1.PeerToV1beta2(&in))
	if err != nil {
		return err
	}
	return unstructuredCodec{}.Encode(&unstructured.Unstructured{Object: m}, w)
}

func (peerV1beta1Codec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, _, err := unstructuredCodec{}.Decode(data, nil, &unstructured.Unstructured{})
	if err != nil {
		return nil, nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("metallb.io/v1beta1 bgppeers storage: stored %T", obj)
	}
	// The storage version's defaults first, then the conversion, as
	// kube-apiserver reads a custom resource from etcd.
	validation.DefaultBGPPeer(u.Object)
	var stored metallbv1beta2.BGPPeer
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &stored); err != nil {
		return nil, nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(metallbv1beta1.PeerFromV1beta2(&stored))
	if err != nil {
		return nil, nil, err
	}
	out := &unstructured.Unstructured{Object: m}
	if into, ok := into.(*unstructured.Unstructured); ok && into != nil {
		into.Object = m
		out = into
	}
	gvk := metallbv1beta1.SchemeGroupVersion.WithKind("BGPPeer")
	return out, &gvk, nil
}

func (peerV1beta1Codec) Identifier() runtime.Identifier { return "svcnet-metallb-bgppeer-v1beta1" }
