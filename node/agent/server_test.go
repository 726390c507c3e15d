package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientexec "k8s.io/client-go/util/exec"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/node/sandbox"
)

func TestContainerLogsEndpoint(t *testing.T) {
	dir := t.TempDir()
	pd := sandbox.PodDir(dir, "default", "web")
	write := func(n int, s string) {
		p := sandbox.LogPath(pd, "app", n)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(0, "2026-01-01T00:00:00Z stdout F old\n")
	write(1, "2026-01-01T00:00:01Z stdout F one\n2026-01-01T00:00:02Z stderr F two\n2026-01-01T00:00:03Z stdout F three\n")
	srv := httptest.NewServer(NewServer(dir, slog.Default()))
	defer srv.Close()
	get := func(q string) (int, string) {
		resp, err := http.Get(srv.URL + "/containerLogs/default/web/app" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for q, want := range map[string]string{
		"":                 "one\ntwo\nthree\n",
		"?tailLines=2":     "two\nthree\n",
		"?previous=true":   "old\n",
		"?timestamps=true": "2026-01-01T00:00:01Z one\n2026-01-01T00:00:02Z two\n2026-01-01T00:00:03Z three\n",
		"?limitBytes=5":    "one\nt",
	} {
		if code, got := get(q); code != 200 || got != want {
			t.Errorf("%q: %d %q, want %q", q, code, got, want)
		}
	}
	if code, _ := get("/../../x"); code == 200 {
		t.Error("path escape served")
	}
	resp, _ := http.Get(srv.URL + "/containerLogs/default/nope/app")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("missing pod: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

// Exec over SPDY with client-go's executor, as the apiserver's proxy
// delivers kubectl exec. The "sandbox" is the test process's own
// namespaces, so nsenter is a no-op but runs for real.
func TestExecEndpoint(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "nsenter")
	dir := t.TempDir()
	pd := sandbox.PodDir(dir, "default", "web")
	_ = os.MkdirAll(filepath.Join(pd, "env"), 0o755)
	b, _ := json.Marshal(sandbox.Sandbox{Namespace: "default", Name: "web", InfraPID: os.Getpid(), Dir: pd})
	_ = os.WriteFile(filepath.Join(pd, "sandbox.json"), b, 0o644)
	_ = os.WriteFile(filepath.Join(pd, "env", "app"), []byte("PATH=/usr/bin:/bin\x00MYAPP_SERVICE_HOST=10.96.3.215"), 0o644)
	srv := httptest.NewServer(NewServer(dir, slog.Default()))
	defer srv.Close()
	run := func(stdin string, cmd ...string) (string, string, error) {
		q := url.Values{"command": cmd, "output": {"1"}, "error": {"1"}}
		if stdin != "" {
			q.Set("input", "1")
		}
		u, _ := url.Parse(srv.URL + "/exec/default/web/app?" + q.Encode())
		ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: srv.URL}, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		opts := remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}
		if stdin != "" {
			opts.Stdin = strings.NewReader(stdin)
		}
		err = ex.StreamWithContext(context.Background(), opts)
		return out.String(), errb.String(), err
	}
	out, _, err := run("", "sh", "-c", "env | grep MYAPP")
	if err != nil || out != "MYAPP_SERVICE_HOST=10.96.3.215\n" {
		t.Errorf("env: %q %v", out, err)
	}
	out, _, err = run("hello\n", "cat")
	if err != nil || out != "hello\n" {
		t.Errorf("stdin: %q %v", out, err)
	}
	_, errOut, err := run("", "sh", "-c", "echo oops >&2; exit 3")
	var ce clientexec.CodeExitError
	if !errors.As(err, &ce) || ce.Code != 3 || errOut != "oops\n" {
		t.Errorf("exit code: %v %q", err, errOut)
	}
}
