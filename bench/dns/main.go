// Command dnsbench measures svcnet dns against CoreDNS's kubernetes plugin on
// the same cluster state: it serves N Services (each with a two-endpoint
// EndpointSlice; every tenth headless) from an in-process read-only
// Kubernetes API on 127.0.0.1, starts both DNS servers against it, waits for
// /ready, then runs dnsperf against each in turn (never concurrently) and
// prints QPS, average and p99 latency (from dnsperf -v per-query times) and
// the servers' RSS when idle after sync and after the run.
//
// It is a benchmark, not a test; everything stays on loopback. Usage:
//
//	go build -o /tmp/svcnet ./cmd/svcnet
//	GOBIN=/tmp/coredns go install github.com/coredns/coredns@v1.15.0
//	go run ./bench/dns --svcnet /tmp/svcnet --coredns /tmp/coredns/coredns --services 1000,10000,100000
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func main() {
	svcnetBin := flag.String("svcnet", "", "svcnet binary (required)")
	corednsBin := flag.String("coredns", "", "coredns binary (optional: without it only svcnet is measured)")
	sizes := flag.String("services", "1000,10000,100000", "comma-separated Service counts")
	seconds := flag.Int("seconds", 10, "dnsperf run length per server")
	clients := flag.Int("clients", 4, "dnsperf -c")
	outstanding := flag.Int("outstanding", 100, "dnsperf -q")
	compareOnly := flag.Bool("compare", false, "instead of measuring, ask both servers the same questions about the test cluster plus a generated one, in every pods mode, and print the differences (exit status 3 if any)")
	compareServices := flag.Int("compare-services", 300, "generated Services for --compare (with their slices, pods and namespaces about 4 objects each)")
	flag.Parse()
	if *svcnetBin == "" {
		fmt.Fprintln(os.Stderr, "--svcnet is required")
		os.Exit(2)
	}
	if *compareOnly {
		n, err := compare(*svcnetBin, *corednsBin, *compareServices)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if n > 0 {
			os.Exit(3)
		}
		return
	}
	var rows []row
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bad --services entry %q\n", s)
			os.Exit(2)
		}
		r, err := runSize(n, *svcnetBin, *corednsBin, *seconds, *clients, *outstanding)
		if err != nil {
			fmt.Fprintf(os.Stderr, "services=%d: %v\n", n, err)
			os.Exit(1)
		}
		rows = append(rows, r)
	}
	if *corednsBin != "" {
		printTable(rows, *svcnetBin, *corednsBin)
	}
}

const namespaces = 10

func clusterState(n int) ([]corev1.Namespace, []corev1.Service, []discoveryv1.EndpointSlice) {
	var nss []corev1.Namespace
	for i := 0; i < namespaces; i++ {
		nss = append(nss, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%d", i), ResourceVersion: "1"}})
	}
	tcp := corev1.ProtocolTCP
	var svcs []corev1.Service
	var slices []discoveryv1.EndpointSlice
	for i := 0; i < n; i++ {
		ns, name := fmt.Sprintf("ns-%d", i%namespaces), fmt.Sprintf("svc-%d", i)
		ip := fmt.Sprintf("10.96.%d.%d", 1+i/250, 1+i%250)
		headless := i%10 == 9
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
				Ports: []corev1.ServicePort{{Name: "http", Protocol: tcp, Port: 80}}}}
		if headless {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
		}
		svcs = append(svcs, s)
		pname, pport, ready := "http", int32(8080), true
		es := discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-abcde", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &pname, Protocol: &tcp, Port: &pport}},
		}
		for e := 0; e < 2; e++ {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 128+e, i/250, 1+i%250)},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			})
		}
		slices = append(slices, es)
	}
	return nss, svcs, slices
}

// queryFile writes a dnsperf input: 80% A of existing Services, 10% SRV of
// their named port, 10% names that do not exist, shuffled.
func queryFile(dir string, n int) (string, error) {
	var lines []string
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		k := r.IntN(n)
		name := fmt.Sprintf("svc-%d.ns-%d.svc.cluster.local", k, k%namespaces)
		switch x := r.IntN(10); {
		case x < 8:
			lines = append(lines, name+" A")
		case x == 8:
			lines = append(lines, "_http._tcp."+name+" SRV")
		default:
			lines = append(lines, fmt.Sprintf("nosuch-%d.ns-%d.svc.cluster.local A", k, k%namespaces))
		}
	}
	p := filepath.Join(dir, fmt.Sprintf("queries-%d.txt", n))
	return p, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

var usedPorts = map[int]bool{}

// freePort returns a port free for TCP and UDP on 127.0.0.1, never the same
// one twice in a run.
func freePort() int {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		l.Close()
		if err != nil || usedPorts[p] {
			continue
		}
		u.Close()
		usedPorts[p] = true
		return p
	}
}

// stubUpstream answers everything NXDOMAIN, so neither server ever reaches a
// real resolver.
func stubUpstream() (string, func()) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		// www.example.com has an address, so that ExternalName chases
		// have something to find; everything else does not exist.
		if len(r.Question) == 1 && strings.EqualFold(r.Question[0].Name, "www.example.com.") {
			m.SetReply(r)
			m.RecursionAvailable = true
			if r.Question[0].Qtype == dns.TypeA {
				m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
					A: net.IPv4(93, 184, 215, 14)}}
			}
		} else {
			m.SetRcode(r, dns.RcodeNameError)
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = s.ActivateAndServe() }()
	return pc.LocalAddr().String(), func() { _ = s.Shutdown() }
}

type target struct {
	name    string
	cmd     *exec.Cmd
	dnsPort int
	ready   string
}

func waitReady(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v", url, timeout)
}

func waitAnswers(port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion("cluster.local.", dns.TypeSOA)
	for time.Now().Before(deadline) {
		if r, _, err := c.Exchange(m, fmt.Sprintf("127.0.0.1:%d", port)); err == nil && r.Rcode == dns.RcodeSuccess {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no DNS answer on port %d after %v", port, timeout)
}

// printTable prints the side-by-side table with ratios, the versions and
// the command, as docs/dns.md records it.
func printTable(rows []row, svcnetBin, corednsBin string) {
	version := func(bin string, args ...string) string {
		b, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\n%s; svcnet: %s; CoreDNS: %s; dnsperf %s; %d CPUs; load average %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"),
		version(svcnetBin, "version"), version(corednsBin, "-version"), dnsperfVersion(), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Printf("command: %s\n\n", strings.Join(os.Args, " "))
	fmt.Println("| Services | QPS svcnet / CoreDNS | p99 ms svcnet / CoreDNS | RSS idle MiB svcnet / CoreDNS | RSS under load MiB svcnet / CoreDNS |")
	fmt.Println("|---|---|---|---|---|")
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	for _, r := range rows {
		fmt.Printf("| %d | %.0f / %.0f (%s) | %.2f / %.2f (%s) | %.1f / %.1f (%s) | %.1f / %.1f (%s) |\n", r.services,
			r.qps[0], r.qps[1], ratio(r.qps[0], r.qps[1]),
			r.p99[0], r.p99[1], ratio(r.p99[0], r.p99[1]),
			float64(r.idleKiB[0])/1024, float64(r.idleKiB[1])/1024, ratio(float64(r.idleKiB[0]), float64(r.idleKiB[1])),
			float64(r.loadKiB[0])/1024, float64(r.loadKiB[1])/1024, ratio(float64(r.loadKiB[0]), float64(r.loadKiB[1])))
	}
}

func dnsperfVersion() string {
	b, _ := exec.Command("dnsperf", "-h").CombinedOutput()
	if m := regexp.MustCompile(`[Vv]ersion ([0-9.]+)`).FindSubmatch(b); m != nil {
		return string(m[1])
	}
	b, _ = exec.Command("dpkg-query", "-W", "-f", "${Version}", "dnsperf").Output()
	return strings.TrimSpace(string(b))
}

func rssAnonKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "RssAnon:") {
			v, _ := strconv.Atoi(strings.Fields(l)[1])
			return v
		}
	}
	return -1
}

func rssKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			v, _ := strconv.Atoi(f[1])
			return v
		}
	}
	return -1
}

type result struct {
	qps, avgMs, p99Ms float64
	completed, lost   string
}

var (
	qpsRe  = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)
	compRe = regexp.MustCompile(`Queries completed:\s+(\d+ \([0-9.]+%\))`)
	lostRe = regexp.MustCompile(`Queries lost:\s+(\d+ \([0-9.]+%\))`)
	// dnsperf -v: "> NOERROR svc-1.ns-1.svc.cluster.local A 0.000123"
	verbRe = regexp.MustCompile(`^> \S+ \S+ \S+ ([0-9.]+)$`)
)

func dnsperf(port int, file string, seconds, clients, outstanding int) (result, error) {
	cmd := exec.Command("dnsperf", "-s", "127.0.0.1", "-p", strconv.Itoa(port), "-d", file,
		"-l", strconv.Itoa(seconds), "-c", strconv.Itoa(clients), "-q", strconv.Itoa(outstanding), "-v")
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("dnsperf: %w", err)
	}
	var lat []float64
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if m := verbRe.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			lat = append(lat, v)
		}
	}
	var r result
	if m := qpsRe.FindSubmatch(out); m != nil {
		r.qps, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := compRe.FindSubmatch(out); m != nil {
		r.completed = string(m[1])
	}
	if m := lostRe.FindSubmatch(out); m != nil {
		r.lost = string(m[1])
	}
	if len(lat) > 0 {
		sort.Float64s(lat)
		sum := 0.0
		for _, v := range lat {
			sum += v
		}
		r.avgMs = sum / float64(len(lat)) * 1000
		r.p99Ms = lat[int(float64(len(lat)-1)*0.99)] * 1000
	}
	return r, nil
}

// row is one size's measurements of both servers (index 0 svcnet, 1 CoreDNS).
type row struct {
	services         int
	qps, p99         [2]float64
	idleKiB, loadKiB [2]int
}

func runSize(n int, svcnetBin, corednsBin string, seconds, clients, outstanding int) (row, error) {
	out := row{services: n}
	dir, err := os.MkdirTemp("", "dnsbench")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)
	api := newFakeAPI(clusterState(n))
	if err := api.start(); err != nil {
		return out, err
	}
	defer api.srv.Close()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(api.kubeconfig()), 0o600); err != nil {
		return out, err
	}
	up, stopUp := stubUpstream()
	defer stopUp()
	qf, err := queryFile(dir, n)
	if err != nil {
		return out, err
	}

	targets, err := startTargets(dir, kc, up, svcnetBin, corednsBin, targetOpts{ttl: "30", pods: "insecure", kubeadm: true})
	if err != nil {
		return out, err
	}
	time.Sleep(2 * time.Second) // both settle after the initial lists
	defer stopTargets(targets)
	fmt.Printf("\n== %d Services (%d namespaces, 2 ready endpoints each, every 10th headless); dnsperf -c %d -q %d -l %d, 80%% A / 10%% SRV / 10%% NXDOMAIN\n",
		n, namespaces, clients, outstanding, seconds)
	fmt.Printf("%-16s %10s %10s %10s %10s %10s  %s\n", "server", "QPS", "avg ms", "p99 ms", "RSS idle", "RSS load", "completed / lost")
	for i, t := range targets {
		idle, idleAnon := rssKiB(t.cmd.Process.Pid), rssAnonKiB(t.cmd.Process.Pid)
		r, err := dnsperf(t.dnsPort, qf, seconds, clients, outstanding)
		if err != nil {
			return out, fmt.Errorf("%s: %w", t.name, err)
		}
		load, loadAnon := rssKiB(t.cmd.Process.Pid), rssAnonKiB(t.cmd.Process.Pid)
		fmt.Printf("%-16s %10.0f %10.3f %10.3f %9.1fM %9.1fM  %s / %s  (anonymous RSS idle %.1fM, load %.1fM)\n", t.name, r.qps, r.avgMs, r.p99Ms,
			float64(idle)/1024, float64(load)/1024, r.completed, r.lost, float64(idleAnon)/1024, float64(loadAnon)/1024)
		if i < 2 {
			out.qps[i], out.p99[i], out.idleKiB[i], out.loadKiB[i] = r.qps, r.p99Ms, idle, load
		}
	}
	return out, nil
}

// targetOpts configures both servers alike.
type targetOpts struct {
	ttl  string
	pods string // insecure, verified or disabled
	// kubeadm: kubeadm's Corefile as is (reverse fallthrough, cache 30
	// outside cluster.local); svcnet gets --reverse-fallthrough to match.
	// Without it CoreDNS is authoritative for the reverse zones and has no
	// cache, which is what --compare checks.
	kubeadm bool
}

// startTargets starts svcnet dns (and CoreDNS, if corednsBin is set) against
// the kubeconfig and waits until both report ready.
func startTargets(dir, kc, up, svcnetBin, corednsBin string, o targetOpts) ([]*target, error) {
	var targets []*target
	ttl := o.ttl
	{
		p, h, rd, m := freePort(), freePort(), freePort(), freePort()
		args := []string{"dns", "--kubeconfig", kc, "--listen", fmt.Sprintf("127.0.0.1:%d", p),
			"--health-listen", fmt.Sprintf("127.0.0.1:%d", h), "--ready-listen", fmt.Sprintf("127.0.0.1:%d", rd),
			"--metrics-listen", fmt.Sprintf("127.0.0.1:%d", m), "--upstream", up, "--ttl", ttl, "--pods", o.pods, "--log-level", "warn"}
		if o.kubeadm {
			args = append(args, "--reverse-fallthrough")
		} else {
			args = append(args, "--cache-size", "0") // CoreDNS runs without cache here
		}
		cmd := exec.Command(svcnetBin, args...)
		targets = append(targets, &target{name: "svcnet dns", cmd: cmd, dnsPort: p, ready: fmt.Sprintf("http://127.0.0.1:%d/ready", rd)})
	}
	if corednsBin != "" {
		p, h, rd, m := freePort(), freePort(), freePort(), freePort()
		// kubeadm's default Corefile (Kubernetes 1.36), on loopback ports.
		fall, cache := "       fallthrough in-addr.arpa ip6.arpa\n", `    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
`
		if !o.kubeadm {
			fall, cache = "", ""
		}
		corefile := fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    errors
    health 127.0.0.1:%d
    ready 127.0.0.1:%d
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       kubeconfig %s
       pods %s
%s       ttl %s
    }
    prometheus 127.0.0.1:%d
    forward . %s {
       max_concurrent 1000
    }
%s    loadbalance
}
`, p, h, rd, kc, o.pods, fall, ttl, m, up, cache)
		cf := filepath.Join(dir, "Corefile")
		if err := os.WriteFile(cf, []byte(corefile), 0o644); err != nil {
			return nil, err
		}
		cmd := exec.Command(corednsBin, "-conf", cf, "-quiet")
		targets = append(targets, &target{name: "CoreDNS 1.15.0", cmd: cmd, dnsPort: p, ready: fmt.Sprintf("http://127.0.0.1:%d/ready", rd)})
	}
	for _, t := range targets {
		t.cmd.Stdout, t.cmd.Stderr = os.Stderr, os.Stderr
		if err := t.cmd.Start(); err != nil {
			stopTargets(targets)
			return nil, fmt.Errorf("start %s: %w", t.name, err)
		}
	}
	for _, t := range targets {
		if err := waitReady(t.ready, 120*time.Second); err != nil {
			stopTargets(targets)
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
		// CoreDNS reports ready before its DNS listener is up: wait until
		// the server answers.
		if err := waitAnswers(t.dnsPort, 30*time.Second); err != nil {
			stopTargets(targets)
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
	}
	return targets, nil
}

func stopTargets(ts []*target) {
	for _, t := range ts {
		if t.cmd.Process != nil {
			_ = t.cmd.Process.Kill()
			_ = t.cmd.Wait()
		}
	}
}
