package tables

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	eventsv1 "k8s.io/api/events/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/registry/events"
)

// printers maps each served resource to its printer. Descriptions are taken
// from the same generated SwaggerDoc entries kube-apiserver uses (including
// its use of the extensions/v1beta1 and discovery/v1beta1 docs), so `kubectl
// get -o json --raw` style consumers see identical column metadata.
var printers = map[schema.GroupResource]printer{
	{Resource: "services"}:                                    servicePrinter,
	{Resource: "endpoints"}:                                   endpointsPrinter,
	{Group: "discovery.k8s.io", Resource: "endpointslices"}:   endpointSlicePrinter,
	{Resource: "pods"}:                                        podPrinter,
	{Resource: "nodes"}:                                       nodePrinter,
	{Resource: "namespaces"}:                                  namespacePrinter,
	{Resource: "events"}:                                      eventPrinter,
	{Group: "events.k8s.io", Resource: "events"}:              eventsV1Printer,
	{Resource: "configmaps"}:                                  configMapPrinter,
	{Resource: "secrets"}:                                     secretPrinter,
	{Resource: "serviceaccounts"}:                             serviceAccountPrinter,
	{Group: "apps", Resource: "deployments"}:                  deploymentPrinter,
	{Group: "apps", Resource: "replicasets"}:                  replicaSetPrinter,
	{Group: "apps", Resource: "daemonsets"}:                   daemonSetPrinter,
	{Group: "apps", Resource: "deployments/scale"}:            scalePrinter,
	{Group: "apps", Resource: "replicasets/scale"}:            scalePrinter,
	{Group: "coordination.k8s.io", Resource: "leases"}:        leasePrinter,
	{Group: "networking.k8s.io", Resource: "networkpolicies"}: networkPolicyPrinter,
	{Group: "networking.k8s.io", Resource: "servicecidrs"}:    serviceCIDRPrinter,
	{Group: "networking.k8s.io", Resource: "ipaddresses"}:     ipAddressPrinter,
	{Group: "networking.k8s.io", Resource: "ingresses"}:       ingressPrinter,
	{Group: "networking.k8s.io", Resource: "ingressclasses"}:  ingressClassPrinter,
}

var (
	serviceSpecDoc   = corev1.ServiceSpec{}.SwaggerDoc()
	podStatusDoc     = corev1.PodStatus{}.SwaggerDoc()
	podSpecDoc       = corev1.PodSpec{}.SwaggerDoc()
	nodeSystemDoc    = corev1.NodeSystemInfo{}.SwaggerDoc()
	nodeStatusDoc    = corev1.NodeStatus{}.SwaggerDoc()
	eventDoc         = corev1.Event{}.SwaggerDoc()
	objectRefDoc     = corev1.ObjectReference{}.SwaggerDoc()
	sliceDoc         = discoveryv1beta1.EndpointSlice{}.SwaggerDoc()
	xDeployStatusDoc = extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()
	xDeploySpecDoc   = extensionsv1beta1.DeploymentSpec{}.SwaggerDoc()
	xRSSpecDoc       = extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()
	xRSStatusDoc     = extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()
)

const (
	containersDesc = "Names of each container in the template."
	imagesDesc     = "Images referenced by each container in the template."
	// loadBalancerWidth is where a LoadBalancer's ingress list is clipped in
	// non-wide output. The server always prints wide, so this only matters
	// for callers of externalIP with wide=false.
	loadBalancerWidth = 16
)

// ---- services ----

var servicePrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Type", Type: "string", Description: serviceSpecDoc["type"]},
		{Name: "Cluster-IP", Type: "string", Description: serviceSpecDoc["clusterIP"]},
		{Name: "External-IP", Type: "string", Description: serviceSpecDoc["externalIPs"]},
		{Name: "Port(s)", Type: "string", Description: serviceSpecDoc["ports"]},
		ageColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: serviceSpecDoc["selector"]},
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		svc, ok := obj.(*corev1.Service)
		if !ok {
			return nil, wrongType("Service", obj)
		}
		clusterIP := "<none>"
		switch {
		case len(svc.Spec.ClusterIPs) > 0:
			clusterIP = svc.Spec.ClusterIPs[0]
		case svc.Spec.ClusterIP != "":
			// Not yet normalised into clusterIPs (kube-apiserver always has both).
			clusterIP = svc.Spec.ClusterIP
		}
		ports := servicePorts(svc.Spec.Ports)
		if ports == "" {
			ports = "<none>"
		}
		return []any{svc.Name, string(svc.Spec.Type), clusterIP, serviceExternalIP(svc, true), ports,
			age(svc.CreationTimestamp, now), labels.FormatLabels(svc.Spec.Selector)}, nil
	},
}

// servicePorts renders ports as "38080/TCP" or, with a node port,
// "38080:30000/TCP", comma separated. An unset protocol prints as TCP, the
// value defaulting gives it.
func servicePorts(ports []corev1.ServicePort) string {
	pieces := make([]string, len(ports))
	for i, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if p.NodePort > 0 {
			pieces[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, proto)
		} else {
			pieces[i] = fmt.Sprintf("%d/%s", p.Port, proto)
		}
	}
	return strings.Join(pieces, ",")
}

// serviceExternalIP is the EXTERNAL-IP cell: externalIPs for ClusterIP and
// NodePort (or <none>), load-balancer ingress then externalIPs for
// LoadBalancer (<pending> while there is neither), the externalName for
// ExternalName, and <unknown> for anything else (including an unset type).
func serviceExternalIP(svc *corev1.Service, wide bool) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		lb := loadBalancerIngress(svc.Status.LoadBalancer, wide)
		if len(svc.Spec.ExternalIPs) > 0 {
			var all []string
			if lb != "" {
				all = append(all, strings.Split(lb, ",")...)
			}
			return strings.Join(append(all, svc.Spec.ExternalIPs...), ",")
		}
		if lb != "" {
			return lb
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// loadBalancerIngress joins the sorted, de-duplicated ingress IPs (or
// hostnames where there is no IP).
func loadBalancerIngress(s corev1.LoadBalancerStatus, wide bool) string {
	seen := map[string]bool{}
	var list []string
	for _, in := range s.Ingress {
		v := in.IP
		if v == "" {
			v = in.Hostname
		}
		if v != "" && !seen[v] {
			seen[v] = true
			list = append(list, v)
		}
	}
	sort.Strings(list)
	r := strings.Join(list, ",")
	if !wide && len(r) > loadBalancerWidth {
		r = r[:loadBalancerWidth-3] + "..."
	}
	return r
}

// ---- endpoints ----

var endpointsPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Endpoints", Type: "string", Description: corev1.Endpoints{}.SwaggerDoc()["subsets"]},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		ep, ok := obj.(*corev1.Endpoints)
		if !ok {
			return nil, wrongType("Endpoints", obj)
		}
		return []any{ep.Name, formatEndpoints(ep), age(ep.CreationTimestamp, now)}, nil
	},
}

// maxListed is how many items the list-valued cells show before
// " + N more...".
const maxListed = 3

// formatEndpoints lists ip:port for every (port, address) pair of every
// subset (bare IPs for a subset without ports), showing the first three and
// then " + N more..." where N counts all the rest. No subsets is <none>.
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var list []string
	count := 0
	more := false
	add := func(s string) {
		count++
		if len(list) == maxListed {
			more = true
			return
		}
		list = append(list, s)
	}
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				add(a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				add(net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	r := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", r, count-maxListed)
	}
	return r
}

// ---- endpointslices ----

var endpointSlicePrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "AddressType", Type: "string", Description: sliceDoc["addressType"]},
		{Name: "Ports", Type: "string", Description: sliceDoc["ports"]},
		{Name: "Endpoints", Type: "string", Description: sliceDoc["endpoints"]},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return nil, wrongType("EndpointSlice", obj)
		}
		var ports, addrs []string
		for _, p := range s.Ports {
			v := "*"
			if p.Port != nil {
				v = strconv.Itoa(int(*p.Port))
			} else if p.Name != nil {
				v = *p.Name
			}
			ports = append(ports, v)
		}
		for _, e := range s.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
		return []any{s.Name, string(s.AddressType), listWithMore(ports), listWithMore(addrs), age(s.CreationTimestamp, now)}, nil
	},
}

// listWithMore shows the first three items and " + N more..."; an empty list
// is <unset>.
func listWithMore(items []string) string {
	if len(items) == 0 {
		return "<unset>"
	}
	if len(items) > maxListed {
		return fmt.Sprintf("%s + %d more...", strings.Join(items[:maxListed], ","), len(items)-maxListed)
	}
	return strings.Join(items, ",")
}

// ---- namespaces, configmaps, leases ----

var namespacePrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: "The status of the namespace"},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		ns, ok := obj.(*corev1.Namespace)
		if !ok {
			return nil, wrongType("Namespace", obj)
		}
		return []any{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp, now)}, nil
	},
}

var configMapPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return nil, wrongType("ConfigMap", obj)
		}
		return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp, now)}, nil
	},
}

var secretPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
		{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return nil, wrongType("Secret", obj)
		}
		return []any{s.Name, string(s.Type), int64(len(s.Data)), age(s.CreationTimestamp, now)}, nil
	},
}

var serviceAccountPrinter = printer{
	columns: []metav1.TableColumnDefinition{nameColumn, ageColumn},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		sa, ok := obj.(*corev1.ServiceAccount)
		if !ok {
			return nil, wrongType("ServiceAccount", obj)
		}
		return []any{sa.Name, age(sa.CreationTimestamp, now)}, nil
	},
}

var leasePrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return nil, wrongType("Lease", obj)
		}
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		return []any{l.Name, holder, age(l.CreationTimestamp, now)}, nil
	},
}

// ---- deployments, replicasets, scale ----

var deploymentPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		{Name: "Up-to-date", Type: "string", Description: xDeployStatusDoc["updatedReplicas"]},
		{Name: "Available", Type: "string", Description: xDeployStatusDoc["availableReplicas"]},
		ageColumn,
		{Name: "Containers", Type: "string", Priority: 1, Description: containersDesc},
		{Name: "Images", Type: "string", Priority: 1, Description: imagesDesc},
		{Name: "Selector", Type: "string", Priority: 1, Description: xDeploySpecDoc["selector"]},
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			return nil, wrongType("Deployment", obj)
		}
		selector := "<invalid>"
		if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
			selector = s.String()
		}
		names, images := containerCells(d.Spec.Template.Spec.Containers)
		return []any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicas(d.Spec.Replicas)),
			int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), age(d.CreationTimestamp, now),
			names, images, selector}, nil
	},
}

var replicaSetPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Desired", Type: "integer", Description: xRSSpecDoc["replicas"]},
		{Name: "Current", Type: "integer", Description: xRSStatusDoc["replicas"]},
		{Name: "Ready", Type: "integer", Description: xRSStatusDoc["readyReplicas"]},
		ageColumn,
		{Name: "Containers", Type: "string", Priority: 1, Description: containersDesc},
		{Name: "Images", Type: "string", Priority: 1, Description: imagesDesc},
		{Name: "Selector", Type: "string", Priority: 1, Description: xRSSpecDoc["selector"]},
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		rs, ok := obj.(*appsv1.ReplicaSet)
		if !ok {
			return nil, wrongType("ReplicaSet", obj)
		}
		names, images := containerCells(rs.Spec.Template.Spec.Containers)
		return []any{rs.Name, int64(replicas(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
			age(rs.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(rs.Spec.Selector)}, nil
	},
}

var (
	dsStatusDoc = appsv1.DaemonSetStatus{}.SwaggerDoc()
	dsSpecDoc   = appsv1.DaemonSetSpec{}.SwaggerDoc()
)

var daemonSetPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Desired", Type: "integer", Description: dsStatusDoc["desiredNumberScheduled"]},
		{Name: "Current", Type: "integer", Description: dsStatusDoc["currentNumberScheduled"]},
		{Name: "Ready", Type: "integer", Description: dsStatusDoc["numberReady"]},
		{Name: "Up-to-date", Type: "integer", Description: dsStatusDoc["updatedNumberScheduled"]},
		{Name: "Available", Type: "integer", Description: dsStatusDoc["numberAvailable"]},
		{Name: "Node Selector", Type: "string", Description: podSpecDoc["nodeSelector"]},
		ageColumn,
		{Name: "Containers", Type: "string", Priority: 1, Description: containersDesc},
		{Name: "Images", Type: "string", Priority: 1, Description: imagesDesc},
		{Name: "Selector", Type: "string", Priority: 1, Description: dsSpecDoc["selector"]},
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		ds, ok := obj.(*appsv1.DaemonSet)
		if !ok {
			return nil, wrongType("DaemonSet", obj)
		}
		st := &ds.Status
		names, images := containerCells(ds.Spec.Template.Spec.Containers)
		return []any{ds.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
			int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
			age(ds.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(ds.Spec.Selector)}, nil
	},
}

// replicas reads spec.replicas as stored; an unset value means the default
// of 1 that defaulting would have applied.
func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

var scalePrinter = printer{
	columns: []metav1.TableColumnDefinition{
		// kube-apiserver's scale table has no "name" format on its Name column.
		{Name: "Name", Type: "string", Description: objectMetaDoc["name"]},
		{Name: "Desired", Type: "integer", Description: autoscalingv1.ScaleSpec{}.SwaggerDoc()["replicas"]},
		{Name: "Available", Type: "integer", Description: autoscalingv1.ScaleStatus{}.SwaggerDoc()["replicas"]},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		s, ok := obj.(*autoscalingv1.Scale)
		if !ok {
			return nil, wrongType("Scale", obj)
		}
		return []any{s.Name, int64(s.Spec.Replicas), int64(s.Status.Replicas), age(s.CreationTimestamp, now)}, nil
	},
}

func isScale(obj runtime.Object) bool {
	_, ok := obj.(*autoscalingv1.Scale)
	return ok
}

// containerCells joins container names and images with commas.
func containerCells(cs []corev1.Container) (names, images string) {
	n := make([]string, len(cs))
	im := make([]string, len(cs))
	for i, c := range cs {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

// ---- nodes ----

const (
	nodeRolePrefix = "node-role.kubernetes.io/"
	nodeRoleLabel  = "kubernetes.io/role"
)

var nodePrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: "The status of the node"},
		{Name: "Roles", Type: "string", Description: "The roles of the node"},
		ageColumn,
		{Name: "Version", Type: "string", Description: nodeSystemDoc["kubeletVersion"]},
		{Name: "Internal-IP", Type: "string", Priority: 1, Description: nodeStatusDoc["addresses"]},
		{Name: "External-IP", Type: "string", Priority: 1, Description: nodeStatusDoc["addresses"]},
		{Name: "OS-Image", Type: "string", Priority: 1, Description: nodeSystemDoc["osImage"]},
		{Name: "Kernel-Version", Type: "string", Priority: 1, Description: nodeSystemDoc["kernelVersion"]},
		{Name: "Container-Runtime", Type: "string", Priority: 1, Description: nodeSystemDoc["containerRuntimeVersion"]},
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return nil, wrongType("Node", obj)
		}
		var status []string
		for _, c := range n.Status.Conditions {
			if c.Type != corev1.NodeReady {
				continue
			}
			// The last Ready condition wins, as in kube-apiserver's map.
			status = status[:0]
			if c.Status == corev1.ConditionTrue {
				status = append(status, string(c.Type))
			} else {
				status = append(status, "Not"+string(c.Type))
			}
		}
		if len(status) == 0 {
			status = append(status, "Unknown")
		}
		if n.Spec.Unschedulable {
			status = append(status, "SchedulingDisabled")
		}
		roles := strings.Join(nodeRoles(n), ",")
		if roles == "" {
			roles = "<none>"
		}
		info := n.Status.NodeInfo
		return []any{n.Name, strings.Join(status, ","), roles, age(n.CreationTimestamp, now), info.KubeletVersion,
			nodeAddress(n, corev1.NodeInternalIP), nodeAddress(n, corev1.NodeExternalIP),
			orUnknown(info.OSImage), orUnknown(info.KernelVersion), orUnknown(info.ContainerRuntimeVersion)}, nil
	},
}

// nodeRoles collects roles from node-role.kubernetes.io/<role> label keys and
// the value of a kubernetes.io/role label, sorted and de-duplicated.
func nodeRoles(n *corev1.Node) []string {
	set := map[string]bool{}
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, nodeRolePrefix):
			if r := strings.TrimPrefix(k, nodeRolePrefix); r != "" {
				set[r] = true
			}
		case k == nodeRoleLabel && v != "":
			set[v] = true
		}
	}
	roles := make([]string, 0, len(set))
	for r := range set {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	return roles
}

func nodeAddress(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// ---- events ----

var eventPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		{Name: "Last Seen", Type: "string", Description: eventDoc["lastTimestamp"]},
		{Name: "Type", Type: "string", Description: eventDoc["type"]},
		{Name: "Reason", Type: "string", Description: eventDoc["reason"]},
		{Name: "Object", Type: "string", Description: eventDoc["involvedObject"]},
		{Name: "Subobject", Type: "string", Priority: 1, Description: objectRefDoc["fieldPath"]},
		{Name: "Source", Type: "string", Priority: 1, Description: eventDoc["source"]},
		{Name: "Message", Type: "string", Description: eventDoc["message"]},
		{Name: "First Seen", Type: "string", Priority: 1, Description: eventDoc["firstTimestamp"]},
		{Name: "Count", Type: "string", Priority: 1, Description: eventDoc["count"]},
		{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: objectMetaDoc["name"]},
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		e, ok := obj.(*corev1.Event)
		if !ok {
			return nil, wrongType("Event", obj)
		}
		first := age(e.FirstTimestamp, now)
		if e.FirstTimestamp.IsZero() {
			first = microAge(e.EventTime, now)
		}
		last := age(e.LastTimestamp, now)
		if e.LastTimestamp.IsZero() {
			last = first
		}
		count := e.Count
		if e.Series != nil {
			last = microAge(e.Series.LastObservedTime, now)
			count = e.Series.Count
		} else if count == 0 {
			count = 1 // singleton events of the events.k8s.io API carry no count
		}
		target := strings.ToLower(e.InvolvedObject.Kind)
		if e.InvolvedObject.Name != "" {
			target += "/" + e.InvolvedObject.Name
		}
		return []any{last, e.Type, e.Reason, target, e.InvolvedObject.FieldPath,
			eventSource(e), strings.TrimSpace(e.Message), first, int64(count), e.Name}, nil
	},
}

// eventsV1Printer prints events.k8s.io/v1 Events with the core/v1 columns,
// as kube-apiserver does (one printer for both versions).
var eventsV1Printer = printer{
	columns: eventPrinter.columns,
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		e, ok := obj.(*eventsv1.Event)
		if !ok {
			return nil, wrongType("Event", obj)
		}
		return eventPrinter.row(events.FromV1(e), now)
	},
}

// eventSource is "component, host", falling back to the reporting
// controller/instance, without the host part when it is empty.
func eventSource(e *corev1.Event) string {
	component := e.Source.Component
	if component == "" {
		component = e.ReportingController
	}
	host := e.Source.Host
	if host == "" {
		host = e.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}

// ---- servicecidrs, ipaddresses ----

var serviceCIDRPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "CIDRs", Type: "string", Description: networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		c, ok := obj.(*networkingv1.ServiceCIDR)
		if !ok {
			return nil, wrongType("ServiceCIDR", obj)
		}
		return []any{c.Name, strings.Join(c.Spec.CIDRs, ","), age(c.CreationTimestamp, now)}, nil
	},
}

// ipAddressPrinter: kube-apiserver's IPAddress table declares two columns
// (Name, ParentRef) but its rows carry a third cell, the age; kept as is.
var ipAddressPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "ParentRef", Type: "string", Description: networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"]},
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		ip, ok := obj.(*networkingv1.IPAddress)
		if !ok {
			return nil, wrongType("IPAddress", obj)
		}
		parent := "<none>"
		if r := ip.Spec.ParentRef; r != nil {
			parent = strings.ToLower(schema.GroupResource{Group: r.Group, Resource: r.Resource}.String())
			if r.Namespace != "" {
				parent += "/" + r.Namespace
			}
			parent += "/" + r.Name
		}
		return []any{ip.Name, parent, age(ip.CreationTimestamp, now)}, nil
	},
}
