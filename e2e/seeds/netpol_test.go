package seeds

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// netpolPods are the scenario's pods: db and its Service in default with
// two clients, and target-service in b with clients in a (labelled name=A)
// and c. Servers run on node 2, clients on node 3, so every connection
// crosses nodes; a second db client (other) shares node 2 with db.
func netpolPods(s *scenario) string {
	pod := func(ns, name, labels string, node int) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels: {%s}
spec:
  nodeName: %s
  containers:
  - name: app
    image: jocatalin/kubernetes-bootcamp:v1
    ports:
    - containerPort: 8080
---
`, name, ns, labels, s.c.nodeName(node))
	}
	svc := func(ns, name, selector string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
spec:
  selector: {%s}
  ports:
  - port: 80
    targetPort: 8080
---
`, name, ns, selector)
	}
	y := `apiVersion: v1
kind: Namespace
metadata: {name: a, labels: {name: A}}
---
apiVersion: v1
kind: Namespace
metadata: {name: b}
---
apiVersion: v1
kind: Namespace
metadata: {name: c, labels: {name: C}}
---
` + pod("default", "np-db", "role: db", 2) + svc("default", "np-db", "role: db") +
		pod("default", "np-frontend", "role: frontend", 3) + pod("default", "np-other", "role: other", 3) +
		pod("default", "np-other-local", "role: other", 2) +
		pod("b", "target", "app: target-service", 2) + svc("b", "target-service", "app: target-service") +
		pod("a", "client", "app: client", 3) + pod("c", "client", "app: client", 3)
	f := filepath.Join(s.TempDir(), "netpol-pods.yaml")
	if err := os.WriteFile(f, []byte(y), 0o644); err != nil {
		s.Fatal(err)
	}
	return f
}

// 15 (issue 16): the seed's two NetworkPolicies, applied with kubectl in
// svcnet up, enforced by svcnet netpol on every node, checked with real
// connections between pods on different nodes, by pod IP and through the
// ClusterIP Service.
func networkPolicy(s *scenario) {
	s.kubectl("apply", "-f", netpolPods(s))
	s.Cleanup(func() {
		_, _ = s.c.kubectl("delete", "networkpolicy", "db-from-frontend", "--ignore-not-found")
		_, _ = s.c.kubectl("delete", "namespace", "a", "b", "c", "--wait=false")
		_, _ = s.c.kubectl("delete", "pod,svc", "np-db", "np-frontend", "np-other", "np-other-local", "--ignore-not-found", "--wait=false")
	})
	ready := func(ns, name string) string {
		var ip string
		s.eventually(90*time.Second, ns+"/"+name+" running", func() ([]string, string, bool) {
			out, _ := s.c.kubectl("get", "pod", "-n", ns, name, "-o", "jsonpath={.status.phase} {.status.podIP}")
			f := strings.Fields(out)
			if len(f) == 2 && f[0] == "Running" {
				ip = f[1]
			}
			return []string{"kubectl get pod -n " + ns + " " + name}, out, ip != ""
		})
		return ip
	}
	dbIP := ready("default", "np-db")
	targetIP := ready("b", "target")
	for _, p := range [][2]string{{"default", "np-frontend"}, {"default", "np-other"}, {"default", "np-other-local"}, {"a", "client"}, {"c", "client"}} {
		ready(p[0], p[1])
	}
	dbSvc := strings.TrimSpace(s.kubectl("get", "svc", "np-db", "-o", "jsonpath={.spec.clusterIP}"))
	targetSvc := strings.TrimSpace(s.kubectl("get", "svc", "-n", "b", "target-service", "-o", "jsonpath={.spec.clusterIP}"))

	// reach: does a fresh connection from the pod get the bootcamp answer?
	reach := func(ns, pod, url string) (string, bool) {
		out, err := s.c.inPod(ns, pod, "curl", "-sS", "-m", "2", url)
		return out, err == nil && strings.HasPrefix(out, "Hello Kubernetes bootcamp!")
	}
	// expect waits (policies take up to a sync period to land) until every
	// probe gives its wanted answer, then checks them all once more.
	type probe struct {
		ns, pod, url string
		want         bool
	}
	expect := func(what string, probes ...probe) {
		s.Helper()
		check := func() ([]string, string, bool) {
			var bad []string
			for _, p := range probes {
				out, ok := reach(p.ns, p.pod, p.url)
				if ok != p.want {
					bad = append(bad, fmt.Sprintf("%s/%s -> %s: reached=%v, want %v (%s)", p.ns, p.pod, p.url, ok, p.want, strings.TrimSpace(out)))
				}
			}
			return []string{"curl from pods"}, strings.Join(bad, "\n"), len(bad) == 0
		}
		s.eventually(30*time.Second, what, check)
		if cmd, out, ok := check(); !ok {
			s.errorf(cmd, out, "%s: not stable", what)
		}
	}
	db := "http://" + dbIP + ":8080/"
	dbVia := "http://" + dbSvc + "/"
	target := "http://" + targetIP + ":8080/"
	targetVia := "http://" + targetSvc + "/"

	expect("without policies every pod reaches db and target",
		probe{"default", "np-frontend", db, true}, probe{"default", "np-other", db, true}, probe{"default", "np-other-local", dbVia, true},
		probe{"c", "client", target, true}, probe{"c", "client", targetVia, true})

	// In userspace mode the proxy process on the client's node opens the
	// backend connection, so the backend sees that node's address, not the
	// pod's: Service traffic to an isolated pod is refused for clients on
	// other nodes and allowed (node traffic) for clients on the backend's
	// node, whatever the policy says (README "NetworkPolicy").
	viaService := s.c.mode != "userspace"
	s.apply("netpol-db-policy.yaml")
	expect("role=frontend reaches role=db, other pods do not, by pod IP and by ClusterIP",
		probe{"default", "np-frontend", db, true}, probe{"default", "np-frontend", dbVia, viaService},
		probe{"default", "np-other", db, false}, probe{"default", "np-other", dbVia, false},
		// userspace: np-other-local shares db's node, so its Service
		// connection comes from that node itself, which is always allowed.
		probe{"default", "np-other-local", db, false}, probe{"default", "np-other-local", dbVia, !viaService},
		probe{"a", "client", db, false},
		// Pods the policy does not select stay open.
		probe{"c", "client", target, true})

	s.apply("netpol-ns-policy.yaml")
	expect("pods of the namespace labelled name=A reach target-service in b, others do not",
		probe{"a", "client", targetVia, viaService}, probe{"a", "client", target, true},
		probe{"c", "client", targetVia, false}, probe{"c", "client", target, false},
		probe{"default", "np-frontend", targetVia, false})

	mustContain := func(out string, subs ...string) {
		for _, sub := range subs {
			if !strings.Contains(out, sub) {
				s.errorf([]string{"kubectl get/describe networkpolicy"}, out, "missing %q", sub)
			}
		}
	}
	mustContain(s.kubectl("get", "networkpolicy", "-A"), "POD-SELECTOR", "db-from-frontend", "role=db", "allow-from-namespace-a", "app=target-service")
	mustContain(s.kubectl("describe", "networkpolicy", "-n", "b", "allow-from-namespace-a"), "NamespaceSelector: name=A", "Policy Types: Ingress")

	s.kubectl("delete", "networkpolicy", "db-from-frontend")
	expect("with the policy deleted other pods reach db again",
		probe{"default", "np-other", db, true}, probe{"default", "np-other", dbVia, true})
}
