package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/storage"
)

// The API comparison: svcnet apiserver against kube-apiserver v1.37.2 (built
// from k8s.io/kubernetes in this module), each on a fresh single-member etcd
// embedded in this process (go.etcd.io/etcd/server/v3/embed through
// svcnet's storage.StartEmbedded: the same etcd version and settings for
// both). Both serve on 127.0.0.1 of the root namespace (loopback only; no
// network state is touched) with their default flow control, RBAC, and an
// admin client (system:masters).

const apiNS = "bench-api"

// apiImpls in the order of the first repetition; later ones alternate.
var apiImpls = []string{"kube-apiserver", "svcnet"}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startLocal starts a program in the harness's own (root) network
// namespace, where it serves on 127.0.0.1 only.
func startLocal(name, logPath string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

// startAPI starts impl on a fresh embedded etcd and returns a client config
// for an admin (protobuf, no client-side rate limit).
func startAPI(tb *benchTB, bins *peers, impl string) (*rest.Config, error) {
	dir := tb.TempDir()
	etcd, err := storage.StartEmbedded(context.Background(), filepath.Join(dir, "etcd"))
	if err != nil {
		return nil, err
	}
	tb.Cleanup(etcd.Close)
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	var p *proc
	var cfg *rest.Config
	switch impl {
	case "svcnet":
		data := filepath.Join(dir, "svcnet")
		p, err = startLocal("svcnet-apiserver", filepath.Join(dir, "apiserver.log"), bins.svcnet, "apiserver",
			"--data-dir", data, "--etcd-servers", etcd.Endpoint, "--bind-address", "127.0.0.1",
			"--secure-port", strconv.Itoa(port), "--service-cluster-ip-range", "10.96.0.0/16")
		if err != nil {
			return nil, err
		}
		tb.Cleanup(func() { p.stop(20 * time.Second) })
		kc := filepath.Join(data, "kubeconfig")
		if err := waitFor(90*time.Second, 200*time.Millisecond, "svcnet apiserver kubeconfig", func() error {
			if p.exited() {
				return fmt.Errorf("exited: %s", p.tail(20))
			}
			_, err := os.Stat(kc)
			return err
		}); err != nil {
			return nil, err
		}
		if cfg, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
			return nil, err
		}
	case "kube-apiserver":
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
		saKey, saPub := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
		var tok [16]byte
		_, _ = rand.Read(tok[:])
		token := hex.EncodeToString(tok[:])
		tokens := filepath.Join(dir, "tokens.csv")
		for path, data := range map[string][]byte{
			saKey:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
			saPub:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
			tokens: []byte(token + ",bench-admin,bench-admin,system:masters\n"),
		} {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				return nil, err
			}
		}
		// The serving certificate is self-signed by kube-apiserver itself
		// (--cert-dir); the client skips verification on loopback.
		p, err = startLocal("kube-apiserver", filepath.Join(dir, "apiserver.log"), bins.kubeAPIServer,
			"--etcd-servers", etcd.Endpoint, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
			"--secure-port", strconv.Itoa(port), "--cert-dir", filepath.Join(dir, "certs"),
			"--service-cluster-ip-range", "10.96.0.0/16", "--authorization-mode", "Node,RBAC",
			"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file", saPub, "--service-account-signing-key-file", saKey,
			"--token-auth-file", tokens,
			// The kubernetes Service's endpoint would be the loopback
			// address, which kube-apiserver refuses to reconcile; the
			// comparison does not need that Service's endpoints.
			"--endpoint-reconciler-type", "none")
		if err != nil {
			return nil, err
		}
		tb.Cleanup(func() { p.stop(20 * time.Second) })
		cfg = &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", port), BearerToken: token,
			TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	default:
		return nil, fmt.Errorf("unknown API server %q", impl)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = cfg.ContentType
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		if p.exited() {
			return nil, fmt.Errorf("%s exited: %s", impl, p.tail(5))
		}
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s /readyz: %w", impl, err)
		}
	}
	if err := retry(func() error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apiNS}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return nil, err
	}
	return cfg, nil
}

func apiService(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "api"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80,
			TargetPort: intstr.FromInt32(8080)}}}}
}

// fillServices creates Services svc-from … svc-(to-1) with w concurrent
// writers and returns the rate in Services per second.
func fillServices(cs *kubernetes.Clientset, from, to, w int) (float64, error) {
	ctx := context.Background()
	var wg sync.WaitGroup
	var next atomic.Int64
	next.Store(int64(from))
	var firstErr atomic.Value
	t0 := time.Now()
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1)) - 1
				if k >= to {
					return
				}
				if err := retry(func() error {
					_, err := cs.CoreV1().Services(apiNS).Create(ctx, apiService(fmt.Sprintf("svc-%05d", k)), metav1.CreateOptions{})
					if apierrors.IsAlreadyExists(err) {
						return nil
					}
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
		return 0, e.(error)
	}
	return float64(to-from) / time.Since(t0).Seconds(), nil
}

// watchDelivery opens a watch on the namespace's Services, then creates k
// Services one at a time and returns, for each, the time from the start of
// its create call to its ADDED event, and the create calls' own latencies.
func watchDelivery(cs *kubernetes.Clientset, prefix string, k int) (events, creates []time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := cs.CoreV1().Services(apiNS).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, nil, err
	}
	w, err := cs.CoreV1().Services(apiNS).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		return nil, nil, err
	}
	defer w.Stop()
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	all := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			if s, ok := ev.Object.(*corev1.Service); ok && strings.HasPrefix(s.Name, prefix) {
				mu.Lock()
				arrived[s.Name] = time.Now()
				n := len(arrived)
				mu.Unlock()
				if n == k {
					close(all)
					return
				}
			}
		}
	}()
	started := map[string]time.Time{}
	for i := 0; i < k; i++ {
		name := fmt.Sprintf("%s%04d", prefix, i)
		t := time.Now()
		if _, err := cs.CoreV1().Services(apiNS).Create(ctx, apiService(name), metav1.CreateOptions{}); err != nil {
			return nil, nil, err
		}
		creates = append(creates, time.Since(t))
		started[name] = t
	}
	select {
	case <-all:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("watch: not every ADDED event arrived")
	}
	mu.Lock()
	defer mu.Unlock()
	for name, t := range started {
		events = append(events, arrived[name].Sub(t))
	}
	return events, creates, nil
}

// listTimesFor measures full LISTs of the namespace's Services in protobuf
// and JSON: reps consistent LISTs (resourceVersion unset) of each.
func listTimesFor(res *results, cfg *rest.Config, impl string, n, reps int) {
	ctx := context.Background()
	for _, ct := range []string{"application/vnd.kubernetes.protobuf", "application/json"} {
		c := rest.CopyConfig(cfg)
		c.AcceptContentTypes, c.ContentType = ct, ct
		c.Timeout = 5 * time.Minute
		cs, err := kubernetes.NewForConfig(c)
		if err != nil {
			res.note(fmt.Sprintf("api %s: %v", impl, err))
			return
		}
		short := map[string]string{"application/json": "json", "application/vnd.kubernetes.protobuf": "protobuf"}[ct]
		for i := 0; i < reps; i++ {
			t := time.Now()
			l, err := cs.CoreV1().Services(apiNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				res.note(fmt.Sprintf("api %s LIST %s at %d: %v", impl, short, n, err))
				continue
			}
			if len(l.Items) < n {
				res.note(fmt.Sprintf("api %s LIST %s at %d: %d items", impl, short, n, len(l.Items)))
				continue
			}
			res.add(time.Since(t).Seconds()*1000, "apicmp", n, "list-"+short, impl)
		}
	}
}

// benchAPI runs the comparison: for each repetition and server (their
// order alternating), a fresh etcd and server are filled to each size in
// cfg.apiSizes in turn (cumulatively: 10k, then 40k more for 50k), and at
// each size the create rate of that fill, full LIST times, and watch
// delivery of cfg.apiWatch sequential creates are recorded.
func benchAPI(res *results, bins *peers, cfg *config) error {
	sizes := append([]int(nil), cfg.apiSizes...)
	sort.Ints(sizes)
	for rep := 0; rep < cfg.apiReps; rep++ {
		order := apiImpls
		if rep%2 == 1 {
			order = []string{apiImpls[1], apiImpls[0]}
		}
		for _, impl := range order {
			err := step(fmt.Sprintf("api %s rep %d", impl, rep+1), func(tb *benchTB) error {
				rc, err := startAPI(tb, bins, impl)
				if err != nil {
					return err
				}
				cs, err := kubernetes.NewForConfig(rc)
				if err != nil {
					return err
				}
				have := 0
				for _, n := range sizes {
					rate, err := fillServices(cs, have, n, cfg.apiWriters)
					if err != nil {
						return fmt.Errorf("fill to %d: %w", n, err)
					}
					res.add(rate, "apicmp", n, "create", impl)
					logf("api %s: %d Services, created at %.0f/s", impl, n, rate)
					have = n
					listTimesFor(res, rc, impl, n, 3)
					ev, cr, err := watchDelivery(cs, fmt.Sprintf("w%d-", n), cfg.apiWatch)
					if err != nil {
						return fmt.Errorf("watch at %d: %w", n, err)
					}
					res.add(float64(percentile(ev, 0.5).Microseconds())/1000, "apicmp", n, "watch-p50", impl)
					res.add(float64(percentile(ev, 0.99).Microseconds())/1000, "apicmp", n, "watch-p99", impl)
					res.add(float64(percentile(cr, 0.5).Microseconds())/1000, "apicmp", n, "create1-p50", impl)
					logf("api %s at %d: LIST protobuf %v ms, watch p50 %v p99 %v", impl, n,
						res.get("apicmp", n, "list-protobuf", impl), percentile(ev, 0.5), percentile(ev, 0.99))
				}
				return nil
			})
			if err != nil {
				res.note(fmt.Sprintf("api comparison, %s: %v", impl, err))
			}
		}
	}
	return nil
}

// writeAPIReport writes the comparison's section.
func writeAPIReport(w func(string, ...any), res *results, bins *peers, cfg *config) {
	w("## API server: svcnet apiserver against kube-apiserver %s\n\n", kubeProxyVersion)
	w("Each server runs on its own fresh single-member etcd embedded in the harness (`go.etcd.io/etcd/server/v3/embed`, "+
		"through svcnet's `storage.StartEmbedded`: the same etcd and settings for both), on 127.0.0.1, with its defaults "+
		"(kube-apiserver: `--authorization-mode Node,RBAC`, its default admission plugins and API Priority and Fairness, "+
		"a self-signed serving certificate, a static admin token; svcnet apiserver: RBAC,Node and its own PKI), and the "+
		"client is an admin (system:masters) speaking protobuf with no client-side rate limit. %d repetition(s), the "+
		"servers' order alternating. The Services are ClusterIP Services (one port), so every create also allocates an "+
		"address from 10.96.0.0/16.\n\n", cfg.apiReps)
	w("- **create rate**: Services created per second by %d concurrent writers while filling the server to N "+
		"(cumulatively: the N=%d row continues from the previous size).\n", cfg.apiWriters, cfg.apiSizes[len(cfg.apiSizes)-1])
	w("- **LIST**: a full LIST of the N Services (resourceVersion unset, as a consistent read), 3 times per repetition, in protobuf and JSON.\n")
	w("- **watch delivery**: a watch on the Services is open while %d more Services are created one at a time; from the "+
		"start of each create call to its ADDED event; also the create call's own latency.\n\n", cfg.apiWatch)
	w("| Services | create rate/s: kube-apiserver / svcnet | ratio | LIST protobuf ms: kube-apiserver / svcnet | ratio | LIST JSON ms: kube-apiserver / svcnet | watch delivery p50 ms: kube-apiserver / svcnet | watch delivery p99 ms: kube-apiserver / svcnet | one create p50 ms: kube-apiserver / svcnet |\n")
	w("|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range cfg.apiSizes {
		g := func(metric, impl string) stat { return stats(res.get("apicmp", n, metric, impl)) }
		w("| %d | %s / %s | %s | %s / %s | %s | %s / %s | %s / %s | %s / %s | %s / %s |\n", n,
			g("create", "kube-apiserver").format(""), g("create", "svcnet").format(""), ratio(g("create", "svcnet"), g("create", "kube-apiserver")),
			g("list-protobuf", "kube-apiserver").format(""), g("list-protobuf", "svcnet").format(""), ratio(g("list-protobuf", "svcnet"), g("list-protobuf", "kube-apiserver")),
			g("list-json", "kube-apiserver").format(""), g("list-json", "svcnet").format(""),
			g("watch-p50", "kube-apiserver").format(""), g("watch-p50", "svcnet").format(""),
			g("watch-p99", "kube-apiserver").format(""), g("watch-p99", "svcnet").format(""),
			g("create1-p50", "kube-apiserver").format(""), g("create1-p50", "svcnet").format(""))
	}
	w("\nRatios are svcnet / kube-apiserver of the medians (create rate: above 1 is faster; LIST: below 1 is faster).\n\n")
}
