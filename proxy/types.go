package proxy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServicePortName names one port of one Service: the unit every proxy mode
// programs. Port is the port's name in the Service spec, empty for a single
// unnamed port.
type ServicePortName struct {
	types.NamespacedName
	Port     string
	Protocol v1.Protocol
}

// Compare orders port names by namespace, name, port name and protocol:
// the order SortedServicePorts lists them in.
func (n ServicePortName) Compare(m ServicePortName) int {
	return cmp.Or(cmp.Compare(n.Namespace, m.Namespace), cmp.Compare(n.Name, m.Name),
		cmp.Compare(n.Port, m.Port), cmp.Compare(n.Protocol, m.Protocol))
}

// String returns "namespace/name:port", or "namespace/name" when the port has
// no name, exactly as kube-proxy formats it in rule comments and chain-name
// hashes.
func (n ServicePortName) String() string {
	if n.Port == "" {
		return n.NamespacedName.String()
	}
	return n.NamespacedName.String() + ":" + n.Port
}

// Annotation keys the proxy reads from Services.
const (
	// AnnotationIPVSScheduler selects a Service's load-balancing algorithm
	// (rr, wrr, lc, ...); the cluster default comes from --ipvs-scheduler.
	AnnotationIPVSScheduler = "service.kubernetes.io/ipvs-scheduler"
	// AnnotationLastChangeTriggerTime is set on EndpointSlices by the
	// endpointslice controller; the proxy measures network programming
	// latency from it.
	AnnotationLastChangeTriggerTime = "endpoints.kubernetes.io/last-change-trigger-time"
	// LabelServiceProxyName opts a Service out of this proxy when set.
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	// LabelHeadless marks the EndpointSlices of headless Services.
	LabelHeadless = "service.kubernetes.io/headless"
)

// ServicePort is everything the proxy knows about one port of a Service. It is
// built once per Service change and never mutated afterwards, so a snapshot
// handed to a mode can be read without locks.
type ServicePort struct {
	Name ServicePortName
	// Type is the Service's type (ClusterIP, NodePort, LoadBalancer).
	Type v1.ServiceType
	// ClusterIPs holds one address per IP family, the primary family first.
	ClusterIPs []netip.Addr
	Port       int
	Protocol   v1.Protocol
	// TargetPort is informational; endpoints carry the resolved port.
	TargetPort string
	// NodePort is 0 when the Service has none.
	NodePort int
	// ExternalIPs, LoadBalancerVIPs and LoadBalancerSourceRanges hold every
	// family; ForFamily filters them.
	ExternalIPs              []netip.Addr
	LoadBalancerVIPs         []netip.Addr
	LoadBalancerSourceRanges []netip.Prefix
	// SessionAffinity is ClientIP or None; StickyMaxAgeSeconds is the
	// ClientIP timeout (default 10800).
	SessionAffinity     v1.ServiceAffinity
	StickyMaxAgeSeconds int
	// ExternalPolicyLocal is true only for externally reachable Services
	// with externalTrafficPolicy Local; InternalPolicyLocal for
	// internalTrafficPolicy Local.
	ExternalPolicyLocal bool
	InternalPolicyLocal bool
	// HealthCheckNodePort is non-zero for LoadBalancer Services with
	// externalTrafficPolicy Local.
	HealthCheckNodePort int
	// Scheduler is the value of AnnotationIPVSScheduler ("" if unset).
	Scheduler string
	// Created is the Service's creation time: it ranks Services that
	// claim one destination (see the claims in the ServiceChangeTracker).
	Created time.Time
}

// String returns the ServicePortName's string form.
func (p *ServicePort) String() string { return p.Name.String() }

// ClusterIP returns the primary cluster IP (the zero Addr if none).
func (p *ServicePort) ClusterIP() netip.Addr {
	if len(p.ClusterIPs) == 0 {
		return netip.Addr{}
	}
	return p.ClusterIPs[0]
}

// ExternallyAccessible reports whether the port is reachable from outside
// the cluster (NodePort, externalIPs or LoadBalancer ingress).
func (p *ServicePort) ExternallyAccessible() bool {
	return p.NodePort != 0 || len(p.ExternalIPs) > 0 || len(p.LoadBalancerVIPs) > 0
}

// UsesClusterEndpoints reports whether some traffic to the port is
// balanced over every endpoint in the cluster: internal traffic with the
// Cluster policy, and any externally accessible port even under
// externalTrafficPolicy Local, because pods and the node itself reaching an
// external address are short-circuited to the cluster-wide endpoints (as in
// kube-proxy).
func (p *ServicePort) UsesClusterEndpoints() bool {
	return !p.InternalPolicyLocal || p.ExternallyAccessible()
}

// UsesLocalEndpoints reports whether some traffic to the port may only go to
// endpoints on this node.
func (p *ServicePort) UsesLocalEndpoints() bool {
	return p.InternalPolicyLocal || (p.ExternallyAccessible() && p.ExternalPolicyLocal)
}

// ForFamily returns p restricted to the addresses of one family (ipv6 true
// for IPv6): p itself when it has no others, else a copy; and false when
// the Service has no cluster IP of that family (then it is not programmed
// in that family at all). ServicePorts are never changed once made, so
// policies share them.
func (p *ServicePort) ForFamily(ipv6 bool) (*ServicePort, bool) {
	if p.onlyFamily(ipv6) {
		return p, len(p.ClusterIPs) > 0
	}
	q := *p
	q.ClusterIPs = filterAddrs(p.ClusterIPs, ipv6)
	if len(q.ClusterIPs) == 0 {
		return nil, false
	}
	q.ExternalIPs = filterAddrs(p.ExternalIPs, ipv6)
	q.LoadBalancerVIPs = filterAddrs(p.LoadBalancerVIPs, ipv6)
	q.LoadBalancerSourceRanges = nil
	for _, r := range p.LoadBalancerSourceRanges {
		if r.Addr().Is6() != ipv6 {
			continue
		}
		if r.Bits() == 0 {
			// A zero range (0.0.0.0/0, ::/0) allows every source of the
			// family: as kube-proxy, no firewall at all.
			q.LoadBalancerSourceRanges = nil
			break
		}
		q.LoadBalancerSourceRanges = append(q.LoadBalancerSourceRanges, r)
	}
	return &q, true
}

// onlyFamily reports whether ForFamily(ipv6) would return p unchanged.
func (p *ServicePort) onlyFamily(ipv6 bool) bool {
	for _, as := range [][]netip.Addr{p.ClusterIPs, p.ExternalIPs, p.LoadBalancerVIPs} {
		for _, a := range as {
			if a.Is6() != ipv6 {
				return false
			}
		}
	}
	for _, r := range p.LoadBalancerSourceRanges {
		if r.Addr().Is6() != ipv6 || r.Bits() == 0 {
			return false
		}
	}
	return true
}

func filterAddrs(in []netip.Addr, ipv6 bool) []netip.Addr {
	var out []netip.Addr
	for _, a := range in {
		if a.Is6() == ipv6 {
			out = append(out, a)
		}
	}
	return out
}

// equal reports whether two ServicePorts program the same data plane.
func (p *ServicePort) equal(q *ServicePort) bool {
	if p == nil || q == nil {
		return p == q
	}
	return p.Name == q.Name && p.Type == q.Type && slices.Equal(p.ClusterIPs, q.ClusterIPs) &&
		p.Port == q.Port && p.Protocol == q.Protocol && p.TargetPort == q.TargetPort && p.NodePort == q.NodePort &&
		slices.Equal(p.ExternalIPs, q.ExternalIPs) && slices.Equal(p.LoadBalancerVIPs, q.LoadBalancerVIPs) &&
		slices.Equal(p.LoadBalancerSourceRanges, q.LoadBalancerSourceRanges) &&
		p.SessionAffinity == q.SessionAffinity && p.StickyMaxAgeSeconds == q.StickyMaxAgeSeconds &&
		p.ExternalPolicyLocal == q.ExternalPolicyLocal && p.InternalPolicyLocal == q.InternalPolicyLocal &&
		p.HealthCheckNodePort == q.HealthCheckNodePort && p.Scheduler == q.Scheduler
}

// Endpoint is one backend of a ServicePort.
type Endpoint struct {
	Addr     netip.Addr
	Port     int
	NodeName string
	Zone     string
	// Hints are the endpoint's topology hints; nil when it has none (as
	// most endpoints: one pointer rather than two slices, for the 100,000s
	// of endpoints a proxy holds).
	Hints *Hints
	// Weight is the pod's load-balancing weight (pod annotation
	// svcnet.io/weight, carried by the slice annotation
	// svcnet.io/endpoint-weights); 0 stands for the default 1, so that a
	// zero Endpoint is an ordinary one. Read it through EffectiveWeight.
	Weight int
	// Ready, Serving and Terminating are the EndpointSlice conditions with
	// Kubernetes' defaults applied (unset ready/serving mean true, unset
	// terminating means false).
	Ready       bool
	Serving     bool
	Terminating bool
	// IsLocal is true when NodeName is this proxy's node.
	IsLocal bool
	// Quiesced is true for weight 0: the endpoint takes no new
	// connections in any mode; established ones continue.
	Quiesced bool
	// (The booleans come last, together: 88 bytes, where they would cost
	// a word each between the other fields.)
}

// Hints are an endpoint's topology hints: the zones and the nodes that
// should prefer it.
type Hints struct{ Zones, Nodes []string }

// ZoneHints returns the zones that should prefer the endpoint.
func (e *Endpoint) ZoneHints() []string {
	if e.Hints == nil {
		return nil
	}
	return e.Hints.Zones
}

// NodeHints returns the nodes that should prefer the endpoint.
func (e *Endpoint) NodeHints() []string {
	if e.Hints == nil {
		return nil
	}
	return e.Hints.Nodes
}

// String returns "ip:port" ("[ip]:port" for IPv6), the form kube-proxy uses
// in DNAT targets, comments and endpoint chain hashes.
func (e *Endpoint) String() string {
	return netip.AddrPortFrom(e.Addr, uint16(e.Port)).String()
}

// IP returns the endpoint's address as a string.
func (e *Endpoint) IP() string { return e.Addr.String() }

// AddrPort returns the endpoint's address and port.
func (e *Endpoint) AddrPort() netip.AddrPort { return netip.AddrPortFrom(e.Addr, uint16(e.Port)) }

// ServicePortMap maps each ServicePortName to its port.
type ServicePortMap map[ServicePortName]*ServicePort

// EndpointsMap maps each ServicePortName to its endpoints, sorted by
// address then port, so that every mode and every sync sees the same order.
type EndpointsMap map[ServicePortName][]*Endpoint

// HealthCheckNodePorts returns the health-check node port of every Service
// that has one.
func (m ServicePortMap) HealthCheckNodePorts() map[types.NamespacedName]uint16 {
	out := map[types.NamespacedName]uint16{}
	for name, p := range m {
		if p.HealthCheckNodePort != 0 {
			out[name.NamespacedName] = uint16(p.HealthCheckNodePort)
		}
	}
	return out
}

// LocalReadyEndpoints counts, for each Service of services (those with a
// health check node port), the ready endpoints on this node (each address
// once, across ports), as the health-check server reports them. ports is
// the service tracker's index of each Service's ports, so the cost follows
// the Services with health checks, not every endpoint of the node's
// Services; without it, every port of m is looked at.
func (m EndpointsMap) LocalReadyEndpoints(services map[types.NamespacedName]uint16, ports PortIndex) map[types.NamespacedName]int {
	out := make(map[types.NamespacedName]int, len(services))
	count := func(nn types.NamespacedName, names []ServicePortName) {
		seen := map[netip.Addr]bool{}
		for _, name := range names {
			for _, ep := range m[name] {
				if ep.IsLocal && ep.Ready {
					seen[ep.Addr] = true
				}
			}
		}
		if len(seen) > 0 {
			out[nn] = len(seen)
		}
	}
	if ports != nil {
		for nn := range services {
			count(nn, ports[nn])
		}
		return out
	}
	byService := map[types.NamespacedName][]ServicePortName{}
	for name := range m {
		if _, ok := services[name.NamespacedName]; ok {
			byService[name.NamespacedName] = append(byService[name.NamespacedName], name)
		}
	}
	for nn, names := range byService {
		count(nn, names)
	}
	return out
}

// NewServicePorts converts a Service into its ports. Headless Services,
// ExternalName Services and Services without cluster IPs yield none. Invalid
// addresses in the spec are skipped (the apiserver validates them; this keeps
// a bad object from stopping the proxy).
func NewServicePorts(svc *v1.Service) []*ServicePort {
	if svc == nil || svc.Spec.Type == v1.ServiceTypeExternalName {
		return nil
	}
	if _, skip := svc.Labels[LabelServiceProxyName]; skip {
		return nil
	}
	var clusterIPs []netip.Addr
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			clusterIPs = append(clusterIPs, a.Unmap())
		}
	}
	if len(clusterIPs) == 0 {
		return nil // headless or not yet allocated
	}
	var extIPs, lbIPs []netip.Addr
	for _, s := range svc.Spec.ExternalIPs {
		if a, err := netip.ParseAddr(s); err == nil {
			extIPs = append(extIPs, a.Unmap())
		}
	}
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP == "" {
				continue
			}
			// ipMode Proxy means the load balancer delivers to the node
			// itself; kube-proxy then does not capture the VIP.
			if ing.IPMode != nil && *ing.IPMode == v1.LoadBalancerIPModeProxy {
				continue
			}
			if a, err := netip.ParseAddr(ing.IP); err == nil {
				lbIPs = append(lbIPs, a.Unmap())
			}
		}
	}
	var ranges []netip.Prefix
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		for _, s := range svc.Spec.LoadBalancerSourceRanges {
			if p, err := netip.ParsePrefix(trimSpace(s)); err == nil {
				ranges = append(ranges, p.Masked())
			}
		}
	}
	sticky := 0
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		sticky = int(v1.DefaultClientIPServiceAffinitySeconds)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			sticky = int(*c.ClientIP.TimeoutSeconds)
		}
	}
	var out []*ServicePort
	for _, sp := range svc.Spec.Ports {
		p := &ServicePort{
			Name: ServicePortName{
				NamespacedName: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name},
				Port:           sp.Name,
				Protocol:       sp.Protocol,
			},
			Type:                     svc.Spec.Type,
			ClusterIPs:               clusterIPs,
			Port:                     int(sp.Port),
			Protocol:                 sp.Protocol,
			TargetPort:               sp.TargetPort.String(),
			ExternalIPs:              extIPs,
			LoadBalancerVIPs:         lbIPs,
			LoadBalancerSourceRanges: ranges,
			SessionAffinity:          svc.Spec.SessionAffinity,
			StickyMaxAgeSeconds:      sticky,
			Scheduler:                svc.Annotations[AnnotationIPVSScheduler],
			Created:                  svc.CreationTimestamp.Time,
		}
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
			p.Name.Protocol = v1.ProtocolTCP
		}
		if svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			p.NodePort = int(sp.NodePort)
		}
		if p.SessionAffinity == "" {
			p.SessionAffinity = v1.ServiceAffinityNone
		}
		if svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal {
			p.InternalPolicyLocal = true
		}
		if p.ExternallyAccessible() && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
			p.ExternalPolicyLocal = true
			if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
				p.HealthCheckNodePort = int(svc.Spec.HealthCheckNodePort)
			}
		}
		out = append(out, p)
	}
	return out
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// FormatProbability formats 1/n the way kube-proxy writes statistic
// probabilities: "%0.10f" of 1/n (n=3 gives 0.3333333333; the seed's
// 0.33333333349 comes from iptables-save's float rendering of that value).
func FormatProbability(n int) string {
	return fmt.Sprintf("%0.10f", 1.0/float64(n))
}

// FormatWeightedProbability formats w/rest the same way: the chance a
// statistic rule takes an endpoint of weight w when the endpoints from it
// to the end of the chain weigh rest in total. With equal weights it is
// FormatProbability(n-i) byte for byte: w/(k*w) and 1/k are the same
// correctly rounded float64.
func FormatWeightedProbability(w, rest int) string {
	return fmt.Sprintf("%0.10f", float64(w)/float64(rest))
}
