package l2

import (
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are MetalLB's layer 2 counters, labelled ip (the announced
// address):
//
//	metallb_layer2_requests_received  ARP requests / neighbor solicitations for an announced address, answered here
//	metallb_layer2_responses_sent     ARP replies / solicited neighbor advertisements sent for them
//	metallb_layer2_gratuitous_sent    gratuitous packets sent: 2 per gratuitous ARP (request and reply), 1 per unsolicited NA
//
// As MetalLB's, the series stay once created (they are counters). A nil
// *Metrics records nothing.
type Metrics struct {
	in, out, gratuitous *prometheus.CounterVec
}

// NewMetrics registers the counters with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "metallb", Subsystem: "layer2", Name: name, Help: help}, []string{"ip"})
	}
	m := &Metrics{
		in:         c("requests_received", "Number of layer2 requests received for owned IPs"),
		out:        c("responses_sent", "Number of layer2 responses sent for owned IPs in response to requests"),
		gratuitous: c("gratuitous_sent", "Number of gratuitous layer2 packets sent for owned IPs as a result of failovers"),
	}
	reg.MustRegister(m.in, m.out, m.gratuitous)
	return m
}

func (m *Metrics) gotRequest(ip netip.Addr) {
	if m != nil {
		m.in.WithLabelValues(ip.String()).Inc()
	}
}

func (m *Metrics) sentResponse(ip netip.Addr) {
	if m != nil {
		m.out.WithLabelValues(ip.String()).Inc()
	}
}

func (m *Metrics) sentGratuitous(ip netip.Addr) {
	if m != nil {
		m.gratuitous.WithLabelValues(ip.String()).Inc()
	}
}
