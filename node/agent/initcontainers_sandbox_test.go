package agent

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/node/sandbox"
)

// A real pod (namespaces, infra process, bind mounts) in a test network
// namespace playing the node: its init container writes a file into an
// emptyDir and waits; kubectl exec into the running init container (the
// node's exec endpoint, with the init container's environment) lets it
// finish; the app container, started only then, reads the file. kubectl
// logs of the init container (the node's log endpoint) shows its output.
func TestInitContainersInSandbox(t *testing.T) {
	testbed.RequireCommand(t, "ip", "nsenter", "sh", "cat", "hostname")
	node, cfg := sandboxNode(t, "aginit", "10.244.4.1/24")
	dataDir := cfg.DataDir
	before := mountPointsOf(t)
	client := fake.NewClientset()
	e := startAgent(t, client, func(*hostRuntime) Runtime { return &nodeRuntime{rt: &NamespaceRuntime{Config: cfg}, node: node} },
		func(c *Config) { c.DataDir = dataDir })

	// The mount point exists on the machine (a pod's filesystem is the
	// node's); what is mounted on it is only in the pod's mount namespace.
	mnt := t.TempDir()
	mounts := []v1.VolumeMount{{Name: "work", MountPath: mnt}}
	prepare := shc("prepare", `echo "prepared by $(hostname)" > `+mnt+`/msg; until [ -f `+mnt+`/go ]; do sleep 0.05; done; echo init-done`)
	prepare.Env = []v1.EnvVar{{Name: "INIT_VAR", Value: "from-init"}}
	prepare.VolumeMounts = mounts
	reader := shc("reader", "cat "+mnt+"/msg; ls "+mnt)
	reader.VolumeMounts = mounts
	p := initPod("initpod", []v1.Container{prepare}, reader)
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	p.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	e.create(p)
	e.eventually("the init container running", func() (bool, string) {
		cur := e.pod("initpod")
		if cur == nil {
			return false, ""
		}
		_, st := kubectlCells(t, cur)
		return st == "Init:0/1" && statusOf(cur, "prepare").State.Running != nil, cur.Status.String()
	})
	vol := filepath.Join(sandbox.PodDir(dataDir, "default", "initpod"), volumesDir, "work")
	e.eventually("the init container's file", func() (bool, string) {
		got := readFile(filepath.Join(vol, "msg"))
		return got == "prepared by initpod\n", got
	})
	if entries, _ := os.ReadDir(mnt); len(entries) != 0 {
		t.Errorf("the machine's %s holds %d entries: the emptyDir is mounted outside the pod", mnt, len(entries))
	}

	srv := httptest.NewServer(NewServer(dataDir, slog.Default()))
	defer srv.Close()
	q := url.Values{"command": {"sh", "-c", "echo $INIT_VAR; touch " + mnt + "/go"}, "output": {"1"}, "error": {"1"}}
	u, _ := url.Parse(srv.URL + "/exec/default/initpod/prepare?" + q.Encode())
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: srv.URL}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}); err != nil || out.String() != "from-init\n" {
		t.Fatalf("exec in the init container: %q %q %v", out.String(), errb.String(), err)
	}

	e.eventually("Succeeded", func() (bool, string) {
		cur := e.pod("initpod")
		if cur == nil {
			return false, ""
		}
		_, st := kubectlCells(t, cur)
		cs := statusOf(cur, "prepare")
		return cur.Status.Phase == v1.PodSucceeded && st == "Completed" && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 &&
			condition(cur, v1.PodInitialized).Status == v1.ConditionTrue, cur.Status.String()
	})
	logs := func(c string) string {
		resp, err := http.Get(srv.URL + "/containerLogs/default/initpod/" + c)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := logs("prepare"); got != "init-done\n" {
		t.Errorf("logs of the init container: %q", got)
	}
	if got := logs("reader"); got != "prepared by initpod\ngo\nmsg\n" {
		t.Errorf("logs of the app container: %q", got)
	}
	for m := range mountPointsOf(t) {
		if !before[m] {
			t.Errorf("mount point %s appeared in the machine's mount namespace", m)
		}
	}
	if h, _ := os.Hostname(); strings.Contains(h, "initpod") {
		t.Errorf("the machine's hostname changed to %q", h)
	}
}
