package speaker

import (
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// Metrics is MetalLB's metallb_speaker_announced gauge: 1 for every
// address a protocol announces from this node, labelled
// service ("namespace/name"), protocol ("layer2", "bgp"), node and ip. It
// is the desired state (set once the protocol accepted the Service), not a
// proof that routers or neighbors have converged, as in MetalLB. A nil
// *Metrics records nothing.
type Metrics struct {
	announced *prometheus.GaugeVec
}

// NewMetrics registers the gauge with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{announced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "metallb", Subsystem: "speaker", Name: "announced",
		Help: "Services being announced from this node. This is desired state, it does not guarantee that the routing protocols have converged.",
	}, []string{"service", "protocol", "node", "ip"})}
	reg.MustRegister(m.announced)
	return m
}

func (m *Metrics) announce(key types.NamespacedName, protocol, node string, ips []netip.Addr) {
	if m == nil {
		return
	}
	for _, ip := range ips {
		m.announced.WithLabelValues(key.String(), protocol, node, ip.String()).Set(1)
	}
}

func (m *Metrics) withdraw(key types.NamespacedName, protocol, node string, ips []netip.Addr) {
	if m == nil {
		return
	}
	for _, ip := range ips {
		m.announced.DeleteLabelValues(key.String(), protocol, node, ip.String())
	}
}
