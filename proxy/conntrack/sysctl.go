package conntrack

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/svcnet/svcnet/proxy"
)

// Sysctls are kube-proxy's conntrack settings (--conntrack-* flags). Zero
// values leave the kernel's setting alone.
type Sysctls struct {
	MaxPerCore               int
	Min                      int
	TCPTimeoutEstablished    time.Duration
	TCPTimeoutCloseWait      time.Duration
	TCPBeLiberal             bool
	UDPTimeout, UDPStreamTTL time.Duration
}

// Apply writes the settings with sysctl through ex. It is best effort, as in
// kube-proxy: inside a non-initial network namespace nf_conntrack_max is
// read-only, so every failure is logged and none is returned.
func (s Sysctls) Apply(ctx context.Context, ex proxy.Executor, log *slog.Logger) {
	if ex == nil {
		ex = proxy.OSExecutor{}
	}
	if log == nil {
		log = slog.Default()
	}
	set := func(key string, val int) {
		if _, err := ex.Run(ctx, nil, "sysctl", "-q", "-w", fmt.Sprintf("%s=%d", key, val)); err != nil {
			log.Info("could not set conntrack sysctl (read-only here?)", "key", key, "value", val, "err", err)
		}
	}
	if s.MaxPerCore > 0 {
		max := s.MaxPerCore * runtime.NumCPU()
		if max < s.Min {
			max = s.Min
		}
		set("net.netfilter.nf_conntrack_max", max)
	}
	if s.TCPTimeoutEstablished > 0 {
		set("net.netfilter.nf_conntrack_tcp_timeout_established", int(s.TCPTimeoutEstablished/time.Second))
	}
	if s.TCPTimeoutCloseWait > 0 {
		set("net.netfilter.nf_conntrack_tcp_timeout_close_wait", int(s.TCPTimeoutCloseWait/time.Second))
	}
	if s.TCPBeLiberal {
		set("net.netfilter.nf_conntrack_tcp_be_liberal", 1)
	}
	if s.UDPTimeout > 0 {
		set("net.netfilter.nf_conntrack_udp_timeout", int(s.UDPTimeout/time.Second))
	}
	if s.UDPStreamTTL > 0 {
		set("net.netfilter.nf_conntrack_udp_timeout_stream", int(s.UDPStreamTTL/time.Second))
	}
}
