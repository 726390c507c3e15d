package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/vishvananda/netns"
)

var logMu sync.Mutex

func logf(format string, args ...any) {
	logMu.Lock()
	defer logMu.Unlock()
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// waitFor polls f every interval until it succeeds or timeout passes.
func waitFor(timeout, interval time.Duration, what string, f func() error) error {
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = f(); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v: %w", what, timeout, err)
		}
		time.Sleep(interval)
	}
}

// nsDialer opens sockets inside the named network namespace, so that the
// harness reaches servers on a test namespace's own loopback.
func nsDialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	n := &testbed.NetNS{Name: ns}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := n.Do(func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

func nsHTTPClient(ns string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: nsDialer(ns), DisableKeepAlives: true}}
}

// metrics is one scrape of a Prometheus text endpoint: series (with their
// label text) to value.
type metrics map[string]float64

func scrape(c *http.Client, url string) (metrics, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// v is the value of a metric's IPv4 series (kube-proxy 1.37 and svcnet
// both label their sync metrics with ip_family; the Services here are
// IPv4), or of the unlabelled series of a metric without that label (the
// pending-change gauges).
func (m metrics) v(name string) float64 {
	if x, ok := m[name+`{ip_family="IPv4"}`]; ok {
		return x
	}
	return m[name]
}

// bucket is one cumulative histogram bucket.
type bucket struct {
	le    float64
	count float64
}

// histogram returns the cumulative buckets of a histogram metric's IPv4
// series, sorted.
func (m metrics) histogram(name string) []bucket {
	var bs []bucket
	prefix4 := name + `_bucket{ip_family="IPv4",le="`
	for k, v := range m {
		if !strings.HasPrefix(k, prefix4) {
			continue
		}
		s := strings.TrimSuffix(strings.TrimPrefix(k, prefix4), `"}`)
		le := math.Inf(1)
		if s != "+Inf" {
			var err error
			if le, err = strconv.ParseFloat(s, 64); err != nil {
				continue
			}
		}
		bs = append(bs, bucket{le, v})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	return bs
}

// proc is a long-running program started inside a namespace, its output in
// a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startIn(ns, name, logPath string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	// If the harness dies, its children go too; a process group of its
	// own, so that stop also ends what it started (kube-proxy's nft).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and, after grace, SIGKILL, waits for the exit, then
// kills what is left of the process group.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	// A child left running (an nft still applying a proxy's transaction
	// would hold the ruleset's lock and a CPU) goes with the group.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// rssMB is the resident set of pid in MB (VmRSS).
func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return math.NaN()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return math.NaN()
}

// rssParts is the anonymous (heap, stacks) and file-backed (executable)
// parts of pid's resident set in MB (RssAnon, RssFile).
func rssParts(pid int) (anon, file float64) {
	anon, file = math.NaN(), math.NaN()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "RssAnon:":
			anon = kb / 1024
		case "RssFile:":
			file = kb / 1024
		}
	}
	return
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

func readAllString(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}

// doInPath runs f on an OS thread inside the network namespace at path
// (such as /proc/PID/ns/net).
func doInPath(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.GetFromPath(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		ferr := f()
		// A thread that cannot go back is never reused.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

func pathHTTPClient(path string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := doInPath(path, func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}
