package ingress

import (
	networkingv1 "k8s.io/api/networking/v1"
)

// IngressClassAnnotation is the deprecated annotation naming an Ingress's
// class, from before spec.ingressClassName.
const IngressClassAnnotation = "kubernetes.io/ingress.class"

// Defaults of the class selection, as ingress-nginx's flags but svcnet's
// names.
const (
	DefaultControllerClass = "svcnet.io/ingress"
	DefaultIngressClass    = "svcnet"
)

// ClassSelector decides which Ingresses this controller serves, as
// ingress-nginx does:
//
//  1. an Ingress with the kubernetes.io/ingress.class annotation is served
//     iff the annotation equals IngressClass (the annotation wins over
//     spec.ingressClassName, which the API server does not let both be set
//     anyway);
//  2. an Ingress with spec.ingressClassName is served iff the IngressClass
//     of that name exists and its spec.controller is ControllerClass (or,
//     with IngressClassByName, the name equals IngressClass);
//  3. an Ingress with neither is served iff WatchWithoutClass. Ingresses
//     created while an IngressClass is marked default
//     (ingressclass.kubernetes.io/is-default-class) got its name from the API
//     server's admission and fall under 2.
type ClassSelector struct {
	ControllerClass    string
	IngressClass       string
	IngressClassByName bool
	WatchWithoutClass  bool
}

// Serves reports whether ing is this controller's; class looks an
// IngressClass up by name.
func (s ClassSelector) Serves(ing *networkingv1.Ingress, class func(name string) *networkingv1.IngressClass) bool {
	if v, ok := ing.Annotations[IngressClassAnnotation]; ok {
		return v == s.IngressClass
	}
	if ing.Spec.IngressClassName != nil {
		name := *ing.Spec.IngressClassName
		if s.IngressClassByName && name == s.IngressClass {
			return true
		}
		ic := class(name)
		return ic != nil && ic.Spec.Controller == s.ControllerClass
	}
	return s.WatchWithoutClass
}
