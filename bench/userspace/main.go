// Command userspace benchmarks svcnet's userspace proxy mode against a
// direct connection and against HAProxy proxying the same backend, in one
// run, on loopback:
//
//   - throughput: iperf3 (one TCP stream, -t seconds) to the iperf3 server
//     directly, through the userspace proxy, and through HAProxy (mode tcp);
//   - connections per second: wrk with "Connection: close" (every request is
//     a new TCP connection through the proxy) against a small HTTP backend.
//
// Beside the rates it reports each proxy's own CPU and the whole machine's
// busy CPU (/proc/stat) per connection and per Gbit, and the CPU ceiling:
// the rate a proxy could reach if CPU were the only bound, CPUs / (what a
// direct connection or Gbit costs the machine + what it costs the proxy).
//
// It is a benchmark, not a test: run it with
//
//	go run ./bench/userspace [-duration 5s] [-connections 32] [-runs 3]
//
// -measure throughput or -measure conns runs only one half, -cpuprofile F
// writes CPU profiles of the proxy (it runs in this process), and
// -accept-loops N sets the proxy's listeners per TCP Service port.
//
// It needs iperf3, wrk and haproxy on PATH (Debian packages of the same
// names) and only uses 127.0.0.1. Every process it starts is stopped before
// it exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/proxy/userspace"
)

var (
	cpuProfile  string
	runs        int
	measure     string
	acceptLoops int
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "length of each measurement")
	flag.IntVar(&runs, "runs", 3, "repetitions of every measurement (medians and ranges are reported)")
	conns := flag.Int("connections", 32, "concurrent wrk connections")
	backend := flag.String("http-backend", "", "internal: serve the HTTP backend on this address")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write CPU profiles of the proxy during its first wrk run to this file and during its first iperf3 run to FILE.iperf")
	flag.IntVar(&acceptLoops, "accept-loops", 0, "listeners per TCP Service port of the userspace proxy (0: its default)")
	flag.StringVar(&measure, "measure", "all", "what to measure: all, throughput (iperf3 only) or conns (wrk only)")
	flag.Parse()
	if *backend != "" {
		serveHTTP(*backend)
		return
	}
	if err := run(*duration, *conns); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func serveHTTP(addr string) {
	body := []byte("ok\n")
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write(body)
	})}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type procs []*exec.Cmd

func (p *procs) start(name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	*p = append(*p, cmd)
	return cmd, nil
}

func (p procs) stop() {
	for _, c := range p {
		if c.Process != nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}

func waitListening(port int) error {
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on port %d", port)
}

func run(d time.Duration, conns int) error {
	for _, b := range []string{"iperf3", "wrk", "haproxy"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s not installed (apt-get install iperf3 wrk haproxy)", b)
		}
	}
	var ps procs
	defer func() { ps.stop() }()
	iperfPort, httpPort := freePort(), freePort()
	if _, err := ps.start("iperf3", "-s", "-B", "127.0.0.1", "-p", strconv.Itoa(iperfPort)); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if _, err := ps.start(self, "-http-backend", fmt.Sprintf("127.0.0.1:%d", httpPort)); err != nil {
		return err
	}
	if err := waitListening(iperfPort); err != nil {
		return err
	}
	if err := waitListening(httpPort); err != nil {
		return err
	}

	// The userspace proxy under test (listeners on 127.0.0.1, no redirect
	// rules: clients connect to its ports directly).
	px := userspace.New(userspace.Options{ListenHost: "127.0.0.1", AcceptLoops: acceptLoops, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer px.Close()
	lo := netip.MustParseAddr("127.0.0.1")
	err = px.Sync(context.Background(), []userspace.ServiceConfig{
		{Name: "bench/iperf", Protocol: "tcp", Port: 5201, Addrs: []netip.Addr{netip.MustParseAddr("10.96.0.100")},
			Endpoints: []userspace.Endpoint{{Addr: netip.AddrPortFrom(lo, uint16(iperfPort)), Weight: 1}}},
		{Name: "bench/http", Protocol: "tcp", Port: 80, Addrs: []netip.Addr{netip.MustParseAddr("10.96.0.101")},
			Endpoints: []userspace.Endpoint{{Addr: netip.AddrPortFrom(lo, uint16(httpPort)), Weight: 1}}},
	})
	if err != nil {
		return fmt.Errorf("userspace sync: %w", err)
	}
	usIperf, usHTTP := px.ProxyPort("bench/iperf", "tcp"), px.ProxyPort("bench/http", "tcp")

	// HAProxy in TCP mode in front of the same two backends.
	haIperf, haHTTP := freePort(), freePort()
	dir, err := os.MkdirTemp("", "svcnet-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := fmt.Sprintf(`global
    maxconn 4000
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
listen iperf
    bind 127.0.0.1:%d
    server s1 127.0.0.1:%d
listen http
    bind 127.0.0.1:%d
    server s1 127.0.0.1:%d
`, haIperf, iperfPort, haHTTP, httpPort)
	cfgPath := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	if _, err := ps.start("haproxy", "-db", "-f", cfgPath); err != nil {
		return err
	}
	if err := waitListening(haIperf); err != nil {
		return err
	}

	haPID := 0
	for _, c := range ps {
		if filepath.Base(c.Path) == "haproxy" {
			haPID = c.Process.Pid
		}
	}
	type row struct {
		name  string
		iperf int
		http  int
		// cpu returns the CPU time the proxy itself has used so far.
		cpu             func() time.Duration
		gbps, rps, cpus []float64 // one per run; cpus: proxy CPU µs per connection
		// machine: the whole machine's busy CPU µs per connection (wrk,
		// the backend, the proxy and the kernel's work for all of them).
		machine []float64
		// iperfMachine and iperfProxy: the machine's and the proxy's CPU
		// seconds per Gbit during the iperf3 runs.
		iperfMachine, iperfProxy []float64
		errs                     []error
	}
	rows := []*row{
		{name: "direct", iperf: iperfPort, http: httpPort},
		{name: "svcnet userspace", iperf: usIperf, http: usHTTP, cpu: selfCPU},
		{name: "haproxy 2.6 (tcp)", iperf: haIperf, http: haHTTP, cpu: func() time.Duration { return procCPU(haPID) }},
	}
	for run := 0; run < runs; run++ {
		// Alternate the order from run to run, so that a slow spell of the
		// machine does not always hit the same path.
		order := append([]*row(nil), rows...)
		if run%2 == 1 {
			slices.Reverse(order)
		}
		for _, r := range order {
			var iperfProf *os.File
			if cpuProfile != "" && r.http == usHTTP && run == 0 {
				f, err := os.Create(cpuProfile + ".iperf")
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				iperfProf = f
			}
			var c0 time.Duration
			if r.cpu != nil {
				c0 = r.cpu()
			}
			m0, t0 := machineCPU(), time.Now()
			g, err := 0.0, error(nil)
			if measure != "conns" {
				g, err = iperf(r.iperf, d)
			}
			if measure != "conns" && err == nil && g > 0 {
				// CPU seconds per Gbit: busy CPUs over Gbit/s.
				el := time.Since(t0).Seconds()
				r.iperfMachine = append(r.iperfMachine, (machineCPU()-m0).Seconds()/el/g)
				if r.cpu != nil {
					r.iperfProxy = append(r.iperfProxy, (r.cpu()-c0).Seconds()/el/g)
				}
			}
			if iperfProf != nil {
				pprof.StopCPUProfile()
				iperfProf.Close()
			}
			if err != nil {
				r.errs = append(r.errs, err)
			} else if measure != "conns" {
				r.gbps = append(r.gbps, g)
			}
			if measure == "throughput" {
				continue
			}
			profiling := cpuProfile != "" && r.http == usHTTP && run == 0
			if profiling {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer f.Close()
			}
			c0 = 0
			if r.cpu != nil {
				c0 = r.cpu()
			}
			m0 = machineCPU()
			rps, n, err := wrk(r.http, d, conns)
			m1 := machineCPU()
			if profiling {
				pprof.StopCPUProfile()
			}
			if err != nil {
				r.errs = append(r.errs, err)
				continue
			}
			r.rps = append(r.rps, rps)
			if r.cpu != nil && n > 0 {
				r.cpus = append(r.cpus, float64((r.cpu()-c0).Microseconds())/float64(n))
			}
			if n > 0 && m0 > 0 {
				r.machine = append(r.machine, float64((m1-m0).Microseconds())/float64(n))
			}
		}
	}
	fmt.Printf("%-20s %22s %10s %22s %10s %14s %16s\n", "path", "iperf3 Gbit/s", "vs direct", "wrk conn/s", "vs direct", "proxy CPU/conn", "machine CPU/conn")
	for _, r := range rows {
		cpu, mach := "-", "-"
		if len(r.cpus) > 0 {
			cpu = fmt.Sprintf("%.0f µs", median(r.cpus))
		}
		if len(r.machine) > 0 {
			mach = fmt.Sprintf("%.0f µs", median(r.machine))
		}
		fmt.Printf("%-20s %22s %9.2fx %22s %9.2fx %14s %16s\n", r.name, spread(r.gbps), median(r.gbps)/median(rows[0].gbps),
			spread(r.rps), median(r.rps)/median(rows[0].rps), cpu, mach)
		for _, err := range r.errs {
			fmt.Printf("  error: %v\n", err)
		}
	}
	// The connection rate a proxy could reach on this machine if the CPUs
	// were the only bound: every connection costs what a direct one costs
	// the machine plus what it costs the proxy.
	if direct := median(rows[0].machine); direct > 0 && len(rows[0].rps) > 0 {
		ncpu := float64(runtime.NumCPU())
		for _, r := range rows[1:] {
			if len(r.cpus) == 0 || len(r.rps) == 0 {
				continue
			}
			ceiling := ncpu * 1e6 / (direct + median(r.cpus))
			fmt.Printf("CPU ceiling %s: %.0f conn/s (%d CPUs / (%.0f µs direct + %.0f µs proxy)), %.2fx direct; reached %.2f of it\n",
				r.name, ceiling, int(ncpu), direct, median(r.cpus), ceiling/median(rows[0].rps), median(r.rps)/ceiling)
		}
		need := ncpu*1e6/(0.8*median(rows[0].rps)) - direct
		fmt.Printf("0.8x direct needs a proxy CPU per connection of at most %.0f µs\n", need)
	}
	// The same for the throughput: a proxied byte costs what a direct one
	// costs the machine plus what it costs the proxy.
	if direct := median(rows[0].iperfMachine); direct > 0 && len(rows[0].gbps) > 0 {
		ncpu := float64(runtime.NumCPU())
		fmt.Printf("iperf3 direct: the machine busy %.2f CPUs, %.3f CPU s per Gbit\n", direct*median(rows[0].gbps), direct)
		for _, r := range rows[1:] {
			if len(r.iperfProxy) == 0 || len(r.gbps) == 0 {
				continue
			}
			ceiling := ncpu / (direct + median(r.iperfProxy))
			fmt.Printf("throughput ceiling %s: %.1f Gbit/s (%d CPUs / (%.3f direct + %.3f proxy CPU s per Gbit)), %.2fx direct; reached %.2f of it\n",
				r.name, ceiling, int(ncpu), direct, median(r.iperfProxy), ceiling/median(rows[0].gbps), median(r.gbps)/ceiling)
		}
	}
	fmt.Printf("(medians [ranges] of %d alternating runs; one iperf3 TCP stream and wrk -t2 -c%d with \"Connection: close\", %s each, all on 127.0.0.1;\n"+
		" proxy CPU/conn: the proxy process's user+system CPU time during the wrk run divided by the requests wrk completed;\n"+
		" machine CPU/conn: the machine's busy CPU time (/proc/stat) during the wrk run divided by the same)\n", runs, conns, d)
	return nil
}

// machineCPU is the busy CPU time of the whole machine so far (/proc/stat:
// user, nice, system, irq, softirq and steal of every CPU); 0 if unknown.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ is 100 on Linux
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func spread(v []float64) string {
	if len(v) == 0 {
		return "error"
	}
	return fmt.Sprintf("%.2f [%.2f-%.2f]", median(v), slices.Min(v), slices.Max(v))
}

// selfCPU is this process's CPU time (the proxy under test runs in it; the
// HTTP backend is a child process).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is another process's CPU time from /proc/PID/stat.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
}

func fmtVal(v float64, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func iperf(port int, d time.Duration) (float64, error) {
	out, err := exec.Command("iperf3", "-c", "127.0.0.1", "-p", strconv.Itoa(port), "-t",
		strconv.Itoa(int(d.Seconds())), "-J").Output()
	if err != nil {
		return 0, fmt.Errorf("iperf3: %w: %s", err, out)
	}
	var res struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("iperf3 output: %w", err)
	}
	if res.Error != "" || res.End.SumReceived.BitsPerSecond == 0 {
		return 0, fmt.Errorf("iperf3: no result: %s", res.Error)
	}
	return res.End.SumReceived.BitsPerSecond / 1e9, nil
}

var (
	wrkRate     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkRequests = regexp.MustCompile(`([0-9]+) requests in`)
)

// wrk returns the rate and the number of requests completed.
func wrk(port int, d time.Duration, conns int) (float64, int, error) {
	out, err := exec.Command("wrk", "-t2", "-c"+strconv.Itoa(conns), "-d"+strconv.Itoa(int(d.Seconds()))+"s",
		"-H", "Connection: close", fmt.Sprintf("http://127.0.0.1:%d/", port)).CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("wrk: %w: %s", err, out)
	}
	m, n := wrkRate.FindSubmatch(out), wrkRequests.FindSubmatch(out)
	if m == nil || n == nil {
		return 0, 0, fmt.Errorf("wrk output: %s", strings.TrimSpace(string(out)))
	}
	count, _ := strconv.Atoi(string(n[1]))
	rate, err := strconv.ParseFloat(string(m[1]), 64)
	return rate, count, err
}
