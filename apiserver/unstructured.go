package apiserver

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// Unstructured resources (the MetalLB custom resources) are served like
// kube-apiserver serves custom resources: JSON and YAML only, merge and JSON
// patches, server-side apply with a schema deduced from the objects.

// unstructuredConverter is the identity conversion: each unstructured
// resource has a single version.
type unstructuredConverter struct{}

func (unstructuredConverter) Convert(in, out, context any) error {
	src, ok1 := in.(*unstructured.Unstructured)
	dst, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("unstructured conversion of %T to %T", in, out)
	}
	dst.Object = runtime.DeepCopyJSON(src.Object)
	return nil
}

func (unstructuredConverter) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	kind := in.GetObjectKind().GroupVersionKind()
	if target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{kind}); !ok || target != kind {
		return nil, fmt.Errorf("%s has a single version", kind)
	}
	return in, nil
}

func (unstructuredConverter) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

type unstructuredDefaulter struct{}

func (unstructuredDefaulter) Default(runtime.Object) {}

type unstructuredCreater struct{}

func (unstructuredCreater) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

func newUnstructuredFieldManager(gvk schema.GroupVersionKind, sub string) (*managedfields.FieldManager, error) {
	return managedfields.NewDefaultCRDFieldManager(managedfields.NewDeducedTypeConverter(), unstructuredConverter{}, unstructuredDefaulter{}, unstructuredCreater{}, gvk, gvk.GroupVersion(), sub, nil)
}

// encodeUnstructured writes unstructured objects and lists as JSON.
func encodeUnstructured(obj runtime.Object) ([]byte, bool, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		b, err := o.MarshalJSON()
		return b, true, err
	case *unstructured.UnstructuredList:
		b, err := o.MarshalJSON()
		return b, true, err
	}
	return nil, false, nil
}
