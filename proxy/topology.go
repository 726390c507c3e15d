package proxy

// CategorizeEndpoints picks the endpoints a ServicePort uses, as kube-proxy
// does:
//
//   - clusterEndpoints: for "Cluster" traffic, every ready endpoint; if none is
//     ready, every endpoint that is serving and terminating (so a rollout that
//     terminates all pods keeps serving). Nil when the port never uses
//     cluster-wide endpoints.
//   - localEndpoints: for "Local" traffic, the ready endpoints on this node,
//     or failing that the serving-and-terminating ones on this node. Nil when
//     the port never uses node-local endpoints.
//   - allReachable: the union of the two (each endpoint once), i.e. every
//     endpoint this node may send to.
//   - hasAnyEndpoints: whether the Service has usable endpoints anywhere in
//     the cluster, even if none of them are reachable under the policy in use
//     (then traffic is dropped rather than rejected).
func CategorizeEndpoints(endpoints []*Endpoint, svc *ServicePort) (clusterEndpoints, localEndpoints, allReachable []*Endpoint, hasAnyEndpoints bool) {
	if svc.UsesClusterEndpoints() {
		clusterEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool { return ep.Ready })
		if len(clusterEndpoints) == 0 {
			clusterEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool { return ep.Serving && ep.Terminating })
		}
		if len(clusterEndpoints) > 0 {
			hasAnyEndpoints = true
		}
	}
	if !svc.UsesLocalEndpoints() {
		return clusterEndpoints, nil, clusterEndpoints, hasAnyEndpoints
	}
	var localReady, localServingTerminating bool
	for _, ep := range endpoints {
		if ep.Ready {
			hasAnyEndpoints = true
			if ep.IsLocal {
				localReady = true
			}
		} else if ep.Serving && ep.Terminating {
			hasAnyEndpoints = true
			if ep.IsLocal {
				localServingTerminating = true
			}
		}
	}
	switch {
	case localReady:
		localEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool { return ep.IsLocal && ep.Ready })
	case localServingTerminating:
		localEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool { return ep.IsLocal && ep.Serving && ep.Terminating })
	}
	if !svc.UsesClusterEndpoints() {
		return nil, localEndpoints, localEndpoints, hasAnyEndpoints
	}
	if len(localEndpoints) == 0 {
		return clusterEndpoints, localEndpoints, clusterEndpoints, hasAnyEndpoints
	}
	if len(clusterEndpoints) == 0 {
		return clusterEndpoints, localEndpoints, localEndpoints, hasAnyEndpoints
	}
	seen := map[*Endpoint]bool{}
	for _, ep := range clusterEndpoints {
		seen[ep] = true
		allReachable = append(allReachable, ep)
	}
	for _, ep := range localEndpoints {
		if !seen[ep] {
			allReachable = append(allReachable, ep)
		}
	}
	return clusterEndpoints, localEndpoints, allReachable, hasAnyEndpoints
}

func filterEndpoints(in []*Endpoint, keep func(*Endpoint) bool) []*Endpoint {
	var out []*Endpoint
	for _, ep := range in {
		if keep(ep) {
			out = append(out, ep)
		}
	}
	return out
}
