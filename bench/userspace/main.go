// Command userspace benchmarks svcnet's userspace proxy mode against a
// direct connection and against HAProxy proxying the same backend, in one
// run, on loopback:
//
//   - throughput: iperf3 (one TCP stream, -t seconds) to the iperf3 server
//     directly, through the userspace proxy, and through HAProxy (mode tcp);
//   - connections per second: wrk with "Connection: close" (every request is
//     a new TCP connection through the proxy) against a small HTTP backend.
//
// It is a benchmark, not a test: run it with
//
//	go run ./bench/userspace [-duration 5s] [-connections 32]
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
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/svcnet/svcnet/proxy/userspace"
)

var cpuProfile string

func main() {
	duration := flag.Duration("duration", 5*time.Second, "length of each measurement")
	conns := flag.Int("connections", 32, "concurrent wrk connections")
	backend := flag.String("http-backend", "", "internal: serve the HTTP backend on this address")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the proxy during its wrk run to this file")
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
	px := userspace.New(userspace.Options{ListenHost: "127.0.0.1", Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
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

	type row struct {
		name       string
		iperf      int
		http       int
		gbps, rps  float64
		gbErr, rpE error
	}
	rows := []*row{
		{name: "direct", iperf: iperfPort, http: httpPort},
		{name: "svcnet userspace", iperf: usIperf, http: usHTTP},
		{name: "haproxy 2.6 (tcp)", iperf: haIperf, http: haHTTP},
	}
	for _, r := range rows {
		r.gbps, r.gbErr = iperf(r.iperf, d)
		if cpuProfile != "" && r.http == usHTTP {
			f, err := os.Create(cpuProfile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			r.rps, r.rpE = wrk(r.http, d, conns)
			pprof.StopCPUProfile()
			f.Close()
			continue
		}
		r.rps, r.rpE = wrk(r.http, d, conns)
	}
	fmt.Printf("%-20s %14s %10s %16s %10s\n", "path", "iperf3 Gbit/s", "vs direct", "wrk conn/s", "vs direct")
	for _, r := range rows {
		g, rp := fmtVal(r.gbps, r.gbErr), fmtVal(r.rps, r.rpE)
		fmt.Printf("%-20s %14s %9.2fx %16s %9.2fx\n", r.name, g, r.gbps/rows[0].gbps, rp, r.rps/rows[0].rps)
	}
	fmt.Printf("(one iperf3 TCP stream and wrk -t2 -c%d with \"Connection: close\", %s each, all on 127.0.0.1)\n", conns, d)
	return nil
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
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("iperf3 output: %w", err)
	}
	return res.End.SumReceived.BitsPerSecond / 1e9, nil
}

var wrkRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

func wrk(port int, d time.Duration, conns int) (float64, error) {
	out, err := exec.Command("wrk", "-t2", "-c"+strconv.Itoa(conns), "-d"+strconv.Itoa(int(d.Seconds()))+"s",
		"-H", "Connection: close", fmt.Sprintf("http://127.0.0.1:%d/", port)).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("wrk: %w: %s", err, out)
	}
	m := wrkRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("wrk output: %s", strings.TrimSpace(string(out)))
	}
	return strconv.ParseFloat(string(m[1]), 64)
}
