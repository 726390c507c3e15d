package apiserver_e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubectlDescribeService checks kubectl describe svc against the
// seed's output: every field, Endpoints from the Service's EndpointSlices
// and Events found with describe's involvedObject field selector (which
// includes the uid).
func TestKubectlDescribeService(t *testing.T) {
	k := newKubectl(t)
	k.ok("apply", "-f", "testdata/myapp.yaml")
	uid := strings.TrimSpace(k.ok("get", "svc", "myapp", "-o", "jsonpath={.metadata.uid}"))
	ip := strings.TrimSpace(k.ok("get", "svc", "myapp", "-o", "jsonpath={.spec.clusterIP}"))
	extra := `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: myapp-abcde
  labels:
    kubernetes.io/service-name: myapp
addressType: IPv4
ports:
- port: 8080
  protocol: TCP
  name: ""
endpoints:
- addresses: ["10.244.1.5"]
  conditions: {ready: true}
- addresses: ["10.244.2.7"]
  conditions: {ready: true}
---
apiVersion: v1
kind: Event
metadata:
  name: myapp.test1
involvedObject:
  apiVersion: v1
  kind: Service
  name: myapp
  namespace: default
  uid: ` + uid + `
reason: ClusterIPOutOfRange
message: test conflict
type: Warning
source:
  component: ipallocator-repair-controller
count: 1
firstTimestamp: "2026-01-01T00:00:00Z"
lastTimestamp: "2026-01-01T00:00:00Z"
---
apiVersion: v1
kind: Event
metadata:
  name: myapp.other
involvedObject:
  apiVersion: v1
  kind: Service
  name: myapp
  namespace: default
  uid: 00000000-0000-0000-0000-000000000000
reason: OtherUID
message: belongs to an older myapp
type: Normal
count: 1
firstTimestamp: "2026-01-01T00:00:00Z"
lastTimestamp: "2026-01-01T00:00:00Z"
`
	f := filepath.Join(t.TempDir(), "extra.yaml")
	if err := os.WriteFile(f, []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	k.ok("apply", "-f", f)
	out := k.ok("describe", "svc", "myapp")
	esc := strings.ReplaceAll(ip, ".", `\.`)
	mustMatch(t, out,
		`(?m)^Name:\s+myapp$`,
		`(?m)^Namespace:\s+default$`,
		`(?m)^Labels:\s+app=myapp$`,
		`(?m)^Annotations:\s+<none>$`,
		`(?m)^Selector:\s+app=myapp$`,
		`(?m)^Type:\s+ClusterIP$`,
		`(?m)^IP Family Policy:\s+SingleStack$`,
		`(?m)^IP Families:\s+IPv4$`,
		`(?m)^IP:\s+`+esc+`$`,
		`(?m)^IPs:\s+`+esc+`$`,
		`(?m)^Port:\s+<unset>\s+38080/TCP$`,
		`(?m)^TargetPort:\s+8080/TCP$`,
		`(?m)^Endpoints:\s+10\.244\.1\.5:8080,10\.244\.2\.7:8080$`,
		`(?m)^Session Affinity:\s+None$`,
		`(?m)^Internal Traffic Policy:\s+Cluster$`,
		`(?m)^Events:`,
		`Warning\s+ClusterIPOutOfRange\s+.*test conflict`,
	)
	if strings.Contains(out, "OtherUID") {
		t.Errorf("describe shows an event of another uid:\n%s", out)
	}
}
