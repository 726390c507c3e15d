package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svcnet/svcnet/ingress"
)

func init() {
	register(command{name: "ingress", short: "Ingress controller: an HTTP reverse proxy for networking.k8s.io/v1 Ingresses (ingress-nginx's annotations)", run: runIngress})
}

// ingressArgs is the parsed command line of `svcnet ingress`.
type ingressArgs struct {
	kubeconfig       string
	httpPort         int
	httpsPort        int
	defaultCert      string
	bindAddress      string
	healthzPort      int
	healthzHost      string
	class            ingress.ClassSelector
	watchNamespace   string
	annotationPrefix string
	defaultBackend   string
	publishService   string
	publishAddresses string
	updateStatus     bool
	leaderElect      bool
	electionID       string
	electionNS       string
	minSync          time.Duration
	statusInterval   time.Duration
	proxy            ingress.ProxyConfig
	shutdownTimeout  time.Duration
	logLevel         string
}

func parseIngressArgs(args []string) (*ingressArgs, error) {
	fs := newFlagSet("ingress")
	a := &ingressArgs{}
	electionNS := os.Getenv("POD_NAMESPACE")
	if electionNS == "" {
		electionNS = "kube-system"
	}
	fs.StringVar(&a.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
	fs.IntVar(&a.httpPort, "http-port", 80, "port of the HTTP listener")
	fs.IntVar(&a.httpsPort, "https-port", 443, "port of the HTTPS listener, which terminates TLS for the hosts of spec.tls (0: no TLS; the controller then reads no Secrets)")
	fs.StringVar(&a.defaultCert, "default-ssl-certificate", "", "namespace/name of the TLS Secret whose certificate clients of hosts without one get (default: a self-signed one made at start)")
	fs.StringVar(&a.bindAddress, "bind-address", "", "address of the HTTP listener (default: every address)")
	fs.IntVar(&a.healthzPort, "healthz-port", 10254, "port of /healthz and /metrics (0 disables)")
	fs.StringVar(&a.healthzHost, "healthz-host", "", "address of /healthz and /metrics (default: every address)")
	fs.StringVar(&a.class.ControllerClass, "controller-class", ingress.DefaultControllerClass, "spec.controller of the IngressClasses this controller serves")
	fs.StringVar(&a.class.IngressClass, "ingress-class", ingress.DefaultIngressClass, "value of the deprecated kubernetes.io/ingress.class annotation this controller serves")
	fs.BoolVar(&a.class.IngressClassByName, "ingress-class-by-name", false, "also serve Ingresses whose spec.ingressClassName is --ingress-class, without an IngressClass object")
	fs.BoolVar(&a.class.WatchWithoutClass, "watch-ingress-without-class", false, "also serve Ingresses with neither spec.ingressClassName nor the class annotation")
	fs.StringVar(&a.watchNamespace, "watch-namespace", "", "serve the Ingresses of this namespace only (default: all)")
	fs.StringVar(&a.annotationPrefix, "annotations-prefix", ingress.DefaultAnnotationsPrefix, "prefix of the annotations read (ingress-nginx's by default)")
	fs.StringVar(&a.defaultBackend, "default-backend-service", "", "namespace/name of the Service answering requests no rule matches (its first port; default: a built-in 404)")
	fs.StringVar(&a.publishService, "publish-service", "", "namespace/name of the Service whose addresses are written into the served Ingresses' status")
	fs.StringVar(&a.publishAddresses, "publish-status-address", "", "comma-separated addresses written into the served Ingresses' status (wins over --publish-service)")
	fs.BoolVar(&a.updateStatus, "update-status", true, "write status.loadBalancer.ingress of the served Ingresses")
	fs.BoolVar(&a.leaderElect, "leader-elect", true, "elect one instance (a Lease) to write status and Events; every instance proxies")
	fs.StringVar(&a.electionID, "election-id", "svcnet-ingress-leader", "name of the election Lease")
	fs.StringVar(&a.electionNS, "election-namespace", electionNS, "namespace of the election Lease (default: $POD_NAMESPACE, else kube-system)")
	fs.DurationVar(&a.minSync, "min-sync-period", 100*time.Millisecond, "minimum interval between routing table rebuilds")
	fs.DurationVar(&a.statusInterval, "status-update-interval", 60*time.Second, "how often the leader checks the status of every served Ingress")
	fs.DurationVar(&a.proxy.ConnectTimeout, "proxy-connect-timeout", 5*time.Second, "timeout of a connection to an endpoint")
	fs.DurationVar(&a.proxy.ReadTimeout, "proxy-read-timeout", 60*time.Second, "how long a backend may take to send its response headers")
	fs.IntVar(&a.proxy.NextUpstreamTries, "proxy-next-upstream-tries", 3, "endpoints one request may try when connections fail")
	fs.IntVar(&a.proxy.KeepaliveConnections, "upstream-keepalive-connections", 32, "idle connections kept per endpoint")
	fs.DurationVar(&a.proxy.KeepaliveTimeout, "upstream-keepalive-timeout", 60*time.Second, "idle backend connections are closed after this long")
	fs.DurationVar(&a.shutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGTERM, how long requests in flight may take to finish")
	fs.StringVar(&a.logLevel, "log-level", "info", "debug (one line per request), info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if a.httpPort <= 0 || a.httpPort > 65535 {
		return nil, fmt.Errorf("--http-port must be between 1 and 65535")
	}
	if a.httpsPort < 0 || a.httpsPort > 65535 {
		return nil, fmt.Errorf("--https-port must be between 0 and 65535")
	}
	if a.httpsPort > 0 && a.httpsPort == a.httpPort {
		return nil, fmt.Errorf("--https-port and --http-port must differ")
	}
	if a.defaultCert != "" && a.httpsPort == 0 {
		return nil, fmt.Errorf("--default-ssl-certificate needs an HTTPS listener (--https-port)")
	}
	if a.healthzPort < 0 || a.healthzPort > 65535 {
		return nil, fmt.Errorf("--healthz-port must be between 0 and 65535")
	}
	if a.class.ControllerClass == "" {
		return nil, fmt.Errorf("--controller-class must not be empty")
	}
	if a.proxy.NextUpstreamTries < 1 {
		return nil, fmt.Errorf("--proxy-next-upstream-tries must be at least 1")
	}
	if a.minSync < 0 || a.statusInterval <= 0 {
		return nil, fmt.Errorf("--min-sync-period must not be negative and --status-update-interval must be positive")
	}
	for _, f := range []string{a.defaultBackend, a.publishService, a.defaultCert} {
		if _, err := ingress.ParseNamespacedName(f); err != nil {
			return nil, err
		}
	}
	if a.leaderElect && a.updateStatus && (a.electionID == "" || a.electionNS == "") {
		return nil, fmt.Errorf("--election-id and --election-namespace must not be empty")
	}
	return a, nil
}

func runIngress(ctx context.Context, args []string) error {
	a, err := parseIngressArgs(args)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "ingress")
	client, err := typedClient(a.kubeconfig, "svcnet-ingress", 20, 40)
	if err != nil {
		return err
	}
	defaultBackend, _ := ingress.ParseNamespacedName(a.defaultBackend)
	publishService, _ := ingress.ParseNamespacedName(a.publishService)
	defaultCert, _ := ingress.ParseNamespacedName(a.defaultCert)
	var addrs []string
	for _, s := range strings.Split(a.publishAddresses, ",") {
		if s = strings.TrimSpace(s); s != "" {
			addrs = append(addrs, s)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg := ingress.Config{
		Client:                 client,
		Class:                  a.class,
		WatchNamespace:         a.watchNamespace,
		AnnotationsPrefix:      a.annotationPrefix,
		DefaultBackend:         defaultBackend,
		PublishService:         publishService,
		PublishStatusAddresses: addrs,
		UpdateStatus:           a.updateStatus,
		MinSyncPeriod:          a.minSync,
		SyncPeriod:             a.statusInterval,
		Proxy:                  a.proxy,
		Logger:                 log,
		Metrics:                ingress.NewMetrics(reg),
		TLS:                    a.httpsPort > 0,
		DefaultCertificate:     defaultCert,
	}
	if a.httpsPort > 0 {
		cfg.Proxy.HTTPSPort = a.httpsPort
	}
	if a.leaderElect {
		id := os.Getenv("POD_NAME")
		cfg.LeaderElection = &ingress.LeaderElection{Namespace: a.electionNS, Name: a.electionID, Identity: id}
	}
	ctrl := ingress.New(cfg)

	// Listen before the caches sync, so that a port in use fails at once;
	// until the first table the proxy answers 503.
	ln, err := net.Listen("tcp", net.JoinHostPort(a.bindAddress, strconv.Itoa(a.httpPort)))
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	srv := &http.Server{
		Handler:           ctrl.Handler(),
		ReadHeaderTimeout: 60 * time.Second,
		IdleTimeout:       75 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 4)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	}()
	var tlsSrv *http.Server
	if a.httpsPort > 0 {
		tln, err := net.Listen("tcp", net.JoinHostPort(a.bindAddress, strconv.Itoa(a.httpsPort)))
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("https listener: %w", err)
		}
		tlsSrv = &http.Server{
			Handler:           ctrl.Handler(),
			TLSConfig:         ctrl.TLSConfig(),
			ReadHeaderTimeout: 60 * time.Second,
			IdleTimeout:       75 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		}
		go func() {
			if err := tlsSrv.ServeTLS(tln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("https: %w", err)
			}
		}()
	}
	var health *http.Server
	if a.healthzPort > 0 {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if !ctrl.Synced() {
				http.Error(w, "not synced yet", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "ok")
		})
		hln, err := net.Listen("tcp", net.JoinHostPort(a.healthzHost, strconv.Itoa(a.healthzPort)))
		if err != nil {
			_ = srv.Close()
			if tlsSrv != nil {
				_ = tlsSrv.Close()
			}
			return fmt.Errorf("healthz listener: %w", err)
		}
		health = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := health.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("healthz: %w", err)
			}
		}()
	}
	log.Info("starting Ingress controller", "http", ln.Addr().String(), "https-port", a.httpsPort, "controller-class", a.class.ControllerClass,
		"ingress-class", a.class.IngressClass, "watch-namespace", a.watchNamespace, "annotations-prefix", a.annotationPrefix)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(cctx) }()
	var runErr error
	stopped := false
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	case runErr = <-done:
		stopped = true
		if runErr == nil && ctx.Err() == nil {
			runErr = errors.New("controller stopped")
		}
	}
	// Stop accepting, let requests in flight finish, then stop watching.
	sctx, scancel := context.WithTimeout(context.Background(), a.shutdownTimeout)
	defer scancel()
	servers := []*http.Server{srv}
	if tlsSrv != nil {
		servers = append(servers, tlsSrv)
	}
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() {
			if err := s.Shutdown(sctx); err != nil {
				_ = s.Close()
			}
		})
	}
	wg.Wait()
	if health != nil {
		_ = health.Close()
	}
	cancel()
	if !stopped {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
	return runErr
}
