package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Scheme holds every type the server reads or writes: the k8s.io/api groups
// and meta.k8s.io/v1 (Table, PartialObjectMetadata). Codecs are its
// serializers (JSON, YAML, protobuf, CBOR).
var (
	Scheme = runtime.NewScheme()
	Codecs serializer.CodecFactory
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(metav1.AddMetaToScheme(Scheme))
	// Request option bodies (DeleteOptions from kubectl and client-go) name
	// meta.k8s.io/v1.
	Scheme.AddKnownTypes(metav1.SchemeGroupVersion, &metav1.DeleteOptions{}, &metav1.ListOptions{},
		&metav1.GetOptions{}, &metav1.CreateOptions{}, &metav1.UpdateOptions{}, &metav1.PatchOptions{})
	// ... or the group version of the resource, as client-go's typed
	// clients and controller-runtime send them. The unstructured (MetalLB)
	// groups have no Go types here, but their option bodies must decode as
	// kube-apiserver decodes those of custom resources.
	for _, gv := range []schema.GroupVersion{metallbGV, metallbV1beta2} {
		metav1.AddToGroupVersion(Scheme, gv)
	}
	Codecs = serializer.NewCodecFactory(Scheme)
}
