package apiserver_e2e

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/controller"
)

// TestKubectlCascadingDelete: `kubectl delete` with --cascade=orphan and
// the default background cascade, carried out by svcnet's garbage
// collector (the API server itself never deletes dependents, as in
// Kubernetes).
func TestKubectlCascadingDelete(t *testing.T) {
	k := newKubectl(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WarningHandler = rest.NoWarnings{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(ctx, kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg),
			controller.Options{Controllers: []string{controller.EndpointSlice, controller.Deployment, controller.ReplicaSet, controller.GC}},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	})
	until := func(what string, args []string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			out := k.ok(args...)
			if ok(out) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never: %s; kubectl %s:\n%s", what, strings.Join(args, " "), out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	k.ok("apply", "-f", "testdata/myapp.yaml")
	names := []string{"get", "pods,replicasets,endpointslices", "-l", "app=myapp", "-o", "name"}
	until("3 pods, 1 ReplicaSet, 1 EndpointSlice", names, func(out string) bool {
		return strings.Count(out, "pod/myapp-") == 3 && strings.Count(out, "replicaset.apps/myapp-") == 1 &&
			strings.Count(out, "endpointslice.discovery.k8s.io/myapp-") == 1
	})

	// --cascade=orphan: kubectl waits until the Deployment is gone, which
	// is when the collector has released the ReplicaSet.
	mustMatch(t, k.ok("delete", "deployment", "myapp", "--cascade=orphan", "--timeout=120s"), `deployment.apps "myapp" deleted`)
	rs := strings.TrimSpace(k.ok("get", "replicasets", "-l", "app=myapp", "-o", "name"))
	if !strings.HasPrefix(rs, "replicaset.apps/myapp-") || strings.Contains(rs, "\n") {
		t.Fatalf("orphaned ReplicaSet: %q, want one", rs)
	}
	mustMatch(t, k.ok("get", rs, "-o", "jsonpath={.metadata.ownerReferences}"), `^$`)
	if n := strings.Count(k.ok(names...), "pod/myapp-"); n != 3 {
		t.Fatalf("the orphaned ReplicaSet's pods: %d, want 3", n)
	}

	// Default (background): the ReplicaSet goes at once, its pods after.
	mustMatch(t, k.ok("delete", rs), `replicaset.apps "myapp-\S+" deleted`)
	until("the pods deleted by the garbage collector", []string{"get", "pods", "-l", "app=myapp", "-o", "name"}, func(out string) bool {
		return strings.TrimSpace(out) == ""
	})
	mustMatch(t, k.ok("delete", "service", "myapp"), `service "myapp" deleted`)
	until("the Service's EndpointSlice deleted", []string{"get", "endpointslices", "-l", "kubernetes.io/service-name=myapp", "-o", "name"}, func(out string) bool {
		return strings.TrimSpace(out) == ""
	})
}
