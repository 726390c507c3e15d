// Package apiserver_e2e drives svcnet's API server with the real kubectl
// (/usr/bin/kubectl), using the seed manifests in testdata. The tests skip
// when kubectl is not installed.
package apiserver_e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/apiserver"
	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// advertise is the address the kubernetes Endpoints point at. It is only
// written into objects; nothing is sent to it.
const advertise = "172.18.0.1"

type kubectl struct {
	t          *testing.T
	kubeconfig string
	env        []string
}

func newKubectl(t *testing.T, opts ...apiservertest.Option) *kubectl {
	k, _ := newKubectlServer(t, opts...)
	return k
}

func newKubectlServer(t *testing.T, opts ...apiservertest.Option) (*kubectl, *apiservertest.Server) {
	t.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	srv := apiservertest.Start(t, append([]apiservertest.Option{apiservertest.WithConfig(func(c *apiserver.Config) { c.AdvertiseAddress = advertise })}, opts...)...)
	return &kubectl{t: t, kubeconfig: srv.KubeconfigPath(), env: []string{"HOME=" + t.TempDir()}}, srv
}

// run runs kubectl and returns its combined output; failure is fatal unless
// wantErr.
func (k *kubectl) run(wantErr bool, args ...string) string {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), k.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if (err != nil) != wantErr {
		k.t.Fatalf("kubectl %s: err=%v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func (k *kubectl) ok(args ...string) string { k.t.Helper(); return k.run(false, args...) }

func mustMatch(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("output does not match %q:\n%s", p, out)
		}
	}
}

func TestKubectlApplyGetDescribe(t *testing.T) {
	k := newKubectl(t)
	mustMatch(t, k.ok("version"), `Server Version: v1\.37\.2`)
	mustMatch(t, k.ok("apply", "-f", "testdata/myapp.yaml"), `deployment.apps/myapp created`, `service/myapp created`)
	mustMatch(t, k.ok("apply", "-f", "testdata/myapp.yaml"), `deployment.apps/myapp unchanged`, `service/myapp unchanged`)
	mustMatch(t, k.ok("get", "svc", "myapp", "-o", "wide"),
		`NAME\s+TYPE\s+CLUSTER-IP\s+EXTERNAL-IP\s+PORT\(S\)\s+AGE\s+SELECTOR`,
		`myapp\s+ClusterIP\s+10\.96\.\d+\.\d+\s+<none>\s+38080/TCP\s+\S+\s+app=myapp`)
	mustMatch(t, k.ok("get", "deploy", "myapp", "-o", "wide"),
		`NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\s+CONTAINERS\s+IMAGES\s+SELECTOR`,
		`myapp\s+0/3\s+0\s+0\s+\S+\s+myapp\s+jocatalin/kubernetes-bootcamp:v1\s+app=myapp,version=v1`)
	y := k.ok("get", "svc", "myapp", "-o", "yaml")
	mustMatch(t, y, `clusterIP: 10\.96\.`, `targetPort: 8080`, `sessionAffinity: None`, `resourceVersion: "\d+"`, `uid: `)
	mustMatch(t, k.ok("describe", "svc", "myapp"), `Selector:\s+app=myapp`, `Type:\s+ClusterIP`, `TargetPort:\s+8080/TCP`)
	mustMatch(t, k.ok("get", "endpoints", "kubernetes"), `kubernetes\s+172\.18\.0\.1:\d+`)
	mustMatch(t, k.ok("get", "svc", "kubernetes"), `kubernetes\s+ClusterIP\s+10\.96\.0\.1\s+<none>\s+443/TCP`)
	mustMatch(t, k.ok("apply", "-f", "testdata/svc-no-selector.yaml"), `service/svc-no-selector created`, `endpoints/svc-no-selector created`)
	mustMatch(t, k.ok("get", "endpoints", "svc-no-selector"), `svc-no-selector\s+47\.93\.22\.98:80`)
	mustMatch(t, k.ok("apply", "--server-side", "--force-conflicts", "-f", "testdata/myapp.yaml"), `service/myapp serverside-applied`)
	mustMatch(t, k.ok("get", "svc", "myapp", "-o", "yaml", "--show-managed-fields"), `manager: kubectl`, `operation: Apply`)
	mustMatch(t, k.ok("apply", "-f", "testdata/ingress.yaml"), `ingress.networking.k8s.io/my-ingress created`)
	// A kind svcnet does not serve.
	mustMatch(t, k.run(true, "apply", "-f", writeTemp(t, "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {schedule: '* * * * *', jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}}}\n")),
		`no matches for kind "CronJob" in version "batch/v1"`)
	mustMatch(t, k.ok("delete", "-f", "testdata/myapp.yaml"), `deployment.apps "myapp" deleted`, `service "myapp" deleted`)
	mustMatch(t, k.run(true, "get", "svc", "myapp"), `services "myapp" not found`)
}

func TestKubectlEditAndWatch(t *testing.T) {
	k := newKubectl(t)
	k.ok("apply", "-f", "testdata/myapp.yaml")
	editor := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/port: 38080/port: 38090/' \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	k.env = append(k.env, "EDITOR="+editor, "KUBE_EDITOR="+editor)
	mustMatch(t, k.ok("edit", "svc", "myapp"), `service/myapp edited`)
	mustMatch(t, k.ok("get", "svc", "myapp"), `38090/TCP`)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", k.kubeconfig, "get", "svc", "-w")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitFor(t, &out, `myapp\s+ClusterIP`)
	k.ok("label", "svc", "myapp", "watched=yes")
	k.ok("apply", "-f", "testdata/svc-no-selector.yaml")
	waitFor(t, &out, `svc-no-selector\s+ClusterIP\s+10\.96\.`)
}

func TestKubectlDiscoveryAndExplain(t *testing.T) {
	k := newKubectl(t)
	out := k.ok("api-resources")
	for _, p := range []string{
		`services\s+svc\s+v1\s+true\s+Service`, `endpoints\s+ep\s+v1\s+true\s+Endpoints`, `pods\s+po\s+v1\s+true\s+Pod`,
		`nodes\s+no\s+v1\s+false\s+Node`, `namespaces\s+ns\s+v1\s+false\s+Namespace`,
		`deployments\s+deploy\s+apps/v1\s+true\s+Deployment`, `endpointslices\s+discovery.k8s.io/v1\s+true\s+EndpointSlice`,
	} {
		mustMatch(t, out, p)
	}
	mustMatch(t, k.ok("explain", "service.spec.type"), `FIELD:\s+type <string>`, `ClusterIP`)
	mustMatch(t, k.ok("auth", "can-i", "create", "services"), `^yes`)
	mustMatch(t, k.ok("auth", "whoami"), `Username\s+kubernetes-admin`, `system:masters`)
	mustMatch(t, k.ok("get", "ns"), `NAME\s+STATUS\s+AGE`, `kube-system\s+Active`, `kube-node-lease\s+Active`)
}
