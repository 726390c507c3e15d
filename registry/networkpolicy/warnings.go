package networkpolicy

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Warnings are kube-apiserver 1.37's Warning headers for a NetworkPolicy
// write (create and update alike): every ipBlock CIDR and exception written
// in a non-standard or ambiguous form (an update may keep such values from
// before strict validation; a create cannot hold them).
func Warnings(obj runtime.Object) []string {
	np, ok := obj.(*networkingv1.NetworkPolicy)
	if !ok {
		return nil
	}
	var w []string
	block := func(p *field.Path, b *networkingv1.IPBlock) {
		if b == nil {
			return
		}
		w = append(w, utilvalidation.GetWarningsForCIDR(p.Child("cidr"), b.CIDR)...)
		for k, e := range b.Except {
			w = append(w, utilvalidation.GetWarningsForCIDR(p.Child("except").Index(k), e)...)
		}
	}
	for i, rule := range np.Spec.Ingress {
		for j := range rule.From {
			block(field.NewPath("spec", "ingress").Index(i).Child("from").Index(j).Child("ipBlock"), rule.From[j].IPBlock)
		}
	}
	for i, rule := range np.Spec.Egress {
		for j := range rule.To {
			block(field.NewPath("spec", "egress").Index(i).Child("to").Index(j).Child("ipBlock"), rule.To[j].IPBlock)
		}
	}
	return w
}
