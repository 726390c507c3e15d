package ingress

import (
	"context"
	"sort"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// PluginDefaultIngressClass is the name of kube-apiserver's admission plugin
// (on by default) that gives new Ingresses the default IngressClass;
// --disable-admission-plugins takes it.
const PluginDefaultIngressClass = "DefaultIngressClass"

// DefaultClassAdmission is kube-apiserver's DefaultIngressClass admission
// plugin: an Ingress created without spec.ingressClassName and without the
// kubernetes.io/ingress.class annotation gets the default IngressClass (the
// one annotated ingressclass.kubernetes.io/is-default-class: "true"; of
// several, the newest by creationTimestamp, and of equally new ones the
// first by name). Without a default class, and on updates, the Ingress is
// left alone.
type DefaultClassAdmission struct {
	// Classes lists the IngressClasses (kube-apiserver's plugin reads its
	// informer's cache); its error makes the create Forbidden. Without it
	// the plugin does nothing.
	Classes func(ctx context.Context) ([]networkingv1.IngressClass, error)
}

// Admit runs the plugin on an Ingress create (old nil) or update.
func (a *DefaultClassAdmission) Admit(ctx context.Context, obj, old runtime.Object) error {
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok || old != nil || a.Classes == nil {
		return nil
	}
	if ing.Spec.IngressClassName != nil {
		return nil
	}
	if _, ok := ing.Annotations[AnnotationIngressClass]; ok {
		return nil
	}
	classes, err := a.Classes(ctx)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return err
		}
		name := ing.Name
		if name == "" {
			name = ing.GenerateName
		}
		if name == "" {
			name = "Unknown"
		}
		return apierrors.NewForbidden(networkingv1.Resource("ingresses"), name, err)
	}
	if def := DefaultClassOf(classes); def != nil {
		name := def.Name
		ing.Spec.IngressClassName = &name
	}
	return nil
}

// DefaultClassOf returns the default IngressClass of classes, or nil: of
// those annotated ingressclass.kubernetes.io/is-default-class: "true", the
// newest by creationTimestamp, ties going to the first name.
func DefaultClassOf(classes []networkingv1.IngressClass) *networkingv1.IngressClass {
	var defaults []*networkingv1.IngressClass
	for i := range classes {
		if IsDefaultClass(&classes[i]) {
			defaults = append(defaults, &classes[i])
		}
	}
	if len(defaults) == 0 {
		return nil
	}
	sort.Slice(defaults, func(i, j int) bool {
		ti, tj := defaults[i].CreationTimestamp.UnixNano(), defaults[j].CreationTimestamp.UnixNano()
		if ti == tj {
			return defaults[i].Name < defaults[j].Name
		}
		return ti > tj
	})
	return defaults[0]
}

// IsDefaultClass reports whether an IngressClass is marked the default one
// (exactly "true", as kube-apiserver and kubectl's printer read it).
func IsDefaultClass(ic *networkingv1.IngressClass) bool {
	return ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true"
}
