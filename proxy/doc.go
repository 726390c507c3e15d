// Package proxy is the shared core of svcnet's service proxy: the model of
// service ports and endpoints that every data-plane mode programs, the change
// trackers that informer handlers feed, endpoint selection per traffic
// policy, the bounded-frequency sync loop, the health-check servers, the
// Prometheus metrics (kube-proxy's names), and stale UDP conntrack cleanup.
//
// A data-plane mode (iptables, nftables, ipvs, userspace) implements
// Provider and registers itself with RegisterMode from an init function. The
// Proxier owns the trackers and calls the provider's Sync from one serial
// loop with a consistent snapshot (SyncRequest) of every service port and its
// endpoints plus what changed since the last successful sync.
//
// Addresses are net/netip values. A ServicePort carries the addresses of
// every IP family of its Service; a mode that programs one family at a time
// uses ServicePort.ForFamily and Endpoint.Addr.Is6 to pick its share.
package proxy
