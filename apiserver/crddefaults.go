package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// storedDefaulter is a strategy that defaults the objects read from
// storage (the MetalLB kinds: their CRD schemas' defaults, which
// kube-apiserver applies on read as well as on write).
type storedDefaulter interface {
	DefaultStored(obj runtime.Object)
}

// defaultingCodec applies def to every object it decodes from storage.
type defaultingCodec struct {
	runtime.Codec
	def func(runtime.Object)
}

func (c defaultingCodec) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, kind, err := c.Codec.Decode(data, gvk, into)
	if err == nil && obj != nil {
		c.def(obj)
	}
	return obj, kind, err
}
