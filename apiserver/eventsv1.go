package apiserver

import (
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/registry/events"
)

var eventsV1GVR = eventsv1.SchemeGroupVersion.WithResource("events")

// eventsCoreCodec is the codec core/v1 Events are stored with.
func eventsCoreCodec() runtime.Codec {
	gv := corev1.SchemeGroupVersion
	if pb, ok := serializerFor("application/vnd.kubernetes.protobuf"); ok {
		return Codecs.CodecForVersions(pb.Serializer, pb.Serializer, gv, gv)
	}
	return Codecs.LegacyCodec(gv)
}

// eventsV1Codec stores events.k8s.io/v1 Events as core/v1 Events, so that
// both APIs read and write the same objects, as in kube-apiserver.
type eventsV1Codec struct{ core runtime.Codec }

func (c eventsV1Codec) Encode(obj runtime.Object, w io.Writer) error {
	e, ok := obj.(*eventsv1.Event)
	if !ok {
		return fmt.Errorf("events.k8s.io/v1 storage: unexpected %T", obj)
	}
	return c.core.Encode(events.FromV1(e), w)
}

func (c eventsV1Codec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, _, err := c.core.Decode(data, nil, &corev1.Event{})
	if err != nil {
		return nil, nil, err
	}
	ce, ok := obj.(*corev1.Event)
	if !ok {
		return nil, nil, fmt.Errorf("events.k8s.io/v1 storage: stored %T", obj)
	}
	out := events.ToV1(ce)
	if e, ok := into.(*eventsv1.Event); ok && e != nil {
		*e = *out
		out = e
	}
	gvk := eventsv1.SchemeGroupVersion.WithKind("Event")
	return out, &gvk, nil
}

func (eventsV1Codec) Identifier() runtime.Identifier { return "svcnet-eventsv1-as-corev1" }
