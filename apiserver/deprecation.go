package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// servedMajor and servedMinor are the Kubernetes release whose API svcnet
// serves; a type deprecated in this release or before gets a warning.
const servedMajor, servedMinor = 1, 36

// deprecationWarning returns the warning kube-apiserver adds to every
// request for a deprecated kind ("v1 Endpoints is deprecated in v1.33+; use
// discovery.k8s.io/v1 EndpointSlice"), built from the APILifecycle methods of
// the k8s.io/api type, or "" when the kind is not deprecated.
func deprecationWarning(obj runtime.Object, gvk schema.GroupVersionKind) string {
	d, ok := obj.(interface{ APILifecycleDeprecated() (int, int) })
	if !ok {
		return ""
	}
	major, minor := d.APILifecycleDeprecated()
	if major == 0 && minor == 0 {
		return ""
	}
	if major > servedMajor || (major == servedMajor && minor > servedMinor) {
		return ""
	}
	msg := fmt.Sprintf("%s %s is deprecated in v%d.%d+", gvk.GroupVersion().String(), gvk.Kind, major, minor)
	if r, ok := obj.(interface{ APILifecycleRemoved() (int, int) }); ok {
		if rmaj, rmin := r.APILifecycleRemoved(); rmaj != 0 || rmin != 0 {
			msg += fmt.Sprintf(", unavailable in v%d.%d+", rmaj, rmin)
		}
	}
	if r, ok := obj.(interface {
		APILifecycleReplacement() schema.GroupVersionKind
	}); ok {
		if rep := r.APILifecycleReplacement(); !rep.Empty() {
			msg += fmt.Sprintf("; use %s %s", rep.GroupVersion().String(), rep.Kind)
		}
	}
	return msg
}

// addWarning adds an RFC 7234 warning header with code 299 and agent "-",
// as kube-apiserver writes them (quotes and backslashes escaped), once per
// text: kube-apiserver's warning recorder drops a text the response
// already carries (two volumes with the same overlapping paths warn once).
func addWarning(w http.ResponseWriter, text string) {
	if text == "" {
		return
	}
	text = strings.ReplaceAll(text, `\`, `\\`)
	text = strings.ReplaceAll(text, `"`, `\"`)
	h := `299 - "` + text + `"`
	if slices.Contains(w.Header().Values("Warning"), h) {
		return
	}
	w.Header().Add("Warning", h)
}
