package apiserver_e2e

import (
	"regexp"
	"strings"
	"testing"
)

// The expected messages below are kube-apiserver 1.37.2's for the same
// objects (hack/apidiff's daemonset-* kinds compare svcnet's strategy with
// Kubernetes' on random objects of these shapes).

// TestKubectlDaemonSet: invalid DaemonSets are refused with kube-apiserver's
// errors in its order (a missing selector is only a template-label
// mismatch, the update strategy rendered as Kubernetes renders its internal
// struct); a valid one is stored with kube's defaults at generation and
// template generation 1; its selector cannot change; a template change
// moves both generations on; a /status write with a negative count is
// refused; `kubectl get ds` prints kube's columns, -o wide too.
func TestKubectlDaemonSet(t *testing.T) {
	k := newKubectl(t)

	bad := `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: bad}
spec:
  minReadySeconds: -1
  template:
    metadata: {labels: {app: agent}}
    spec:
      restartPolicy: OnFailure
      activeDeadlineSeconds: 30
      containers: [{name: agent, image: fluent/fluent-bit}]
`
	out := k.run(true, "apply", "-f", writeTemp(t, bad))
	wantLines(t, "invalid DaemonSet", out, `The DaemonSet "bad" is invalid: `,
		"* spec.template.metadata.labels: Invalid value: {\"app\":\"agent\"}: `selector` does not match template `labels`",
		`* spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: "Always"`,
		"* spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in DaemonSet is not Supported",
		"* spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0")

	strategy := `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: bad-strategy}
spec:
  selector: {}
  updateStrategy: {type: Bogus}
  revisionHistoryLimit: -1
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: fluent/fluent-bit}]
`
	out = k.run(true, "apply", "-f", writeTemp(t, strategy))
	wantLines(t, "DaemonSet with a bad strategy", out, `The DaemonSet "bad-strategy" is invalid: `,
		"* spec.selector: Invalid value: {}: empty selector is invalid for daemonset",
		`* spec.updateStrategy: Unsupported value: {"Type":"Bogus","RollingUpdate":null}: supported values: "RollingUpdate", "OnDelete"`,
		"* spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0")

	surge := `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: bad-surge}
spec:
  selector: {matchLabels: {app: agent}}
  updateStrategy: {rollingUpdate: {maxUnavailable: 1, maxSurge: "150%"}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: fluent/fluent-bit}]
`
	out = k.run(true, "apply", "-f", writeTemp(t, surge))
	wantLines(t, "DaemonSet with maxSurge and maxUnavailable", out, `The DaemonSet "bad-surge" is invalid: `,
		`* spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: "150%": must not be greater than 100%`,
		`* spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: "150%": may not be set when maxUnavailable is non-zero`)
	zero := strings.ReplaceAll(surge, `{maxUnavailable: 1, maxSurge: "150%"}`, `{maxUnavailable: "0%"}`)
	out = k.run(true, "apply", "-f", writeTemp(t, zero))
	wantLines(t, "DaemonSet with nothing to roll with", out,
		`The DaemonSet "bad-surge" is invalid: spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0`)

	good := `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers: [{name: agent, image: fluent/fluent-bit}]
`
	f := writeTemp(t, good)
	got := k.ok("create", "--save-config", "-f", f, "-o", "jsonpath={.metadata.generation} {.metadata.annotations.deprecated\\.daemonset\\.template\\.generation} "+
		"{.spec.updateStrategy.type} {.spec.updateStrategy.rollingUpdate.maxUnavailable} {.spec.updateStrategy.rollingUpdate.maxSurge} "+
		"{.spec.revisionHistoryLimit} {.spec.template.spec.restartPolicy} {.spec.template.spec.containers[0].imagePullPolicy}")
	if want := "1 1 RollingUpdate 1 0 10 Always Always"; got != want {
		t.Errorf("created DaemonSet: got %q, want %q", got, want)
	}

	moved := strings.ReplaceAll(good, "{app: agent}", "{app: agent, tier: node}")
	out = k.run(true, "apply", "-f", writeTemp(t, moved))
	wantLines(t, "selector change", out,
		`The DaemonSet "agent" is invalid: spec.selector: Invalid value: {"matchLabels":{"app":"agent","tier":"node"}}: field is immutable`)

	// A template change moves the generation and the template generation on.
	if got := k.ok("set", "image", "ds/agent", "agent=fluent/fluent-bit:3.2", "-o",
		"jsonpath={.metadata.generation} {.metadata.annotations.deprecated\\.daemonset\\.template\\.generation}"); got != "2 2" {
		t.Errorf("after a template change: got %q, want %q", got, "2 2")
	}
	// A metadata change moves neither.
	if got := k.ok("annotate", "ds", "agent", "example.com/note=x", "-o",
		"jsonpath={.metadata.generation} {.metadata.annotations.deprecated\\.daemonset\\.template\\.generation}"); got != "2 2" {
		t.Errorf("after an annotation: got %q, want %q", got, "2 2")
	}

	out = k.run(true, "patch", "ds", "agent", "--subresource=status", "--type=merge", "-p", `{"status":{"numberReady":-1}}`)
	wantLines(t, "status write", out, `status.numberReady: Invalid value: -1: must be greater than or equal to 0`)
	k.ok("patch", "ds", "agent", "--subresource=status", "--type=merge", "-p",
		`{"status":{"desiredNumberScheduled":5,"currentNumberScheduled":4,"numberReady":3,"updatedNumberScheduled":2,"numberAvailable":1,"numberUnavailable":4}}`)

	table := k.ok("get", "ds")
	wantRow(t, table, `NAME\s+DESIRED\s+CURRENT\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+NODE SELECTOR\s+AGE`)
	wantRow(t, table, `agent\s+5\s+4\s+3\s+2\s+1\s+kubernetes.io/os=linux\s+\d+s`)
	wide := k.ok("get", "daemonset", "-o", "wide")
	wantRow(t, wide, `NAME\s+DESIRED\s+CURRENT\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+NODE SELECTOR\s+AGE\s+CONTAINERS\s+IMAGES\s+SELECTOR`)
	wantRow(t, wide, `agent\s+5\s+4\s+3\s+2\s+1\s+kubernetes.io/os=linux\s+\d+s\s+agent\s+fluent/fluent-bit:3.2\s+app=agent`)
	// DaemonSets are in the "all" category.
	wantRow(t, k.ok("get", "all"), `daemonset.apps/agent\s+5\s+4\s+3\s+2\s+1\s+kubernetes.io/os=linux\s+\d+s`)
}

// wantRow fails unless a line of out matches the regular expression re.
func wantRow(t *testing.T, out, re string) {
	t.Helper()
	rx := regexp.MustCompile(`(?m)^` + re + `\s*$`)
	if !rx.MatchString(out) {
		t.Errorf("no line matching %q in\n%s", re, out)
	}
}
