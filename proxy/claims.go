package proxy

import (
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Destinations that more than one Service claims.
//
// The API lets several ServicePorts claim one destination (address,
// protocol and port): two Services may list the same externalIP, a load
// balancer controller may report an address that another Service lists as
// an externalIP, and an externalIP may be another Service's ClusterIP. A
// new connection can reach only one of them. kube-proxy leaves the choice
// to Go map order, so it differs between its modes and may change from one
// sync to the next. svcnet decides it here, once for every mode, and the
// modes never see the losing claims: a ServicePort in the map handed to
// them lists only the externalIPs and LoadBalancer IPs it won.
//
// The winner of a destination is, in order:
//  1. a ClusterIP: the API server allocates it, unique, so no externalIP
//     or load balancer can take over a Service's cluster address
//     (CVE-2020-8554 is about exactly that);
//  2. a LoadBalancer ingress IP: the load balancer controller assigned
//     it; a user's externalIP does not take its traffic;
//  3. an externalIP;
//
// then the Service created first (a new Service cannot take the traffic of
// one that already has it), then the first in namespace, name and port
// name order. ClusterIPs are never taken away: two Services with one
// ClusterIP (which allocation rules out) both keep it.

// claimKind is how a ServicePort claims an address, in the order of
// precedence.
type claimKind uint8

const (
	claimClusterIP claimKind = iota
	claimLoadBalancer
	claimExternalIP
)

// claim is one ServicePort's claim of an address in one kind; port is the
// ServicePort as its Service declares it (before losing claims are taken
// out of it).
type claim struct {
	port *ServicePort
	kind claimKind
}

// wins reports whether c takes a destination from d.
func (c claim) wins(d claim) bool {
	if c.kind != d.kind {
		return c.kind < d.kind
	}
	if !c.port.Created.Equal(d.port.Created) {
		return c.port.Created.Before(d.port.Created)
	}
	return c.port.Name.Compare(d.port.Name) < 0
}

// addressClaims holds, per address, every claim of it.
type addressClaims map[netip.Addr][]claim

// eachClaim calls f with each address p claims and how.
func eachClaim(p *ServicePort, f func(netip.Addr, claimKind)) {
	for _, ip := range p.ClusterIPs {
		f(ip, claimClusterIP)
	}
	for _, ip := range p.LoadBalancerVIPs {
		f(ip, claimLoadBalancer)
	}
	for _, ip := range p.ExternalIPs {
		f(ip, claimExternalIP)
	}
}

// add records p's claims; touched collects the addresses.
func (a addressClaims) add(p *ServicePort, touched map[netip.Addr]bool) {
	eachClaim(p, func(ip netip.Addr, kind claimKind) {
		cs := a[ip]
		if slices.ContainsFunc(cs, func(c claim) bool { return c.port == p && c.kind == kind }) {
			return // listed twice
		}
		a[ip] = append(cs, claim{p, kind})
		touched[ip] = true
	})
}

// drop removes the claims of p (as add recorded it); touched collects the
// addresses.
func (a addressClaims) drop(p *ServicePort, touched map[netip.Addr]bool) {
	eachClaim(p, func(ip netip.Addr, _ claimKind) {
		cs := slices.DeleteFunc(a[ip], func(c claim) bool { return c.port.Name == p.Name })
		if len(cs) == 0 {
			delete(a, ip)
		} else {
			a[ip] = cs
		}
		touched[ip] = true
	})
}

// winner returns the claim that wins the destination ip, proto, port.
func (a addressClaims) winner(ip netip.Addr, proto v1.Protocol, port int) (claim, bool) {
	var w claim
	found := false
	for _, c := range a[ip] {
		if c.port.Protocol == proto && c.port.Port == port && (!found || c.wins(w)) {
			w, found = c, true
		}
	}
	return w, found
}

// resolve returns p without the externalIPs and LoadBalancer IPs whose
// destination another claim wins (p itself when it wins them all).
func (a addressClaims) resolve(p *ServicePort) *ServicePort {
	won := func(ip netip.Addr) bool {
		w, ok := a.winner(ip, p.Protocol, p.Port)
		// A port whose ClusterIP is also one of its own external
		// addresses keeps the address as a ClusterIP only.
		return !ok || (w.port.Name == p.Name && w.kind != claimClusterIP)
	}
	if !slices.ContainsFunc(p.ExternalIPs, func(ip netip.Addr) bool { return !won(ip) }) &&
		!slices.ContainsFunc(p.LoadBalancerVIPs, func(ip netip.Addr) bool { return !won(ip) }) {
		return p
	}
	q := *p
	q.ExternalIPs, q.LoadBalancerVIPs = nil, nil
	for _, ip := range p.ExternalIPs {
		if won(ip) {
			q.ExternalIPs = append(q.ExternalIPs, ip)
		}
	}
	for _, ip := range p.LoadBalancerVIPs {
		if won(ip) {
			q.LoadBalancerVIPs = append(q.LoadBalancerVIPs, ip)
		}
	}
	return &q
}

// ResolveClaims replaces every ServicePort of m that loses a destination
// to another by a copy without it, as the ServiceChangeTracker keeps the
// map it applies changes to; for maps built by hand (tests, tools).
func ResolveClaims(m ServicePortMap) {
	a := addressClaims{}
	touched := map[netip.Addr]bool{}
	for _, p := range m {
		a.add(p, touched)
	}
	for name, p := range m {
		m[name] = a.resolve(p)
	}
}
