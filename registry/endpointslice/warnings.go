package endpointslice

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// WarningsOnCreate implements registry.CreateWarner: kube-apiserver 1.37's
// Warning headers for a created EndpointSlice, the FQDN address type's
// deprecation and then badIPs.
func (Strategy) WarningsOnCreate(_ context.Context, obj runtime.Object) []string {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil
	}
	var w []string
	if s.AddressType == discoveryv1.AddressTypeFQDN {
		w = append(w, fmt.Sprintf("%s: FQDN endpoints are deprecated", field.NewPath("spec", "addressType")))
	}
	return append(w, badIPs(s)...)
}

// WarningsOnUpdate implements registry.UpdateWarner: badIPs only (the
// address type cannot change).
func (Strategy) WarningsOnUpdate(_ context.Context, obj, _ runtime.Object) []string {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil
	}
	return badIPs(s)
}

// badIPs: endpoint addresses written in a non-standard form, unless the
// EndpointSlice or mirroring controller manages the slice (they write
// canonical addresses, and kube-apiserver does not check theirs).
func badIPs(s *discoveryv1.EndpointSlice) []string {
	switch s.Labels[discoveryv1.LabelManagedBy] {
	case "endpointslice-controller.k8s.io", "endpointslicemirroring-controller.k8s.io":
		return nil
	}
	var w []string
	for i, e := range s.Endpoints {
		for j, a := range e.Addresses {
			w = append(w, utilvalidation.GetWarningsForIP(field.NewPath("endpoints").Index(i).Child("addresses").Index(j), a)...)
		}
	}
	return w
}
