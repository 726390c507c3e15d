package metallb

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/apis/metallb/validation"
	"github.com/svcnet/svcnet/registry"
)

// PoolStrategy is IPAddressPool's (metallb.io/v1beta1): MetalLB's
// validating webhook, that is every address entry parses and no pool
// overlaps another (package apis/metallb/validation), denied with
// kube-apiserver's wording for a webhook denial. Pools are compared with
// those of every namespace, because svcnet's LoadBalancer IPAM reads pools
// from all of them. Status is a subresource, as in MetalLB's CRD: the
// controller counts the pool's addresses there. The CRD schema's defaults
// (autoAssign true, avoidBuggyIPs false) are applied.
type PoolStrategy struct{ *Strategy }

var (
	_ registry.CreateAllocator = (*PoolStrategy)(nil)
	_ registry.UpdateAllocator = (*PoolStrategy)(nil)
)

// NewIPAddressPoolStrategy returns IPAddressPool's strategy.
func NewIPAddressPoolStrategy() *PoolStrategy {
	return &PoolStrategy{&Strategy{
		Basic:   schemaFuncs(validation.DefaultIPAddressPool, nil),
		webhook: "ipaddresspoolvalidationwebhook.metallb.io",
		admit:   admitPool,
	}}
}

func admitPool(ctx context.Context, s *Strategy, u *unstructured.Unstructured) error {
	pool, err := decode[metallbv1beta1.IPAddressPool](s, u)
	if err != nil {
		return err
	}
	pools, err := list[metallbv1beta1.IPAddressPool](ctx, s, metallbv1beta1.IPAddressPoolsResource.GroupResource())
	if err != nil {
		return err
	}
	all := validation.WithUpdate(pools, *pool, func(x *metallbv1beta1.IPAddressPool) string { return nsName(&x.ObjectMeta) })
	if err := validation.Pools(all); err != nil {
		return s.deny(err)
	}
	return nil
}

// NewL2AdvertisementStrategy returns L2Advertisement's strategy: the CRD
// schema's checks (preferredNodeSelectors' weight from 1 to 100) and
// MetalLB's webhook checks of the advertisement itself (package
// apis/metallb/validation).
func NewL2AdvertisementStrategy() *PoolStrategy {
	return &PoolStrategy{&Strategy{
		Basic:   schemaFuncs(nil, validation.SchemaL2Advertisement),
		webhook: "l2advertisementvalidationwebhook.metallb.io",
		admit:   admitL2Advertisement,
	}}
}

func admitL2Advertisement(_ context.Context, s *Strategy, u *unstructured.Unstructured) error {
	ad, err := decode[metallbv1beta1.L2Advertisement](s, u)
	if err != nil {
		return err
	}
	if err := validation.L2Advertisement(ad); err != nil {
		return s.deny(err)
	}
	return nil
}
