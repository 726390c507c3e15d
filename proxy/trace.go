package proxy

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// TracePacket is a virtual first packet of a connection, for the packet
// tracers each mode provides over its generated rules (see package
// proxy/proxytest, which runs one behaviour table against every mode).
type TracePacket struct {
	Src, Dst netip.Addr
	Protocol v1.Protocol
	DPort    int
	// FromLocalHost is true for a packet sent by the node itself (it
	// traverses OUTPUT rather than PREROUTING).
	FromLocalHost bool
}

// Verdicts a trace can end with.
const (
	VerdictAccept = "ACCEPT"
	VerdictDrop   = "DROP"
	VerdictReject = "REJECT"
)

// TraceOutcome is one possible fate of a traced packet (a load-balanced
// packet has one outcome per endpoint it may reach).
type TraceOutcome struct {
	// Endpoint is the DNAT destination "ip:port", empty if not translated.
	Endpoint string
	// Masquerade is true when the packet leaves with the node's source
	// address instead of the client's.
	Masquerade bool
	// Verdict is VerdictAccept, VerdictDrop or VerdictReject.
	Verdict string
}

// Tracer walks a virtual packet through a mode's programmed state.
type Tracer interface {
	Trace(pkt TracePacket) ([]TraceOutcome, error)
}
