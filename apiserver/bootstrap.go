package apiserver

import (
	"context"
	"fmt"
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/registry"
)

// SystemNamespaces exist from the first start on.
var SystemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

const bootstrapManager = "kube-apiserver"

// bootstrap creates the system namespaces and reconciles the default/kubernetes
// Service, Endpoints and EndpointSlice.
func (s *Server) bootstrap(ctx context.Context, port int) error {
	opts := registry.WriteOptions{FieldManager: bootstrapManager}
	for _, name := range SystemNamespaces {
		_, err := s.byGR[namespacesGR].Create(ctx, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, opts)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	ip := FirstServiceIP(s.cfg.ServiceClusterIPRange).String()
	family := corev1.IPv4Protocol
	if FirstServiceIP(s.cfg.ServiceClusterIPRange).Is6() {
		family = corev1.IPv6Protocol
	}
	single := corev1.IPFamilyPolicySingleStack
	cluster := corev1.ServiceInternalTrafficPolicyCluster
	ports := []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(int32(port))}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, Ports: ports,
			SessionAffinity: corev1.ServiceAffinityNone, IPFamilies: []corev1.IPFamily{family}, IPFamilyPolicy: &single,
			InternalTrafficPolicy: &cluster,
		},
	}
	svcs := s.byGR[ServicesResource]
	err := s.ensure(ctx, svcs, svc, func(cur runtime.Object) runtime.Object {
		c := cur.(*corev1.Service)
		c.Spec.Ports = ports
		return c
	})
	if err != nil {
		return fmt.Errorf("kubernetes service: %w", err)
	}
	addr := s.cfg.AdvertiseAddress
	if ip := net.ParseIP(addr); ip == nil || ip.IsLoopback() {
		// Endpoints may not point at loopback addresses (validation rejects
		// them, as in Kubernetes); with a loopback advertise address the
		// kubernetes Service has no endpoints.
		s.log.Warn("advertise address is loopback: not writing the kubernetes Endpoints/EndpointSlice", "address", addr)
		return nil
	}
	epPorts := []corev1.EndpointPort{{Name: "https", Port: int32(port), Protocol: corev1.ProtocolTCP}}
	eps := s.byGR[EndpointsResource]
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", Labels: map[string]string{"endpointslice.kubernetes.io/skip-mirror": "true"}},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: addr}}, Ports: epPorts}},
	}
	err = s.ensure(ctx, eps, ep, func(cur runtime.Object) runtime.Object {
		c := cur.(*corev1.Endpoints)
		var addrs []corev1.EndpointAddress
		if len(c.Subsets) > 0 && slices.Equal(c.Subsets[0].Ports, epPorts) {
			addrs = c.Subsets[0].Addresses
		}
		if !slices.ContainsFunc(addrs, func(a corev1.EndpointAddress) bool { return a.IP == addr }) {
			addrs = append(addrs, corev1.EndpointAddress{IP: addr})
		}
		c.Subsets = []corev1.EndpointSubset{{Addresses: addrs, Ports: epPorts}}
		return c
	})
	if err != nil {
		return fmt.Errorf("kubernetes endpoints: %w", err)
	}
	ready := true
	proto := corev1.ProtocolTCP
	name, p32 := "https", int32(port)
	addrType := discoveryv1.AddressTypeIPv4
	if family == corev1.IPv6Protocol {
		addrType = discoveryv1.AddressTypeIPv6
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: addrType,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &p32, Protocol: &proto}},
	}
	slices_ := s.byGR[EndpointSlicesResource]
	err = s.ensure(ctx, slices_, slice, func(cur runtime.Object) runtime.Object {
		c := cur.(*discoveryv1.EndpointSlice)
		if len(c.Ports) != 1 || c.Ports[0].Port == nil || *c.Ports[0].Port != p32 {
			c.Endpoints = nil
		}
		c.Ports = slice.Ports
		if !slices.ContainsFunc(c.Endpoints, func(e discoveryv1.Endpoint) bool { return slices.Contains(e.Addresses, addr) }) {
			c.Endpoints = append(c.Endpoints, slice.Endpoints[0])
		}
		return c
	})
	if err != nil {
		return fmt.Errorf("kubernetes endpointslice: %w", err)
	}
	return nil
}

// ensure creates obj, or, if it exists, updates it with fix. The existing
// object is looked up first so that a restart does not run the create-time
// allocation of an object that is already there; a create that loses a race
// with another apiserver is retried as an update.
func (s *Server) ensure(ctx context.Context, st *served, obj runtime.Object, fix func(cur runtime.Object) runtime.Object) error {
	acc, _ := meta.Accessor(obj)
	ns, name := acc.GetNamespace(), acc.GetName()
	opts := registry.WriteOptions{FieldManager: bootstrapManager}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if _, err = st.Get(ctx, ns, name); apierrors.IsNotFound(err) {
			if _, err = st.Create(ctx, ns, obj.DeepCopyObject(), opts); err == nil {
				return nil
			}
			continue
		} else if err != nil {
			return err
		}
		_, _, err = st.Update(ctx, ns, name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			if cur == nil {
				return nil, apierrors.NewNotFound(st.Info.GroupResource(), name)
			}
			return fix(cur), nil
		}, false, opts)
		if err == nil {
			return nil
		}
	}
	return err
}
