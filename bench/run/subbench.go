package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The userspace and DNS comparisons already exist as commands of the main
// module (bench/userspace, bench/dns); the harness runs them, repeatedly,
// and parses their tables instead of duplicating them.

// benchUserspace runs `go run ./bench/userspace` reps times. Each run
// measures direct, svcnet userspace and HAProxy one after the other.
func benchUserspace(res *results, root string, cfg *config) error {
	for rep := 0; rep < cfg.reps; rep++ {
		args := []string{"run", "./bench/userspace", "-duration", cfg.usDuration.String()}
		cmd := exec.Command(goBin(), args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			res.note(fmt.Sprintf("bench/userspace repetition %d: %v: %s", rep+1, err, lastLines(string(out), 5)))
			continue
		}
		res.text["userspace-cmd"] = "go " + strings.Join(args, " ")
		if n := parseUserspace(res, string(out)); n != 3 {
			res.note(fmt.Sprintf("bench/userspace repetition %d: unexpected output: %s", rep+1, lastLines(string(out), 6)))
		}
		logf("userspace repetition %d done", rep+1)
	}
	return nil
}

var (
	// direct  19.47 [19.28-19.89]  1.00x 27470.29 [27101.38-28891.54]  1.00x  -  199 µs
	// (a value may come with its range in brackets; the last columns are
	// the proxy's CPU per connection, "-" for direct, and the machine's)
	usRow = regexp.MustCompile(`^(direct|svcnet userspace|haproxy[^0-9]*[0-9.]+ \(tcp\))\s+([0-9.]+)` + usRange + `\s+[0-9.]+x\s+([0-9.]+)` + usRange +
		`\s+[0-9.]+x\s+(?:([0-9.]+) µs|-)\s+(?:([0-9.]+) µs|-)`)
	usRange = `(?:\s+\[[^\]]*\])?`
	// iperf3 direct: the machine busy 1.71 CPUs, 0.064 CPU s per Gbit
	usIperfDirect = regexp.MustCompile(`^iperf3 direct: the machine busy [0-9.]+ CPUs, ([0-9.]+) CPU s per Gbit`)
	// throughput ceiling svcnet userspace: 19.7 Gbit/s (2 CPUs / (0.064 direct + 0.037 proxy CPU s per Gbit)), ...
	usIperfProxy = regexp.MustCompile(`^throughput ceiling (svcnet userspace|haproxy).*\([0-9.]+ direct \+ ([0-9.]+) proxy CPU s per Gbit`)
)

// parseUserspace adds one bench/userspace output's figures to res and
// returns the number of table rows it found (3).
func parseUserspace(res *results, out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if m := usIperfDirect.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			res.add(v, "userspace", "direct", "gbitcpu")
		}
		if m := usIperfProxy.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			res.add(v, "userspace", m[1], "gbitcpu")
		}
		m := usRow.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		impl := m[1]
		if strings.HasPrefix(impl, "haproxy") {
			impl = "haproxy"
		}
		g, _ := strconv.ParseFloat(m[2], 64)
		r, _ := strconv.ParseFloat(m[3], 64)
		res.add(g, "userspace", impl, "gbps")
		res.add(r, "userspace", impl, "connps")
		for i, metric := range []string{"cpuconn", "machineconn"} {
			if m[4+i] != "" {
				c, _ := strconv.ParseFloat(m[4+i], 64)
				res.add(c, "userspace", impl, metric)
			}
		}
		n++
	}
	return n
}

// benchDNS runs `go run ./bench/dns` reps times at the DNS sizes. bench/dns
// serves the same generated cluster to both servers and runs dnsperf against
// each in turn.
func benchDNS(res *results, root string, bins *peers, cfg *config) error {
	sizes := make([]string, len(cfg.dnsSizes))
	for i, n := range cfg.dnsSizes {
		sizes[i] = strconv.Itoa(n)
	}
	// | 1000 | 81234 / 20345 (3.99×) | 1.20 / 3.40 (0.35×) | 20.1 / 60.2 (0.33×) | 22.0 / 70.1 (0.31×) |
	row := regexp.MustCompile(`^\| (\d+) \| ([0-9.]+) / ([0-9.]+) \([^)]*\) \| ([0-9.]+) / ([0-9.]+) \([^)]*\) \| ([0-9.]+) / ([0-9.]+) \([^)]*\) \| ([0-9.]+) / ([0-9.]+)`)
	for rep := 0; rep < cfg.reps; rep++ {
		args := []string{"run", "./bench/dns", "--svcnet", bins.svcnet, "--coredns", bins.coredns,
			"--services", strings.Join(sizes, ","), "--seconds", strconv.Itoa(int(cfg.dnsDuration / time.Second))}
		cmd := exec.Command(goBin(), args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			res.note(fmt.Sprintf("bench/dns repetition %d: %v: %s", rep+1, err, lastLines(string(out), 5)))
			continue
		}
		res.text["dns-cmd"] = strings.ReplaceAll("go "+strings.Join(args, " "), cfg.root+"/", "")
		for _, l := range strings.Split(string(out), "\n") {
			m := row.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			f := func(i int) float64 { v, _ := strconv.ParseFloat(m[i], 64); return v }
			res.add(f(2), "dns", n, "qps", "svcnet")
			res.add(f(3), "dns", n, "qps", "coredns")
			res.add(f(4), "dns", n, "p99", "svcnet")
			res.add(f(5), "dns", n, "p99", "coredns")
			res.add(f(6), "dns", n, "rss-idle", "svcnet")
			res.add(f(7), "dns", n, "rss-idle", "coredns")
			res.add(f(8), "dns", n, "rss-load", "svcnet")
			res.add(f(9), "dns", n, "rss-load", "coredns")
		}
		logf("dns repetition %d done", rep+1)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}
