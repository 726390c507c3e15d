package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClusterFaults runs the fault cases that need a whole cluster on one
// `svcnet up --nodes 3` (iptables mode): a rolling update under HTTP load,
// then a node agent killed and restarted.
func TestClusterFaults(t *testing.T) {
	needBinary(t)
	c := startUp(t, "iptables", "--node-monitor-grace-period", nodeGrace.String())
	t.Run("rolling-update", func(t *testing.T) { rollingUpdate(t, c) })
	t.Run("node-agent-kill", func(t *testing.T) { nodeAgentKill(t, c) })
}

// web is the Deployment the rolling update replaces: three bootcamp pods
// with a readiness probe, behind a ClusterIP Service. The preStop sleep is
// what Kubernetes asks of a server that stops accepting at SIGTERM (as the
// built-in bootcamp server does): the pod's endpoint turns terminating in
// every proxy while the old process still serves, and only then gets
// SIGTERM (and finishes its in-flight requests).
const webManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: jocatalin/kubernetes-bootcamp:v1
        ports:
        - containerPort: 8080
        readinessProbe:
          httpGet:
            path: /
            port: 8080
          periodSeconds: 1
        lifecycle:
          preStop:
            sleep:
              seconds: 5
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
  - port: 80
    targetPort: 8080
`

// rollingUpdate: `kubectl set image` replaces the three pods of a
// Deployment (on the worker nodes) while a client pod on the control-plane
// node sends HTTP requests to its ClusterIP, each on a new connection,
// without pause. Pass: 0 failed requests, both versions answered during the
// update, only the new one after it.
func rollingUpdate(t *testing.T, c *upCluster) {
	manifest := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(manifest, []byte(webManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.kubectl("apply", "-f", manifest); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	if out, err := c.kubectl("rollout", "status", "deployment/web", "--timeout=180s"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s", err, out)
	}
	ctx := context.Background()
	svc, err := c.client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + svc.Spec.ClusterIP + "/"
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: dialFrom(c.clientPod(t, 1, "load")), DisableKeepAlives: true}}
	get := func() (string, error) {
		resp, err := client.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
		}
		return string(b), err
	}
	waitUntil(t, 60*time.Second, "the Service answers from the client pod", func() (bool, string) {
		_, err := get()
		return err == nil, fmt.Sprint(err)
	})

	var mu sync.Mutex
	versions := map[string]int{}
	var okN, failN atomic.Int64
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				body, err := get()
				mu.Lock()
				if err != nil {
					failN.Add(1)
					if len(failures) < 10 {
						failures = append(failures, fmt.Sprintf("%s: %v", t0.Format("15:04:05.000"), err))
					}
				} else {
					okN.Add(1)
					for _, v := range []string{"v=1", "v=2"} {
						if strings.Contains(body, v) {
							versions[v]++
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(2 * time.Second)
	t0 := time.Now()
	if out, err := c.kubectl("set", "image", "deployment/web", "web=jocatalin/kubernetes-bootcamp:v2"); err != nil {
		t.Fatalf("kubectl set image: %v\n%s", err, out)
	}
	out, err := c.kubectl("rollout", "status", "deployment/web", "--timeout=240s")
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("kubectl rollout status: %v\n%s", err, out)
	}
	rolled := time.Since(t0)
	// The old pods finish their preStop and graceful stop after the rollout
	// counts as done: keep the load on until they are gone.
	waitUntil(t, 120*time.Second, "old pods gone", func() (bool, string) {
		pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != "jocatalin/kubernetes-bootcamp:v2" {
				return false, "old pod " + p.Name + " still exists"
			}
		}
		return len(pods.Items) == 3, fmt.Sprintf("%d pods", len(pods.Items))
	})
	time.Sleep(2 * time.Second)
	mu.Lock()
	before := versions["v=1"]
	mu.Unlock()
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("rolling update of 3 pods under HTTP load from another node: rollout %s, requests %d, failed %d, answered by v=1 %d, by v=2 %d",
		rolled.Round(time.Millisecond), okN.Load()+failN.Load(), failN.Load(), versions["v=1"], versions["v=2"])
	if failN.Load() > 0 {
		t.Errorf("%d requests failed; first: %s", failN.Load(), strings.Join(failures, "; "))
	}
	if versions["v=1"] == 0 || versions["v=2"] == 0 {
		t.Errorf("answers by version %v: want both during the update", versions)
	}
	if versions["v=1"] != before {
		t.Errorf("v=1 still answered after its pods were gone")
	}
}
