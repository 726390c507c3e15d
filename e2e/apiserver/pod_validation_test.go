package apiserver_e2e

import (
	"strings"
	"testing"
)

// TestKubectlPodValidation: Pods get kube-apiserver 1.37's pod validation,
// the way a user meets it with kubectl: every wrong field of a manifest
// reported at once in its order, the QoS class and defaults of an accepted
// pod, and the update rules (images may change, other fields may not).
func TestKubectlPodValidation(t *testing.T) {
	k := newKubectl(t)
	bad := `apiVersion: v1
kind: Pod
metadata: {name: bad}
spec:
  volumes: [{name: data, emptyDir: {}}]
  containers:
  - name: Web_1
    image: " nginx"
    ports: [{containerPort: 70000, name: toolongportname1}]
    env: [{name: "", value: x}]
    volumeMounts: [{name: missing, mountPath: /data}]
    resources: {requests: {cpu: "2"}, limits: {cpu: "1"}}
    livenessProbe: {exec: {command: ["true"]}, successThreshold: 2}
    securityContext: {privileged: true}
  restartPolicy: Sometimes
  dnsPolicy: None
  tolerations: [{operator: Exists, value: x}]
`
	out := k.run(true, "apply", "-f", writeTemp(t, bad))
	want := []string{
		`spec.containers[0].name: Invalid value: "Web_1": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'`,
		`spec.containers[0].ports[0].name: Invalid value: "toolongportname1": must be no more than 15 characters`,
		`spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive`,
		`spec.containers[0].env[0].name: Required value`,
		`spec.containers[0].volumeMounts[0].name: Not found: "missing"`,
		`spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`,
		`spec.containers[0].securityContext.privileged: Forbidden: disallowed by cluster policy`,
		`spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1`,
		`spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`,
		"spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None",
		"spec.tolerations[0].operator: Invalid value: \"x\": value must be empty when `operator` is 'Exists'",
		`spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace`,
	}
	last := -1
	for _, w := range want {
		i := strings.Index(out, w)
		if i < 0 {
			t.Errorf("kubectl apply of a bad Pod said\n%s\nwant it to contain %q", out, w)
			continue
		}
		if i < last {
			t.Errorf("%q came before the error listed above it in\n%s", w, out)
		}
		last = i
	}
	if strings.Contains(out, "created") {
		t.Fatalf("the bad Pod was created:\n%s", out)
	}

	good := `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: web
    image: nginx:1.25
    resources: {limits: {cpu: 100m, memory: 64Mi}}
  tolerations: [{key: a, operator: Exists}]
`
	k.ok("apply", "-f", writeTemp(t, good))
	if got := k.ok("get", "pod", "web", "-o", "jsonpath={.status.qosClass} {.metadata.generation} {.spec.containers[0].resources.requests.cpu}"); got != "Guaranteed 1 100m" {
		t.Errorf("accepted pod: qosClass, generation, defaulted request = %q, want %q", got, "Guaranteed 1 100m")
	}
	k.ok("set", "image", "pod/web", "web=nginx:1.26")
	if got := k.ok("get", "pod", "web", "-o", "jsonpath={.spec.containers[0].image} {.metadata.generation}"); got != "nginx:1.26 2" {
		t.Errorf("after an image change: image, generation = %q", got)
	}
	out = k.run(true, "patch", "pod", "web", "--type=json", "-p", `[{"op":"add","path":"/spec/containers/0/env","value":[{"name":"A","value":"1"}]}]`)
	if want := "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"; !strings.Contains(out, want) {
		t.Errorf("kubectl patch of a pod's env said\n%s\nwant it to contain %q", out, want)
	}
	out = k.run(true, "patch", "pod", "web", "--type=json", "-p", `[{"op":"replace","path":"/spec/tolerations/0/key","value":"b"}]`)
	if want := "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"; !strings.Contains(out, want) {
		t.Errorf("kubectl patch of a toleration said\n%s\nwant it to contain %q", out, want)
	}
}

// TestKubectlPodAdmission: what kube-apiserver's default admission plugins
// do to a pod, as kubectl shows it: Priority (priority and preemption
// policy from the class, unknown classes and hand-set priorities refused,
// kept on update) and DefaultTolerationSeconds (300 s of not-ready and
// unreachable unless the pod tolerates them).
func TestKubectlPodAdmission(t *testing.T) {
	k := newKubectl(t)
	pod := func(name, extra string) string {
		return writeTemp(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+"}\nspec:\n  containers: [{name: c, image: nginx}]\n"+extra)
	}
	k.ok("apply", "-f", pod("plain", ""))
	const fields = `jsonpath={.spec.priority} {.spec.preemptionPolicy} {range .spec.tolerations[*]}{.key}:{.effect}:{.tolerationSeconds};{end}`
	if got, want := k.ok("get", "pod", "plain", "-o", fields),
		"0 PreemptLowerPriority node.kubernetes.io/not-ready:NoExecute:300;node.kubernetes.io/unreachable:NoExecute:300;"; got != want {
		t.Errorf("pod without a class: %q, want %q", got, want)
	}
	k.ok("apply", "-f", pod("critical", "  priorityClassName: system-node-critical\n  tolerations: [{operator: Exists}]\n"))
	if got, want := k.ok("get", "pod", "critical", "-o", fields), "2000001000 PreemptLowerPriority ::;"; got != want {
		t.Errorf("system-node-critical pod tolerating everything: %q, want %q", got, want)
	}
	k.ok("apply", "-f", pod("partial", "  tolerations: [{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 10}]\n"))
	if got, want := k.ok("get", "pod", "partial", "-o", fields),
		"0 PreemptLowerPriority node.kubernetes.io/unreachable:NoExecute:10;node.kubernetes.io/not-ready:NoExecute:300;"; got != want {
		t.Errorf("pod tolerating unreachable for 10 s: %q, want %q", got, want)
	}
	for _, c := range []struct{ name, extra, want string }{
		{"gold", "  priorityClassName: gold\n", `pods "gold" is forbidden: no PriorityClass with name gold was found`},
		{"hand", "  priority: 5\n", `pods "hand" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name`},
		{"never", "  preemptionPolicy: Never\n", `pods "never" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name`},
	} {
		if out := k.run(true, "create", "-f", pod(c.name, c.extra)); !strings.Contains(out, "Error from server (Forbidden)") || !strings.Contains(out, c.want) {
			t.Errorf("kubectl create of pod %s said\n%s\nwant it to contain %q", c.name, out, c.want)
		}
	}
	// An update may not change the priority admission computed; one that
	// leaves it out (a replace without it) gets it back.
	if out := k.run(true, "patch", "pod", "plain", "--type=json", "-p", `[{"op":"replace","path":"/spec/priority","value":7}]`); !strings.Contains(out, "pod updates may not change fields") {
		t.Errorf("kubectl patch of the priority said\n%s", out)
	}
	k.ok("patch", "pod", "plain", "--type=json", "-p", `[{"op":"remove","path":"/spec/priority"},{"op":"remove","path":"/spec/preemptionPolicy"}]`)
	if got := k.ok("get", "pod", "plain", "-o", "jsonpath={.spec.priority} {.spec.preemptionPolicy}"); got != "0 PreemptLowerPriority" {
		t.Errorf("priority and policy after a patch removing them: %q, want %q", got, "0 PreemptLowerPriority")
	}
}
