package core

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/registry"
)

// NewNodeStrategy: nodes are cluster-scoped with a status subresource. As
// kube-apiserver 1.37's node strategy: a create keeps the status it is
// given (a node registers with its addresses and conditions in one write),
// an update keeps the stored status and /status the stored spec; the
// validation is kube-apiserver's ValidateNode and ValidateNodeUpdate (taints,
// podCIDRs, resource quantities, swap, declared features, addresses,
// immutable podCIDRs, providerID and externalID), and it validates
// declaratively (ObjectMeta's rules).
func NewNodeStrategy() registry.Strategy {
	return WithDeclarative(&Basic{
		HasStatus:         true,
		CreateKeepsStatus: true,
		Defaulter: func(obj runtime.Object) {
			st := &obj.(*corev1.Node).Status
			if st.Allocatable == nil && st.Capacity != nil {
				st.Allocatable = st.Capacity
			}
		},
		OnCreate: func(obj runtime.Object) {
			n := obj.(*corev1.Node)
			n.Spec.ConfigSource = nil
			n.Status.Config = nil
		},
		// The deprecated configSource stays only where it was.
		OnUpdate: func(obj, old runtime.Object) {
			if old.(*corev1.Node).Spec.ConfigSource == nil {
				obj.(*corev1.Node).Spec.ConfigSource = nil
			}
		},
		Validator: func(obj runtime.Object) field.ErrorList { return validateNode(obj.(*corev1.Node)) },
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			n := obj.(*corev1.Node)
			errs := metavalidation.ValidateObjectMeta(&n.ObjectMeta, false, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
			errs = append(errs, validateNode(n)...)
			return append(errs, validateNodeUpdate(n, old.(*corev1.Node))...)
		},
		StatusValidator: func(obj, old runtime.Object) field.ErrorList {
			return validateNodeUpdate(obj.(*corev1.Node), old.(*corev1.Node))
		},
		StatusPrepare: func(obj, old runtime.Object) {
			if old.(*corev1.Node).Status.Config == nil {
				obj.(*corev1.Node).Status.Config = nil
			}
		},
		FieldsFunc: func(obj runtime.Object) map[string]string {
			n := obj.(*corev1.Node)
			return map[string]string{"metadata.name": n.Name, "spec.unschedulable": boolString(n.Spec.Unschedulable)}
		},
		FieldLabels:    registry.SupportedFieldLabels(nil, "metadata.name", "spec.unschedulable"),
		CreateWarnings: nodeWarnings,
		UpdateWarnings: func(obj, _ runtime.Object) []string { return nodeWarnings(obj) },
	}, ObjectMetaDeclarative)
}

var nodeDeclaredFeature = regexp.MustCompile(`^[A-Z][a-zA-Z0-9]*(\/[a-zA-Z][a-zA-Z0-9]*)*$`)

// validateNode is kube-apiserver's ValidateNode without the metadata (the
// generic registry checks it) and without the legacy taint and avoid-pods
// annotations. Its paths are kube-apiserver's, metadata.taints and
// metadata.nodeSwapStatus included.
func validateNode(n *corev1.Node) field.ErrorList {
	meta := field.NewPath("metadata")
	var errs field.ErrorList
	if len(n.Spec.Taints) > 0 {
		errs = append(errs, validateNodeTaints(n.Spec.Taints, meta.Child("taints"))...)
	}
	errs = append(errs, validateNodeResources(n)...)
	if sw := n.Status.NodeInfo.Swap; sw != nil && sw.Capacity != nil && *sw.Capacity <= 0 {
		errs = append(errs, field.Invalid(meta.Child("nodeSwapStatus", "capacity"), *sw.Capacity, "must be greater than zero").WithOrigin("minimum"))
	}
	errs = append(errs, validateDeclaredFeatures(n.Status.DeclaredFeatures, field.NewPath("status", "declaredFeatures"))...)
	if cidrs := n.Spec.PodCIDRs; len(cidrs) > 0 {
		p := field.NewPath("spec", "podCIDRs")
		for i, c := range cidrs {
			errs = append(errs, validation.IsValidCIDRForLegacyField(p.Index(i), c, true, nil)...)
		}
		if len(cidrs) > 1 {
			dual, err := netutils.IsDualStackCIDRStrings(cidrs)
			if err != nil {
				errs = append(errs, field.InternalError(p, fmt.Errorf("invalid PodCIDRs. failed to check with dual stack with error:%v", err)))
			}
			if !dual || len(cidrs) > 2 {
				errs = append(errs, field.Invalid(p, cidrs, "may specify no more than one CIDR for each IP family"))
			}
		}
	}
	return errs
}

// validateNodeUpdate is kube-apiserver's ValidateNodeUpdate but its first
// step (the metadata update rules, which the generic registry runs).
func validateNodeUpdate(n, old *corev1.Node) field.ErrorList {
	errs := validateNodeResources(n)
	errs = append(errs, validateDeclaredFeatures(n.Status.DeclaredFeatures, field.NewPath("status", "declaredFeatures"))...)
	seen := map[corev1.NodeAddress]bool{}
	for i, a := range n.Status.Addresses {
		if seen[a] {
			// Rendered as kube-apiserver's internal type (no JSON tags).
			errs = append(errs, field.Duplicate(field.NewPath("status", "addresses").Index(i), struct {
				Type    corev1.NodeAddressType
				Address string
			}{a.Type, a.Address}))
		}
		seen[a] = true
	}
	if len(old.Spec.PodCIDRs) > 0 {
		forbidden := field.Forbidden(field.NewPath("spec", "podCIDRs"), `node updates may not change podCIDR except from "" to valid`)
		if len(old.Spec.PodCIDRs) != len(n.Spec.PodCIDRs) {
			errs = append(errs, forbidden)
		} else {
			for i, c := range old.Spec.PodCIDRs {
				if c != n.Spec.PodCIDRs[i] {
					errs = append(errs, forbidden)
				}
			}
		}
	}
	pid := field.NewPath("spec", "providerID")
	switch {
	case old.Spec.ProviderID != "" && n.Spec.ProviderID != "" && old.Spec.ProviderID != n.Spec.ProviderID:
		errs = append(errs, field.Invalid(pid, nil, "field cannot be modified once set").WithOrigin("update").MarkCoveredByDeclarative())
	case old.Spec.ProviderID != "" && n.Spec.ProviderID == "":
		errs = append(errs, field.Invalid(pid, nil, "field cannot be cleared once set").WithOrigin("update").MarkCoveredByDeclarative())
	}
	if len(n.Spec.Taints) > 0 {
		errs = append(errs, validateNodeTaints(n.Spec.Taints, field.NewPath("metadata", "taints"))...)
	}
	if n.Spec.DoNotUseExternalID != old.Spec.DoNotUseExternalID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "externalID"), "may not be updated"))
	}
	return errs
}

var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// validateNodeTaints: each key a label name, each value a label value, an
// effect required and known, and one taint per key and effect.
func validateNodeTaints(taints []corev1.Taint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.TaintEffect]sets.Set[string]{}
	for i, t := range taints {
		ip := p.Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, ip.Child("key"))...)
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
			errs = append(errs, field.Invalid(ip.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		switch t.Effect {
		case "":
			errs = append(errs, field.Required(ip.Child("effect"), ""))
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(ip.Child("effect"), t.Effect, taintEffects))
		}
		if seen[t.Effect].Has(t.Key) {
			dup := field.Duplicate(ip, taintValue(t))
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		if seen[t.Effect] == nil {
			seen[t.Effect] = sets.New[string]()
		}
		seen[t.Effect].Insert(t.Key)
	}
	return errs
}

// taintValue renders a taint in an error as kube-apiserver does (its
// internal type, whose JSON has no field tags).
func taintValue(t corev1.Taint) any {
	return struct {
		Key       string
		Value     string
		Effect    corev1.TaintEffect
		TimeAdded *metav1.Time
	}{t.Key, t.Value, t.Effect, t.TimeAdded}
}

func validateNodeResources(n *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	for k, v := range n.Status.Capacity {
		errs = append(errs, validateResourceQuantity(k, v, field.NewPath("status", "capacity", string(k)))...)
	}
	for k, v := range n.Status.Allocatable {
		errs = append(errs, validateResourceQuantity(k, v, field.NewPath("status", "allocatable", string(k)))...)
	}
	return errs
}

var integerResources = sets.New(corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims, corev1.ResourceServicesNodePorts,
	corev1.ResourceServicesLoadBalancers)

// validateResourceQuantity: not negative, and whole for the integer
// resources (object counts and extended resources).
func validateResourceQuantity(name corev1.ResourceName, q resource.Quantity, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.Cmp(resource.Quantity{}) < 0 {
		errs = append(errs, field.Invalid(p, q.String(), metavalidation.IsNegativeErrorMsg))
	}
	if (integerResources.Has(name) || isExtendedResource(name)) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(p, q, "must be an integer"))
	}
	return errs
}

// isExtendedResource: a resource outside the kubernetes.io domain whose
// quota name (requests.NAME) is a qualified name.
func isExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, "kubernetes.io/") || strings.HasPrefix(s, "requests.") {
		return false
	}
	return len(validation.IsQualifiedName("requests."+s)) == 0
}

func validateDeclaredFeatures(features []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range features {
		switch {
		case len(f) > validation.DNS1123SubdomainMaxLength:
			errs = append(errs, field.Invalid(p.Index(i), f, fmt.Sprintf("invalid feature name %q: must be no more than %d characters", f, validation.DNS1123SubdomainMaxLength)))
		case !nodeDeclaredFeature.MatchString(f):
			errs = append(errs, field.Invalid(p.Index(i), f, fmt.Sprintf("invalid feature name %q: must start with an UpperCamelCase segment, with subsequent segments separated by '/' (e.g., MyFeature or MyFeature/mySubFeature), and contain only alphanumeric characters and slashes", f)))
		}
		if i+1 < len(features) {
			next := features[i+1]
			if f == next {
				errs = append(errs, field.Duplicate(p.Index(i+1), next))
			} else if f > next {
				errs = append(errs, field.Invalid(p.Index(i+1), next, "list must be sorted alphabetically"))
			}
		}
	}
	return errs
}
