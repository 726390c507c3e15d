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

// TestKubectlDeleteNamespace: `kubectl delete namespace` of a namespace
// holding the seed's Deployment and Service, their ReplicaSet, pods,
// Endpoints and EndpointSlices returns (kubectl waits until the namespace is
// gone) once svcnet's controllers, the namespace controller among them,
// have emptied it.
func TestKubectlDeleteNamespace(t *testing.T) {
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
			controller.Options{Controllers: []string{controller.EndpointSlice, controller.Endpoints, controller.Deployment,
				controller.ReplicaSet, controller.GC, controller.Namespace}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	})

	k.ok("create", "namespace", "app")
	k.ok("apply", "-n", "app", "-f", "testdata/myapp.yaml")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out := k.ok("get", "-n", "app", "pods,replicasets,endpointslices", "-o", "name")
		if strings.Count(out, "pod/myapp-") == 3 && strings.Count(out, "replicaset.apps/myapp-") == 1 &&
			strings.Count(out, "endpointslice.discovery.k8s.io/myapp-") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("controllers did not create the namespace's content:\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	mustMatch(t, k.ok("delete", "namespace", "app", "--timeout=120s"), `namespace "app" deleted`)
	mustMatch(t, k.run(true, "get", "namespace", "app"), `namespaces "app" not found`)
	mustMatch(t, k.ok("get", "pods,services,endpointslices,replicasets,deployments", "-A", "-l", "app=myapp"), `No resources found`)
}

// TestKubectlNamespaceFinalizers: a namespace created with finalizers of
// its own keeps them and gets "kubernetes" after them; a finalizer that is
// neither standard nor qualified is a 422 and nothing is stored.
func TestKubectlNamespaceFinalizers(t *testing.T) {
	k := newKubectl(t)
	ok := "apiVersion: v1\nkind: Namespace\nmetadata: {name: kept}\nspec: {finalizers: [example.com/cleanup]}\n"
	k.ok("apply", "-f", writeTemp(t, ok))
	if got := k.ok("get", "namespace", "kept", "-o", "jsonpath={.spec.finalizers} {.status.phase}"); got != `["example.com/cleanup","kubernetes"] Active` {
		t.Errorf("finalizers and phase: %s", got)
	}
	bad := "apiVersion: v1\nkind: Namespace\nmetadata: {name: bad-fin}\nspec: {finalizers: [cleanup]}\n"
	out := k.run(true, "apply", "-f", writeTemp(t, bad))
	if want := `spec.finalizers: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`; !strings.Contains(out, want) {
		t.Errorf("kubectl apply said\n%s\nwant it to contain %q", out, want)
	}
	if out := k.run(true, "get", "namespace", "bad-fin"); !strings.Contains(out, "NotFound") {
		t.Errorf("bad-fin was stored: %s", out)
	}
}

// TestKubectlNodes: a Node created with its status keeps it (a node
// registers with its addresses and capacity in one write, as with
// kube-apiserver); bad taints and podCIDRs get kube-apiserver's 422, at its
// paths (metadata.taints), and nothing is stored.
func TestKubectlNodes(t *testing.T) {
	k := newKubectl(t)
	ok := `apiVersion: v1
kind: Node
metadata: {name: worker-1}
spec:
  podCIDRs: [10.244.1.0/24]
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
status:
  addresses: [{type: InternalIP, address: 10.1.0.11}]
  capacity: {cpu: "4", pods: "110"}
`
	k.ok("create", "-f", writeTemp(t, ok))
	if got := k.ok("get", "node", "worker-1", "-o", "jsonpath={.status.addresses[0].address} {.status.allocatable.pods}"); got != "10.1.0.11 110" {
		t.Errorf("status kept from the create (allocatable defaulted from capacity): %q", got)
	}
	mustMatch(t, k.ok("get", "nodes", "-o", "wide"), `(?m)^worker-1\s+\S+\s+<none>\s+\S+\s+\S*\s*10\.1\.0\.11\s`)
	bad := `apiVersion: v1
kind: Node
metadata: {name: worker-2}
spec:
  podCIDRs: [10.244.2.1/24]
  taints: [{key: dedicated, effect: NoSchedule}, {key: dedicated, value: x, effect: NoSchedule}, {key: "a b", effect: Sometimes}]
`
	out := k.run(true, "create", "-f", writeTemp(t, bad))
	for _, want := range []string{
		`metadata.taints[1]: Duplicate value: {"Key":"dedicated","Value":"x","Effect":"NoSchedule","TimeAdded":null}: taints must be unique by key and effect pair`,
		`metadata.taints[2].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`,
		`spec.podCIDRs[0]: Invalid value: "10.244.2.1/24": must not have bits set beyond the prefix length`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl create said\n%s\nwant it to contain %q", out, want)
		}
	}
	if out := k.run(true, "get", "node", "worker-2"); !strings.Contains(out, "NotFound") {
		t.Errorf("worker-2 was stored: %s", out)
	}
}

// TestKubectlConfigMapsAndLeases: bad ConfigMap keys and an immutable
// ConfigMap's data are refused with kube-apiserver's errors; a Lease with a
// duration of 0 is refused.
func TestKubectlConfigMapsAndLeases(t *testing.T) {
	k := newKubectl(t)
	out := k.run(true, "apply", "-f", writeTemp(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {\"bad key!\": x}\n"))
	if want := `data[bad key!]: Invalid value: "bad key!": a valid config key must consist of alphanumeric characters, '-', '_' or '.'`; !strings.Contains(out, want) {
		t.Errorf("kubectl apply of a bad ConfigMap said\n%s\nwant it to contain %q", out, want)
	}
	k.ok("apply", "-f", writeTemp(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: frozen}\nimmutable: true\ndata: {a: \"1\"}\n"))
	out = k.run(true, "apply", "-f", writeTemp(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: frozen}\nimmutable: true\ndata: {a: \"2\"}\n"))
	if want := "data: Forbidden: field is immutable when `immutable` is set"; !strings.Contains(out, want) {
		t.Errorf("kubectl apply of an immutable ConfigMap said\n%s\nwant it to contain %q", out, want)
	}
	if got := k.ok("get", "configmap", "frozen", "-o", "jsonpath={.data.a}"); got != "1" {
		t.Errorf("frozen data a = %q", got)
	}
	out = k.run(true, "apply", "-f", writeTemp(t, "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: l}\nspec: {leaseDurationSeconds: 0}\n"))
	if want := "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"; !strings.Contains(out, want) {
		t.Errorf("kubectl apply of a Lease said\n%s\nwant it to contain %q", out, want)
	}
}

// TestKubectlRBACErrors: RBAC objects get kube-apiserver 1.37's errors in
// its order, the declaratively required fields last and without the old
// detail ("verbs must contain at least one value").
func TestKubectlRBACErrors(t *testing.T) {
	k := newKubectl(t)
	role := "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\nrules:\n- {apiGroups: [\"\"], resources: [pods]}\n- {verbs: [get], apiGroups: [\"\"]}\n"
	out := k.run(true, "apply", "-f", writeTemp(t, role))
	if want := "* rules[1].resources: Required value: resource rules must supply at least one resource\n* rules[0].verbs: Required value\n"; !strings.Contains(out, want) {
		t.Errorf("kubectl apply of a Role said\n%s\nwant\n%s", out, want)
	}
	rb := "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: rb}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Thing, name: \"\"}\nsubjects: [{kind: User, name: \"\"}]\n"
	out = k.run(true, "apply", "-f", writeTemp(t, rb))
	if want := "* roleRef.kind: Unsupported value: \"Thing\": supported values: \"Role\", \"ClusterRole\"\n* subjects[0].name: Required value\n* roleRef.name: Required value\n"; !strings.Contains(out, want) {
		t.Errorf("kubectl apply of a RoleBinding said\n%s\nwant\n%s", out, want)
	}
}
