package apiserver_e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestKubectlEventsV1: an Event written through events.k8s.io/v1 (as
// kube-proxy and kube-controller-manager write theirs) is listed by
// `kubectl get events` (core/v1) and by the events.k8s.io resource.
func TestKubectlEventsV1(t *testing.T) {
	k := newKubectl(t)
	manifest := filepath.Join(t.TempDir(), "event.yaml")
	eventTime := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	if err := os.WriteFile(manifest, []byte(`apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: node-1.starting
  namespace: default
eventTime: "`+eventTime+`"
reportingController: kube-proxy
reportingInstance: kube-proxy-node-1
action: StartKubeProxy
reason: Starting
type: Normal
note: kube-proxy started
regarding:
  kind: Node
  name: node-1
`), 0o644); err != nil {
		t.Fatal(err)
	}
	mustMatch(t, k.ok("create", "-f", manifest), `event.events.k8s.io/node-1.starting created`)
	mustMatch(t, k.ok("get", "events", "-n", "default"),
		`LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE`, `\S+\s+Normal\s+Starting\s+node/node-1\s+kube-proxy started`)
	mustMatch(t, k.ok("get", "events.v1.events.k8s.io", "-n", "default", "-o", "wide"),
		`Normal\s+Starting\s+node/node-1\s+kube-proxy, kube-proxy-node-1\s+kube-proxy started`)
	mustMatch(t, k.ok("get", "events", "-n", "default", "--field-selector", "reason=Starting", "-o", "jsonpath={.items[*].message}"), `^kube-proxy started$`)
	mustMatch(t, k.ok("get", "events.events.k8s.io", "-n", "default", "-o", "jsonpath={.items[*].note}"), `^kube-proxy started$`)
}
