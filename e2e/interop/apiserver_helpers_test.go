package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/testbed"
)

// startAPIServer starts `svcnet apiserver` in ns with its data in data
// and args, waits until it is ready, and returns a context ending with
// the test, the admin kubeconfig's path and clients dialing through ns.
func startAPIServer(t *testing.T, ns *testbed.NetNS, svcnet, data string, args ...string) (context.Context, string, kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	ns.Start(append([]string{svcnet, "apiserver", "--data-dir", data}, args...)...)
	kubeconfig := filepath.Join(data, "kubeconfig")
	waitFor(t, 60*time.Second, "admin kubeconfig", func() error { _, err := os.Stat(kubeconfig); return err })
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = nsDialer(ns)
	cfg.QPS, cfg.Burst = 100, 200
	cs := kubernetes.NewForConfigOrDie(cfg)
	dc := dynamic.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	waitFor(t, 60*time.Second, "API server /readyz", func() error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	return ctx, kubeconfig, cs, dc
}

// stableDump calls dump every interval until it returns the same result
// three times in a row (within limit), logs how long the scenario begun
// at began took, keeps the result in $SVCNET_METALLB_DUMP when set, and
// returns it.
func stableDump(t *testing.T, began time.Time, limit, interval time.Duration, what string, dump func() (map[string]any, error)) map[string]any {
	t.Helper()
	var prev map[string]any
	stable := 0
	waitFor(t, limit, what+" stable", func() error {
		time.Sleep(interval)
		cur, err := dump()
		if err != nil {
			return err
		}
		if prev != nil && cmp.Equal(prev, cur) {
			stable++
		} else {
			stable = 0
		}
		prev = cur
		if stable < 2 {
			return fmt.Errorf("still changing")
		}
		return nil
	})
	t.Logf("scenario took %s", time.Since(began).Round(time.Second))
	if dir := os.Getenv("SVCNET_METALLB_DUMP"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".json"), []byte(pretty(prev)), 0o644)
	}
	return prev
}
