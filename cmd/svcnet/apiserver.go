package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/svcnet/svcnet/apiserver"
	"github.com/svcnet/svcnet/registry/service"
)

func init() {
	register(command{name: "apiserver", short: "Kubernetes-compatible API server on etcd (embedded or external)", run: runAPIServer})
}

// parseAPIServerArgs turns `svcnet apiserver` flags into an apiserver.Config.
func parseAPIServerArgs(args []string) (apiserver.Config, error) {
	fs := newFlagSet("apiserver")
	var cfg apiserver.Config
	var etcd, cidr, logLevel string
	fs.StringVar(&cfg.DataDir, "data-dir", "/var/lib/svcnet", "directory for the PKI, the admin kubeconfig and the embedded etcd's data")
	fs.StringVar(&etcd, "etcd-servers", "", "comma-separated client URLs of an external etcd cluster (default: run an embedded etcd under --data-dir)")
	fs.StringVar(&cfg.BindAddress, "bind-address", "127.0.0.1", "IP address to serve HTTPS on (0.0.0.0 for all)")
	fs.IntVar(&cfg.SecurePort, "secure-port", 6443, "HTTPS port")
	fs.StringVar(&cfg.AdvertiseAddress, "advertise-address", "", "IP address nodes use to reach this server; the kubernetes Service's endpoint (default: --bind-address)")
	fs.StringVar(&cidr, "service-cluster-ip-range", "10.96.0.0/16", "CIDR of Service ClusterIPs, or two of different families (dual-stack); the first range's first address is the kubernetes Service's")
	fs.StringVar(&cfg.ServiceNodePortRange, "service-node-port-range", "30000-32767", "range of Service NodePorts")
	fs.StringSliceVar(&cfg.AuthorizationModes, "authorization-mode", []string{"RBAC", "Node"}, "ordered list of authorizers: RBAC, Node, AlwaysAllow, AlwaysDeny (system:masters is always allowed)")
	fs.IntVar(&cfg.MaxRequestsInflight, "max-requests-inflight", 400, "maximum non-mutating requests served at once (429 beyond; negative disables); one user gets at most half")
	fs.IntVar(&cfg.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", 200, "maximum mutating requests served at once (429 beyond; negative disables); one user gets at most half")
	fs.DurationVar(&cfg.RepairInterval, "repair-interval", 3*time.Minute, "how often the ClusterIP/NodePort repair runs (kube-apiserver: 3m; leaks are freed on the third run that finds them)")
	fs.BoolVar(&cfg.AllowPrivileged, "allow-privileged", false, "allow containers to request privileged mode (as kube-apiserver, refused by default)")
	fs.StringVar(&cfg.ServiceAccountSigningKeyFile, "service-account-signing-key-file", "", "RSA private key (PEM) service account tokens are signed and checked with; API servers sharing an etcd must share it (default: DATA_DIR/pki/sa.key, made on first start)")
	fs.StringVar(&cfg.ServiceAccountIssuer, "service-account-issuer", apiserver.DefaultServiceAccountIssuer, "the iss claim of service account tokens")
	fs.StringSliceVar(&cfg.APIAudiences, "api-audiences", nil, "audiences a service account token must name to authenticate (default: --service-account-issuer)")
	fs.StringSliceVar(&cfg.DisableAdmissionPlugins, "disable-admission-plugins", nil, "admission plugins to turn off: ServiceAccount, Priority, DefaultTolerationSeconds, DefaultIngressClass (all on by default, as in kube-apiserver)")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	ranges, err := service.ParseServiceClusterIPRange(cidr)
	if err != nil {
		return cfg, err
	}
	cfg.ServiceClusterIPRange = ranges[0]
	if len(ranges) > 1 {
		cfg.SecondaryServiceClusterIPRange = ranges[1]
	}
	if etcd != "" {
		for _, e := range strings.Split(etcd, ",") {
			if e = strings.TrimSpace(e); e != "" {
				cfg.EtcdServers = append(cfg.EtcdServers, e)
			}
		}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
		return cfg, fmt.Errorf("--log-level: %w", err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	return cfg, nil
}

func runAPIServer(ctx context.Context, args []string) error {
	cfg, err := parseAPIServerArgs(args)
	if err != nil {
		return err
	}
	srv, err := apiserver.New(cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
