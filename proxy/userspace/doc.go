// Package userspace is svcnet's userspace proxy mode (--proxy-mode=userspace):
// a real L4 proxy in Go, in the manner of kube-proxy's original mode.
//
// For every Service port the Proxier opens a TCP listener or UDP socket on a
// kernel-chosen local port (the "proxy port") and installs iptables REDIRECT
// rules in its own nat chains — KUBE-PORTALS-CONTAINER (from PREROUTING, for
// traffic from pods and other hosts), KUBE-PORTALS-HOST (from OUTPUT, for
// the node itself), KUBE-NODEPORT-CONTAINER and KUBE-NODEPORT-HOST (NodePorts
// on local addresses) — that send the Service's ClusterIPs, externalIPs,
// LoadBalancer IPs and NodePorts to that port. Redirecting was chosen over
// binding the Service addresses locally because it needs no interface
// addresses (the kernel here has no dummy interfaces), leaves the node's
// ARP answers alone, and covers NodePorts on every local address with one
// rule. Services without endpoints get a REJECT in the filter chain
// KUBE-PORTALS-REJECT instead, so clients see "connection refused" as with
// kube-proxy's other modes.
//
// Each new TCP connection goes to the endpoint the Service's scheduler
// (proxy/lb; annotation service.kubernetes.io/ipvs-scheduler) picks; if the
// connect fails, the next endpoint is tried with a longer timeout (250ms,
// 500ms, 1s, 2s — never the same endpoint twice), so a dead endpoint costs
// the client a delay, not an error. Each TCP Service port has several
// listeners on one port (SO_REUSEPORT, one per event loop, at most 4). The
// TCP relays run on those event loops (loop.go: raw non-blocking sockets,
// one epoll per loop shared by every Service port, no goroutine per
// connection). Small exchanges are copied with read/write through the
// loop's buffer; once a read fills it, the rest moves with splice(2)
// through a pipe, so bulk payload never enters user space. Half-closes are
// passed on. UDP is
// proxied per client address: a session owns a connected socket to its
// endpoint and ends after UDPIdleTimeout without traffic (not while the
// client's last datagram awaits its reply, up to 5 s). ClientIP session affinity pins a
// client address to its endpoint until timeoutSeconds pass without a new
// connection. Removing an endpoint only stops new connections to it;
// established TCP connections run to their end (UDP sessions to it are
// closed, because nothing else would ever end them).
//
// The proxy does not keep the client's source address: endpoints see the
// node's address, as with kube-proxy's userspace mode.
package userspace
