// Package proxytest is the shared test kit of svcnet's proxy modes:
//
//   - a fixed scenario (Scenario) of Services and endpoints on a two-node
//     cluster, and a behaviour table (BehaviourCases) saying, for a packet
//     from a given source to a given Service address, which endpoints it may
//     reach, whether it is masqueraded, and whether it is accepted, dropped
//     or rejected. RunBehaviour runs the table against any mode's
//     proxy.Tracer, so every mode is held to the same semantics;
//   - a real-kernel topology (NewCluster): two "nodes" (network namespaces
//     on a bridge inside a third "switch" namespace, nothing in the root
//     namespace) each with "pods" (namespaces on a per-node bridge, pod
//     CIDRs routed between nodes host-gw), small Go TCP/UDP servers in the
//     pods, and one proxy per node whose data-plane commands run inside the
//     node namespace. RunKernelScenarios drives the same end-to-end checks
//     (spread, NodePort, externalIP/LB IP, Local policy with source IP and
//     health checks, affinity, no-endpoint reject, endpoint removal, UDP
//     conntrack cleanup, proxy restart) against any mode.
package proxytest
