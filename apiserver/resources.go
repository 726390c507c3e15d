package apiserver

import (
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
	"github.com/svcnet/svcnet/registry/endpoints"
	"github.com/svcnet/svcnet/registry/endpointslice"
	"github.com/svcnet/svcnet/registry/events"
	"github.com/svcnet/svcnet/registry/ingress"
	metallbreg "github.com/svcnet/svcnet/registry/metallb"
	"github.com/svcnet/svcnet/registry/networking"
	"github.com/svcnet/svcnet/registry/networkpolicy"
)

// Well-known group resources, for Config.Strategies.
var (
	ServicesResource       = schema.GroupResource{Resource: "services"}
	EndpointsResource      = schema.GroupResource{Resource: "endpoints"}
	EndpointSlicesResource = schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}
)

type resourceDef struct {
	info registry.ResourceInfo
	// strategy builds the resource's strategy; nil for services, whose
	// strategy needs the other stores (buildStores sets it).
	strategy func() registry.Strategy
}

func typed[T any, PT interface {
	*T
	runtime.Object
}]() func() runtime.Object {
	return func() runtime.Object { return PT(new(T)) }
}

func unstructuredNew(gv schema.GroupVersion, kind string) func() runtime.Object {
	return func() runtime.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gv.WithKind(kind))
		return u
	}
}

func unstructuredNewList(gv schema.GroupVersion, kind string) func() runtime.Object {
	return func() runtime.Object {
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(gv.WithKind(kind + "List"))
		return u
	}
}

var metallbGV = schema.GroupVersion{Group: "metallb.io", Version: "v1beta1"}

// builtinResources lists every resource served, in discovery order.
func builtinResources() []resourceDef {
	v1 := corev1.SchemeGroupVersion
	apps := appsv1.SchemeGroupVersion
	return append([]resourceDef{
		{registry.ResourceInfo{GVR: v1.WithResource("namespaces"), Kind: "Namespace", Singular: "namespace", ShortNames: []string{"ns"}, Status: true,
			New: typed[corev1.Namespace](), NewList: typed[corev1.NamespaceList]()}, core.NewNamespaceStrategy},
		{registry.ResourceInfo{GVR: v1.WithResource("services"), Kind: "Service", Singular: "service", Namespaced: true, ShortNames: []string{"svc"}, Categories: []string{"all"}, Status: true,
			New: typed[corev1.Service](), NewList: typed[corev1.ServiceList]()}, nil}, // built by buildStores over the IPAddress allocator
		{registry.ResourceInfo{GVR: v1.WithResource("endpoints"), Kind: "Endpoints", Singular: "endpoints", Namespaced: true, ShortNames: []string{"ep"},
			New: typed[corev1.Endpoints](), NewList: typed[corev1.EndpointsList]()}, func() registry.Strategy { return endpoints.NewStrategy() }},
		{registry.ResourceInfo{GVR: v1.WithResource("pods"), Kind: "Pod", Singular: "pod", Generation: true, Namespaced: true, ShortNames: []string{"po"}, Categories: []string{"all"}, Status: true,
			New: typed[corev1.Pod](), NewList: typed[corev1.PodList]()}, core.NewPodStrategy},
		{registry.ResourceInfo{GVR: v1.WithResource("nodes"), Kind: "Node", Singular: "node", ShortNames: []string{"no"}, Status: true,
			New: typed[corev1.Node](), NewList: typed[corev1.NodeList]()}, core.NewNodeStrategy},
		{registry.ResourceInfo{GVR: v1.WithResource("events"), Kind: "Event", Singular: "event", Namespaced: true, ShortNames: []string{"ev"},
			New: typed[corev1.Event](), NewList: typed[corev1.EventList]()}, core.NewEventStrategy},
		{registry.ResourceInfo{GVR: eventsv1.SchemeGroupVersion.WithResource("events"), Kind: "Event", Singular: "event", Namespaced: true, ShortNames: []string{"ev"},
			New: typed[eventsv1.Event](), NewList: typed[eventsv1.EventList]()}, events.NewV1Strategy},
		{registry.ResourceInfo{GVR: v1.WithResource("configmaps"), Kind: "ConfigMap", Singular: "configmap", Namespaced: true, ShortNames: []string{"cm"},
			New: typed[corev1.ConfigMap](), NewList: typed[corev1.ConfigMapList]()}, core.NewConfigMapStrategy},
		{registry.ResourceInfo{GVR: v1.WithResource("secrets"), Kind: "Secret", Singular: "secret", Namespaced: true,
			New: typed[corev1.Secret](), NewList: typed[corev1.SecretList]()}, core.NewSecretStrategy},
		{registry.ResourceInfo{GVR: v1.WithResource("serviceaccounts"), Kind: "ServiceAccount", Singular: "serviceaccount", Namespaced: true, ShortNames: []string{"sa"},
			New: typed[corev1.ServiceAccount](), NewList: typed[corev1.ServiceAccountList]()}, core.NewServiceAccountStrategy},
		{registry.ResourceInfo{GVR: discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), Kind: "EndpointSlice", Singular: "endpointslice", Namespaced: true,
			New: typed[discoveryv1.EndpointSlice](), NewList: typed[discoveryv1.EndpointSliceList]()}, func() registry.Strategy { return endpointslice.NewStrategy() }},
		{registry.ResourceInfo{GVR: apps.WithResource("deployments"), Kind: "Deployment", Singular: "deployment", Generation: true, Namespaced: true, ShortNames: []string{"deploy"}, Categories: []string{"all"}, Status: true, Scale: true,
			New: typed[appsv1.Deployment](), NewList: typed[appsv1.DeploymentList]()}, core.NewDeploymentStrategy},
		{registry.ResourceInfo{GVR: apps.WithResource("replicasets"), Kind: "ReplicaSet", Singular: "replicaset", Generation: true, Namespaced: true, ShortNames: []string{"rs"}, Categories: []string{"all"}, Status: true, Scale: true,
			New: typed[appsv1.ReplicaSet](), NewList: typed[appsv1.ReplicaSetList]()}, core.NewReplicaSetStrategy},
		{registry.ResourceInfo{GVR: apps.WithResource("daemonsets"), Kind: "DaemonSet", Singular: "daemonset", Generation: true, Namespaced: true, ShortNames: []string{"ds"}, Categories: []string{"all"}, Status: true,
			New: typed[appsv1.DaemonSet](), NewList: typed[appsv1.DaemonSetList]()}, core.NewDaemonSetStrategy},
		{registry.ResourceInfo{GVR: coordinationv1.SchemeGroupVersion.WithResource("leases"), Kind: "Lease", Singular: "lease", Namespaced: true,
			New: typed[coordinationv1.Lease](), NewList: typed[coordinationv1.LeaseList]()}, core.NewLeaseStrategy},
		{registry.ResourceInfo{GVR: networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), Kind: "NetworkPolicy", Singular: "networkpolicy", Namespaced: true, ShortNames: []string{"netpol"}, Generation: true,
			New: typed[networkingv1.NetworkPolicy](), NewList: typed[networkingv1.NetworkPolicyList]()}, networkpolicy.NewStrategy},
		{registry.ResourceInfo{GVR: networkingv1.SchemeGroupVersion.WithResource("ingresses"), Kind: "Ingress", Singular: "ingress", Namespaced: true, ShortNames: []string{"ing"}, Generation: true, Status: true,
			New: typed[networkingv1.Ingress](), NewList: typed[networkingv1.IngressList]()}, ingress.NewStrategy},
		{registry.ResourceInfo{GVR: networkingv1.SchemeGroupVersion.WithResource("ingressclasses"), Kind: "IngressClass", Singular: "ingressclass", Generation: true,
			New: typed[networkingv1.IngressClass](), NewList: typed[networkingv1.IngressClassList]()}, ingress.NewClassStrategy},
		{registry.ResourceInfo{GVR: networkingv1.SchemeGroupVersion.WithResource("servicecidrs"), Kind: "ServiceCIDR", Singular: "servicecidr", Status: true,
			New: typed[networkingv1.ServiceCIDR](), NewList: typed[networkingv1.ServiceCIDRList]()}, networking.NewServiceCIDRStrategy},
		{registry.ResourceInfo{GVR: networkingv1.SchemeGroupVersion.WithResource("ipaddresses"), Kind: "IPAddress", Singular: "ipaddress", ShortNames: []string{"ip"},
			New: typed[networkingv1.IPAddress](), NewList: typed[networkingv1.IPAddressList]()}, networking.NewIPAddressStrategy},
	}, append(append(rbacResources(), metallbBGPResources()...), []resourceDef{
		{registry.ResourceInfo{GVR: metallbGV.WithResource("ipaddresspools"), Kind: "IPAddressPool", Singular: "ipaddresspool", Namespaced: true, Generation: true, Status: true,
			New: unstructuredNew(metallbGV, "IPAddressPool"), NewList: unstructuredNewList(metallbGV, "IPAddressPool")}, func() registry.Strategy { return metallbreg.NewIPAddressPoolStrategy() }},
		{registry.ResourceInfo{GVR: metallbGV.WithResource("l2advertisements"), Kind: "L2Advertisement", Singular: "l2advertisement", Namespaced: true, Generation: true, Status: true,
			New: unstructuredNew(metallbGV, "L2Advertisement"), NewList: unstructuredNewList(metallbGV, "L2Advertisement")}, func() registry.Strategy { return metallbreg.NewL2AdvertisementStrategy() }},
	}...)...)
}
