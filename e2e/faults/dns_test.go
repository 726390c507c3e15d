package faults

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver"
)

// TestDNSRestartUnderLoad kills `svcnet dns` (SIGKILL) under dnsperf load
// and starts it again at once: answers must resume within 1 s of the
// restart. The DNS server runs as kube-system/coredns with the
// system:coredns role only. A prober queries every 10 ms to time the gap;
// dnsperf's summary is printed.
func TestDNSRestartUnderLoad(t *testing.T) {
	needBinary(t)
	dnsperf, err := exec.LookPath("dnsperf")
	if err != nil {
		t.Skip("dnsperf not installed (Debian package dnsperf)")
	}
	dataDir := t.TempDir()
	apiPort := strconv.Itoa(freePort(t))
	api := start(t, bin, "apiserver", "--data-dir", dataDir, "--secure-port", apiPort, "--repair-interval", "1h")
	cfg := waitAPI(t, api, dataDir, 60*time.Second)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "myapp"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "myapp"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "dns.kubeconfig")
	if err := apiserver.WriteClientKubeconfig(dataDir, kc, "https://127.0.0.1:"+apiPort, "system:serviceaccount:kube-system:coredns",
		[]string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}); err != nil {
		t.Fatal(err)
	}
	dnsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	args := []string{"dns", "--kubeconfig", kc, "--listen", dnsAddr, "--health-listen", "", "--ready-listen", "",
		"--metrics-listen", "", "--upstream", "127.0.0.1:9"}
	d := start(t, bin, args...)
	const name = "myapp.default.svc.cluster.local."
	query := func(timeout time.Duration) bool {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		cl := &dns.Client{Timeout: timeout}
		r, _, err := cl.Exchange(m, dnsAddr)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return false
		}
		a, ok := r.Answer[0].(*dns.A)
		return ok && a.A.String() == svc.Spec.ClusterIP
	}
	deadline := time.Now().Add(30 * time.Second)
	for !query(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("DNS does not answer %s:\n%s", name, d.output())
		}
		time.Sleep(50 * time.Millisecond)
	}

	qfile := filepath.Join(t.TempDir(), "queries")
	if err := os.WriteFile(qfile, []byte("myapp.default.svc.cluster.local A\nkubernetes.default.svc.cluster.local A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(dnsAddr, ":")
	perf := exec.Command(dnsperf, "-s", host, "-p", port, "-d", qfile, "-l", "6", "-Q", "3000", "-q", "200", "-t", "1")
	var perfOut strings.Builder
	perf.Stdout, perf.Stderr = &perfOut, &perfOut
	if err := perf.Start(); err != nil {
		t.Fatal(err)
	}
	perfDone := make(chan error, 1)
	go func() { perfDone <- perf.Wait() }()
	t.Cleanup(func() { _ = perf.Process.Kill() })

	type probe struct {
		at time.Time
		ok bool
	}
	var mu sync.Mutex
	var probes []probe
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			at := time.Now()
			ok := query(100 * time.Millisecond)
			mu.Lock()
			probes = append(probes, probe{at, ok})
			mu.Unlock()
		}
	}()
	time.Sleep(2 * time.Second)
	d.kill()
	killedAt := time.Now()
	d = start(t, bin, args...)
	restartedAt := time.Now()
	if err := <-perfDone; err != nil {
		t.Logf("dnsperf: %v", err)
	}
	close(stop)
	wg.Wait()

	var resumed time.Time
	failed := 0
	for _, p := range probes {
		if p.at.Before(killedAt) {
			if !p.ok {
				failed++
			}
			continue
		}
		if p.ok && resumed.IsZero() && p.at.After(restartedAt) {
			resumed = p.at
		}
	}
	var summary []string
	for _, l := range strings.Split(perfOut.String(), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Queries sent") || strings.HasPrefix(l, "Queries completed") || strings.HasPrefix(l, "Queries lost") || strings.HasPrefix(l, "Queries per second") {
			summary = append(summary, l)
		}
	}
	if resumed.IsZero() {
		t.Fatalf("DNS never answered after the restart; dnsperf: %s\nDNS log:\n%s", strings.Join(summary, "; "), d.output())
	}
	gap := resumed.Sub(restartedAt)
	t.Logf("dns: SIGKILL, restarted %s later, first answer %s after the restart (%s after the kill); probes before the kill: %d timed out (100 ms) under load; dnsperf: %s",
		restartedAt.Sub(killedAt).Round(time.Millisecond), gap.Round(time.Millisecond), resumed.Sub(killedAt).Round(time.Millisecond), failed, strings.Join(summary, "; "))
	if gap > time.Second {
		t.Errorf("answers resumed %s after the restart, want within 1s", gap)
	}
}
