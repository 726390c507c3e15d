package userspace

import (
	"net/netip"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/lb"
)

// This file is the mode's pure part: the core's policy in, the listener
// table out (Proxier.Sync in apply.go and proxier.go is the I/O).

// Schedulers are what userspace mode can balance with: every proxy/lb
// algorithm, def (--ipvs-scheduler) by default. The choice, and whether
// the endpoints' weights count, is proxy.NewBalance's.
func Schedulers(def string) proxy.ModeSchedulers {
	return proxy.ModeSchedulers{Default: def, Supported: lb.Known}
}

// Plan turns the core's snapshot into the listener table, as a pure
// function. Endpoints are the ones the core's policy (proxy.PortPolicy)
// chose for internal and external traffic, topology hints included. When the internal and external policies pick
// different endpoints (externalTrafficPolicy: Local, or
// internalTrafficPolicy: Local, on an externally reachable Service), the
// port gets two listeners: one for the ClusterIPs and one, named
// "<port> (external)", for NodePorts, externalIPs and LoadBalancer IPs.
// observe (may be nil) is told each Service port's proxy.Balance; a port
// whose service.kubernetes.io/ipvs-scheduler names no known algorithm
// (Balance.Fallback) uses the cluster default.
func Plan(req *proxy.SyncRequest, defaultScheduler string, observe func(proxy.ServicePortName, proxy.Balance)) []ServiceConfig {
	var out []ServiceConfig
	for _, name := range proxy.SortedServicePorts(req.Services) {
		sp := req.Services[name]
		proto := strings.ToLower(string(sp.Protocol))
		if proto != "tcp" && proto != "udp" {
			continue // SCTP is not proxied in user space
		}
		bal := proxy.NewBalance(sp, Schedulers(defaultScheduler))
		if observe != nil {
			observe(name, bal)
		}
		var affinity time.Duration
		if sp.SessionAffinity == v1.ServiceAffinityClientIP {
			affinity = time.Duration(sp.StickyMaxAgeSeconds) * time.Second
		}
		// One listener serves every family of the Service: it takes the
		// endpoints the core's policy chose in each family.
		var internal, external []*proxy.Endpoint
		for _, ipv6 := range []bool{false, true} {
			if pol := req.Policy(name, ipv6); pol != nil {
				internal = append(internal, pol.Internal.Endpoints...)
				external = append(external, pol.External.Endpoints...)
			}
		}
		base := ServiceConfig{
			Name: name.String(), Protocol: proto, Port: sp.Port, Scheduler: bal.Scheduler, AffinityTimeout: affinity,
		}
		var extAddrs []netip.Addr
		extAddrs = append(extAddrs, sp.ExternalIPs...)
		extAddrs = append(extAddrs, sp.LoadBalancerVIPs...)
		split := sp.ExternallyAccessible() && sp.InternalPolicyLocal != sp.ExternalPolicyLocal
		in := base
		in.Addrs = append([]netip.Addr(nil), sp.ClusterIPs...)
		in.Endpoints = toEndpoints(bal, internal)
		if !split {
			in.Addrs = append(in.Addrs, extAddrs...)
			in.NodePort = sp.NodePort
			out = append(out, in)
			continue
		}
		out = append(out, in)
		ext := base
		ext.Name = name.String() + " (external)"
		ext.Addrs = extAddrs
		ext.NodePort = sp.NodePort
		ext.Endpoints = toEndpoints(bal, external)
		out = append(out, ext)
	}
	return out
}

func toEndpoints(bal proxy.Balance, eps []*proxy.Endpoint) []Endpoint {
	out := make([]Endpoint, 0, len(eps))
	for _, ep := range eps {
		out = append(out, Endpoint{Addr: ep.AddrPort(), Weight: bal.Weight(ep)})
	}
	return out
}
