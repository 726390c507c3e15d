package tables

import (
	"fmt"
	"sort"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ---- networkpolicies ----

// networkPolicyPrinter is kube-apiserver's: NAME, POD-SELECTOR (the
// selector in label-query form, "<none>" when empty), AGE.
var networkPolicyPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Pod-Selector", Type: "string", Description: networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		np, ok := obj.(*networkingv1.NetworkPolicy)
		if !ok {
			return nil, wrongType("NetworkPolicy", obj)
		}
		return []any{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), age(np.CreationTimestamp, now)}, nil
	},
}

// ---- ingresses, ingressclasses ----

// ingressPrinter is kube-apiserver's: NAME, CLASS (spec.ingressClassName,
// "<none>" without one), HOSTS (the first three rule hosts joined with ",",
// "+ N more..." past them, "*" when no rule has a host), ADDRESS (the
// status's IPs, or hostnames where an entry has no IP, sorted, unique,
// joined with ","; the server prints wide, so never clipped), PORTS ("80",
// or "80, 443" with TLS), AGE.
var ingressPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Class", Type: "string", Description: "The name of the IngressClass resource that should be used for additional configuration"},
		{Name: "Hosts", Type: "string", Description: "Hosts that incoming requests are matched against before the ingress rule"},
		{Name: "Address", Type: "string", Description: "Address is a list containing ingress points for the load-balancer"},
		{Name: "Ports", Type: "string", Description: "Ports of TLS configurations that open"},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		ing, ok := obj.(*networkingv1.Ingress)
		if !ok {
			return nil, wrongType("Ingress", obj)
		}
		class := "<none>"
		if ing.Spec.IngressClassName != nil {
			class = *ing.Spec.IngressClassName
		}
		ports := "80"
		if len(ing.Spec.TLS) > 0 {
			ports = "80, 443"
		}
		return []any{ing.Name, class, ingressHosts(ing.Spec.Rules), ingressAddress(ing.Status.LoadBalancer), ports, age(ing.CreationTimestamp, now)}, nil
	},
}

func ingressHosts(rules []networkingv1.IngressRule) string {
	const max = 3
	var hosts []string
	for _, r := range rules {
		if len(hosts) == max {
			return fmt.Sprintf("%s + %d more...", strings.Join(hosts, ","), len(rules)-max)
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	return strings.Join(hosts, ",")
}

func ingressAddress(st networkingv1.IngressLoadBalancerStatus) string {
	set := map[string]bool{}
	for _, in := range st.Ingress {
		switch {
		case in.IP != "":
			set[in.IP] = true
		case in.Hostname != "":
			set[in.Hostname] = true
		}
	}
	addrs := make([]string, 0, len(set))
	for a := range set {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	return strings.Join(addrs, ",")
}

// ingressClassPrinter is kube-apiserver's: NAME (with " (default)" for the
// class annotated ingressclass.kubernetes.io/is-default-class: "true"),
// CONTROLLER, PARAMETERS (Kind[.apiGroup]/name, "<none>" without
// parameters), AGE.
var ingressClassPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Controller", Type: "string", Description: "Controller that is responsible for handling this class"},
		{Name: "Parameters", Type: "string", Description: "A reference to a resource with additional parameters"},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		ic, ok := obj.(*networkingv1.IngressClass)
		if !ok {
			return nil, wrongType("IngressClass", obj)
		}
		name := ic.Name
		if ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			name += " (default)"
		}
		params := "<none>"
		if p := ic.Spec.Parameters; p != nil {
			params = p.Kind
			if p.APIGroup != nil {
				params += "." + *p.APIGroup
			}
			params += "/" + p.Name
		}
		return []any{name, ic.Spec.Controller, params, age(ic.CreationTimestamp, now)}, nil
	},
}
