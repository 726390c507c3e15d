package apiserver_e2e

import (
	"strconv"
	"strings"
	"testing"
)

// The expected messages below are kube-apiserver 1.37.2's for the same
// objects (hack/apidiff's deployment-* and replicaset-* kinds compare
// svcnet's strategies with Kubernetes' on random objects of these shapes).

// TestKubectlDeploymentValidation: invalid Deployments are refused with
// kube-apiserver's errors in its order (the Deployment-specific checks of
// the template, the rollout strategy rendered as Kubernetes renders its
// internal struct, progressDeadlineSeconds against minReadySeconds); a
// valid one is stored with kube's defaults at generation 1; its selector
// cannot change; an annotation change moves the generation on; a /status
// write with a negative count is refused.
func TestKubectlDeploymentValidation(t *testing.T) {
	k := newKubectl(t)

	bad := `apiVersion: apps/v1
kind: Deployment
metadata: {name: bad}
spec:
  replicas: -1
  selector: {matchLabels: {app: web}}
  strategy: {type: Recreate, rollingUpdate: {maxSurge: 1}}
  minReadySeconds: 10
  progressDeadlineSeconds: 5
  template:
    metadata: {labels: {app: other}}
    spec:
      restartPolicy: Never
      containers: [{name: app, image: nginx}]
`
	out := k.run(true, "apply", "-f", writeTemp(t, bad))
	wantLines(t, "invalid Deployment", out, `The Deployment "bad" is invalid: `,
		"* spec.replicas: Invalid value: -1: must be greater than or equal to 0",
		"* spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`",
		`* spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"`,
		"* spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'",
		"* spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds")

	strategy := `apiVersion: apps/v1
kind: Deployment
metadata: {name: bad-strategy}
spec:
  selector: {matchLabels: {app: web}}
  strategy: {type: Bogus, rollingUpdate: {maxUnavailable: 150%}}
  revisionHistoryLimit: -1
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: nginx}]
`
	out = k.run(true, "apply", "-f", writeTemp(t, strategy))
	wantLines(t, "Deployment with a bad strategy", out, `The Deployment "bad-strategy" is invalid: `,
		`* spec.strategy: Unsupported value: {"Type":"Bogus","RollingUpdate":{"MaxUnavailable":"150%","MaxSurge":0}}: supported values: "Recreate", "RollingUpdate"`,
		"* spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0")

	surge := `apiVersion: apps/v1
kind: Deployment
metadata: {name: bad-surge}
spec:
  selector: {matchLabels: {app: web}}
  strategy: {rollingUpdate: {maxUnavailable: 0, maxSurge: "0%"}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: nginx}]
`
	out = k.run(true, "apply", "-f", writeTemp(t, surge))
	wantLines(t, "Deployment with maxSurge and maxUnavailable 0", out,
		"The Deployment \"bad-surge\" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0")

	good := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: nginx}]
`
	f := writeTemp(t, good)
	got := k.ok("create", "--save-config", "-f", f, "-o", "jsonpath={.metadata.generation} {.spec.replicas} {.spec.strategy.type} {.spec.strategy.rollingUpdate.maxSurge} "+
		"{.spec.strategy.rollingUpdate.maxUnavailable} {.spec.revisionHistoryLimit} {.spec.progressDeadlineSeconds} "+
		"{.spec.template.spec.restartPolicy} {.spec.template.spec.dnsPolicy} {.spec.template.spec.containers[0].imagePullPolicy}")
	if want := "1 1 RollingUpdate 25% 25% 10 600 Always ClusterFirst Always"; got != want {
		t.Errorf("created Deployment: got %q, want %q", got, want)
	}

	// The selector of an apps/v1 Deployment is immutable, even when the
	// template's labels follow it.
	moved := strings.ReplaceAll(good, "{app: web}", "{app: web, tier: front}")
	out = k.run(true, "apply", "-f", writeTemp(t, moved))
	wantLines(t, "selector change", out,
		`The Deployment "web" is invalid: spec.selector: Invalid value: {"matchLabels":{"app":"web","tier":"front"}}: field is immutable`)

	// Annotations are copied to the ReplicaSets: changing them is a new
	// generation, as a spec change is.
	before, err := strconv.Atoi(k.ok("get", "deploy", "web", "-o", "jsonpath={.metadata.generation}"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := strconv.Atoi(k.ok("annotate", "deploy", "web", "example.com/note=x", "-o", "jsonpath={.metadata.generation}"))
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("generation after an annotation change: %d, before %d", after, before)
	}

	out = k.run(true, "patch", "deploy", "web", "--subresource=status", "--type=merge", "-p", `{"status":{"observedGeneration":-1}}`)
	wantLines(t, "status write", out, `status.observedGeneration: Invalid value: -1: must be greater than or equal to 0`)
}

// TestKubectlReplicaSetValidation: a ReplicaSet without a selector, with
// activeDeadlineSeconds and a bad template label is refused with
// kube-apiserver's errors; a valid one is accepted and its selector cannot
// change.
func TestKubectlReplicaSetValidation(t *testing.T) {
	k := newKubectl(t)
	bad := `apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: bad}
spec:
  minReadySeconds: -1
  template:
    metadata: {labels: {app: web, "bad key!": x}}
    spec:
      activeDeadlineSeconds: 30
      containers: [{name: app, image: nginx}]
`
	out := k.run(true, "apply", "-f", writeTemp(t, bad))
	wantLines(t, "invalid ReplicaSet", out, `The ReplicaSet "bad" is invalid: `,
		"* spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
		"* spec.selector: Required value",
		"* spec.template.metadata.labels: Invalid value: {\"app\":\"web\",\"bad key!\":\"x\"}: `selector` does not match template `labels`",
		`* spec.template.labels: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		"* spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported")

	good := `apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-1}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: nginx}]
`
	if got := k.ok("create", "-f", writeTemp(t, good), "-o", "jsonpath={.metadata.generation} {.spec.replicas} {.spec.template.spec.restartPolicy}"); got != "1 1 Always" {
		t.Errorf("created ReplicaSet: got %q, want %q", got, "1 1 Always")
	}
	out = k.run(true, "apply", "-f", writeTemp(t, strings.ReplaceAll(good, "{app: web}", "{app: api}")))
	wantLines(t, "ReplicaSet selector change", out,
		`The ReplicaSet "web-1" is invalid: spec.selector: Invalid value: {"matchLabels":{"app":"api"}}: field is immutable`)
}

// wantLines fails unless out holds want as consecutive lines.
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	if w := strings.Join(want, "\n"); !strings.Contains(out, w) {
		t.Errorf("%s: kubectl said\n%s\nwant it to contain\n%s", what, out, w)
	}
}
