package apiserver

import (
	"context"
	"fmt"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
	"github.com/svcnet/svcnet/registry/ingress"
)

var (
	ingressesGR      = schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}
	ingressClassesGR = schema.GroupResource{Group: "networking.k8s.io", Resource: "ingressclasses"}
)

// admissionPlugins are the kube-apiserver admission plugins svcnet runs
// (all on by default, as in kube-apiserver): the pods' and
// DefaultIngressClass.
var admissionPlugins = append(slices.Clone(core.AdmissionPlugins), ingress.PluginDefaultIngressClass)

// installIngressAdmission gives the Ingress strategy the DefaultIngressClass
// plugin over the stored IngressClasses (read from the list cache, as
// kube-apiserver's plugin reads its informer), unless the plugin is
// disabled or the strategy was replaced by one without the hook.
func (s *Server) installIngressAdmission() {
	st, ok := s.byGR[ingressesGR]
	if !ok {
		return
	}
	b := core.BasicOf(st.Strategy)
	if b == nil || b.Admit == nil {
		return
	}
	if slices.Contains(s.cfg.DisableAdmissionPlugins, ingress.PluginDefaultIngressClass) {
		b.Admit = nil
		return
	}
	b.Admit = (&ingress.DefaultClassAdmission{Classes: s.listIngressClasses}).Admit
}

// listIngressClasses returns the stored IngressClasses (the list cache's
// objects: read only).
func (s *Server) listIngressClasses(ctx context.Context) ([]networkingv1.IngressClass, error) {
	st, ok := s.byGR[ingressClassesGR]
	if !ok {
		return nil, nil
	}
	res, err := st.ListItems(ctx, "", registry.ListOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	out := make([]networkingv1.IngressClass, 0, len(res.Items))
	for _, it := range res.Items {
		ic, ok := it.(*networkingv1.IngressClass)
		if !ok {
			return nil, fmt.Errorf("list ingressclasses: unexpected %T", it)
		}
		out = append(out, *ic)
	}
	return out, nil
}
