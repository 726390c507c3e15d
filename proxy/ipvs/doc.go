// Package ipvs is svcnet's IPVS proxy mode (`svcnet proxy --proxy-mode=ipvs`),
// laid out as kube-proxy 1.36's IPVS mode.
//
// A sync is three steps:
//
//   - BuildPlan (plan.go) is pure: Services, endpoints and node facts become
//     the desired IPVS table (one virtual server per ClusterIP, externalIP,
//     load-balancer IP and node address × NodePort; Masq real servers from
//     the endpoints), the ipset contents (KUBE-CLUSTER-IP, KUBE-LOOP-BACK,
//     KUBE-NODE-PORT-TCP, ...), the addresses to bind to kube-ipvs0, and the
//     iptables-restore payload of the few chains IPVS mode keeps
//     (KUBE-SERVICES, KUBE-POSTROUTING, KUBE-MARK-MASQ, KUBE-NODE-PORT,
//     KUBE-LOAD-BALANCER, KUBE-FORWARD, KUBE-IPVS-FILTER, ...).
//   - Apply (apply.go) reconciles the kernel with the plan through the
//     small Handle interface (a netlink implementation on
//     github.com/moby/ipvs, and Fake for tests), `ipset restore`,
//     `iptables-restore --noflush` and rtnetlink for kube-ipvs0. A full
//     sync reads the kernel back; a partial one writes only what differs
//     from the plan last applied.
//   - Removed real servers terminate gracefully: their weight is set to 0
//     so that no new connection picks them, and they are deleted on a later
//     sync once their active and inactive connection counts are both zero
//     (UDP and SCTP real servers are deleted at once, as kube-proxy does).
//     A virtual server whose Service is gone is deleted at once.
//
// The scheduler of a Service comes from the annotation
// service.kubernetes.io/ipvs-scheduler, else --ipvs-scheduler (default rr).
// An annotation naming no IPVS scheduler is reported (Config.Report; the
// proxy turns it into an Event) and the default is used. ClientIP session
// affinity is IPVS persistence with the Service's timeoutSeconds.
//
// kube-ipvs0 is a dummy interface where the kernel has the dummy driver.
// Kernels built without it (such as the CI kernel) get a bridge with no
// ports instead: addresses on it are local addresses like on a dummy,
// nothing is ever forwarded through it, and it never carries packets.
//
// The mode needs the ip_vs kernel module; NewMode fails with an error that
// names it when the kernel has no IPVS support.
package ipvs
