// Package apiservertest starts an embedded etcd and an apiserver in-process
// for tests, on free localhost ports in a temporary data directory, and
// returns an admin *rest.Config. Everything stops when the test ends.
//
//	srv := apiservertest.Start(t)
//	client := kubernetes.NewForConfigOrDie(srv.Config)
package apiservertest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/apiserver"
)

// Server is a running test apiserver.
type Server struct {
	*apiserver.Server
	// Config is an admin client configuration.
	Config *rest.Config
	// DataDir is the server's data directory (PKI, kubeconfig, etcd data).
	DataDir string
	stop    context.CancelFunc
	done    chan error
}

// Option changes the test server's configuration.
type Option func(*apiserver.Config)

// WithDataDir reuses a data directory (for restart tests).
func WithDataDir(dir string) Option { return func(c *apiserver.Config) { c.DataDir = dir } }

// WithEtcd uses an external etcd instead of the embedded one.
func WithEtcd(endpoints ...string) Option {
	return func(c *apiserver.Config) { c.EtcdServers = endpoints }
}

// WithServiceAccountAdmission turns the ServiceAccount admission plugin
// back on. It is off in test servers by default, as in Kubernetes'
// integration test servers: no controller creates the namespaces' default
// service accounts here, so every pod would be refused.
func WithServiceAccountAdmission() Option {
	return func(c *apiserver.Config) { c.DisableAdmissionPlugins = nil }
}

// WithConfig applies an arbitrary change.
func WithConfig(f func(*apiserver.Config)) Option { return Option(f) }

// Start runs an apiserver until the test ends (or Stop is called). It fails
// the test if the server does not come up within 30 seconds.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := apiserver.Config{
		DataDir:    t.TempDir(),
		SecurePort: -1,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		// See WithServiceAccountAdmission.
		DisableAdmissionPlugins: []string{"ServiceAccount"},
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := apiserver.New(cfg)
	if err != nil {
		t.Fatalf("apiserver.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Server: srv, DataDir: cfg.DataDir, stop: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-s.done:
		cancel()
		t.Fatalf("apiserver did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("apiserver did not start within 30s")
	}
	rc, err := srv.RESTConfig()
	if err != nil {
		cancel()
		t.Fatalf("rest config: %v", err)
	}
	rc.QPS, rc.Burst = 1000, 2000
	s.Config = rc
	t.Cleanup(s.Stop)
	return s
}

// Stop stops the server and waits for it (and its embedded etcd) to exit.
// It is safe to call more than once.
func (s *Server) Stop() {
	s.stop()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
	// A second Stop must not block.
	select {
	case s.done <- nil:
	default:
	}
}
