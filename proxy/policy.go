package proxy

import (
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/proxy/lb"
)

// This file is the one place where Service semantics are decided. Every
// data-plane mode (iptables, nftables, ipvs, userspace) asks for the
// PortPolicy of each ServicePort and family and only translates it into its
// own kernel language; no mode chooses endpoints, verdicts or firewall
// exceptions itself.

// Traffic is what happens to new connections of one kind (internal: to a
// ClusterIP; external: to a NodePort, externalIP or LoadBalancer IP) that
// come from outside the node or cluster and are not short-circuited.
type Traffic struct {
	// Verdict is VerdictAccept (balance over Endpoints), VerdictDrop (the
	// policy is Local and this node has no usable endpoint while others
	// do) or VerdictReject (the Service has no usable endpoint at all).
	Verdict string
	// Local is true when the traffic policy is Local (Endpoints are then
	// PortPolicy.Local), false for Cluster (PortPolicy.Cluster).
	Local bool
	// Endpoints are the endpoints new connections may go to; empty unless
	// Verdict is VerdictAccept.
	Endpoints []*Endpoint
}

// PortPolicy is everything a data plane needs to program one ServicePort in
// one IP family on this node. It is computed by NewPortPolicy (and cached by
// PolicyCache) and must not be modified.
type PortPolicy struct {
	// Port is the ServicePort restricted to the family (see
	// ServicePort.ForFamily).
	Port *ServicePort
	// Topology is the topology mode applied to cluster traffic:
	// "PreferSameNode" (node hints), "PreferSameZone" (zone hints, also
	// PreferClose) or "" when hints are absent or ignored.
	Topology string
	// Cluster are the endpoints for cluster-wide traffic, after topology
	// and the terminating fallback; nil when the port never uses them
	// (internalTrafficPolicy Local and not externally reachable).
	Cluster []*Endpoint
	// Local are the endpoints on this node (ready ones, or failing that
	// serving-and-terminating ones); nil when the port never uses them.
	Local []*Endpoint
	// Reachable is every endpoint in Cluster or Local, each once: the
	// endpoints a data plane must be able to send to.
	Reachable []*Endpoint
	// HasEndpoints is true when the Service has a usable endpoint anywhere
	// in the cluster (then traffic without a local endpoint is dropped, not
	// rejected).
	HasEndpoints bool
	// UsesCluster and UsesLocal say whether a cluster-wide or a node-local
	// endpoint choice must be programmed (kube-proxy's cluster and local
	// policy chains).
	UsesCluster, UsesLocal bool
	// Internal is ClusterIP traffic; External is NodePort, externalIP and
	// LoadBalancer traffic from outside the node. Pods and the node itself
	// reaching an external address of a Service with externalTrafficPolicy
	// Local are short-circuited to Cluster (ShortCircuitLocalOrigin).
	Internal, External Traffic
	// Externally is true when the port has a NodePort, externalIPs or
	// LoadBalancer IPs and at least one usable endpoint: then an external
	// entry point (kube-proxy's external chain) is programmed.
	Externally bool
	// MasqueradeExternal is true when every external connection is source
	// NATed (externalTrafficPolicy Cluster). Under Local only traffic that
	// originates on this node is masqueraded, and pod and node traffic is
	// short-circuited to Cluster (ShortCircuitLocalOrigin).
	MasqueradeExternal      bool
	ShortCircuitLocalOrigin bool
	// Firewall is true when LoadBalancer IPs are restricted by
	// loadBalancerSourceRanges (of this family); SourceRanges
	// are the ranges of this family, and FirewallAllowsNode is true when a
	// range contains this node's primary address of the family: then
	// connections whose source is a LoadBalancer IP itself (the node
	// reaching a VIP it holds locally) pass too. As in kube-proxy, only the
	// primary node IP is checked, in every mode.
	Firewall           bool
	SourceRanges       []netip.Prefix
	FirewallAllowsNode bool
	// Affinity is the ClientIP session affinity timeout, 0 without
	// affinity.
	Affinity time.Duration
}

// PolicyNode is what the policy needs to know about this node.
type PolicyNode struct {
	Name   string
	Labels map[string]string
	// IP is the node's primary address of the family (may be invalid).
	IP netip.Addr
}

// PolicyNodeFor returns the PolicyNode of node for one family: the first of
// its addresses of that family is the primary one.
func PolicyNodeFor(node NodeInfo, ipv6 bool) PolicyNode {
	n := PolicyNode{Name: node.Name, Labels: node.Labels}
	for _, ip := range node.IPs {
		if ip.Is6() == ipv6 {
			n.IP = ip
			break
		}
	}
	return n
}

// EffectiveWeight is an endpoint's weight as every mode uses it: 0 when it
// is quiesced, else its Weight capped to lb's maximum (65535), with 0 and
// negative values standing for the default 1.
func EffectiveWeight(ep *Endpoint) int {
	switch {
	case ep.Quiesced:
		return 0
	case ep.Weight <= 0:
		return 1
	case ep.Weight > 65535:
		return 65535
	}
	return ep.Weight
}

// ModeSchedulers is what one mode can balance with; see NewBalance.
type ModeSchedulers struct {
	// Default is the mode's algorithm when a Service asks for none, and
	// its fallback when it asks for one the mode cannot program: lb.Random
	// for iptables and nftables (kube-proxy's choice; --ipvs-scheduler
	// does not apply to them, as in kube-proxy), --ipvs-scheduler for ipvs
	// and userspace. Lower case; a Default the mode does not support is
	// replaced by lb.DefaultScheduler (rr).
	Default string
	// Supported reports whether the mode can program a scheduler, given
	// by its canonical name (lb.Canonical).
	Supported func(name string) bool
}

// Balance is how one ServicePort's new connections are spread over its
// endpoints in one mode. It is decided by NewBalance, the one place where
// the scheduler annotation, the mode's default and its abilities meet;
// every mode programs Scheduler and asks Weight for each endpoint.
type Balance struct {
	// Requested is the Service's service.kubernetes.io/ipvs-scheduler
	// annotation as written ("" when unset).
	Requested string
	// Scheduler is the algorithm the mode uses (canonical name).
	Scheduler string
	// Fallback is "" when the mode honours Requested (or nothing was
	// requested); else ReasonUnknownScheduler (a name no mode knows) or
	// ReasonUnsupportedScheduler (an algorithm this mode cannot program),
	// and Scheduler is the mode's Default.
	Fallback string
	// Weighted is true when Scheduler balances by endpoint weight
	// (lb.UsesWeights): then Weight is the pod's weight, else 1.
	Weighted bool
}

// NewBalance decides the Balance of sp in a mode that can do m.
func NewBalance(sp *ServicePort, m ModeSchedulers) Balance {
	supported := func(name string) bool { return m.Supported != nil && m.Supported(name) }
	def := lb.Canonical(m.Default)
	if !supported(def) {
		def = lb.DefaultScheduler
	}
	b := Balance{Requested: sp.Scheduler, Scheduler: def}
	if req := lb.Canonical(sp.Scheduler); req != "" {
		switch {
		case supported(req):
			b.Scheduler = req
		case lb.Known(req):
			b.Fallback = ReasonUnsupportedScheduler
		default:
			b.Fallback = ReasonUnknownScheduler
		}
	}
	b.Weighted = lb.UsesWeights(b.Scheduler)
	return b
}

// Weight is ep's weight under b: EffectiveWeight when the scheduler
// balances by weight, else 1. (Quiesced endpoints, weight 0, never reach
// a mode: NewPortPolicy leaves them out.)
func (b Balance) Weight(ep *Endpoint) int {
	if !b.Weighted {
		return 1
	}
	return EffectiveWeight(ep)
}

// NewPortPolicy computes the policy of svc (any family; it is restricted to
// ipv6's) over eps (endpoints of every family, sorted as in EndpointsMap).
// It returns nil when the Service has no cluster IP of the family.
//
// Endpoint choice follows kube-proxy 1.37's CategorizeEndpoints with its
// topology rules (see categorize). Quiesced endpoints (weight 0) are left
// out before anything is chosen, so they get no new connections in any
// mode (connections already established keep their conntrack or IPVS
// entries); a Service whose endpoints are all quiesced is treated as having
// none.
func NewPortPolicy(svc *ServicePort, eps []*Endpoint, node PolicyNode, ipv6 bool) *PortPolicy {
	sp, ok := svc.ForFamily(ipv6)
	if !ok {
		return nil
	}
	fam := filterEndpoints(eps, func(ep *Endpoint) bool { return ep.Addr.Is6() == ipv6 && EffectiveWeight(ep) > 0 })
	p := &PortPolicy{Port: sp}
	p.Topology, p.Cluster, p.Local, p.Reachable, p.HasEndpoints = categorize(fam, sp, node.Name, node.Labels)
	p.UsesCluster = len(p.Cluster) > 0 && sp.UsesClusterEndpoints()
	p.UsesLocal = len(p.Local) > 0 && sp.UsesLocalEndpoints()
	p.Internal = traffic(sp.InternalPolicyLocal, p)
	p.External = traffic(sp.ExternalPolicyLocal, p)
	p.Externally = p.HasEndpoints && sp.ExternallyAccessible()
	p.MasqueradeExternal = !sp.ExternalPolicyLocal
	p.ShortCircuitLocalOrigin = sp.ExternalPolicyLocal
	if len(sp.LoadBalancerVIPs) > 0 && len(sp.LoadBalancerSourceRanges) > 0 {
		p.Firewall = true
		p.SourceRanges = sp.LoadBalancerSourceRanges
		for _, r := range p.SourceRanges {
			if node.IP.IsValid() && r.Contains(node.IP) {
				p.FirewallAllowsNode = true
			}
		}
	}
	if sp.SessionAffinity == v1.ServiceAffinityClientIP {
		p.Affinity = time.Duration(sp.StickyMaxAgeSeconds) * time.Second
	}
	return p
}

func traffic(local bool, p *PortPolicy) Traffic {
	t := Traffic{Local: local, Verdict: VerdictAccept, Endpoints: p.Cluster}
	if local {
		t.Endpoints = p.Local
	}
	switch {
	case !p.HasEndpoints:
		t.Verdict, t.Endpoints = VerdictReject, nil
	case len(t.Endpoints) == 0:
		t.Verdict, t.Endpoints = VerdictDrop, nil
	}
	return t
}

// policyKey names one ServicePort in one family.
type policyKey struct {
	name ServicePortName
	ipv6 bool
}

// PolicyCache holds the PortPolicies of a ServicePortMap. The Proxier keeps
// one across syncs and recomputes only the Services that changed (or all of
// them when this node's facts changed); modes read it through
// SyncRequest.Policy.
type PolicyCache struct {
	node     NodeInfo
	policies map[policyKey]*PortPolicy
}

// NewPolicyCache returns an empty cache.
func NewPolicyCache() *PolicyCache { return &PolicyCache{policies: map[policyKey]*PortPolicy{}} }

func sameNodeFacts(a, b NodeInfo) bool {
	if a.Name != b.Name || len(a.IPs) != len(b.IPs) || len(a.Labels) != len(b.Labels) {
		return false
	}
	for i := range a.IPs {
		if a.IPs[i] != b.IPs[i] {
			return false
		}
	}
	for k, v := range a.Labels {
		if w, ok := b.Labels[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// UpdatePorts drops the cached policies of the ports of the changed
// Services (ports, as SyncRequest.ChangedPorts returns them) and of the
// ports that were removed (ServiceUpdateResult.Deleted), or all of them when
// node differs from the last call, so they are computed anew on their next
// Get. Its cost follows the change.
func (c *PolicyCache) UpdatePorts(node NodeInfo, ports map[types.NamespacedName][]ServicePortName, deleted []*ServicePort) {
	if !sameNodeFacts(c.node, node) {
		clear(c.policies)
		c.node = node
		return
	}
	drop := func(n ServicePortName) {
		delete(c.policies, policyKey{n, false})
		delete(c.policies, policyKey{n, true})
	}
	for _, ps := range ports {
		for _, n := range ps {
			drop(n)
		}
	}
	for _, sp := range deleted {
		drop(sp.Name)
	}
}

// Get returns the policy of name in one family, computing it if needed;
// nil when the Service has no cluster IP of the family.
func (c *PolicyCache) Get(name ServicePortName, ipv6 bool, svcs ServicePortMap, eps EndpointsMap) *PortPolicy {
	k := policyKey{name, ipv6}
	if p, ok := c.policies[k]; ok {
		return p
	}
	svc, ok := svcs[name]
	if !ok {
		return nil
	}
	p := NewPortPolicy(svc, eps[name], PolicyNodeFor(c.node, ipv6), ipv6)
	c.policies[k] = p
	return p
}

// Policy returns the policy of one ServicePort of req in one family (nil
// when it has no cluster IP of that family). Requests built by the Proxier
// share its cache; for others (tests, callers that reuse and modify one
// request) the policy is computed on every call, so it always follows the
// request's current maps.
func (r *SyncRequest) Policy(name ServicePortName, ipv6 bool) *PortPolicy {
	if r.policies != nil {
		return r.policies.Get(name, ipv6, r.Services, r.Endpoints)
	}
	svc, ok := r.Services[name]
	if !ok {
		return nil
	}
	return NewPortPolicy(svc, r.Endpoints[name], PolicyNodeFor(r.Node, ipv6), ipv6)
}

// UsePolicyCache makes r read its policies through c, as the requests the
// Proxier builds do (benchmarks and tests of modes use it to share
// policies across syncs the way the core does; call c.Update with the
// changed Services before each sync).
func (r *SyncRequest) UsePolicyCache(c *PolicyCache) { r.policies = c }
