// Package speaker is svcnet's MetalLB speaker: it makes the LoadBalancer IPs
// that controller/lbipam assigns reachable from outside the nodes, by
// announcing them from the nodes, as MetalLB 0.16's speaker does.
//
// One Speaker runs per node (`svcnet speaker --node-name N`). It watches
// Services, EndpointSlices, Nodes, IPAddressPools and L2Advertisements
// (client-go informers, so it works against svcnet's apiserver and against
// a real cluster alike) and the Leases by which the speakers show they are
// alive. For each LoadBalancer Service with an address in status it finds
// the pool holding every address and then asks each Protocol whether this
// node should announce the Service:
//
//	reason := p.ShouldAnnounce(in)   // "" means: announce from this node
//	p.SetBalancer(ctx, in)           // start or update announcing in.IPs
//	p.DeleteBalancer(ctx, key, why)  // stop (Service gone, lost election...)
//
// ServiceInput carries everything a protocol decides on: the Service, its
// addresses, its Pool, the L2Advertisements selecting the pool, the
// Service's EndpointSlices, every Node, the set of nodes whose speaker is
// alive, and this node's name. The helpers a protocol needs to decide as
// MetalLB does are exported: EndpointCanServe, NodesWithServingEndpoint,
// NodeUsable, NodeSelectorsMatch, L2AdsForService (an L2Advertisement's
// serviceSelectors), PreferenceScores (its preferredNodeSelectors) and
// SortCandidates / SortCandidatesByScore (preference first, then the
// sha256(node+"#"+ip) ordering every speaker computes identically).
//
// Layer2 (layer2.go) is the L2 protocol: on exactly one elected node it hands
// the addresses to an L2Responder, implemented by package speaker/l2 with
// real ARP and NDP. A BGP protocol plugs in the same way: implement
// Protocol, and, when it has configuration of its own (BGPPeers,
// BGPAdvertisements), also Runner, whose Run gets a resync function to call
// whenever that configuration changes so that every Service is decided
// again. Pass it in Config.Protocols next to Layer2.
//
// When a protocol starts announcing a Service from this node (or its
// addresses change) the Service gets a Normal event nodeAssigned, "announcing
// from node "N" with protocol "layer2"", as MetalLB records it.
//
// Liveness differs from MetalLB on purpose: instead of memberlist gossip
// every speaker renews a Lease (coordination.k8s.io/v1, "svcnet-speaker-<node>"
// in the lease namespace) and a speaker counts as alive while its Lease was
// seen renewed within its leaseDurationSeconds (by the local clock of the
// observer, so clock skew between nodes does not matter). A speaker that
// stops cleanly deletes its Lease, so that another node takes over at once;
// one that dies is replaced once its Lease expires. The rule that
// the elected node be Ready is applied too (MetalLB itself only excludes
// nodes whose NetworkUnavailable condition is true and nodes labelled
// node.kubernetes.io/exclude-from-external-load-balancers).
package speaker
