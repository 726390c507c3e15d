package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/testbed"
)

const npMetric = "kubeproxy_network_programming_duration_seconds"

// benchNetProg measures network programming latency as the proxies
// themselves report it (kubeproxy_network_programming_duration_seconds) in
// `svcnet up --nodes 3`, run inside a throwaway namespace as e2e/seeds does:
// cfg.npServices background Services (each with a two-endpoint slice) are
// created first, then a 3-replica Deployment behind a Service is scaled
// 3→4→3 cfg.npCycles times. Only observations made during the cycles count.
func benchNetProg(res *results, bins *peers, cfg *config) error {
	return step("netprog", func(tb *benchTB) error {
		lab := testbed.NewNetNS(tb, "bench-np")
		dir := tb.TempDir()
		var rb [2]byte
		_, _ = rand.Read(rb[:])
		prefix := "bnp" + hex.EncodeToString(rb[:])
		upArgs := []string{"up", "--nodes", "3", "--proxy-mode", cfg.npMode, "--data-dir", dir, "--prefix", prefix}
		upArgs = append(upArgs, cfg.npUpArgs...)
		// The report shows the command without this run's temporary paths.
		shown := append([]string{"up", "--nodes", "3", "--proxy-mode", cfg.npMode, "--data-dir", "DATA_DIR"}, cfg.npUpArgs...)
		res.text["netprog-up"] = "svcnet " + strings.Join(shown, " ")
		logFile, err := os.Create(filepath.Join(dir, "up.log"))
		if err != nil {
			return err
		}
		up := exec.Command("ip", append([]string{"netns", "exec", lab.Name, bins.svcnet}, upArgs...)...)
		stdout, _ := up.StdoutPipe()
		up.Stderr = logFile
		up.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := up.Start(); err != nil {
			return err
		}
		exited := make(chan struct{})
		go func() { _ = up.Wait(); close(exited) }()
		tb.Cleanup(func() {
			_ = up.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(60 * time.Second):
				_ = up.Process.Kill()
				<-exited
			}
			_ = exec.Command("ip", "netns", "exec", lab.Name, bins.svcnet, "down", "--data-dir", dir).Run()
			logFile.Close()
		})
		ready := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "export KUBECONFIG=") {
					ready <- strings.TrimPrefix(sc.Text(), "export KUBECONFIG=")
				}
			}
		}()
		var kubeconfig string
		select {
		case kubeconfig = <-ready:
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "up.log"))
			return fmt.Errorf("svcnet up exited: %s", lastLines(string(b), 20))
		case <-time.After(5 * time.Minute):
			return fmt.Errorf("svcnet up not ready within 5m")
		}
		logf("netprog: cluster ready")
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		rc.Dial = nsDialer(lab.Name)
		rc.QPS, rc.Burst = -1, 0
		rc.ContentType = "application/vnd.kubernetes.protobuf"
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return err
		}
		ctx := context.Background()
		// The node namespaces' names exist only in svcnet up's own mount
		// namespace (ip netns exec), so the proxies are reached through
		// their processes' namespaces: svcnet up records every pid.
		proxies, err := proxyNetNS(filepath.Join(dir, "cluster.json"))
		if err != nil {
			return err
		}
		scrapeAll := func() ([]metrics, error) {
			var ms []metrics
			for _, ns := range proxies {
				m, err := scrape(pathHTTPClient(ns), "http://127.0.0.1:10249/metrics")
				if err != nil {
					return nil, fmt.Errorf("proxy in %s: %w", ns, err)
				}
				ms = append(ms, m)
			}
			return ms, nil
		}

		// Background Services.
		t0 := time.Now()
		if err := createBackground(ctx, cs, cfg.npServices); err != nil {
			return err
		}
		logf("netprog: %d background Services created in %s", cfg.npServices, time.Since(t0).Round(time.Second))
		// Every proxy has caught up once none has changes pending and each
		// synced after the last change it queued.
		if err := waitFor(15*time.Minute, time.Second, "proxies synced the background Services", func() error {
			ms, err := scrapeAll()
			if err != nil {
				return err
			}
			for i, m := range ms {
				if m.v("kubeproxy_sync_proxy_rules_last_timestamp_seconds") < m.v("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds") ||
					m.v("kubeproxy_sync_proxy_rules_endpoint_changes_pending") > 0 ||
					m.v("kubeproxy_sync_proxy_rules_service_changes_pending") > 0 {
					return fmt.Errorf("proxy %d not caught up", i+1)
				}
			}
			return nil
		}); err != nil {
			return err
		}

		// The Deployment and its Service.
		labels := map[string]string{"app": "np"}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "np"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "jocatalin/kubernetes-bootcamp:v1",
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}}},
		}
		if _, err := cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "np"},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
			metav1.CreateOptions{}); err != nil {
			return err
		}
		endpoints := func() (ready, all int, err error) {
			l, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=np"})
			if err != nil {
				return 0, 0, err
			}
			for _, s := range l.Items {
				for _, e := range s.Endpoints {
					all++
					if e.Conditions.Ready != nil && *e.Conditions.Ready {
						ready++
					}
				}
			}
			return ready, all, nil
		}
		waitEndpoints := func(want int) error {
			return waitFor(3*time.Minute, 100*time.Millisecond, fmt.Sprintf("%d ready endpoints", want), func() error {
				r, a, err := endpoints()
				if err != nil {
					return err
				}
				if r != want || a != want {
					return fmt.Errorf("%d ready of %d", r, a)
				}
				return nil
			})
		}
		scale := func(n int) error {
			_, err := cs.AppsV1().Deployments("default").Patch(ctx, "np", types.MergePatchType,
				[]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)), metav1.PatchOptions{})
			return err
		}
		if err := waitEndpoints(3); err != nil {
			return err
		}
		time.Sleep(3 * time.Second)
		// Where the time goes: a watcher of the Service's slices (as a
		// proxy's informer is) records, for each new trigger time, how long
		// after it the slice reached it: the node agent's status write, the
		// API and the EndpointSlice controller. The rest of an observation
		// is the proxy's (its informer's delivery, --min-sync-period, the
		// sync itself).
		delivered := watchTriggers(ctx, cs)
		before, err := scrapeAll()
		if err != nil {
			return err
		}
		var upHist, downHist histSum
		for i := 0; i < cfg.npCycles; i++ {
			for _, step := range []struct {
				n   int
				sum *histSum
			}{{4, &upHist}, {3, &downHist}} {
				s0, err := scrapeAll()
				if err != nil {
					return err
				}
				if err := scale(step.n); err != nil {
					return err
				}
				if err := waitEndpoints(step.n); err != nil {
					return err
				}
				time.Sleep(2 * time.Second)
				s1, err := scrapeAll()
				if err != nil {
					return err
				}
				step.sum.add(s0, s1)
			}
		}
		time.Sleep(2 * time.Second)
		after, err := scrapeAll()
		if err != nil {
			return err
		}
		// Sum the three proxies' histograms, after minus before.
		var all histSum
		all.add(before, after)
		diff, count, sum := all.buckets, all.count, all.sum
		for _, h := range []struct {
			name string
			sum  histSum
		}{{"up", upHist}, {"down", downHist}} {
			if h.sum.count > 0 {
				res.add(h.sum.count, "netprog", h.name+"-count")
				res.add(h.sum.sum/h.sum.count, "netprog", h.name+"-mean")
				res.add(h.sum.syncs/3/float64(cfg.npCycles), "netprog", h.name+"-syncs")
				res.text["netprog-"+h.name+"-buckets"] = bucketList(h.sum.buckets)
				if d, w, s := h.sum.parts(); !math.IsNaN(d + w + s) {
					res.add(d, "netprog", h.name+"-delivery")
					res.add(w, "netprog", h.name+"-wait")
					res.add(s, "netprog", h.name+"-sync")
				}
			}
		}
		if ds := delivered(); len(ds) > 0 {
			slices.Sort(ds)
			res.add(float64(len(ds)), "netprog", "delivered-count")
			res.add(ds[len(ds)/2], "netprog", "delivered-p50")
			res.add(ds[len(ds)-1], "netprog", "delivered-max")
			var total float64
			for _, d := range ds {
				total += d
			}
			res.add(total/float64(len(ds)), "netprog", "delivered-mean")
		}
		res.add(count, "netprog", "count")
		if count > 0 {
			res.add(sum/count, "netprog", "mean")
			res.text["netprog-p50"] = quantileBucket(diff, count, 0.5)
			res.text["netprog-p90"] = quantileBucket(diff, count, 0.9)
			res.text["netprog-p99"] = quantileBucket(diff, count, 0.99)
			res.add(interpolatedQuantile(diff, count, 0.5), "netprog", "p50-interp")
			res.add(interpolatedQuantile(diff, count, 0.99), "netprog", "p99-interp")
			res.text["netprog-buckets"] = bucketList(diff)
		}
		logf("netprog: %.0f observations, mean %.3fs, p50 %s, p99 %s (%s)", count, sum/math.Max(count, 1),
			res.text["netprog-p50"], res.text["netprog-p99"], res.text["netprog-buckets"])
		return nil
	})
}

// interpolatedQuantile estimates quantile q as Prometheus'
// histSum sums the three proxies' histograms between two scrapes.
type histSum struct {
	buckets    []bucket
	count, sum float64
	// syncs counts the proxies' syncs (all three) between the scrapes.
	syncs float64
	// The parts, as the proxies measure them (sums and counts): trigger
	// time to the slice at the proxy's informer, first queued change to
	// sync start, and the sync itself.
	delivery, deliveryN, wait, waitN, syncSum float64
}

// parts returns the mean trigger delivery, queue wait and sync duration
// the proxies measured (seconds; NaN without observations).
func (h *histSum) parts() (delivery, wait, sync float64) {
	return h.delivery / h.deliveryN, h.wait / h.waitN, h.syncSum / h.syncs
}

func (h *histSum) add(before, after []metrics) {
	for i := range after {
		a, b := after[i].histogram(npMetric), before[i].histogram(npMetric)
		if h.buckets == nil {
			h.buckets = make([]bucket, len(a))
			for j := range a {
				h.buckets[j].le = a[j].le
			}
		}
		for j := range a {
			if j >= len(h.buckets) {
				break
			}
			h.buckets[j].count += a[j].count
			if j < len(b) {
				h.buckets[j].count -= b[j].count
			}
		}
		h.count += after[i].v(npMetric+"_count") - before[i].v(npMetric+"_count")
		h.sum += after[i].v(npMetric+"_sum") - before[i].v(npMetric+"_sum")
		h.syncs += after[i].v("kubeproxy_sync_proxy_rules_duration_seconds_count") - before[i].v("kubeproxy_sync_proxy_rules_duration_seconds_count")
		h.syncSum += after[i].v("kubeproxy_sync_proxy_rules_duration_seconds_sum") - before[i].v("kubeproxy_sync_proxy_rules_duration_seconds_sum")
		h.delivery += after[i].v("svcnet_proxy_trigger_delivery_seconds_sum") - before[i].v("svcnet_proxy_trigger_delivery_seconds_sum")
		h.deliveryN += after[i].v("svcnet_proxy_trigger_delivery_seconds_count") - before[i].v("svcnet_proxy_trigger_delivery_seconds_count")
		h.wait += after[i].v("svcnet_proxy_sync_queue_wait_seconds_sum") - before[i].v("svcnet_proxy_sync_queue_wait_seconds_sum")
		h.waitN += after[i].v("svcnet_proxy_sync_queue_wait_seconds_count") - before[i].v("svcnet_proxy_sync_queue_wait_seconds_count")
	}
}

// bucketList writes the observations per bucket of a cumulative histogram.
func bucketList(bs []bucket) string {
	var sb strings.Builder
	prev := 0.0
	for _, b := range bs {
		if b.count-prev > 0 {
			fmt.Fprintf(&sb, "≤%s: %.0f, ", leString(b.le), b.count-prev)
		}
		prev = b.count
	}
	return strings.TrimSuffix(sb.String(), ", ")
}

// watchTriggers watches the np Service's EndpointSlices and records, for
// every trigger time it has not seen before, how long after it the slice
// arrived (seconds). The returned function stops the watch and returns the
// delays.
func watchTriggers(ctx context.Context, cs *kubernetes.Clientset) func() []float64 {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var delays []float64
	seen := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w, err := cs.DiscoveryV1().EndpointSlices("default").Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=np"})
		if err != nil {
			return
		}
		defer w.Stop()
		for ev := range w.ResultChan() {
			now := time.Now()
			s, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			v := s.Annotations[corev1.EndpointsLastChangeTriggerTime]
			if v == "" || seen[v] {
				continue
			}
			seen[v] = true
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				continue
			}
			mu.Lock()
			delays = append(delays, now.Sub(t).Seconds())
			mu.Unlock()
		}
	}()
	return func() []float64 {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(delays)
	}
}

// histogram_quantile does: linearly within the bucket that holds it (the
// first bucket from 0). An estimate, not a measurement: the report shows it
// beside the bucket interval.
func interpolatedQuantile(bs []bucket, total, q float64) float64 {
	rank := q * total
	lo, below := 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lo
			}
			if b.count == below {
				return b.le
			}
			return lo + (b.le-lo)*(rank-below)/(b.count-below)
		}
		lo, below = b.le, b.count
	}
	return math.NaN()
}

func leString(le float64) string {
	if math.IsInf(le, 1) {
		return "+Inf"
	}
	return fmt.Sprintf("%gs", le)
}

// quantileBucket names the histogram bucket holding quantile q, as an
// interval (the histogram cannot say more).
func quantileBucket(bs []bucket, total, q float64) string {
	rank := q * total
	lo := 0.0
	for _, b := range bs {
		if b.count >= rank {
			return fmt.Sprintf("(%g s, %s]", lo, strings.TrimSuffix(leString(b.le), "s")+" s")
		}
		lo = b.le
	}
	return "?"
}

// bgNamespace holds the background Services. Not the Deployment's
// namespace: every pod gets environment variables for each Service of its
// own namespace (enableServiceLinks), which at 10k Services would slow pod
// starts and measure that instead.
const bgNamespace = "bench-bg"

// createBackground creates n selector-less Services, each with a slice of
// two ready endpoints (addresses no pod has: only the rules matter).
func createBackground(ctx context.Context, cs *kubernetes.Clientset, n int) error {
	if err := retry(func() error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bgNamespace}},
			metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	var firstErr atomic.Value
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				name := fmt.Sprintf("bg-%05d", i)
				if err := retry(func() error {
					_, err := cs.CoreV1().Services(bgNamespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
						Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
						metav1.CreateOptions{})
					return err
				}); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				var eps []discoveryv1.Endpoint
				for k := 0; k < 2; k++ {
					eps = append(eps, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 200+(2*i+k)/62500, ((2*i+k)/250)%250, 1+(2*i+k)%250)},
						Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
				}
				if err := retry(func() error {
					_, err := cs.DiscoveryV1().EndpointSlices(bgNamespace).Create(ctx, &discoveryv1.EndpointSlice{
						ObjectMeta: metav1.ObjectMeta{Name: name + "-bg", Labels: map[string]string{
							discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "svcnet-bench"}},
						AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
						Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
					}, metav1.CreateOptions{})
					return err
				}); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return e.(error)
	}
	return nil
}

// proxyNetNS returns /proc/PID/ns/net of each `svcnet proxy` that svcnet up
// started (its state file lists the pids).
func proxyNetNS(stateFile string) ([]string, error) {
	b, err := os.ReadFile(stateFile)
	if err != nil {
		return nil, err
	}
	var st struct {
		PIDs []int `json:"pids"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	var out []string
	for _, pid := range st.PIDs {
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if len(args) > 1 && args[1] == "proxy" {
			out = append(out, fmt.Sprintf("/proc/%d/ns/net", pid))
		}
	}
	if len(out) != 3 {
		return nil, fmt.Errorf("found %d proxies in %s, want 3", len(out), stateFile)
	}
	return out, nil
}
