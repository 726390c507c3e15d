package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func copySelectors(in []metav1.LabelSelector) []metav1.LabelSelector {
	if in == nil {
		return nil
	}
	out := make([]metav1.LabelSelector, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

func copyStrings(in []string) []string {
	if in == nil {
		return nil
	}
	return append([]string(nil), in...)
}

// DeepCopyInto copies the receiver into out.
func (in *ServiceAllocation) DeepCopyInto(out *ServiceAllocation) {
	*out = *in
	out.Namespaces = copyStrings(in.Namespaces)
	out.NamespaceSelectors = copySelectors(in.NamespaceSelectors)
	out.ServiceSelectors = copySelectors(in.ServiceSelectors)
}

// DeepCopyInto copies the receiver into out.
func (in *IPAddressPoolSpec) DeepCopyInto(out *IPAddressPoolSpec) {
	*out = *in
	out.Addresses = copyStrings(in.Addresses)
	if in.AutoAssign != nil {
		v := *in.AutoAssign
		out.AutoAssign = &v
	}
	if in.AllocateTo != nil {
		out.AllocateTo = new(ServiceAllocation)
		in.AllocateTo.DeepCopyInto(out.AllocateTo)
	}
}

// DeepCopyInto copies the receiver into out.
func (in *IPAddressPool) DeepCopyInto(out *IPAddressPool) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	out.Status = in.Status
}

// DeepCopy returns a deep copy (nil for nil).
func (in *IPAddressPool) DeepCopy() *IPAddressPool {
	if in == nil {
		return nil
	}
	out := new(IPAddressPool)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *IPAddressPool) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *IPAddressPoolList) DeepCopyInto(out *IPAddressPoolList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]IPAddressPool, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy (nil for nil).
func (in *IPAddressPoolList) DeepCopy() *IPAddressPoolList {
	if in == nil {
		return nil
	}
	out := new(IPAddressPoolList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *IPAddressPoolList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *L2AdvertisementSpec) DeepCopyInto(out *L2AdvertisementSpec) {
	*out = *in
	out.IPAddressPools = copyStrings(in.IPAddressPools)
	out.IPAddressPoolSelectors = copySelectors(in.IPAddressPoolSelectors)
	out.NodeSelectors = copySelectors(in.NodeSelectors)
	out.Interfaces = copyStrings(in.Interfaces)
}

// DeepCopyInto copies the receiver into out.
func (in *L2Advertisement) DeepCopyInto(out *L2Advertisement) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *L2Advertisement) DeepCopy() *L2Advertisement {
	if in == nil {
		return nil
	}
	out := new(L2Advertisement)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *L2Advertisement) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *L2AdvertisementList) DeepCopyInto(out *L2AdvertisementList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]L2Advertisement, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy (nil for nil).
func (in *L2AdvertisementList) DeepCopy() *L2AdvertisementList {
	if in == nil {
		return nil
	}
	out := new(L2AdvertisementList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *L2AdvertisementList) DeepCopyObject() runtime.Object { return in.DeepCopy() }
