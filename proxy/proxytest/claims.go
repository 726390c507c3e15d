package proxytest

import (
	"maps"
	"reflect"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/proxy"
)

// ClaimsView hands a mode, from a ServicePortMap a test builds and changes
// by hand, what the Proxier would: the ports without the destinations
// other Services win (proxy.ResolveClaims), and a Service whose ports
// changed that way counts as changed (as the ServiceChangeTracker reports
// it). The tracker itself is checked against ResolveClaims in package
// proxy.
type ClaimsView struct{ last proxy.ServicePortMap }

// View returns the map to hand the mode and adds to changed the Services
// whose ports differ from the last view's.
func (v *ClaimsView) View(raw proxy.ServicePortMap, changed sets.Set[types.NamespacedName]) proxy.ServicePortMap {
	view := maps.Clone(raw)
	proxy.ResolveClaims(view)
	for name, p := range view {
		if q, ok := v.last[name]; !ok || !reflect.DeepEqual(p, q) {
			changed.Insert(name.NamespacedName)
		}
	}
	for name := range v.last {
		if _, ok := view[name]; !ok {
			changed.Insert(name.NamespacedName)
		}
	}
	v.last = view
	return view
}
