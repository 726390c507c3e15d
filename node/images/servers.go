package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// BootcampHandler answers like the kubernetes-bootcamp image: every request
// gets 200, text/plain, "Hello Kubernetes bootcamp! | Running on: <host> |
// v=<version>\n", and one log line per request on log.
func BootcampHandler(host, version string, log io.Writer, start time.Time) http.Handler {
	var requests atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "Hello Kubernetes bootcamp! | Running on: %s | v=%s\n", host, version)
		n := requests.Add(1)
		fmt.Fprintf(log, "Running On: %s | Total Requests: %d | App Uptime: %.3f seconds | Log Time: %s\n",
			host, n, time.Since(start).Seconds(), time.Now().UTC().Format(time.RFC3339Nano))
	})
}

// ServeBootcamp runs the bootcamp server on addr until ctx ends. The host
// name is $HOSTNAME (set for every container), else the UTS hostname.
func ServeBootcamp(ctx context.Context, addr, version string, log io.Writer) error {
	host := os.Getenv("HOSTNAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	start := time.Now()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("bootcamp: %w", err)
	}
	fmt.Fprintf(log, "Kubernetes Bootcamp App Started At: %s | Running On:  %s \n\n", start.UTC().Format(time.RFC3339Nano), host)
	return serve(ctx, l, BootcampHandler(host, version, log, start))
}

// NginxHandler serves files under root like nginx's default server: a
// directory answers its index.html (403 without one, no listings), a
// missing file 404, methods other than GET and HEAD 405. Each request is
// logged in nginx's combined format.
func NginxHandler(root string, log io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := serveStatic(w, r, root)
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		ua := r.UserAgent()
		if ua == "" {
			ua = "-"
		}
		ref := r.Referer()
		if ref == "" {
			ref = "-"
		}
		fmt.Fprintf(log, "%s - - [%s] \"%s %s %s\" %d %d \"%s\" \"%s\" \"-\"\n", host,
			time.Now().Format("02/Jan/2006:15:04:05 -0700"), r.Method, r.RequestURI, r.Proto, status.code, status.bytes, ref, ua)
	})
}

type result struct {
	code  int
	bytes int64
}

func serveStatic(w http.ResponseWriter, r *http.Request, root string) result {
	w.Header().Set("Server", "nginx")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nginxError(w, http.StatusMethodNotAllowed)
	}
	p := path.Clean("/" + r.URL.Path)
	full := filepath.Join(root, filepath.FromSlash(p))
	fi, err := os.Stat(full)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nginxError(w, http.StatusForbidden)
		}
		return nginxError(w, http.StatusNotFound)
	}
	if fi.IsDir() {
		if !strings.HasSuffix(r.URL.Path, "/") {
			w.Header().Set("Location", r.URL.Path+"/")
			return nginxError(w, http.StatusMovedPermanently)
		}
		full = filepath.Join(full, "index.html")
		if fi, err = os.Stat(full); err != nil || fi.IsDir() {
			return nginxError(w, http.StatusForbidden)
		}
	}
	f, err := os.Open(full)
	if err != nil {
		return nginxError(w, http.StatusForbidden)
	}
	defer f.Close()
	http.ServeContent(w, r, full, fi.ModTime(), f)
	return result{http.StatusOK, fi.Size()}
}

func nginxError(w http.ResponseWriter, code int) result {
	text := fmt.Sprintf("%d %s", code, http.StatusText(code))
	body := fmt.Sprintf("<html>\r\n<head><title>%s</title></head>\r\n<body>\r\n<center><h1>%s</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n", text, text)
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
	return result{code, int64(len(body))}
}

// ServeNginx runs the static server on addr until ctx ends.
func ServeNginx(ctx context.Context, addr, root string, log io.Writer) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("nginx: %w", err)
	}
	return serve(ctx, l, NginxHandler(root, log))
}

func serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// NginxDefaultFiles are written into a fresh nginx pod's document root.
func NginxDefaultFiles() map[string][]byte {
	return map[string][]byte{
		"index.html": []byte(`<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
<style>
body { width: 35em; margin: 0 auto; font-family: sans-serif; }
</style>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>This is svcnet's built-in stand-in for the nginx image: a static file
server for the files in /usr/share/nginx/html of this pod.</p>
<p>Replace this page with your own index.html to see it served.</p>
</body>
</html>
`),
		"50x.html": []byte(`<!DOCTYPE html>
<html>
<head>
<title>Error</title>
</head>
<body>
<h1>An error occurred.</h1>
<p>The page you are looking for is currently unavailable.</p>
</body>
</html>
`),
	}
}
