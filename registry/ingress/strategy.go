// Package ingress holds the registry strategies of networking.k8s.io/v1
// Ingresses and IngressClasses, and kube-apiserver's DefaultIngressClass
// admission plugin.
//
// Ingress: namespaced, with a status subresource and metadata.generation
// (1 on create, +1 on every spec change). networking/v1 has no defaults for
// it. Validation is kube-apiserver 1.37's (ValidateIngressCreate,
// ValidateIngressUpdate, ValidateIngressStatusUpdate): the same checks, in
// the same order, with the same field paths and messages, so bad input is a
// 422 with field causes and nothing is stored. As in kube-apiserver 1.37 the
// strategy also validates declaratively (ObjectMeta's rules only).
//
// IngressClass: cluster-scoped, generation kept; parameters.scope defaults
// to Cluster; spec.controller is required, a domain-prefixed path of at most
// 250 bytes and immutable; parameters are checked as ValidateIngressClass
// checks them (apiGroup, kind, name, scope, namespace), kind and name also
// by declarative rules.
package ingress

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// AnnotationIngressClass is the annotation that named an Ingress's class
// before spec.ingressClassName (networking/v1beta1's AnnotationIngressClass);
// still honoured by controllers, and by the DefaultIngressClass plugin.
const AnnotationIngressClass = "kubernetes.io/ingress.class"

// NewStrategy is the registry strategy of Ingresses. Its Admit hook is the
// DefaultIngressClass plugin without a way to list IngressClasses (so it
// does nothing); the API server installs one that reads them from its store.
func NewStrategy() registry.Strategy {
	return core.WithDeclarative(&core.Basic{
		Namespaced: true,
		HasStatus:  true,
		Admit:      (&DefaultClassAdmission{}).Admit,
		OnCreate:   func(obj runtime.Object) { obj.(*networkingv1.Ingress).Generation = 1 },
		// As kube-apiserver's strategy (the store does the same after
		// PrepareForUpdate): a changed spec is a new generation.
		OnUpdate: func(obj, old runtime.Object) {
			ing, o := obj.(*networkingv1.Ingress), old.(*networkingv1.Ingress)
			if !equality.Semantic.DeepEqual(ing.Spec, o.Spec) {
				ing.Generation = o.Generation + 1
			}
		},
		Validator:       Validate,
		UpdateValidator: ValidateUpdate,
		StatusValidator: ValidateStatusUpdate,
		CreateWarnings:  WarningsOnCreate,
		StatusUpdateWarnings: func(obj, _ runtime.Object) []string {
			var w []string
			p := field.NewPath("status", "loadBalancer", "ingress")
			for i, in := range obj.(*networkingv1.Ingress).Status.LoadBalancer.Ingress {
				if in.IP != "" {
					w = append(w, validation.GetWarningsForIP(p.Index(i), in.IP)...)
				}
			}
			return w
		},
	}, core.ObjectMetaDeclarative)
}

// WarningsOnCreate is kube-apiserver's warning for an Ingress created with
// the class annotation and without spec.ingressClassName.
func WarningsOnCreate(obj runtime.Object) []string {
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		return nil
	}
	if _, set := ing.Annotations[AnnotationIngressClass]; set && ing.Spec.IngressClassName == nil {
		return []string{fmt.Sprintf("annotation %q is deprecated, please use 'spec.ingressClassName' instead", AnnotationIngressClass)}
	}
	return nil
}

// ValidationOptions relax the rules on update for values already stored
// under older ones.
type ValidationOptions struct {
	// AllowInvalidSecretName: a stored spec.tls[*].secretName is not a valid
	// Secret name, so none is checked.
	AllowInvalidSecretName bool
	// AllowInvalidWildcardHostRule: a stored rule with a wildcard host has
	// an invalid rule value, so those of wildcard rules are not checked.
	AllowInvalidWildcardHostRule bool
}

var metaPath = field.NewPath("metadata")

// Validate checks a new Ingress (ValidateIngressCreate without the generic
// ObjectMeta checks, which the store runs first): kube-apiserver's finalizer
// rule, the spec, and that the kubernetes.io/ingress.class annotation, when
// set together with spec.ingressClassName, names the same class.
func Validate(obj runtime.Object) field.ErrorList {
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a *v1.Ingress: %T", obj))}
	}
	errs := validateKubeFinalizers(&ing.ObjectMeta)
	errs = append(errs, ValidateSpec(&ing.Spec, field.NewPath("spec"), ValidationOptions{})...)
	if v, ok := ing.Annotations[AnnotationIngressClass]; ok && ing.Spec.IngressClassName != nil && v != *ing.Spec.IngressClassName {
		errs = append(errs, field.Invalid(field.NewPath("annotations").Child(AnnotationIngressClass), v, "must match `ingressClassName` when both are specified"))
	}
	return errs
}

// ValidateUpdate checks an update as ValidateIngressUpdate does: the
// metadata update rules, the whole metadata again (kube-apiserver repeats
// what the generic checks found), then the spec, relaxed for TLS secret
// names and wildcard-host rules the stored object already got wrong. The
// annotation rule of Validate applies to creates only.
func ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	ing, ok1 := obj.(*networkingv1.Ingress)
	o, ok2 := old.(*networkingv1.Ingress)
	if !ok1 || !ok2 {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a *v1.Ingress: %T", obj))}
	}
	errs := metavalidation.ValidateObjectMetaUpdate(&ing.ObjectMeta, &o.ObjectMeta, metaPath)
	errs = append(errs, validateKubeFinalizers(&ing.ObjectMeta)...)
	errs = append(errs, metavalidation.ValidateObjectMeta(&ing.ObjectMeta, true, metavalidation.NameIsDNSSubdomain, metaPath)...)
	errs = append(errs, validateKubeFinalizers(&ing.ObjectMeta)...)
	opts := ValidationOptions{AllowInvalidSecretName: allowInvalidSecretName(o), AllowInvalidWildcardHostRule: allowInvalidWildcardHostRule(o)}
	return append(errs, ValidateSpec(&ing.Spec, field.NewPath("spec"), opts)...)
}

// ValidateStatusUpdate checks a write to /status: the metadata update rules
// and status.loadBalancer.ingress (IPs under the strict rules unless already
// stored, hostnames DNS names and not IPs).
func ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	ing, ok1 := obj.(*networkingv1.Ingress)
	o, ok2 := old.(*networkingv1.Ingress)
	if !ok1 || !ok2 {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a *v1.Ingress: %T", obj))}
	}
	errs := metavalidation.ValidateObjectMetaUpdate(&ing.ObjectMeta, &o.ObjectMeta, metaPath)
	errs = append(errs, validateKubeFinalizers(&ing.ObjectMeta)...)
	return append(errs, ValidateLoadBalancerStatus(&ing.Status.LoadBalancer, &o.Status.LoadBalancer, field.NewPath("status", "loadBalancer"))...)
}

// validateKubeFinalizers is kube-apiserver's addition to the generic
// ObjectMeta checks: a finalizer without a "/" must be a standard one.
func validateKubeFinalizers(m *metav1.ObjectMeta) field.ErrorList {
	var errs field.ErrorList
	for i, f := range m.Finalizers {
		if !strings.Contains(f, "/") && f != string(corev1.FinalizerKubernetes) && f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			errs = append(errs, field.Invalid(metaPath.Child("finalizers").Index(i), f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}

// ValidateSpec checks an Ingress spec in kube-apiserver's order: rules or a
// default backend required, the default backend, the rules, TLS, then
// ingressClassName (a DNS subdomain).
func ValidateSpec(spec *networkingv1.IngressSpec, p *field.Path, opts ValidationOptions) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Rules) == 0 && spec.DefaultBackend == nil {
		errs = append(errs, field.Invalid(p, spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		errs = append(errs, validateBackend(spec.DefaultBackend, p.Child("defaultBackend"))...)
	}
	for i := range spec.Rules {
		errs = append(errs, validateRule(&spec.Rules[i], p.Child("rules").Index(i), opts)...)
	}
	for i, tls := range spec.TLS {
		tp := p.Child("tls").Index(i)
		for j, host := range tls.Hosts {
			check := validation.IsDNS1123Subdomain
			if strings.Contains(host, "*") {
				check = validation.IsWildcardDNS1123Subdomain
			}
			for _, msg := range check(host) {
				errs = append(errs, field.Invalid(tp.Child("hosts").Index(j), host, msg))
			}
		}
		if !opts.AllowInvalidSecretName {
			for _, msg := range validateTLSSecretName(tls.SecretName) {
				errs = append(errs, field.Invalid(tp.Child("secretName"), tls.SecretName, msg))
			}
		}
	}
	if spec.IngressClassName != nil {
		for _, msg := range metavalidation.NameIsDNSSubdomain(*spec.IngressClassName, false) {
			errs = append(errs, field.Invalid(p.Child("ingressClassName"), *spec.IngressClassName, msg))
		}
	}
	return errs
}

// validateRule: a host is a DNS name (a leading "*." label allowed), never
// an IP; the paths of its http rule value are checked, unless the host is a
// wildcard and the stored object already had an invalid wildcard rule.
func validateRule(r *networkingv1.IngressRule, p *field.Path, opts ValidationOptions) field.ErrorList {
	var errs field.ErrorList
	wildcard := false
	if r.Host != "" {
		hp := p.Child("host")
		if netutils.ParseIPSloppy(r.Host) != nil {
			errs = append(errs, field.Invalid(hp, r.Host, "must be a DNS name, not an IP address"))
		}
		check := validation.IsDNS1123Subdomain
		if strings.Contains(r.Host, "*") {
			check, wildcard = validation.IsWildcardDNS1123Subdomain, true
		}
		for _, msg := range check(r.Host) {
			errs = append(errs, field.Invalid(hp, r.Host, msg))
		}
	}
	if !wildcard || !opts.AllowInvalidWildcardHostRule {
		errs = append(errs, validateRuleValue(&r.IngressRuleValue, p)...)
	}
	return errs
}

func validateRuleValue(v *networkingv1.IngressRuleValue, p *field.Path) field.ErrorList {
	if v.HTTP == nil {
		return nil
	}
	var errs field.ErrorList
	pp := p.Child("http", "paths")
	if len(v.HTTP.Paths) == 0 {
		errs = append(errs, field.Required(pp, ""))
	}
	for i := range v.HTTP.Paths {
		errs = append(errs, validatePath(&v.HTTP.Paths[i], pp.Index(i))...)
	}
	return errs
}

var (
	supportedPathTypes   = []string{string(networkingv1.PathTypeExact), string(networkingv1.PathTypeImplementationSpecific), string(networkingv1.PathTypePrefix)}
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
)

// validatePath: pathType is required (nothing else is checked without it);
// Exact and Prefix paths are absolute and free of "//", "/./", "/../" and
// an encoded slash, and do not end in "/.." or "/."; an
// ImplementationSpecific path, when given, is absolute. Then the backend.
func validatePath(hp *networkingv1.HTTPIngressPath, p *field.Path) field.ErrorList {
	if hp.PathType == nil {
		return field.ErrorList{field.Required(p.Child("pathType"), "pathType must be specified")}
	}
	var errs field.ErrorList
	pathPath := p.Child("path")
	switch *hp.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(hp.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, hp.Path, "must be an absolute path"))
		}
		if hp.Path != "" {
			for _, seq := range invalidPathSequences {
				if strings.Contains(hp.Path, seq) {
					errs = append(errs, field.Invalid(pathPath, hp.Path, fmt.Sprintf("must not contain '%s'", seq)))
				}
			}
			for _, suffix := range invalidPathSuffixes {
				if strings.HasSuffix(hp.Path, suffix) {
					errs = append(errs, field.Invalid(pathPath, hp.Path, fmt.Sprintf("cannot end with '%s'", suffix)))
				}
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if hp.Path != "" && !strings.HasPrefix(hp.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, hp.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("pathType"), *hp.PathType, supportedPathTypes))
	}
	return append(errs, validateBackend(&hp.Backend, p.Child("backend"))...)
}

// validateBackend: exactly one of service and resource. A service backend
// names a Service (a DNS label: kube-apiserver 1.37's relaxed Service names
// are GA) and a port by name or by number, not both; a resource backend is
// a typed local object reference.
func validateBackend(b *networkingv1.IngressBackend, p *field.Path) field.ErrorList {
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(p, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		return validateTypedLocalObjectReference(b.Resource, p.Child("resource"))
	case b.Service == nil:
		return field.ErrorList{field.Invalid(p, "", "resource or service backend is required")}
	}
	var errs field.ErrorList
	svc := b.Service
	sp := p.Child("service")
	if svc.Name == "" {
		errs = append(errs, field.Required(sp.Child("name"), ""))
	} else {
		for _, msg := range metavalidation.NameIsDNSLabel(svc.Name, false) {
			errs = append(errs, field.Invalid(sp.Child("name"), svc.Name, msg))
		}
	}
	hasName, hasNumber := svc.Port.Name != "", svc.Port.Number != 0
	switch {
	case hasName && hasNumber:
		errs = append(errs, field.Invalid(p, "", "cannot set both port name & port number"))
	case hasName:
		for _, msg := range validation.IsValidPortName(svc.Port.Name) {
			errs = append(errs, field.Invalid(sp.Child("port", "name"), svc.Port.Name, msg))
		}
	case hasNumber:
		for _, msg := range validation.IsValidPortNum(int(svc.Port.Number)) {
			errs = append(errs, field.Invalid(sp.Child("port", "number"), svc.Port.Number, msg))
		}
	default:
		errs = append(errs, field.Required(p, "port name or number is required"))
	}
	return errs
}

// validateTypedLocalObjectReference checks a resource backend: apiGroup a
// DNS subdomain when set, kind and name required and path segments.
func validateTypedLocalObjectReference(r *corev1.TypedLocalObjectReference, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.APIGroup != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*r.APIGroup) {
			errs = append(errs, field.Invalid(p.Child("apiGroup"), *r.APIGroup, msg))
		}
	}
	errs = append(errs, requiredPathSegment(r.Kind, p.Child("kind"), false)...)
	return append(errs, requiredPathSegment(r.Name, p.Child("name"), false)...)
}

// requiredPathSegment: required, then a valid path segment; covered marks
// the Required error as one a declarative rule also reports.
func requiredPathSegment(v string, p *field.Path, covered bool) field.ErrorList {
	if v == "" {
		e := field.Required(p, "")
		if covered {
			e = e.MarkCoveredByDeclarative()
		}
		return field.ErrorList{e}
	}
	var errs field.ErrorList
	for _, msg := range content.IsPathSegmentName(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func validateTLSSecretName(name string) []string {
	if name == "" {
		return nil
	}
	return metavalidation.NameIsDNSSubdomain(name, false)
}

func allowInvalidSecretName(old *networkingv1.Ingress) bool {
	for _, tls := range old.Spec.TLS {
		if len(validateTLSSecretName(tls.SecretName)) > 0 {
			return true
		}
	}
	return false
}

func allowInvalidWildcardHostRule(old *networkingv1.Ingress) bool {
	for i := range old.Spec.Rules {
		r := &old.Spec.Rules[i]
		if strings.Contains(r.Host, "*") && len(validateRuleValue(&r.IngressRuleValue, nil)) > 0 {
			return true
		}
	}
	return false
}

// ValidateLoadBalancerStatus checks status.loadBalancer.ingress: each ip
// (when set) under the strict IP rules unless it is one of the stored
// status's, each hostname (when set) a DNS subdomain and not an IP.
func ValidateLoadBalancerStatus(st, old *networkingv1.IngressLoadBalancerStatus, p *field.Path) field.ErrorList {
	var oldIPs []string
	if old != nil {
		oldIPs = make([]string, 0, len(old.Ingress))
		for _, in := range old.Ingress {
			if in.IP != "" {
				oldIPs = append(oldIPs, in.IP)
			}
		}
	}
	var errs field.ErrorList
	for i, in := range st.Ingress {
		ip := p.Child("ingress").Index(i)
		if in.IP != "" {
			errs = append(errs, validation.IsValidIPForLegacyField(ip.Child("ip"), in.IP, true, oldIPs)...)
		}
		if in.Hostname != "" {
			for _, msg := range validation.IsDNS1123Subdomain(in.Hostname) {
				errs = append(errs, field.Invalid(ip.Child("hostname"), in.Hostname, msg))
			}
			if netutils.ParseIPSloppy(in.Hostname) != nil {
				errs = append(errs, field.Invalid(ip.Child("hostname"), in.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return errs
}
