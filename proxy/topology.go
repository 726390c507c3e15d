package proxy

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

const (
	topologySameNode = v1.ServiceTrafficDistributionPreferSameNode
	topologySameZone = v1.ServiceTrafficDistributionPreferSameZone
)

// topologyMode decides, from the hints of the ready endpoints, which
// topology filter cluster traffic on this node uses, with kube-proxy 1.37's
// rules: node hints apply when every ready endpoint has one and some name
// this node; otherwise zone hints apply when every ready endpoint has one
// and some name this node's zone (PreferSameZone, and PreferClose, which the
// EndpointSlice controller publishes as zone hints too). Hints that do not
// cover this node or zone are ignored, as are hints when the node has no
// zone label, and everything when no endpoint is ready.
func topologyMode(endpoints []*Endpoint, nodeName, zone string) string {
	anyReady := false
	allNode, forNode := true, false
	allZone, forZone := true, false
	for _, ep := range endpoints {
		if !ep.Ready {
			continue
		}
		anyReady = true
		if len(ep.NodeHints()) == 0 {
			allNode = false
		} else if slices.Contains(ep.NodeHints(), nodeName) {
			forNode = true
		}
		if len(ep.ZoneHints()) == 0 {
			allZone = false
		} else if slices.Contains(ep.ZoneHints(), zone) {
			forZone = true
		}
	}
	switch {
	case !anyReady:
		return ""
	case allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return ""
}

func availableForTopology(ep *Endpoint, mode, nodeName, zone string) bool {
	switch mode {
	case topologySameNode:
		return slices.Contains(ep.NodeHints(), nodeName)
	case topologySameZone:
		return slices.Contains(ep.ZoneHints(), zone)
	}
	return true
}

// CategorizeEndpointsForNode picks the endpoints a ServicePort uses on node
// nodeName (with labels nodeLabels), as kube-proxy does. Modes do not call
// it: they read NewPortPolicy's result, which is built on it.
//
//   - clusterEndpoints: for "Cluster" traffic, the ready endpoints that the
//     topology mode (see topologyMode) allows; if there are none, every
//     serving-and-terminating endpoint (so a rollout that terminates all
//     pods keeps serving). Nil when the port never uses cluster-wide
//     endpoints.
//   - localEndpoints: for "Local" traffic, the ready endpoints on this node,
//     or failing that the serving-and-terminating ones on this node. Nil
//     when the port never uses node-local endpoints.
//   - allReachable: the union of the two (each endpoint once), i.e. every
//     endpoint this node may send to.
//   - hasAnyEndpoints: whether the Service has usable endpoints anywhere in
//     the cluster, even if none of them are reachable under the policy in use
//     (then traffic is dropped rather than rejected).
func CategorizeEndpointsForNode(endpoints []*Endpoint, svc *ServicePort, nodeName string, nodeLabels map[string]string) (clusterEndpoints, localEndpoints, allReachable []*Endpoint, hasAnyEndpoints bool) {
	_, clusterEndpoints, localEndpoints, allReachable, hasAnyEndpoints = categorize(endpoints, svc, nodeName, nodeLabels)
	return
}

func categorize(endpoints []*Endpoint, svc *ServicePort, nodeName string, nodeLabels map[string]string) (mode string, clusterEndpoints, localEndpoints, allReachable []*Endpoint, hasAnyEndpoints bool) {
	if svc.UsesClusterEndpoints() {
		zone := nodeLabels[v1.LabelTopologyZone]
		mode = topologyMode(endpoints, nodeName, zone)
		clusterEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool { return ep.Ready && availableForTopology(ep, mode, nodeName, zone) })
		if len(clusterEndpoints) == 0 {
			// Not filtered by topology: when no endpoint is ready the
			// mode is "" anyway.
			clusterEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool { return ep.Serving && ep.Terminating })
		}
		if len(clusterEndpoints) > 0 {
			hasAnyEndpoints = true
		}
	}
	if !svc.UsesLocalEndpoints() {
		return mode, clusterEndpoints, nil, clusterEndpoints, hasAnyEndpoints
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
		return mode, nil, localEndpoints, localEndpoints, hasAnyEndpoints
	}
	if len(localEndpoints) == 0 {
		return mode, clusterEndpoints, localEndpoints, clusterEndpoints, hasAnyEndpoints
	}
	if len(clusterEndpoints) == 0 {
		return mode, clusterEndpoints, localEndpoints, localEndpoints, hasAnyEndpoints
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
	return mode, clusterEndpoints, localEndpoints, allReachable, hasAnyEndpoints
}

// filterEndpoints returns the endpoints of in that keep accepts: in
// itself when it accepts all of them (endpoint lists are never changed in
// place, so policies share them).
func filterEndpoints(in []*Endpoint, keep func(*Endpoint) bool) []*Endpoint {
	n := 0
	for _, ep := range in {
		if keep(ep) {
			n++
		}
	}
	switch n {
	case 0:
		return nil
	case len(in):
		return in
	}
	out := make([]*Endpoint, 0, n)
	for _, ep := range in {
		if keep(ep) {
			out = append(out, ep)
		}
	}
	return out
}
