package images

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestResolve(t *testing.T) {
	cases := []struct {
		image   string
		command []string
		args    []string
		want    string // builtin args joined, or "exec:<argv>", or "error"
	}{
		{"jocatalin/kubernetes-bootcamp:v1", nil, nil, "bootcamp --version 1"},
		{"docker.io/jocatalin/kubernetes-bootcamp:v2", nil, nil, "bootcamp --version 2"},
		{"gcr.io/google-samples/kubernetes-bootcamp:v1", nil, nil, "bootcamp --version 1"},
		{"jocatalin/kubernetes-bootcamp", nil, nil, "error"},
		{"jocatalin/kubernetes-bootcamp:v3", nil, nil, "error"},
		{"nginx", nil, nil, "nginx --root /usr/share/nginx/html --listen :80"},
		{"nginx:1.25-alpine", nil, nil, "nginx --root /usr/share/nginx/html --listen :80"},
		{"docker.io/library/nginx@sha256:abcd", nil, nil, "nginx --root /usr/share/nginx/html --listen :80"},
		{"bitnami/nginx:latest", nil, nil, "error"},
		{"busybox", []string{"sleep"}, []string{"3600"}, "exec:sleep 3600"},
		{"nginx", []string{"sh", "-c"}, []string{"echo hi"}, "exec:sh -c echo hi"},
		{"busybox", nil, []string{"sleep", "3600"}, "error"},
		{"localhost:5000/app:v1", nil, nil, "error"},
	}
	for _, c := range cases {
		p, err := Resolve(&v1.Container{Image: c.image, Command: c.command, Args: c.args})
		var got string
		var nae *NotAvailableError
		switch {
		case errors.As(err, &nae):
			got = "error"
			if want := "image " + c.image + " is not available to svcnet; give the container a command or use a built-in image"; err.Error() != want {
				t.Errorf("%s: message %q", c.image, err)
			}
		case err != nil:
			t.Fatalf("%s: %v", c.image, err)
		case p.Builtin != nil:
			got = strings.Join(p.Builtin.Args, " ")
		default:
			got = "exec:" + strings.Join(p.Argv, " ")
		}
		if got != c.want {
			t.Errorf("Resolve(%q, %v, %v) = %q, want %q", c.image, c.command, c.args, got, c.want)
		}
	}
}

func TestBootcampAnswer(t *testing.T) {
	var log strings.Builder
	srv := httptest.NewServer(BootcampHandler("myapp-fdb95659d-fl5c4", "1", &log, time.Now()))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/anything")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "Hello Kubernetes bootcamp! | Running on: myapp-fdb95659d-fl5c4 | v=1\n" {
		t.Errorf("body %q", body)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(log.String(), "Total Requests: 1") {
		t.Errorf("log %q", log.String())
	}
}

func TestNginxStatic(t *testing.T) {
	root := t.TempDir()
	for n, b := range NginxDefaultFiles() {
		if err := os.WriteFile(filepath.Join(root, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var log strings.Builder
	srv := httptest.NewServer(NginxHandler(root, &log))
	defer srv.Close()
	get := func(p string) (int, string) {
		t.Helper()
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, "Welcome to nginx!") {
		t.Errorf("/ = %d %q", code, body)
	}
	if err := os.WriteFile(filepath.Join(root, "index.html"), []byte("web1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/"); code != 200 || body != "web1\n" {
		t.Errorf("after rewrite / = %d %q", code, body)
	}
	if code, body := get("/missing"); code != 404 || !strings.Contains(body, "<title>404 Not Found</title>") {
		t.Errorf("/missing = %d %q", code, body)
	}
	if code, _ := get("/../../etc/passwd"); code != 404 {
		t.Errorf("path escape answered %d", code)
	}
	_ = os.Mkdir(filepath.Join(root, "sub"), 0o755)
	if code, _ := get("/sub/"); code != 403 {
		t.Errorf("dir without index = %d, want 403", code)
	}
	if code, _ := get("/sub"); code != 301 {
		t.Errorf("dir without slash = %d, want 301", code)
	}
	if !strings.Contains(log.String(), `"GET / HTTP/1.1" 200 5 "-" "Go-http-client/1.1" "-"`) {
		t.Errorf("access log:\n%s", log.String())
	}
}
