package ipvs

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/proxy"
)

// Set names and comments, as kube-proxy's IPVS mode names them. IPv6 sets
// are named with "KUBE-6-" instead of "KUBE-" (SetName).
const (
	SetLoopBack             = "KUBE-LOOP-BACK"
	SetClusterIP            = "KUBE-CLUSTER-IP"
	SetExternalIP           = "KUBE-EXTERNAL-IP"
	SetExternalIPLocal      = "KUBE-EXTERNAL-IP-LOCAL"
	SetLoadBalancer         = "KUBE-LOAD-BALANCER"
	SetLoadBalancerFW       = "KUBE-LOAD-BALANCER-FW"
	SetLoadBalancerLocal    = "KUBE-LOAD-BALANCER-LOCAL"
	SetLoadBalancerSourceIP = "KUBE-LOAD-BALANCER-SOURCE-IP"
	SetLoadBalancerSrcCIDR  = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	SetNodePortTCP          = "KUBE-NODE-PORT-TCP"
	SetNodePortLocalTCP     = "KUBE-NODE-PORT-LOCAL-TCP"
	SetNodePortUDP          = "KUBE-NODE-PORT-UDP"
	SetNodePortLocalUDP     = "KUBE-NODE-PORT-LOCAL-UDP"
	SetNodePortSCTP         = "KUBE-NODE-PORT-SCTP-HASH"
	SetNodePortLocalSCTP    = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	SetHealthCheckNodePort  = "KUBE-HEALTH-CHECK-NODE-PORT"
	SetIPVSIPs              = "KUBE-IPVS-IPS"
)

// Chain names IPVS mode keeps.
const (
	chainServices          = "KUBE-SERVICES"
	chainPostrouting       = "KUBE-POSTROUTING"
	chainNodePort          = "KUBE-NODE-PORT"
	chainLoadBalancer      = "KUBE-LOAD-BALANCER"
	chainMarkMasq          = "KUBE-MARK-MASQ"
	chainForward           = "KUBE-FORWARD"
	chainProxyFirewall     = "KUBE-PROXY-FIREWALL"
	chainSourceRangesFW    = "KUBE-SOURCE-RANGES-FIREWALL"
	chainIPVSFilter        = "KUBE-IPVS-FILTER"
	chainIPVSOutFilter     = "KUBE-IPVS-OUT-FILTER"
	defaultInterface       = "kube-ipvs0"
	persistenceDefaultSecs = 10800
)

// SetInfo describes one ipset: its type and kube-proxy's comment.
type SetInfo struct {
	Name    string
	Type    string
	Comment string
}

// Sets lists every ipset of the mode in kube-proxy's order.
var Sets = []SetInfo{
	{SetLoopBack, "hash:ip,port,ip", "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
	{SetClusterIP, "hash:ip,port", "Kubernetes service cluster ip + port for masquerade purpose"},
	{SetExternalIP, "hash:ip,port", "Kubernetes service external ip + port for masquerade and filter purpose"},
	{SetExternalIPLocal, "hash:ip,port", "Kubernetes service external ip + port with externalTrafficPolicy=local"},
	{SetLoadBalancer, "hash:ip,port", "Kubernetes service lb portal"},
	{SetLoadBalancerFW, "hash:ip,port", "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
	{SetLoadBalancerLocal, "hash:ip,port", "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
	{SetLoadBalancerSourceIP, "hash:ip,port,ip", "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
	{SetLoadBalancerSrcCIDR, "hash:ip,port,net", "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
	{SetNodePortTCP, "bitmap:port", "Kubernetes nodeport TCP port for masquerade purpose"},
	{SetNodePortLocalTCP, "bitmap:port", "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
	{SetNodePortUDP, "bitmap:port", "Kubernetes nodeport UDP port for masquerade purpose"},
	{SetNodePortLocalUDP, "bitmap:port", "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
	{SetNodePortSCTP, "hash:ip,port", "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
	{SetNodePortLocalSCTP, "hash:ip,port", "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
	{SetHealthCheckNodePort, "bitmap:port", "Kubernetes health check node port"},
	{SetIPVSIPs, "hash:ip", "Addresses on the ipvs interface"},
}

// SetName returns the kernel name of set for a family: IPv6 sets replace
// the "KUBE-" prefix with "KUBE-6-" and are cut to ipset's 31 characters.
func SetName(set string, ipv6 bool) string {
	if !ipv6 {
		return set
	}
	n := strings.Replace(set, "KUBE-", "KUBE-6-", 1)
	if len(n) > 31 {
		n = n[:31]
	}
	return n
}

// Schedulers are the IPVS schedulers a Service may ask for (the kernel's
// ip_vs_* scheduler modules).
var Schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos"}

// ModeSchedulers is what ipvs mode can balance with: every IPVS scheduler,
// def (--ipvs-scheduler) by default. The choice, and whether the
// endpoints' weights count, is proxy.NewBalance's.
func ModeSchedulers(def string) proxy.ModeSchedulers {
	return proxy.ModeSchedulers{Default: def, Supported: func(name string) bool { return slices.Contains(Schedulers, name) }}
}

// PlanConfig is what BuildPlan needs besides Services and endpoints. One
// plan covers one IP family.
type PlanConfig struct {
	IPv6 bool
	// Scheduler is --ipvs-scheduler.
	Scheduler     string
	MasqueradeAll bool
	// MasqueradeMark is the fwmark in kube-proxy's "%#08x" form
	// ("0x00004000").
	MasqueradeMark string
	// ClusterCIDR is the pod CIDR of this family for local-traffic
	// detection; the zero Prefix means no detection.
	ClusterCIDR netip.Prefix
	// NodePortAddrs are this node's addresses that accept NodePort
	// traffic (one virtual server each per NodePort). With none, NodePorts
	// and their health-check ports are left out, as kube-proxy does.
	NodePortAddrs []netip.Addr
	// LocalAddrs are the addresses on this node's links other than
	// kube-ipvs0: an externalIP or LoadBalancer IP among them is not bound
	// to kube-ipvs0 (it is local already).
	LocalAddrs []netip.Addr
	// NodeIPs are this node's addresses (for loadBalancerSourceRanges
	// that include the node itself).
	NodeIPs    []netip.Addr
	NodeName   string
	NodeLabels map[string]string
	// Policy, when set, returns the core's policy of a port (the
	// Proxier's cache); when nil, BuildPlan computes it from the node
	// fields above (the first of NodeIPs is the primary address).
	Policy func(name proxy.ServicePortName, ipv6 bool) *proxy.PortPolicy
}

// PlannedService is one desired virtual server with its real servers.
type PlannedService struct {
	Name  proxy.ServicePortName
	VS    VirtualServer
	Dests []RealServer
	// nodePort: the virtual server is a NodePort's on a node address,
	// which yields to another port's externalIP or LoadBalancer IP on the
	// same address and port (as the iptables and nftables modes match
	// those first).
	nodePort bool
}

// SchedulerFallback records a Service whose scheduler annotation was not
// an IPVS scheduler.
type SchedulerFallback struct {
	Service   proxy.ServicePortName
	Requested string
	Used      string
	// Reason is proxy.ReasonUnknownScheduler, or
	// proxy.ReasonUnsupportedScheduler for an algorithm svcnet knows that
	// IPVS has not (random).
	Reason string
}

// Plan is the desired state of one family.
type Plan struct {
	Services []PlannedService
	// IPSets holds the entries of every set in Sets (kernel names), in
	// `ipset save` form, sorted; empty sets are present with no entries.
	IPSets map[string][]string
	// Bind is the addresses kube-ipvs0 must carry, sorted.
	Bind []netip.Addr
	// IPTables is the iptables-restore payload (filter, then nat).
	IPTables  []byte
	Fallbacks []SchedulerFallback
	// NoLocalEndpointsInternal/External count Services whose Local
	// policy found no local endpoint.
	NoLocalEndpointsInternal, NoLocalEndpointsExternal int
}

func protoLower(p v1.Protocol) string { return strings.ToLower(string(p)) }

// ipPortEntry is a hash:ip,port entry: "10.96.3.215,tcp:38080".
func ipPortEntry(a netip.Addr, p v1.Protocol, port int) string {
	return a.String() + "," + protoLower(p) + ":" + strconv.Itoa(port)
}

// BuildPlan computes the desired state. It does no I/O and never fails:
// ports without a cluster IP of the family are skipped.
func BuildPlan(cfg PlanConfig, svcs proxy.ServicePortMap, eps proxy.EndpointsMap) *Plan {
	p, _ := buildPlan(cfg, svcs, eps)
	return p
}

// buildPlan is BuildPlan that also returns each port's fragment (the state
// partial syncs start from).
func buildPlan(cfg PlanConfig, svcs proxy.ServicePortMap, eps proxy.EndpointsMap) (*Plan, map[proxy.ServicePortName]*fragment) {
	a := assembly{p: &Plan{IPSets: map[string][]string{}}, sets: map[string]map[string]bool{},
		bind: map[netip.Addr]bool{}, noLocalInt: map[string]bool{}, noLocalExt: map[string]bool{}}
	frags := make(map[proxy.ServicePortName]*fragment, len(svcs))
	for _, name := range proxy.SortedServicePorts(svcs) {
		if f := planPort(cfg, name, portPolicy(cfg, name, svcs, eps), eps[name]); f != nil {
			frags[name] = f
			a.merge(name, f)
		}
	}
	return a.finish(cfg), frags
}

// portPolicy is the core's policy of a port (cfg.Policy), or one computed
// from cfg's node fields.
func portPolicy(cfg PlanConfig, name proxy.ServicePortName, svcs proxy.ServicePortMap, eps proxy.EndpointsMap) *proxy.PortPolicy {
	if cfg.Policy != nil {
		return cfg.Policy(name, cfg.IPv6)
	}
	node := proxy.PolicyNode{Name: cfg.NodeName, Labels: cfg.NodeLabels}
	if len(cfg.NodeIPs) > 0 {
		node.IP = cfg.NodeIPs[0]
	}
	return proxy.NewPortPolicy(svcs[name], eps[name], node, cfg.IPv6)
}

// fragment is what one Service port contributes to a family's plan. A
// plan is the union of its ports' fragments; a partial sync replaces the
// fragments of the changed ports (planState).
type fragment struct {
	name proxy.ServicePortName
	// services are the port's virtual servers as planned; once the kernel
	// has them, a planState keeps only kept (settle).
	services []PlannedService
	kept     []keptVS
	// entries are (set, entry) pairs by the sets' short names; an entry
	// may appear more than once.
	entries []setEntry
	// bind are the addresses kube-ipvs0 must carry for the port.
	bind []netip.Addr
	// lbNoNodeAccess are load-balancer virtual servers the node itself
	// may not reach (a source-range firewall that excludes it).
	lbNoNodeAccess         []Key
	noLocalInt, noLocalExt bool
	fallback               *SchedulerFallback
	// nodePorts is the index of the first NodePort virtual server (they
	// come last; numVS when there is none).
	nodePorts int32
}

type setEntry struct{ set, entry string }

// planner plans one Service port into a fragment.
type planner struct {
	cfg PlanConfig
	f   *fragment
}

func (pl *planner) add(set, entry string) {
	pl.f.entries = append(pl.f.entries, setEntry{set, entry})
}

// planPort plans one Service port; nil when the port has no policy for
// the family.
func planPort(cfg PlanConfig, name proxy.ServicePortName, pol *proxy.PortPolicy, endpoints []*proxy.Endpoint) *fragment {
	if pol == nil {
		return nil
	}
	pl := &planner{cfg: cfg, f: &fragment{name: name, nodePorts: math.MaxInt32}}
	pl.port(name, pol, endpoints)
	return pl.f
}

// assembly merges fragments into a Plan.
type assembly struct {
	p                      *Plan
	sets                   map[string]map[string]bool
	bind                   map[netip.Addr]bool
	lbNoNodeAccess         []Key
	noLocalInt, noLocalExt map[string]bool
}

func (a *assembly) merge(name proxy.ServicePortName, f *fragment) {
	a.p.Services = append(a.p.Services, f.services...)
	for _, e := range f.entries {
		if a.sets[e.set] == nil {
			a.sets[e.set] = map[string]bool{}
		}
		a.sets[e.set][e.entry] = true
	}
	for _, ip := range f.bind {
		a.bind[ip] = true
	}
	a.lbNoNodeAccess = append(a.lbNoNodeAccess, f.lbNoNodeAccess...)
	if f.noLocalInt {
		a.noLocalInt[name.NamespacedName.String()] = true
	}
	if f.noLocalExt {
		a.noLocalExt[name.NamespacedName.String()] = true
	}
	if f.fallback != nil {
		a.p.Fallbacks = append(a.p.Fallbacks, *f.fallback)
	}
}

// portVS is one Service port's virtual-server maker: the scheduler and
// persistence every virtual server of the port gets, and the weights of
// its real servers.
type portVS struct {
	pl   *planner
	name proxy.ServicePortName
	svc  *proxy.ServicePort
	bal  proxy.Balance
}

func (v portVS) emit(a netip.Addr, port int, chosen []*proxy.Endpoint) {
	vs := VirtualServer{Addr: a, Protocol: v.svc.Protocol, Port: uint16(port), Scheduler: v.bal.Scheduler,
		HashPort: v.bal.Scheduler == "mh"}
	if v.svc.SessionAffinity == v1.ServiceAffinityClientIP {
		vs.Persistent = true
		vs.Timeout = uint32(v.svc.StickyMaxAgeSeconds)
		if vs.Timeout == 0 {
			vs.Timeout = persistenceDefaultSecs
		}
	}
	// Sized once and deduplicated after sorting: a partial sync keeps
	// these between syncs, one per virtual server.
	ps := PlannedService{Name: v.name, VS: vs, Dests: make([]RealServer, 0, len(chosen))}
	for _, ep := range chosen {
		if ep.Addr.Is6() == v.pl.cfg.IPv6 {
			ps.Dests = append(ps.Dests, RealServer{Addr: ep.Addr, Port: uint16(ep.Port), Weight: v.bal.Weight(ep)})
		}
	}
	// Stable, so that of an endpoint listed twice the first is kept.
	slices.SortStableFunc(ps.Dests, func(a, b RealServer) int { return a.AddrPort().Compare(b.AddrPort()) })
	ps.Dests = slices.Clip(slices.CompactFunc(ps.Dests, func(a, b RealServer) bool { return a.AddrPort() == b.AddrPort() }))
	v.pl.f.services = append(v.pl.f.services, ps)
}

// port plans one Service port: its virtual servers and set entries.
func (pl *planner) port(name proxy.ServicePortName, pol *proxy.PortPolicy, endpoints []*proxy.Endpoint) {
	svc := pol.Port
	proto := svc.Protocol
	bal := proxy.NewBalance(svc, ModeSchedulers(pl.cfg.Scheduler))
	if bal.Fallback != "" {
		pl.f.fallback = &SchedulerFallback{Service: name, Requested: svc.Scheduler, Used: bal.Scheduler, Reason: bal.Fallback}
	}
	pl.f.noLocalInt = pol.Internal.Verdict == proxy.VerdictDrop
	pl.f.noLocalExt = pol.External.Verdict == proxy.VerdictDrop
	// Every virtual server serves, besides the clients its policy is
	// about, the pods and the node itself. When a Local policy finds no
	// endpoint on this node (the policy drops) the virtual server keeps the
	// cluster-wide endpoints, so that pods still reach the Service, as in
	// kube-proxy's IPVS mode (kubernetes PR 97081); replies to external
	// clients then go astray. External ones get what the policy
	// short-circuits pods and the node to otherwise.
	intEps, extEps := pol.Internal.Endpoints, pol.External.Endpoints
	if pol.Internal.Verdict == proxy.VerdictDrop {
		intEps = pol.Cluster
	}
	if pol.External.Verdict == proxy.VerdictDrop {
		extEps = pol.Cluster
	}
	v := portVS{pl: pl, name: name, svc: svc, bal: bal}
	for _, ep := range endpoints {
		if ep.IsLocal && ep.Addr.Is6() == pl.cfg.IPv6 {
			pl.add(SetLoopBack, ep.Addr.String()+","+protoLower(proto)+":"+strconv.Itoa(ep.Port)+","+ep.Addr.String())
		}
	}
	// ClusterIP.
	cip := svc.ClusterIP()
	pl.add(SetClusterIP, ipPortEntry(cip, proto, svc.Port))
	v.emit(cip, svc.Port, intEps)
	pl.f.bind = append(pl.f.bind, cip)
	// externalIPs.
	for _, ip := range svc.ExternalIPs {
		if svc.ExternalPolicyLocal {
			pl.add(SetExternalIPLocal, ipPortEntry(ip, proto, svc.Port))
		} else {
			pl.add(SetExternalIP, ipPortEntry(ip, proto, svc.Port))
		}
		v.emit(ip, svc.Port, extEps)
		pl.bind(ip)
	}
	pl.loadBalancer(v, pol, extEps)
	if !pl.nodePort(v, extEps) {
		return
	}
	if svc.HealthCheckNodePort != 0 {
		pl.add(SetHealthCheckNodePort, strconv.Itoa(svc.HealthCheckNodePort))
	}
}

// loadBalancer plans the LoadBalancer ingress IPs of a port, with their
// source-range firewall.
func (pl *planner) loadBalancer(v portVS, pol *proxy.PortPolicy, extEps []*proxy.Endpoint) {
	svc, proto := v.svc, v.svc.Protocol
	for _, ip := range svc.LoadBalancerVIPs {
		e := ipPortEntry(ip, proto, svc.Port)
		pl.add(SetLoadBalancer, e)
		if svc.ExternalPolicyLocal {
			pl.add(SetLoadBalancerLocal, e)
		}
		if pol.Firewall {
			pl.add(SetLoadBalancerFW, e)
			for _, r := range pol.SourceRanges {
				pl.add(SetLoadBalancerSrcCIDR, e+","+r.String())
			}
			// Node-originated traffic to an LB IP bound locally has the
			// LB IP as source.
			if pol.FirewallAllowsNode {
				pl.add(SetLoadBalancerSourceIP, e+","+ip.String())
			} else {
				pl.f.lbNoNodeAccess = append(pl.f.lbNoNodeAccess, Key{ip, proto, uint16(svc.Port)})
			}
		}
		v.emit(ip, svc.Port, extEps)
		pl.bind(ip)
	}
}

// bind binds an external address to kube-ipvs0 unless a link of the node
// has it.
func (pl *planner) bind(ip netip.Addr) {
	if !slices.Contains(pl.cfg.LocalAddrs, ip) {
		pl.f.bind = append(pl.f.bind, ip)
	}
}

// nodePort plans the NodePort of a port: set entries and a virtual server
// per NodePort address. It returns false when the port has a NodePort but
// the node no NodePort address: kube-proxy then skips the rest of the port
// (its health-check port too).
func (pl *planner) nodePort(v portVS, extEps []*proxy.Endpoint) bool {
	svc, proto := v.svc, v.svc.Protocol
	if svc.NodePort == 0 {
		return true
	}
	if len(pl.cfg.NodePortAddrs) == 0 {
		return false
	}
	switch proto {
	case v1.ProtocolTCP, v1.ProtocolUDP:
		set, local := SetNodePortTCP, SetNodePortLocalTCP
		if proto == v1.ProtocolUDP {
			set, local = SetNodePortUDP, SetNodePortLocalUDP
		}
		pl.add(set, strconv.Itoa(svc.NodePort))
		if svc.ExternalPolicyLocal {
			pl.add(local, strconv.Itoa(svc.NodePort))
		}
	case v1.ProtocolSCTP:
		for _, a := range pl.cfg.NodePortAddrs {
			pl.add(SetNodePortSCTP, ipPortEntry(a, proto, svc.NodePort))
			if svc.ExternalPolicyLocal {
				pl.add(SetNodePortLocalSCTP, ipPortEntry(a, proto, svc.NodePort))
			}
		}
	}
	pl.f.nodePorts = int32(len(pl.f.services))
	for _, a := range pl.cfg.NodePortAddrs {
		if a.Is6() == pl.cfg.IPv6 {
			v.emit(a, svc.NodePort, extEps)
			pl.f.services[len(pl.f.services)-1].nodePort = true
		}
	}
	return true
}

// finish sorts what the ports produced into the Plan and writes its
// iptables rules.
func (a *assembly) finish(cfg PlanConfig) *Plan {
	p := a.p
	for ip := range a.bind {
		p.Bind = append(p.Bind, ip)
	}
	slices.SortFunc(p.Bind, func(a, b netip.Addr) int { return a.Compare(b) })
	for _, s := range Sets {
		var entries []string
		if s.Name == SetIPVSIPs {
			for _, ip := range p.Bind {
				entries = append(entries, ip.String())
			}
		}
		for e := range a.sets[s.Name] {
			entries = append(entries, e)
		}
		slices.Sort(entries)
		p.IPSets[SetName(s.Name, cfg.IPv6)] = slices.Compact(entries)
	}
	// Stable: of ports that plan the same virtual server (an externalIP
	// that is a node address, on another Service's NodePort) the winner
	// is chosen among them in port order, as in a partial sync
	// (vsOwner.after).
	slices.SortStableFunc(p.Services, func(a, b PlannedService) int { return compareKeys(a.VS.Key(), b.VS.Key()) })
	p.Services = lastOfEachKey(p.Services)
	p.NoLocalEndpointsInternal, p.NoLocalEndpointsExternal = len(a.noLocalInt), len(a.noLocalExt)
	p.IPTables = buildIPTables(cfg, func(set string) bool { return len(p.IPSets[SetName(set, cfg.IPv6)]) > 0 }, sortedKeys(a.lbNoNodeAccess))
	return p
}

// lastOfEachKey keeps, of each run of planned virtual servers with the
// same key in sorted ss, the one that wins it: an externalIP's or
// LoadBalancer IP's over a NodePort's, then the last (the last port in
// name order; vsOwner.after decides alike in partial syncs).
func lastOfEachKey(ss []PlannedService) []PlannedService {
	out := ss[:0]
	for i := 0; i < len(ss); {
		j, w := i, i
		for ; j < len(ss) && ss[j].VS.Key() == ss[i].VS.Key(); j++ {
			if !ss[j].nodePort || ss[w].nodePort {
				w = j
			}
		}
		out = append(out, ss[w])
		i = j
	}
	return out
}

// compareKeys orders virtual servers by protocol, address and port.
func compareKeys(a, b Key) int {
	if c := strings.Compare(string(a.Protocol), string(b.Protocol)); c != 0 {
		return c
	}
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}

// sortedKeys returns keys sorted and without repeats (a plan's order does
// not depend on the order the ports were planned in).
func sortedKeys(keys []Key) []Key {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, compareKeys)
	return slices.Compact(keys)
}

// jumps are the rules linking the kernel's chains to ours, as kube-proxy
// installs them (inserted at the top, with these comments).
var jumps = []struct{ table, from, to, comment string }{
	{"nat", "OUTPUT", chainServices, "kubernetes service portals"},
	{"nat", "PREROUTING", chainServices, "kubernetes service portals"},
	{"nat", "POSTROUTING", chainPostrouting, "kubernetes postrouting rules"},
	{"filter", "FORWARD", chainForward, "kubernetes forwarding rules"},
	{"filter", "INPUT", chainNodePort, "kubernetes health check rules"},
	{"filter", "INPUT", chainProxyFirewall, "kube-proxy firewall rules"},
	{"filter", "FORWARD", chainProxyFirewall, "kube-proxy firewall rules"},
	{"filter", "INPUT", chainIPVSFilter, "kubernetes ipvs access filter"},
	{"filter", "OUTPUT", chainIPVSOutFilter, "kubernetes ipvs access filter"},
}

var natChains = []string{chainServices, chainPostrouting, chainNodePort, chainLoadBalancer, chainMarkMasq}
var filterChains = []string{chainForward, chainNodePort, chainProxyFirewall, chainSourceRangesFW, chainIPVSFilter, chainIPVSOutFilter}

// setJumps are the set-match rules written only when their set is
// non-empty; the Local sets must precede their non-Local sets.
var setJumps = []struct{ set, table, from, to, match, proto string }{
	{SetLoopBack, "nat", chainPostrouting, "MASQUERADE", "dst,dst,src", ""},
	{SetLoadBalancer, "nat", chainServices, chainLoadBalancer, "dst,dst", ""},
	{SetLoadBalancerLocal, "nat", chainLoadBalancer, "RETURN", "dst,dst", ""},
	{SetNodePortLocalTCP, "nat", chainNodePort, "RETURN", "dst", "tcp"},
	{SetNodePortTCP, "nat", chainNodePort, chainMarkMasq, "dst", "tcp"},
	{SetNodePortLocalUDP, "nat", chainNodePort, "RETURN", "dst", "udp"},
	{SetNodePortUDP, "nat", chainNodePort, chainMarkMasq, "dst", "udp"},
	{SetNodePortLocalSCTP, "nat", chainNodePort, "RETURN", "dst,dst", "sctp"},
	{SetNodePortSCTP, "nat", chainNodePort, chainMarkMasq, "dst,dst", "sctp"},
	{SetLoadBalancerFW, "filter", chainProxyFirewall, chainSourceRangesFW, "dst,dst", ""},
	{SetLoadBalancerSrcCIDR, "filter", chainSourceRangesFW, "RETURN", "dst,dst,src", ""},
	{SetLoadBalancerSourceIP, "filter", chainSourceRangesFW, "RETURN", "dst,dst,src", ""},
}

func setComment(set string) string {
	for _, s := range Sets {
		if s.Name == set {
			return `"` + s.Comment + `"`
		}
	}
	return `""`
}

// buildIPTables writes the iptables-restore payload; nonEmpty says which
// sets (short names) have entries.
func buildIPTables(cfg PlanConfig, nonEmpty func(set string) bool, lbNoNodeAccess []Key) []byte {
	name := func(s string) string { return SetName(s, cfg.IPv6) }
	var nat, filter []string
	w := func(table string, args ...string) {
		line := strings.Join(args, " ")
		if table == "nat" {
			nat = append(nat, line)
		} else {
			filter = append(filter, line)
		}
	}
	lo := "127.0.0.0/8"
	if cfg.IPv6 {
		lo = "::1/128"
	}
	w("nat", "-A", chainServices, "-s", lo, "-j", "RETURN")
	for _, j := range setJumps {
		if !nonEmpty(j.set) {
			continue
		}
		args := []string{"-A", j.from}
		if j.proto != "" {
			args = append(args, "-p", j.proto)
		}
		args = append(args, "-m", "comment", "--comment", setComment(j.set), "-m", "set", "--match-set", name(j.set), j.match, "-j", j.to)
		w(j.table, args...)
	}
	if nonEmpty(SetClusterIP) {
		args := []string{"-A", chainServices, "-m", "comment", "--comment", setComment(SetClusterIP), "-m", "set", "--match-set", name(SetClusterIP)}
		switch {
		case cfg.MasqueradeAll:
			args = append(args, "dst,dst", "-j", chainMarkMasq)
		case cfg.ClusterCIDR.IsValid():
			args = append(args, "dst,dst", "!", "-s", cfg.ClusterCIDR.String(), "-j", chainMarkMasq)
		default:
			args = append(args, "src,dst", "-j", chainMarkMasq)
		}
		w("nat", args...)
	}
	externalIPRules := func(args []string) {
		w("nat", append(slices.Clone(args), "-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL", "-j", "ACCEPT")...)
		w("nat", append(slices.Clone(args), "-m", "addrtype", "--dst-type", "LOCAL", "-j", "ACCEPT")...)
	}
	if nonEmpty(SetExternalIP) {
		args := []string{"-A", chainServices, "-m", "comment", "--comment", setComment(SetExternalIP), "-m", "set", "--match-set", name(SetExternalIP), "dst,dst"}
		w("nat", append(slices.Clone(args), "-j", chainMarkMasq)...)
		externalIPRules(args)
	}
	if nonEmpty(SetExternalIPLocal) {
		externalIPRules([]string{"-A", chainServices, "-m", "comment", "--comment", setComment(SetExternalIPLocal), "-m", "set", "--match-set", name(SetExternalIPLocal), "dst,dst"})
	}
	w("nat", "-A", chainServices, "-m", "addrtype", "--dst-type", "LOCAL", "-j", chainNodePort)
	w("nat", "-A", chainLoadBalancer, "-j", chainMarkMasq)
	w("filter", "-A", chainSourceRangesFW, "-j", "DROP")
	for _, k := range lbNoNodeAccess {
		w("filter", "-A", chainIPVSOutFilter, "-s", k.Addr.String(), "-m", "ipvs", "--vaddr", k.Addr.String(),
			"--vproto", protoLower(k.Protocol), "--vport", strconv.Itoa(int(k.Port)), "-j", "DROP")
	}
	// Accept traffic to IPVS virtual servers so that later rules cannot
	// break them; these must end KUBE-SERVICES.
	for _, s := range []string{SetClusterIP, SetLoadBalancer} {
		if nonEmpty(s) {
			w("nat", "-A", chainServices, "-m", "set", "--match-set", name(s), "dst,dst", "-j", "ACCEPT")
		}
	}
	mark := cfg.MasqueradeMark
	w("filter", "-A", chainForward, "-m", "comment", "--comment", `"kubernetes forwarding rules"`, "-m", "mark", "--mark", mark+"/"+mark, "-j", "ACCEPT")
	w("filter", "-A", chainForward, "-m", "comment", "--comment", `"kubernetes forwarding conntrack rule"`, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	w("filter", "-A", chainNodePort, "-m", "comment", "--comment", setComment(SetHealthCheckNodePort), "-m", "set", "--match-set", name(SetHealthCheckNodePort), "dst", "-j", "ACCEPT")
	for _, s := range []string{SetLoadBalancer, SetClusterIP, SetExternalIP, SetExternalIPLocal} {
		w("filter", "-A", chainIPVSFilter, "-m", "set", "--match-set", name(s), "dst,dst", "-j", "RETURN")
	}
	w("filter", "-A", chainIPVSFilter, "-m", "set", "--match-set", name(SetHealthCheckNodePort), "dst", "-j", "RETURN")
	w("filter", "-A", chainIPVSFilter, "-m", "conntrack", "--ctstate", "NEW", "-m", "set", "--match-set", name(SetIPVSIPs), "dst", "-j", "REJECT")
	w("nat", "-A", chainPostrouting, "-m", "mark", "!", "--mark", mark+"/"+mark, "-j", "RETURN")
	w("nat", "-A", chainPostrouting, "-j", "MARK", "--xor-mark", mark)
	w("nat", "-A", chainPostrouting, "-m", "comment", "--comment", `"kubernetes service traffic requiring SNAT"`, "-j", "MASQUERADE", "--random-fully")
	w("nat", "-A", chainMarkMasq, "-j", "MARK", "--or-mark", mark)

	var b strings.Builder
	b.WriteString("*filter\n")
	for _, c := range filterChains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, l := range filter {
		b.WriteString(l + "\n")
	}
	b.WriteString("COMMIT\n*nat\n")
	for _, c := range natChains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, l := range nat {
		b.WriteString(l + "\n")
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String())
}
