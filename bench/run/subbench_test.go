package main

import "testing"

// TestParseUserspace reads bench/userspace's output as it prints it.
func TestParseUserspace(t *testing.T) {
	out := `iperf3: error - unable to receive cookie at server: Connection reset by peer
path                          iperf3 Gbit/s  vs direct             wrk conn/s  vs direct proxy CPU/conn machine CPU/conn
direct                  26.53 [24.72-28.20]      1.00x 9212.35 [9034.06-9828.71]      1.00x              -           202 µs
svcnet userspace        14.40 [13.99-14.77]      0.54x 5183.58 [5147.98-5276.47]      0.56x         148 µs           370 µs
haproxy 2.6 (tcp)          6.82 [6.21-7.02]      0.26x 4994.18 [4861.84-5702.65]      0.54x         161 µs           391 µs
CPU ceiling svcnet userspace: 5717 conn/s (2 CPUs / (202 µs direct + 148 µs proxy)), 0.62x direct; reached 0.91 of it
CPU ceiling haproxy 2.6 (tcp): 5506 conn/s (2 CPUs / (202 µs direct + 161 µs proxy)), 0.60x direct; reached 0.91 of it
0.8x direct needs a proxy CPU per connection of at most 69 µs
iperf3 direct: the machine busy 1.71 CPUs, 0.064 CPU s per Gbit
throughput ceiling svcnet userspace: 19.7 Gbit/s (2 CPUs / (0.064 direct + 0.037 proxy CPU s per Gbit)), 0.74x direct; reached 0.73 of it
throughput ceiling haproxy 2.6 (tcp): 9.9 Gbit/s (2 CPUs / (0.064 direct + 0.139 proxy CPU s per Gbit)), 0.37x direct; reached 0.69 of it
`
	res := newResults()
	if n := parseUserspace(res, out); n != 3 {
		t.Fatalf("%d rows", n)
	}
	for _, c := range []struct {
		impl, metric string
		want         float64
	}{
		{"direct", "gbps", 26.53}, {"direct", "connps", 9212.35}, {"direct", "machineconn", 202}, {"direct", "gbitcpu", 0.064},
		{"svcnet userspace", "gbps", 14.40}, {"svcnet userspace", "cpuconn", 148}, {"svcnet userspace", "machineconn", 370},
		{"svcnet userspace", "gbitcpu", 0.037},
		{"haproxy", "connps", 4994.18}, {"haproxy", "cpuconn", 161}, {"haproxy", "gbitcpu", 0.139},
	} {
		if got := res.get("userspace", c.impl, c.metric); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s %s: %v, want %v", c.impl, c.metric, got, c.want)
		}
	}
	if got := res.get("userspace", "direct", "cpuconn"); len(got) != 0 {
		t.Errorf("direct has a proxy CPU: %v", got)
	}
}
