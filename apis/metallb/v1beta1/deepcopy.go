package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// deepCopy is the DeepCopy of every kind here: nil for nil, else a new
// value filled by the kind's DeepCopyInto.
func deepCopy[T any, PT interface {
	*T
	DeepCopyInto(*T)
}](in PT) PT {
	if in == nil {
		return nil
	}
	out := PT(new(T))
	in.DeepCopyInto(out)
	return out
}

// copyItems deep-copies a list's items (nil stays nil).
func copyItems[T any, PT interface {
	*T
	DeepCopyInto(*T)
}](in []T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i := range in {
		PT(&in[i]).DeepCopyInto(&out[i])
	}
	return out
}

func copySelectors(in []metav1.LabelSelector) []metav1.LabelSelector { return copyItems(in) }

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
func (in *IPAddressPool) DeepCopy() *IPAddressPool { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *IPAddressPool) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *IPAddressPoolList) DeepCopyInto(out *IPAddressPoolList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyItems(in.Items)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *IPAddressPoolList) DeepCopy() *IPAddressPoolList { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *IPAddressPoolList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *L2AdvertisementSpec) DeepCopyInto(out *L2AdvertisementSpec) {
	*out = *in
	out.IPAddressPools = copyStrings(in.IPAddressPools)
	out.IPAddressPoolSelectors = copySelectors(in.IPAddressPoolSelectors)
	out.NodeSelectors = copySelectors(in.NodeSelectors)
	out.Interfaces = copyStrings(in.Interfaces)
	out.ServiceSelectors = copySelectors(in.ServiceSelectors)
	out.PreferredNodeSelectors = copyItems(in.PreferredNodeSelectors)
}

// DeepCopyInto copies the receiver into out.
func (in *PreferredNodeSelector) DeepCopyInto(out *PreferredNodeSelector) {
	*out = *in
	in.Preference.DeepCopyInto(&out.Preference)
}

// DeepCopyInto copies the receiver into out.
func (in *L2Advertisement) DeepCopyInto(out *L2Advertisement) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *L2Advertisement) DeepCopy() *L2Advertisement { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *L2Advertisement) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *L2AdvertisementList) DeepCopyInto(out *L2AdvertisementList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyItems(in.Items)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *L2AdvertisementList) DeepCopy() *L2AdvertisementList { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *L2AdvertisementList) DeepCopyObject() runtime.Object { return in.DeepCopy() }
