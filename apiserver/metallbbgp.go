package apiserver

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/registry"
	metallbreg "github.com/svcnet/svcnet/registry/metallb"
)

var metallbV1beta2 = schema.GroupVersion{Group: "metallb.io", Version: "v1beta2"}

// metallbBGPResources are the MetalLB kinds beyond IPAddressPool and
// L2Advertisement: BGPPeer is stored as v1beta2 (MetalLB's storage
// version), listed first so that discovery prefers v1beta2 for metallb.io
// as kube-apiserver does, and served as v1beta1 too, converted
// (peerV1beta1Codec).
func metallbBGPResources() []resourceDef {
	u := func(gv schema.GroupVersion, resource, kind, singular string, strategy func() *metallbreg.Strategy) resourceDef {
		return resourceDef{registry.ResourceInfo{GVR: gv.WithResource(resource), Kind: kind, Singular: singular, Namespaced: true, Generation: true, Status: true,
			New: unstructuredNew(gv, kind), NewList: unstructuredNewList(gv, kind)}, func() registry.Strategy { return strategy() }}
	}
	return []resourceDef{
		u(metallbV1beta2, "bgppeers", "BGPPeer", "bgppeer", metallbreg.NewBGPPeerStrategy),
		u(metallbGV, "bgppeers", "BGPPeer", "bgppeer", metallbreg.NewBGPPeerV1beta1Strategy),
		u(metallbGV, "bgpadvertisements", "BGPAdvertisement", "bgpadvertisement", metallbreg.NewBGPAdvertisementStrategy),
		u(metallbGV, "communities", "Community", "community", metallbreg.NewCommunityStrategy),
		u(metallbGV, "bfdprofiles", "BFDProfile", "bfdprofile", metallbreg.NewBFDProfileStrategy),
		u(metallbGV, "configurationstates", "ConfigurationState", "configurationstate", metallbreg.NewConfigurationStateStrategy),
		u(metallbGV, "servicel2statuses", "ServiceL2Status", "servicel2status", metallbreg.NewStatusKindStrategy),
		u(metallbGV, "servicebgpstatuses", "ServiceBGPStatus", "servicebgpstatus", metallbreg.NewStatusKindStrategy),
	}
}

// installMetalLBListers gives the MetalLB strategies' webhook checks the
// stored objects they compare with.
func (s *Server) installMetalLBListers() {
	lister := func(ctx context.Context, gr schema.GroupResource) ([]unstructured.Unstructured, error) {
		st, ok := s.byGR[gr]
		if !ok {
			return nil, nil
		}
		l, err := st.List(ctx, "", registry.ListOptions{})
		if err != nil {
			return nil, err
		}
		ul, ok := l.(*unstructured.UnstructuredList)
		if !ok {
			return nil, fmt.Errorf("list %s: unexpected %T", gr, l)
		}
		return ul.Items, nil
	}
	for _, st := range s.byGR {
		switch ms := st.Strategy.(type) {
		case *metallbreg.Strategy:
			ms.Lister = lister
		case *metallbreg.PoolStrategy:
			ms.Lister = lister
		}
	}
}
