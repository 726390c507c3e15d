package registry

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FieldLabelConverter is implemented by strategies whose kind registers a
// field-label conversion in Kubernetes (Pods, Services, Nodes, Events,
// Namespaces, Secrets, ...): it accepts the labels a field selector may use,
// possibly renaming one (a Pod's legacy spec.host is spec.nodeName), and
// rejects the others with the error kube-apiserver returns.
// A nil conversion means the kind has none of its own.
type FieldLabelConverter interface {
	FieldLabelConversion() func(label, value string) (string, string, error)
}

// SupportedFieldLabels returns a conversion that accepts exactly labels (and
// the keys of aliases, renamed to their values), rejecting anything else with
// "field label not supported: <label>" as the conversion functions
// Kubernetes registers per kind do.
func SupportedFieldLabels(aliases map[string]string, labels ...string) func(label, value string) (string, string, error) {
	ok := map[string]string{}
	for _, l := range labels {
		ok[l] = l
	}
	for from, to := range aliases {
		ok[from] = to
	}
	return func(label, value string) (string, string, error) {
		if to, found := ok[label]; found {
			return to, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	}
}

// ConvertFieldLabel checks (and canonicalizes) one label of a field
// selector, as kube-apiserver's scheme does before it lists or watches:
// the strategy's conversion when it has one; otherwise, for built-in kinds,
// apimachinery's default (metadata.name and metadata.namespace only, with
// its own wording), and for custom resources the CRD handler's rule
// (metadata.namespace only when namespaced).
func (s *Store) ConvertFieldLabel(label, value string) (string, string, error) {
	if c, ok := s.Strategy.(FieldLabelConverter); ok {
		if conv := c.FieldLabelConversion(); conv != nil {
			return conv(label, value)
		}
	}
	if _, custom := s.Info.New().(*unstructured.Unstructured); custom {
		if label == "metadata.name" || (s.Info.Namespaced && label == "metadata.namespace") {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	}
	return runtime.DefaultMetaV1FieldSelectorConversion(label, value)
}
