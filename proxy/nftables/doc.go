// Package nftables is svcnet's nftables proxy mode (--proxy-mode=nftables),
// following kube-proxy 1.37's nftables design (kubernetes
// pkg/proxy/nftables): one table named "kube-proxy" per IP family and
// nothing outside it.
//
// Dispatch is by verdict maps, so the cost of finding a Service does not
// grow with the number of Services: service-ips (address . protocol . port
// → goto the Service's chain) for ClusterIPs, externalIPs and LoadBalancer
// IPs, service-nodeports (protocol . port) for NodePorts on local addresses,
// no-endpoint-services / no-endpoint-nodeports (reject or drop), and
// firewall-ips for loadBalancerSourceRanges. Per Service port there is a
// cluster-policy chain "service-HASH-ns/name/proto/port", a local-policy
// chain "local-…", an "external-…" chain for NodePort/externalIP/LB traffic
// (sets the masquerade mark, or with externalTrafficPolicy Local the pod
// and host short-circuits) and a "firewall-…" chain. A policy chain picks
// and translates the endpoint in one rule, `meta l4proto tcp dnat ip addr .
// port to numgen random mod N map { 0 : IP . PORT , … }`, or with a single
// endpoint simply `meta l4proto tcp dnat to IP:PORT`. Only with ClientIP
// affinity are there per-endpoint chains "endpoint-HASH-…__ip/port" and one
// timed set per endpoint ("affinity-…"): the policy chain sends a client in
// an endpoint's set to its chain, else picks a chain with `numgen random mod
// N vmap`, and the endpoint chain records the client (`update @set { ip
// saddr }`) and DNATs. Traffic to a ClusterIP on a port no Service uses is
// rejected, and traffic to an unallocated address of the service CIDRs
// dropped (cluster-ips-check).
//
// Masquerading: the services chain marks ClusterIP traffic from outside the
// pod CIDRs (all of it with masquerade-all) with the 0x4000 bit; the
// masquerading chain (nat-postrouting) clears the bit and masquerades
// marked packets, and masquerades hairpin connections — a DNATed packet
// whose source, destination, protocol and port are in the
// hairpin-connections set, which holds every local endpoint as
// IP . IP . protocol . port.
//
// Every sync is one transaction, planned purely (plan*.go: from the shared
// proxy.PortPolicy of each Service port and the kernel state known from the
// last sync to the desired chains, rules, sets and elements, as data) and
// then applied (apply.go). The proxy programs the kernel through netlink
// batches (netlink.go, github.com/google/nftables): rules are compiled from
// the plan's nft text (compile.go) into the expressions nft itself would
// send, so the text that --dump, the packet tracer (trace.go) and the golden
// files show cannot drift from what is programmed. Tests, kpdiff and
// executors other than proxy.OSExecutor apply the same plan as an nft
// script (knftables.Fake or `nft -f -`). After the first sync, a sync is
// partial: only the Service ports that changed are planned, their chains
// rewritten and their map elements added, replaced or deleted one by one,
// so its cost follows the change, not the number of Services; chains no
// longer used are flushed and deleted a second later (kernels before 6.2
// free map references late). Every --sync-period the core asks for a full
// sync, which rewrites everything.
//
// Beyond kube-proxy, a Service can pick its algorithm with the annotation
// service.kubernetes.io/ipvs-scheduler where nftables can express it: rr
// (numgen inc), wrr (weighted numgen random intervals), sh and dh (weighted
// jhash of the source or destination address, seeded so rewrites keep the
// mapping) and mh/maglev (a 251-slot Maglev table from proxy/lb in a jhash
// map). The scheduler replaces the numgen expression of the dnat map (of
// the endpoint-chain vmap with affinity). lc, wlc, sed and nq need
// connection counts nftables does not have: such Services, and unknown
// names, get the random choice, a log warning and a Warning Event on the
// Service (proxy.SchedulerReporter: UnsupportedScheduler / UnknownScheduler).
// Without the annotation, the rules are exactly kube-proxy's.
//
// --nftables-endpoint-choice=rules (Config.ChoiceRules, opt-in) writes the
// random, wrr, sh and dh choices among up to 64 endpoints as one rule per
// endpoint (`numgen random mod R < W ...`, `jhash ... LO-HI ...`) instead of
// an anonymous map per chain, so the table holds no set per Service and a
// start costs the kernel O(N) rather than O(N²) (plan_choice.go).
//
// --nftables-endpoint-choice=shared (Config.ChoiceShared, opt-in) keeps the
// random choice's endpoints in maps shared by many chains,
// `service-endpoints-PROTO-XX`, each chain using a range of keys: `meta
// l4proto tcp dnat ip addr . port to numgen random mod N offset O map
// @service-endpoints-tcp-XX`. Neither a set per Service nor a rule per
// endpoint: linear starts and one-change syncs as cheap as the map's. A
// port that needs its chain only for that choice (ClusterIP, random,
// no affinity, internalTrafficPolicy Cluster, up to 64 endpoints) has no
// chain at all (planner.direct): its cluster IP . port . i keys are in a
// map per endpoint count N, `cluster-ip-endpoints-tcp-N`, looked up by one
// rule per map, `dnat ip addr . port to ip daddr . tcp dport . numgen random
// mod N map @cluster-ip-endpoints-tcp-N`, so its changes write map
// elements only and the kernel's commit, which walks every chain of the
// namespace, no longer grows with the Services. The same holds with
// external entries of externalTrafficPolicy Cluster without source ranges:
// the NodePort is in the set direct-node-ports, whose rule leads to
// node-port-endpoints (the masquerade mark, then one rule per map
// `node-port-endpoints-tcp-N`, keyed by NODEPORT . i); an externalIP or
// LoadBalancer IP (of the port that wins it, proxy/claims.go) is in direct-external-ips,
// whose rule leads to external-ip-endpoints (the masquerade mark, then
// cluster-ip-endpoints, whose maps hold ADDRESS . PORT . i too).
//
// --nftables-shards=N (Config.Shards, opt-in, up to 64) spreads the
// Services over N dispatch tables, "kube-proxy-s00" … (shardOf: a hash of
// the Service's namespace and name, so all its ports share one). The
// kernel validates a whole table — every chain reachable from its base
// chains, every element of its verdict maps — on each commit that adds a
// jump, goto, DNAT or masquerade (nft_table_validate), so in one table a
// one-Service change beside N Services costs O(N). A dispatch table holds
// two NAT base chains (prerouting and output, priority dstnat) jumping to
// its own services chain — the ClusterIP masquerade mark over its own copy
// of cluster-ips, its service-ips and service-nodeports maps (and
// nodeport-ips) — and the Service, local, external and endpoint chains,
// affinity sets and shared endpoint maps of its Services. NAT chains run
// only for a connection's first packet, and once one table's chain DNATs
// it the hook's NAT chains of the other tables no longer see it, as the
// kernel runs a hook's NAT chains. The main table keeps everything that
// filters (the no-endpoint, cluster-IP and NodePort checks, the
// firewall-ips map with the firewall chains, masquerading and hairpin
// sets) and an empty services chain. A change then validates one dispatch
// table (1/N of the Services) and, when it adds a verdict to the main
// table, the main table, which has no per-Service chain but firewall
// ones. Every behaviour test traces the same outcomes as with one table
// (shards_test.go); restarting with another N deletes the tables beyond it
// and moves the chains.
package nftables
