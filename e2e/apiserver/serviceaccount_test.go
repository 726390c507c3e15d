package apiserver_e2e

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/controller"
)

// TestKubectlServiceAccounts drives service accounts as a user of a
// kubeadm cluster meets them: the default service account and the
// kube-root-ca.crt ConfigMap of every namespace (svcnet's controllers), the
// ServiceAccount admission plugin's defaults and refusals, `kubectl create
// token`, and that token as kubectl's credentials (authentication,
// authorization as the service account, revocation with the service account
// or the pod it is bound to).
func TestKubectlServiceAccounts(t *testing.T) {
	k, srv := newKubectlServer(t, apiservertest.WithServiceAccountAdmission())
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WarningHandler = rest.NoWarnings{}
	ca, err := os.ReadFile(filepath.Join(srv.DataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(ctx, kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg),
			controller.Options{Controllers: []string{controller.ServiceAccount, controller.RootCAPublisher}, RootCA: ca},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	})
	until := func(what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !f(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
		}
	}
	// The controllers: a default service account and the CA in every
	// namespace, a new one included, made again when deleted.
	k.ok("create", "namespace", "team")
	for _, ns := range []string{"default", "kube-system", "team"} {
		until("service account default in "+ns, func() bool {
			return k.ok("get", "sa", "-n", ns, "--ignore-not-found", "default", "-o", "name") == "serviceaccount/default\n"
		})
		until("kube-root-ca.crt in "+ns, func() bool {
			return k.ok("get", "cm", "-n", ns, "--ignore-not-found", "kube-root-ca.crt", "-o", `jsonpath={.data.ca\.crt}`) == string(ca)
		})
	}
	mustMatch(t, k.ok("get", "sa", "-n", "team"), `(?m)^NAME\s+AGE\n^default\s+\d+s$`)
	k.ok("delete", "sa", "default", "-n", "team")
	until("service account default made again", func() bool { return strings.Contains(k.ok("get", "sa", "-n", "team"), "default") })
	k.ok("patch", "cm", "kube-root-ca.crt", "-n", "team", "-p", `{"data":{"ca.crt":"forged"}}`)
	until("kube-root-ca.crt put back", func() bool {
		return k.ok("get", "cm", "-n", "team", "kube-root-ca.crt", "-o", `jsonpath={.data.ca\.crt}`) == string(ca)
	})
	if got := k.ok("get", "cm", "-n", "team", "kube-root-ca.crt", "-o", `jsonpath={.metadata.annotations.kubernetes\.io/description}`); !strings.HasPrefix(got, "Contains a CA bundle") {
		t.Errorf("kube-root-ca.crt description: %q", got)
	}

	// Admission: the default service account and the token volume in every
	// container (init containers too).
	pod := func(name, extra string) string {
		return writeTemp(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+"}\nspec:\n  initContainers: [{name: init, image: nginx}]\n  containers: [{name: c, image: nginx}, {name: d, image: nginx, volumeMounts: [{name: own, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}]}]\n  volumes: [{name: own, emptyDir: {}}]\n"+extra)
	}
	k.ok("apply", "-f", pod("web", ""))
	got := k.ok("get", "pod", "web", "-o", `jsonpath={.spec.serviceAccountName} {.spec.serviceAccount}|{range .spec.volumes[*]}{.name}={.projected.defaultMode}:{range .projected.sources[*]}{.serviceAccountToken.path}/{.serviceAccountToken.expirationSeconds}{.configMap.name}/{.configMap.items[0].key}{.downwardAPI.items[0].fieldRef.fieldPath};{end},{end}|{range .spec.initContainers[*]}{.volumeMounts[*].name}@{.volumeMounts[*].mountPath}:{.volumeMounts[*].readOnly};{end}|{range .spec.containers[*]}{.volumeMounts[*].name};{end}`)
	want := regexp.MustCompile(`^default default\|own=:,(kube-api-access-[a-z0-9]{5})=420:token/3607/;/kube-root-ca.crt/ca.crt;//metadata.namespace;,\|kube-api-access-[a-z0-9]{5}@/var/run/secrets/kubernetes.io/serviceaccount:true;\|kube-api-access-[a-z0-9]{5};own;$`)
	if !want.MatchString(got) {
		t.Errorf("pod web after admission:\n%s\nwant to match %s", got, want)
	}
	k.ok("apply", "-f", pod("quiet", "  automountServiceAccountToken: false\n"))
	if got := k.ok("get", "pod", "quiet", "-o", `jsonpath={.spec.serviceAccountName} {.spec.volumes[*].name}`); got != "default own" {
		t.Errorf("pod with automountServiceAccountToken false: %q, want %q", got, "default own")
	}
	if out := k.run(true, "apply", "-f", pod("lost", "  serviceAccountName: nobody\n")); !strings.Contains(out,
		`Error from server (Forbidden): error when creating "`) || !strings.Contains(out, `pods "lost" is forbidden: error looking up service account default/nobody: serviceaccount "nobody" not found`) {
		t.Errorf("pod of a missing service account: %s", out)
	}

	// kubectl create token, and the token as credentials.
	k.ok("create", "serviceaccount", "robot")
	if out := k.run(true, "create", "token", "robot", "--duration", "5m"); !strings.Contains(out, "spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes") {
		t.Errorf("kubectl create token --duration 5m: %s", out)
	}
	tok := strings.TrimSpace(k.ok("create", "token", "robot"))
	as := func(tok string, wantErr bool, args ...string) string {
		t.Helper()
		return k.run(wantErr, append([]string{"--kubeconfig", os.DevNull, "--server", srv.URL(),
			"--certificate-authority", filepath.Join(srv.DataDir, "pki", "ca.crt"), "--token", tok}, args...)...)
	}
	mustMatch(t, as(tok, false, "auth", "whoami", "-o", "yaml"),
		`username: system:serviceaccount:default:robot`,
		`(?s)groups:\n    - system:serviceaccounts\n    - system:serviceaccounts:default\n    - system:authenticated`,
		`authentication.kubernetes.io/credential-id:\n      - JTI=`)
	mustMatch(t, as(tok, true, "get", "pods"),
		`Error from server \(Forbidden\): pods is forbidden: User "system:serviceaccount:default:robot" cannot list resource "pods" in API group "" in the namespace "default"`)
	k.ok("create", "rolebinding", "robot-view", "--clusterrole", "view", "--serviceaccount", "default:robot")
	until("robot may list pods", func() bool {
		return strings.Contains(k.run(false, "auth", "can-i", "list", "pods", "--as", "system:serviceaccount:default:robot"), "yes")
	})
	mustMatch(t, as(tok, false, "get", "pods"), `(?m)^web\s`)
	if out := as("not-a-token", true, "get", "pods"); !strings.Contains(out, "Unauthorized") {
		t.Errorf("a bad token: %s", out)
	}
	k.ok("delete", "sa", "robot")
	if out := as(tok, true, "get", "pods"); !strings.Contains(out, "Unauthorized") {
		t.Errorf("token of a deleted service account: %s", out)
	}

	// A token bound to a pod dies with it.
	bound := strings.TrimSpace(k.ok("create", "token", "default", "--bound-object-kind", "Pod", "--bound-object-name", "quiet"))
	mustMatch(t, as(bound, false, "auth", "whoami", "-o", "yaml"),
		`username: system:serviceaccount:default:default`, `authentication.kubernetes.io/pod-name:\n      - quiet`)
	if out := k.run(true, "create", "token", "robot2", "--bound-object-kind", "Pod", "--bound-object-name", "quiet"); !strings.Contains(out, `serviceaccounts "robot2" not found`) {
		t.Errorf("token of a missing service account: %s", out)
	}
	k.ok("delete", "pod", "quiet", "--wait=false")
	until("the bound token refused", func() bool {
		return strings.Contains(as(bound, true, "auth", "whoami"), "Unauthorized")
	})
	mustMatch(t, k.ok("api-resources", "--api-group="), `(?m)^serviceaccounts\s+sa\s+v1\s+true\s+ServiceAccount$`)
}
