// Package iptables is svcnet's iptables proxy mode. It programs exactly
// kube-proxy's (1.37) layout: KUBE-SERVICES, KUBE-NODEPORTS,
// KUBE-POSTROUTING and KUBE-MARK-MASQ in the nat table; KUBE-SERVICES,
// KUBE-EXTERNAL-SERVICES, KUBE-NODEPORTS, KUBE-FORWARD and
// KUBE-PROXY-FIREWALL in the filter table; and per service port the
// KUBE-SVC-/KUBE-SVL-/KUBE-EXT-/KUBE-FW- chains plus one KUBE-SEP- chain per
// endpoint, named from base32(sha256(...))[:16].
//
// Planning (BuildPlan) is a pure function from the model to one
// iptables-restore payload; the Proxier applies it with a single
// `iptables-restore --noflush --counters` per family through the Interface,
// which has a real implementation (Runner, running iptables/ip6tables
// through a proxy.Executor, optionally inside a network namespace) and a
// Fake that keeps the resulting tables in memory for tests.
//
// Between full syncs (every --sync-period, after a failure, or when the
// KUBE-PROXY-CANARY chain has been flushed away by someone else) only the
// chains of Services whose ports or endpoints changed are rewritten, and
// their rules in the top-level chains (KUBE-SERVICES, KUBE-NODEPORTS, ...)
// are edited rule by rule (-D the old, -A/-I the new) from the previous
// plan's record.
//
// --iptables-dispatch=tree (Dispatch) replaces the linear nat KUBE-SERVICES
// with a tree of KUBE-DST- chains by destination prefix (tree.go).
package iptables
