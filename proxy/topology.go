package proxy

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

const (
	topologySameNode = "PreferSameNode"
	topologySameZone = "PreferSameZone"
)

func topologyMode(endpoints []*Endpoint, nodeName, zone string) string {
	allNode, forNode := true, false
	allZone, forZone := true, false
	for _, ep := range endpoints {
		if !ep.Ready {
			continue
		}
		if len(ep.NodeHints) == 0 {
			allNode = false
		} else if nodeName != "" && slices.Contains(ep.NodeHints, nodeName) {
			forNode = true
		}
		if len(ep.ZoneHints) == 0 {
			allZone = false
		} else if zone != "" && slices.Contains(ep.ZoneHints, zone) {
			forZone = true
		}
	}
	if allNode && forNode {
		return topologySameNode
	}
	if allZone && forZone {
		return topologySameZone
	}
	return ""
}

func availableForTopology(ep *Endpoint, mode, nodeName, zone string) bool {
	switch mode {
	case topologySameNode:
		return slices.Contains(ep.NodeHints, nodeName)
	case topologySameZone:
		return slices.Contains(ep.ZoneHints, zone)
	}
	return true
}

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
//
// CategorizeEndpoints ignores topology hints; CategorizeEndpointsForNode
// honours them.
func CategorizeEndpoints(endpoints []*Endpoint, svc *ServicePort) (clusterEndpoints, localEndpoints, allReachable []*Endpoint, hasAnyEndpoints bool) {
	return CategorizeEndpointsForNode(endpoints, svc, "", nil)
}

// CategorizeEndpointsForNode is CategorizeEndpoints with kube-proxy's
// topology-aware routing: when every ready endpoint carries node hints and
// one names nodeName, "Cluster" traffic only uses endpoints hinted for this
// node (PreferSameNode); otherwise, when every ready endpoint carries zone
// hints and one names this node's zone (label topology.kubernetes.io/zone),
// only endpoints hinted for this zone (PreferSameZone / PreferClose). Hints
// that do not cover this node or zone are ignored.
func CategorizeEndpointsForNode(endpoints []*Endpoint, svc *ServicePort, nodeName string, nodeLabels map[string]string) (clusterEndpoints, localEndpoints, allReachable []*Endpoint, hasAnyEndpoints bool) {
	if svc.UsesClusterEndpoints() {
		zone := nodeLabels[v1.LabelTopologyZone]
		mode := topologyMode(endpoints, nodeName, zone)
		clusterEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool { return ep.Ready && availableForTopology(ep, mode, nodeName, zone) })
		if len(clusterEndpoints) == 0 {
			clusterEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool {
				return ep.Serving && ep.Terminating && availableForTopology(ep, mode, nodeName, zone)
			})
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
