package core

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"strconv"
)

func metaFields(obj runtime.Object, namespaced bool) map[string]string {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return map[string]string{}
	}
	set := map[string]string{"metadata.name": acc.GetName()}
	if namespaced {
		set["metadata.namespace"] = acc.GetNamespace()
	}
	return set
}

func dnsSubdomain(name string, prefix bool) []string {
	return validation.NameIsDNSSubdomain(name, prefix)
}
func dnsLabel(name string, prefix bool) []string { return validation.NameIsDNSLabel(name, prefix) }
func dns1035(name string, prefix bool) []string {
	return validation.NameIsDNS1035Label(name, prefix)
}
func strconvItoa(i int) string { return strconv.Itoa(i) }
