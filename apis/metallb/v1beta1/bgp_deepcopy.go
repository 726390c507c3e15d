package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

func copyInt32(in *int32) *int32 {
	if in == nil {
		return nil
	}
	v := *in
	return &v
}

// DeepCopyInto copies the receiver into out.
func (in *BGPAdvertisementSpec) DeepCopyInto(out *BGPAdvertisementSpec) {
	*out = *in
	out.AggregationLength = copyInt32(in.AggregationLength)
	out.AggregationLengthV6 = copyInt32(in.AggregationLengthV6)
	out.Communities = copyStrings(in.Communities)
	out.IPAddressPools = copyStrings(in.IPAddressPools)
	out.IPAddressPoolSelectors = copySelectors(in.IPAddressPoolSelectors)
	out.NodeSelectors = copySelectors(in.NodeSelectors)
	out.Peers = copyStrings(in.Peers)
	out.ServiceSelectors = copySelectors(in.ServiceSelectors)
}

// DeepCopyInto copies the receiver into out.
func (in *BGPAdvertisement) DeepCopyInto(out *BGPAdvertisement) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *BGPAdvertisement) DeepCopy() *BGPAdvertisement { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *BGPAdvertisement) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *BGPAdvertisementList) DeepCopyInto(out *BGPAdvertisementList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyItems(in.Items)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *BGPAdvertisementList) DeepCopy() *BGPAdvertisementList { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *BGPAdvertisementList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *Community) DeepCopyInto(out *Community) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Spec.Communities != nil {
		out.Spec.Communities = append([]CommunityAlias(nil), in.Spec.Communities...)
	}
}

// DeepCopy returns a deep copy (nil for nil).
func (in *Community) DeepCopy() *Community { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *Community) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *CommunityList) DeepCopyInto(out *CommunityList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyItems(in.Items)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *CommunityList) DeepCopy() *CommunityList { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *CommunityList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *ServiceL2Status) DeepCopyInto(out *ServiceL2Status) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Status.Interfaces != nil {
		out.Status.Interfaces = append([]InterfaceInfo(nil), in.Status.Interfaces...)
	}
}

// DeepCopy returns a deep copy (nil for nil).
func (in *ServiceL2Status) DeepCopy() *ServiceL2Status { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *ServiceL2Status) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *ServiceL2StatusList) DeepCopyInto(out *ServiceL2StatusList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyItems(in.Items)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *ServiceL2StatusList) DeepCopy() *ServiceL2StatusList { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *ServiceL2StatusList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *ServiceBGPStatus) DeepCopyInto(out *ServiceBGPStatus) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Peers = copyStrings(in.Status.Peers)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *ServiceBGPStatus) DeepCopy() *ServiceBGPStatus { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *ServiceBGPStatus) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the receiver into out.
func (in *ServiceBGPStatusList) DeepCopyInto(out *ServiceBGPStatusList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyItems(in.Items)
}

// DeepCopy returns a deep copy (nil for nil).
func (in *ServiceBGPStatusList) DeepCopy() *ServiceBGPStatusList { return deepCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *ServiceBGPStatusList) DeepCopyObject() runtime.Object { return in.DeepCopy() }
