package main

import (
	"fmt"
	"math/rand"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Scenario is one node's view of a cluster: the proxy's configuration and
// the Services and EndpointSlices it sees. Both proxies get exactly this.
type Scenario struct {
	ID       int
	NodeName string
	// Zone is the node's topology.kubernetes.io/zone label ("" = none).
	Zone string
	// Families are the IP families the node programs.
	Families []v1.IPFamily
	// NodeIPs are the node's addresses, the primary of each family first;
	// the fake network interface holds the same addresses.
	NodeIPs []netip.Addr
	// PodCIDRs is --cluster-cidr (one per family, "" = no local detection).
	PodCIDRs map[v1.IPFamily]string
	// ServiceCIDRs per family (nftables drops unallocated ClusterIPs).
	ServiceCIDRs      map[v1.IPFamily][]string
	MasqueradeAll     bool
	MasqueradeBit     int
	NodePortAddresses []string
	// NodePortFlag is how NodePortAddresses was written (keywords before
	// expansion), for the report.
	NodePortFlag []string
	Services     []*v1.Service
	Slices       []*discovery.EndpointSlice
}

func (sc *Scenario) podCIDR(f v1.IPFamily) string { return sc.PodCIDRs[f] }
func (sc *Scenario) serviceCIDRs(f v1.IPFamily) []string {
	return sc.ServiceCIDRs[f]
}

func (sc *Scenario) primaryIP(f v1.IPFamily) netip.Addr {
	for _, a := range sc.NodeIPs {
		if a.Is6() == (f == v1.IPv6Protocol) {
			return a
		}
	}
	return netip.Addr{}
}

func (sc *Scenario) nodeLabels() map[string]string {
	l := map[string]string{"kubernetes.io/hostname": sc.NodeName}
	if sc.Zone != "" {
		l[v1.LabelTopologyZone] = sc.Zone
	}
	return l
}

// gen draws scenarios from one seed; scenario i of a seed is always the same.
type gen struct {
	r  *rand.Rand
	sc *Scenario
	// per-scenario counters for unique addresses and ports
	nextIP, nextNodePort, nextHC, nextEP int
}

var (
	localNode  = "node-a"
	otherNodes = []string{"node-b", "node-c"}
	zoneOf     = map[string]string{"node-a": "zone-a", "node-b": "zone-b", "node-c": "zone-a"}
)

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }
func (g *gen) pick(n int) int        { return g.r.Intn(n) }

func pickS[T any](g *gen, xs ...T) T { return xs[g.pick(len(xs))] }

// Generate returns scenario id of seed.
func Generate(seed int64, id int) *Scenario {
	g := &gen{r: rand.New(rand.NewSource(seed*1_000_003 + int64(id)))}
	sc := &Scenario{ID: id, NodeName: localNode, PodCIDRs: map[v1.IPFamily]string{}, ServiceCIDRs: map[v1.IPFamily][]string{}, MasqueradeBit: 14}
	g.sc = sc
	if g.chance(0.8) {
		sc.Zone = zoneOf[localNode]
	}
	switch g.pick(4) {
	case 0:
		sc.Families = []v1.IPFamily{v1.IPv6Protocol}
	case 1:
		sc.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	default:
		sc.Families = []v1.IPFamily{v1.IPv4Protocol}
	}
	sc.NodeIPs = []netip.Addr{netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("fd00:192::2")}
	if g.chance(0.3) {
		sc.NodeIPs = append(sc.NodeIPs, netip.MustParseAddr("192.168.0.3"), netip.MustParseAddr("fd00:192::3"))
	}
	if g.chance(0.85) {
		sc.PodCIDRs[v1.IPv4Protocol] = "10.0.0.0/8"
		sc.PodCIDRs[v1.IPv6Protocol] = "fd00:10::/64"
	}
	if g.chance(0.85) {
		sc.ServiceCIDRs[v1.IPv4Protocol] = []string{"172.30.0.0/16"}
		sc.ServiceCIDRs[v1.IPv6Protocol] = []string{"fd00:172:30::/112"}
		if g.chance(0.2) {
			sc.ServiceCIDRs[v1.IPv4Protocol] = append(sc.ServiceCIDRs[v1.IPv4Protocol], "172.31.0.0/16")
			sc.ServiceCIDRs[v1.IPv6Protocol] = append(sc.ServiceCIDRs[v1.IPv6Protocol], "fd00:172:31::/112")
		}
	}
	sc.MasqueradeAll = g.chance(0.15)
	if g.chance(0.1) {
		sc.MasqueradeBit = pickS(g, 0, 5, 15, 31)
	}
	g.nodePortAddresses()
	nsvc := 1 + g.pick(4)
	for i := 0; i < nsvc; i++ {
		g.service(i)
	}
	return sc
}

// nodePortAddresses draws --nodeport-addresses, with kube-proxy 1.37's
// keywords (primary, localhost, all) expanded as kube-proxy's server does.
func (g *gen) nodePortAddresses() {
	sc := g.sc
	choices := [][]string{
		nil, nil, nil,
		{"primary"},
		{"primary"},
		{"192.168.0.0/24"},
		{"192.168.0.0/24", "127.0.0.0/8"},
		{"192.168.0.2/32", "fd00:192::2/128"},
		{"192.168.0.3/32", "fd00:192::/64"},
		{"0.0.0.0/0"},
		{"::/0", "192.168.0.0/24"},
		{"127.0.0.1/32"},
		{"10.99.0.0/16"},
		{"localhost"},
		{"primary", "localhost"},
		{"all"},
		{"fd00:192::/64"},
	}
	sc.NodePortFlag = pickS(g, choices...)
	for _, s := range sc.NodePortFlag {
		switch s {
		case "primary":
			// The node IP of each family (never loopback here).
			sc.NodePortAddresses = append(sc.NodePortAddresses, sc.NodeIPs[0].String()+"/32", sc.NodeIPs[1].String()+"/128")
		case "localhost":
			sc.NodePortAddresses = append(sc.NodePortAddresses, "127.0.0.0/8", "::1/128")
		case "all":
			sc.NodePortAddresses = append(sc.NodePortAddresses, "0.0.0.0/0", "::/0")
		default:
			sc.NodePortAddresses = append(sc.NodePortAddresses, s)
		}
	}
}

func (g *gen) ip(fam v1.IPFamily, v4, v6 string) string {
	g.nextIP++
	if fam == v1.IPv6Protocol {
		return fmt.Sprintf(v6, g.nextIP)
	}
	return fmt.Sprintf(v4, g.nextIP)
}

func (g *gen) service(i int) {
	sc := g.sc
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: pickS(g, "default", "ns1"), Name: fmt.Sprintf("svc%d", i)}}
	s := &svc.Spec
	// Families of the Service.
	switch g.pick(5) {
	case 0:
		s.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	case 1:
		s.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	case 2:
		s.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
	default:
		s.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
	}
	if len(s.IPFamilies) == 2 {
		s.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	} else {
		s.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicySingleStack)
	}
	headless := g.chance(0.04)
	for _, f := range s.IPFamilies {
		if headless {
			break
		}
		s.ClusterIPs = append(s.ClusterIPs, g.ip(f, "172.30.1.%d", "fd00:172:30::1:%x"))
	}
	if headless {
		s.ClusterIPs = []string{v1.ClusterIPNone}
	}
	s.ClusterIP = s.ClusterIPs[0]
	s.Type = v1.ServiceTypeClusterIP
	if !headless {
		s.Type = pickS(g, v1.ServiceTypeClusterIP, v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer, v1.ServiceTypeLoadBalancer)
	}
	// Ports.
	np := 1
	if g.chance(0.35) {
		np = 2 + g.pick(2)
	}
	for j := 0; j < np; j++ {
		p := v1.ServicePort{Protocol: pickS(g, v1.ProtocolTCP, v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP),
			Port: int32(pickS(g, 80, 443, 53, 8080) + j*1000), TargetPort: intstr.FromInt32(int32(8000 + j))}
		if np > 1 || g.chance(0.3) {
			p.Name = fmt.Sprintf("p%d", j)
		}
		if s.Type != v1.ServiceTypeClusterIP {
			g.nextNodePort++
			p.NodePort = int32(30000 + g.nextNodePort)
		}
		s.Ports = append(s.Ports, p)
	}
	external := s.Type != v1.ServiceTypeClusterIP
	if !headless && g.chance(0.2) {
		for _, f := range s.IPFamilies {
			ip := g.ip(f, "203.0.113.%d", "2001:db8::%x")
			// Now and then the node's own address (IPVS mode binds no
			// local address to kube-ipvs0); drawn from the id, so the
			// random sequence stays what it was.
			if i == 0 && sc.ID%11 == 3 {
				ip = sc.primaryIP(f).String()
			}
			s.ExternalIPs = append(s.ExternalIPs, ip)
		}
		external = true
	}
	if s.Type == v1.ServiceTypeLoadBalancer && g.chance(0.85) {
		for _, f := range s.IPFamilies {
			ing := v1.LoadBalancerIngress{IP: g.ip(f, "198.51.100.%d", "2001:db8:1::%x")}
			switch g.pick(6) {
			case 0:
				ing.IPMode = ptr.To(v1.LoadBalancerIPModeProxy)
			case 1:
				ing.IPMode = ptr.To(v1.LoadBalancerIPModeVIP)
			}
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, ing)
			if g.chance(0.15) {
				svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{Hostname: "lb.example.com"})
			}
		}
		if g.chance(0.4) {
			n := 1 + g.pick(3)
			for k := 0; k < n; k++ {
				s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, pickS(g,
					"203.0.113.0/25", "192.168.0.0/24", "192.168.0.2/32", "10.0.0.0/8", "0.0.0.0/0",
					"2001:db8::/64", "fd00:192::/64", "fd00:192::2/128", "198.51.100.0/24"))
			}
		}
	}
	if external && (s.Type != v1.ServiceTypeClusterIP || g.chance(0.5)) && g.chance(0.4) {
		s.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		if s.Type == v1.ServiceTypeLoadBalancer && g.chance(0.8) {
			g.nextHC++
			s.HealthCheckNodePort = int32(32000 + g.nextHC)
		}
	} else if external {
		s.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	}
	if g.chance(0.25) {
		s.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	} else {
		s.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyCluster)
	}
	s.SessionAffinity = v1.ServiceAffinityNone
	if g.chance(0.25) {
		s.SessionAffinity = v1.ServiceAffinityClientIP
		s.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(pickS[int32](g, 10800, 60, 1))}}
	}
	td := ""
	if g.chance(0.4) {
		td = pickS(g, v1.ServiceTrafficDistributionPreferClose, v1.ServiceTrafficDistributionPreferSameZone, v1.ServiceTrafficDistributionPreferSameNode)
		s.TrafficDistribution = ptr.To(td)
	}
	sc.Services = append(sc.Services, svc)
	if headless || g.chance(0.08) {
		return // no endpoints at all
	}
	for _, f := range s.IPFamilies {
		g.slices(svc, f, td)
	}
}

// slices writes the Service's EndpointSlices of one family: 1 or 2
// slices, endpoints on this and other nodes with every combination of
// conditions, and hints as the EndpointSlice controller writes them for
// trafficDistribution (sometimes partial, sometimes for other nodes).
func (g *gen) slices(svc *v1.Service, fam v1.IPFamily, td string) {
	at := discovery.AddressTypeIPv4
	if fam == v1.IPv6Protocol {
		at = discovery.AddressTypeIPv6
	}
	var ports []discovery.EndpointPort
	for j, p := range svc.Spec.Ports {
		if len(svc.Spec.Ports) > 1 && g.chance(0.1) {
			continue // a port no endpoint serves
		}
		port := p.TargetPort.IntVal
		if g.chance(0.1) {
			port = int32(9000 + j)
		}
		ports = append(ports, discovery.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(port)})
	}
	nslices := 1
	if g.chance(0.2) {
		nslices = 2
	}
	hintMode := ""
	switch td {
	case v1.ServiceTrafficDistributionPreferSameNode:
		hintMode = pickS(g, "node", "node", "node", "partial", "none")
	case v1.ServiceTrafficDistributionPreferSameZone, v1.ServiceTrafficDistributionPreferClose:
		hintMode = pickS(g, "zone", "zone", "zone", "partial", "none")
	default:
		if g.chance(0.1) {
			hintMode = pickS(g, "zone", "node", "partial")
		}
	}
	for k := 0; k < nslices; k++ {
		sl := &discovery.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: fmt.Sprintf("%s-%s-%d", svc.Name, string(at), k),
				Labels: map[string]string{discovery.LabelServiceName: svc.Name}},
			AddressType: at, Ports: ports,
		}
		n := g.pick(5)
		if k == 0 && n == 0 && g.chance(0.5) {
			n = 1
		}
		for e := 0; e < n; e++ {
			g.nextEP++
			var addr string
			if k == 0 && e == 0 && g.chance(0.05) {
				// A host-network endpoint on this node's address. (The
				// same address in two slices is left out: kube-proxy then
				// keeps whichever slice its map iteration visits last.)
				addr = g.sc.primaryIP(fam).String()
			} else if fam == v1.IPv6Protocol {
				addr = fmt.Sprintf("fd00:10::%x", 0x100+g.nextEP)
			} else {
				addr = fmt.Sprintf("10.180.0.%d", g.nextEP)
			}
			ep := discovery.Endpoint{Addresses: []string{addr}}
			node := localNode
			if g.chance(0.6) {
				node = pickS(g, otherNodes...)
			}
			if !g.chance(0.05) {
				ep.NodeName = ptr.To(node)
				ep.Zone = ptr.To(zoneOf[node])
			}
			switch g.pick(8) {
			case 0: // terminating, still serving
				ep.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
			case 1: // terminating, not serving
				ep.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}
			case 2: // not ready
				ep.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)}
			case 3: // conditions unset (ready)
			default:
				ep.Conditions = discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
			}
			g.hints(&ep, node, hintMode)
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		g.sc.Slices = append(g.sc.Slices, sl)
	}
}

func (g *gen) hints(ep *discovery.Endpoint, node, mode string) {
	switch mode {
	case "node":
		ep.Hints = &discovery.EndpointHints{ForNodes: []discovery.ForNode{{Name: node}}}
		if g.chance(0.1) {
			ep.Hints.ForNodes = []discovery.ForNode{{Name: pickS(g, otherNodes...)}}
		}
		if g.chance(0.3) {
			ep.Hints.ForZones = []discovery.ForZone{{Name: zoneOf[node]}}
		}
	case "zone":
		ep.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zoneOf[node]}}}
		if g.chance(0.1) {
			ep.Hints.ForZones = append(ep.Hints.ForZones, discovery.ForZone{Name: "zone-b"})
		}
	case "partial":
		if g.chance(0.5) {
			ep.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zoneOf[node]}}}
			if g.chance(0.5) {
				ep.Hints.ForNodes = []discovery.ForNode{{Name: node}}
			}
		}
	}
}

// features names what a scenario exercises, for the coverage line of the
// report (so a generator change that stops producing something shows).
func (sc *Scenario) features() []string {
	f := map[string]bool{}
	if len(sc.Families) == 2 {
		f["dual-stack node"] = true
	}
	if sc.Zone != "" {
		f["node zone"] = true
	}
	if len(sc.NodePortFlag) > 0 {
		f["--nodeport-addresses"] = true
	}
	for _, k := range sc.NodePortFlag {
		if k == "primary" || k == "localhost" || k == "all" {
			f["--nodeport-addresses "+k] = true
		}
	}
	if sc.MasqueradeAll {
		f["masquerade-all"] = true
	}
	if sc.PodCIDRs[v1.IPv4Protocol] == "" {
		f["no local detection"] = true
	}
	for _, s := range sc.Services {
		sp := s.Spec
		f["type "+string(sp.Type)] = true
		if sp.ClusterIP == v1.ClusterIPNone {
			f["headless"] = true
		}
		if len(sp.IPFamilies) == 2 {
			f["dual-stack Service"] = true
		}
		if len(sp.Ports) > 1 {
			f["multiple ports"] = true
		}
		if len(sp.ExternalIPs) > 0 {
			f["externalIPs"] = true
		}
		for _, ip := range sp.ExternalIPs {
			if a, err := netip.ParseAddr(ip); err == nil && slices.Contains(sc.NodeIPs, a) {
				f["externalIP is a node address"] = true
			}
		}
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			f["LB ingress IP"] = true
		}
		for _, ing := range s.Status.LoadBalancer.Ingress {
			if ing.IPMode != nil && *ing.IPMode == v1.LoadBalancerIPModeProxy {
				f["LB ipMode Proxy"] = true
			}
		}
		if len(sp.LoadBalancerSourceRanges) > 0 {
			f["loadBalancerSourceRanges"] = true
		}
		if sp.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
			f["externalTrafficPolicy Local"] = true
		}
		if sp.InternalTrafficPolicy != nil && *sp.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal {
			f["internalTrafficPolicy Local"] = true
		}
		if sp.SessionAffinity == v1.ServiceAffinityClientIP {
			f["ClientIP affinity"] = true
		}
		if sp.TrafficDistribution != nil {
			f["trafficDistribution "+*sp.TrafficDistribution] = true
		}
	}
	bySvc := map[string]bool{}
	for _, sl := range sc.Slices {
		bySvc[sl.Namespace+"/"+sl.Labels[discovery.LabelServiceName]] = true
		for _, e := range sl.Endpoints {
			c := e.Conditions
			if c.Terminating != nil && *c.Terminating && c.Serving != nil && *c.Serving {
				f["serving terminating endpoint"] = true
			}
			if e.Hints != nil && len(e.Hints.ForNodes) > 0 {
				f["node hints"] = true
			}
			if e.Hints != nil && len(e.Hints.ForZones) > 0 {
				f["zone hints"] = true
			}
		}
	}
	for _, s := range sc.Services {
		if !bySvc[s.Namespace+"/"+s.Name] {
			f["Service without endpoints"] = true
		}
	}
	out := make([]string, 0, len(f))
	for k := range f {
		out = append(out, k)
	}
	return out
}
