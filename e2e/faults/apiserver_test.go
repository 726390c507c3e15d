package faults

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

type ack struct {
	ip   string
	port int32
}

// TestAPIServerKill9DuringCreates: 1,000 NodePort Services are created at
// once; when a quarter have been acknowledged, `svcnet apiserver` (and the
// embedded etcd in its process) gets SIGKILL.
//
// This is also the case "kill -9 of the embedded etcd's process while
// writing": the embedded etcd (storage.StartEmbedded, go.etcd.io/etcd's
// embed package) runs inside the apiserver process, there is no separate
// etcd process to kill, so this SIGKILL interrupts etcd mid-write (WAL
// appends, raft apply, bbolt commits) at the same moment as the
// apiserver. Every 201 the test got is an etcd write acknowledged after its
// WAL entry was written; the test checks each of them is stored after the
// restart, with the values it was acknowledged with. After a restart on the same
// data directory every acknowledged Service is stored with the ClusterIP
// and NodePort its 201 carried, no ClusterIP or NodePort is used twice, and
// the repair loops free what the interrupted creates had allocated without
// storing (they log the counts before and after).
func TestAPIServerKill9DuringCreates(t *testing.T) {
	needBinary(t)
	t.Parallel() // mostly waits for the IPAddress repair's grace period
	const total = 1000
	dataDir := t.TempDir()
	port := strconv.Itoa(freePort(t))
	args := []string{"apiserver", "--data-dir", dataDir, "--secure-port", port, "--repair-interval", "1s"}
	p := start(t, bin, args...)
	cfg := waitAPI(t, p, dataDir, 60*time.Second)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "faults"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var acked sync.Map // name → ack
	var nAcked, nFailed atomic.Int32
	var killedAt time.Time
	var killOnce sync.Once
	kill := func() {
		killOnce.Do(func() {
			killedAt = time.Now()
			p.kill()
		})
	}
	var wg sync.WaitGroup
	startAt := time.Now()
	for i := 0; i < total; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := fmt.Sprintf("s-%04d", i)
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{Port: 80}}}}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			got, err := c.CoreV1().Services("faults").Create(cctx, svc, metav1.CreateOptions{})
			if err != nil {
				nFailed.Add(1)
				return
			}
			acked.Store(name, ack{got.Spec.ClusterIP, got.Spec.Ports[0].NodePort})
			if nAcked.Add(1) == total/4 {
				go kill()
			}
		}(i)
	}
	wg.Wait()
	kill() // in case every create finished first
	t.Logf("creates: %d acknowledged (201), %d failed, kill -9 after %s", nAcked.Load(), nFailed.Load(), killedAt.Sub(startAt).Round(time.Millisecond))
	if nAcked.Load() < total/4 {
		t.Fatalf("only %d creates acknowledged before the kill", nAcked.Load())
	}

	restartAt := time.Now()
	p2 := start(t, bin, args...)
	cfg = waitAPI(t, p2, dataDir, 60*time.Second)
	t.Logf("restart: ready %s after the restart", time.Since(restartAt).Round(time.Millisecond))
	c = kubernetes.NewForConfigOrDie(cfg)
	all, err := c.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]corev1.Service{}
	ips, ports := map[string]string{}, map[int32]string{}
	dups := 0
	for _, s := range all.Items {
		key := s.Namespace + "/" + s.Name
		if s.Namespace == "faults" {
			stored[s.Name] = s
		}
		for _, ip := range s.Spec.ClusterIPs {
			if other, dup := ips[ip]; dup {
				t.Errorf("ClusterIP %s allocated twice: %s and %s", ip, other, key)
				dups++
			}
			ips[ip] = key
		}
		for _, sp := range s.Spec.Ports {
			if sp.NodePort == 0 {
				continue
			}
			if other, dup := ports[sp.NodePort]; dup {
				t.Errorf("NodePort %d allocated twice: %s and %s", sp.NodePort, other, key)
				dups++
			}
			ports[sp.NodePort] = key
		}
	}
	lost := 0
	acked.Range(func(k, v any) bool {
		a := v.(ack)
		s, ok := stored[k.(string)]
		switch {
		case !ok:
			lost++
			t.Errorf("acknowledged Service faults/%s lost", k)
		case s.Spec.ClusterIP != a.ip || s.Spec.Ports[0].NodePort != a.port:
			t.Errorf("faults/%s stored with %s:%d, acknowledged with %s:%d", k, s.Spec.ClusterIP, s.Spec.Ports[0].NodePort, a.ip, a.port)
		}
		return true
	})
	t.Logf("after restart: %d acknowledged found (%d lost), %d stored in all (%d stored without a 201: committed before the kill, answer lost), %d ClusterIPs and %d NodePorts in use, %d allocated twice",
		int(nAcked.Load())-lost, lost, len(stored), len(stored)-int(nAcked.Load()), len(ips), len(ports), dups)

	// The repair loops: allocations of creates that died between allocation
	// and storage are leaks. The NodePort repair frees them on its third run
	// that sees them (1 s apart here); the IPAddress repair deletes an
	// IPAddress without its Service after kube-apiserver's 60 s grace.
	re := regexp.MustCompile(`service allocation repair.*clusterIPsAllocatedBefore=(\d+) clusterIPsAllocated=(\d+) nodePortsAllocatedBefore=(\d+) nodePortsAllocated=(\d+)`)
	deadline := time.Now().Add(90 * time.Second)
	var first []string
	var portsFreed, ipsFreed time.Duration
	for ipsFreed == 0 || portsFreed == 0 {
		ms := re.FindAllStringSubmatch(p2.output(), -1)
		if len(ms) > 0 {
			if first == nil {
				first = ms[0]
			}
			last := ms[len(ms)-1]
			if portsFreed == 0 && last[4] == strconv.Itoa(len(ports)) {
				portsFreed = time.Since(restartAt)
			}
			if ipsFreed == 0 && last[2] == strconv.Itoa(len(ips)) {
				ipsFreed = time.Since(restartAt)
			}
		}
		if time.Now().After(deadline) {
			out := p2.output()
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			t.Fatalf("repair did not converge to %d ClusterIPs / %d NodePorts in use; repair log:\n%s\nlog tail:\n%s", len(ips), len(ports), strings.Join(lines(p2.output(), "service allocation repair"), "\n"), out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	leakedIPs, _ := strconv.Atoi(first[1])
	leakedPorts, _ := strconv.Atoi(first[3])
	t.Logf("repair: at restart %d ClusterIPs (IPAddresses) and %d NodePorts allocated for %d and %d in use: %d and %d leaked by the kill; NodePorts freed %s and IPAddresses %s after the restart (repair log: %s)",
		leakedIPs, leakedPorts, len(ips), len(ports), leakedIPs-len(ips), leakedPorts-len(ports), portsFreed.Round(time.Second), ipsFreed.Round(time.Second),
		strings.Join(lines(p2.output(), "service allocation repair"), " | "))
	// And the freed values are allocatable again: a create works.
	if _, err := c.CoreV1().Services("faults").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "after"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("create after restart: %v", err)
	}
}

func lines(s, substr string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}
