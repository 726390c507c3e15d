// Package apiserver is svcnet's Kubernetes-compatible API server: HTTPS with
// client-certificate authentication, discovery, /version and health
// endpoints, and the REST verbs (get, list, watch, create, update, patch of all
// four types, delete, deletecollection) over the generic registry and etcd
// storage. Real kubectl and client-go talk to it: responses come in JSON,
// YAML or protobuf as negotiated, kubectl gets server-side Tables, and watches
// support bookmarks and streaming lists (sendInitialEvents).
//
// New builds a Server from a Config; Run serves until its context ends. For
// tests, package apiservertest starts one in-process in well under a second.
package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/rest"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/svcnet/svcnet/allocator"
	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	"github.com/svcnet/svcnet/apiserver/authz"
	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
	"github.com/svcnet/svcnet/registry/service"
	"github.com/svcnet/svcnet/storage"
)

// Config configures a Server. Zero values get the documented defaults.
type Config struct {
	// DataDir holds the PKI, the kubeconfig and (without EtcdServers) the
	// embedded etcd's data. Required.
	DataDir string
	// AllowPrivileged lets containers ask for privileged mode
	// (kube-apiserver's --allow-privileged, off by default there too).
	AllowPrivileged bool
	// EtcdServers, when set, are the client URLs of an external etcd cluster;
	// otherwise an embedded single-member etcd runs under DataDir/etcd.
	EtcdServers []string
	// BindAddress is the address to listen on (default 127.0.0.1).
	BindAddress string
	// SecurePort is the HTTPS port (default 6443; -1 picks a free port).
	SecurePort int
	// AdvertiseAddress is the address nodes reach the server at, used for the
	// kubernetes Service's Endpoints (default: BindAddress, or 127.0.0.1 when
	// binding to all addresses).
	AdvertiseAddress string
	// ServiceClusterIPRange is the Service ClusterIP range (default
	// 10.96.0.0/16); its first address is the kubernetes Service's ClusterIP.
	ServiceClusterIPRange netip.Prefix
	// SecondaryServiceClusterIPRange, when valid, is the range of the other IP
	// family (dual-stack Services).
	SecondaryServiceClusterIPRange netip.Prefix
	// ServiceNodePortRange is the NodePort range (default 30000-32767).
	ServiceNodePortRange string
	// Strategies replaces the strategy of a resource. Only tests use it
	// (registry/service's integration tests run the Service strategy over
	// an allocator Config of their own).
	Strategies map[schema.GroupResource]registry.Strategy
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
	// BookmarkInterval is how often watches asking for bookmarks get one
	// (default 10s).
	BookmarkInterval time.Duration
	// AuthorizationModes are the authorizers in order, as kube-apiserver's
	// --authorization-mode: RBAC, Node, AlwaysAllow, AlwaysDeny (default
	// RBAC,Node). Members of system:masters are always allowed.
	AuthorizationModes []string
	// RepairInterval is how often the ClusterIP/NodePort repair runs after
	// the run at start (default 3m, kube-apiserver's); a value leaked by a
	// crash is freed on the third run that finds it unused.
	RepairInterval time.Duration
	// MaxRequestsInflight and MaxMutatingRequestsInflight bound the
	// read-only and mutating requests served at once, as kube-apiserver's
	// flags of those names (defaults 400 and 200; negative disables).
	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	// ServiceAccountSigningKeyFile is the RSA key service account tokens
	// are signed and checked with (default <data-dir>/pki/sa.key, made on
	// first start). Several API servers on one etcd must share it.
	ServiceAccountSigningKeyFile string
	// ServiceAccountIssuer is the tokens' iss claim (default
	// https://kubernetes.default.svc.cluster.local, kubeadm's).
	ServiceAccountIssuer string
	// APIAudiences are the audiences a token must name to authenticate to
	// this server (default: the issuer), as --api-audiences.
	APIAudiences []string
	// DisableAdmissionPlugins turns off admission plugins by name, as
	// kube-apiserver's --disable-admission-plugins (ServiceAccount,
	// Priority, DefaultTolerationSeconds, DefaultIngressClass).
	DisableAdmissionPlugins []string
}

// Server is one API server instance.
type Server struct {
	cfg      Config
	log      *slog.Logger
	pki      *PKI
	stores   map[schema.GroupVersionResource]*served
	byGR     map[schema.GroupResource]*served
	order    []*served
	ready    chan struct{}
	url      string
	etcd     *clientv3.Client
	embedded *storage.Embedded

	policy     *policyCache
	rbac       *authz.RBAC
	authorizer authz.Authorizer
	inflight   *inFlightLimiter

	openapiOnce    sync.Once
	openapiHandler http.Handler
	openapiErr     error
	serviceCfg     *service.Config
	ipAddresses    *service.IPAddressAllocator
	saTokens       *saTokens
}

type served struct {
	*registry.Store
	scaleFM *managedfields.FieldManager
}

// New validates cfg and prepares a server; nothing is started until Run.
func New(cfg Config) (*Server, error) {
	core.AllowPrivileged = cfg.AllowPrivileged
	if cfg.DataDir == "" {
		return nil, errors.New("apiserver: --data-dir is required")
	}
	if cfg.BindAddress == "" {
		cfg.BindAddress = "127.0.0.1"
	}
	if net.ParseIP(cfg.BindAddress) == nil {
		return nil, fmt.Errorf("apiserver: --bind-address %q is not an IP address", cfg.BindAddress)
	}
	if cfg.SecurePort == 0 {
		cfg.SecurePort = 6443
	}
	if cfg.AdvertiseAddress == "" {
		cfg.AdvertiseAddress = cfg.BindAddress
		if ip := net.ParseIP(cfg.BindAddress); ip.IsUnspecified() {
			cfg.AdvertiseAddress = "127.0.0.1"
		}
	}
	if net.ParseIP(cfg.AdvertiseAddress) == nil {
		return nil, fmt.Errorf("apiserver: --advertise-address %q is not an IP address", cfg.AdvertiseAddress)
	}
	if !cfg.ServiceClusterIPRange.IsValid() {
		cfg.ServiceClusterIPRange = netip.MustParsePrefix("10.96.0.0/16")
	}
	if cfg.ServiceNodePortRange == "" {
		cfg.ServiceNodePortRange = "30000-32767"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BookmarkInterval == 0 {
		cfg.BookmarkInterval = 10 * time.Second
	}
	if cfg.MaxRequestsInflight == 0 {
		cfg.MaxRequestsInflight = 400
	}
	if cfg.MaxMutatingRequestsInflight == 0 {
		cfg.MaxMutatingRequestsInflight = 200
	}
	if cfg.RepairInterval <= 0 {
		cfg.RepairInterval = 3 * time.Minute
	}
	if len(cfg.AuthorizationModes) == 0 {
		cfg.AuthorizationModes = []string{"RBAC", "Node"}
	}
	if cfg.ServiceAccountIssuer == "" {
		cfg.ServiceAccountIssuer = DefaultServiceAccountIssuer
	}
	if len(cfg.APIAudiences) == 0 {
		cfg.APIAudiences = []string{cfg.ServiceAccountIssuer}
	}
	for _, p := range cfg.DisableAdmissionPlugins {
		if !slices.Contains(admissionPlugins, p) {
			return nil, fmt.Errorf("apiserver: --disable-admission-plugins: unknown plugin %q (svcnet has %s)", p, strings.Join(admissionPlugins, ", "))
		}
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ready: make(chan struct{}), policy: newPolicyCache(),
		inflight: newInFlightLimiter(cfg.MaxRequestsInflight, cfg.MaxMutatingRequestsInflight)}
	s.rbac = &authz.RBAC{Policy: s.policy}
	policy, err := authz.LoadDefaultPolicy()
	if err != nil {
		return nil, fmt.Errorf("apiserver: default RBAC policy: %w", err)
	}
	nodeRole, _ := policy.ClusterRole("system:node")
	node := &authz.Node{Graph: nodeGraph{s}}
	if nodeRole != nil {
		node.Rules = nodeRole.Rules
	}
	if s.authorizer, err = authz.New(cfg.AuthorizationModes, s.rbac, node); err != nil {
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	return s, nil
}

// Ready is closed once the server accepts requests.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// URL is the server's https URL; valid once Ready is closed.
func (s *Server) URL() string { return s.url }

// KubeconfigPath is where the admin kubeconfig is written.
func (s *Server) KubeconfigPath() string { return filepath.Join(s.cfg.DataDir, "kubeconfig") }

// RESTConfig returns an admin client configuration; valid once Ready is closed.
func (s *Server) RESTConfig() (*rest.Config, error) {
	cfg, err := restConfigFromKubeconfig(s.KubeconfigPath())
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// FirstServiceIP is the kubernetes Service's ClusterIP: the first address of
// the service range.
func FirstServiceIP(p netip.Prefix) netip.Addr { return p.Masked().Addr().Next() }

func (s *Server) buildStores() error {
	s.stores = map[schema.GroupVersionResource]*served{}
	s.byGR = map[schema.GroupResource]*served{}
	tc := applyconfigurations.NewTypeConverter(Scheme)
	for _, def := range builtinResources() {
		info := def.info
		var strategy registry.Strategy
		if def.strategy != nil {
			strategy = def.strategy()
		}
		if st, ok := s.cfg.Strategies[info.GroupResource()]; ok && st != nil {
			strategy = st
		}
		codec := Codecs.LegacyCodec(info.GVR.GroupVersion())
		if _, isTyped := info.New().(interface{ Marshal() ([]byte, error) }); isTyped {
			if pb, ok := serializerFor("application/vnd.kubernetes.protobuf"); ok {
				codec = Codecs.CodecForVersions(pb.Serializer, pb.Serializer, info.GVR.GroupVersion(), info.GVR.GroupVersion())
			}
		} else {
			codec = unstructuredCodec{}
			if d, ok := strategy.(storedDefaulter); ok {
				codec = defaultingCodec{Codec: codec, def: d.DefaultStored}
			}
		}
		st := &served{Store: &registry.Store{
			Info:     info,
			Strategy: strategy,
			Storage:  storage.NewStore(s.etcd, info.GroupResource(), codec, info.New),
		}}
		if info.GVR == eventsV1GVR {
			// events.k8s.io/v1 Events are the core/v1 Events' stored
			// objects, converted on the way in and out (kube-apiserver).
			st.KeyResource = schema.GroupResource{Resource: "events"}
			st.Storage = storage.NewStore(s.etcd, info.GroupResource(), eventsV1Codec{core: eventsCoreCodec()}, info.New)
		}
		if info.GVR == metallbv1beta1.BGPPeersResource {
			// v1beta1 BGPPeers are the v1beta2 ones, converted.
			st.Storage = storage.NewStore(s.etcd, info.GroupResource(), peerV1beta1Codec{}, info.New)
		}
		if _, isTyped := info.New().(interface{ Marshal() ([]byte, error) }); isTyped {
			// Whole LISTs (and the initial state of a watch) are answered
			// from memory, as kube-apiserver answers them from its watch
			// cache. Unstructured lists share their items' maps, so those
			// resources read etcd.
			st.Storage.EnableListCache(st.Prefix(""))
			st.FieldManagers = map[string]*managedfields.FieldManager{}
			for _, sub := range []string{"", "status", "finalize"} {
				if sub == "finalize" && !st.HasSubresource(sub) {
					continue
				}
				fm, err := managedfields.NewDefaultFieldManager(tc, Scheme, Scheme, Scheme, info.GVK(), info.GVR.GroupVersion(), sub, nil)
				if err != nil {
					return fmt.Errorf("field manager for %s: %w", info.GVR, err)
				}
				st.FieldManagers[sub] = fm
			}
		} else {
			fm, err := newUnstructuredFieldManager(info.GVK(), "")
			if err != nil {
				return fmt.Errorf("field manager for %s: %w", info.GVR, err)
			}
			st.FieldManagers = map[string]*managedfields.FieldManager{"": fm}
		}
		if info.Namespaced {
			st.NamespaceExists = s.namespaceActive
		}
		s.stores[info.GVR] = st
		if _, second := s.byGR[info.GroupResource()]; !second {
			// A kind served in two versions (metallb.io BGPPeer) is
			// known by its preferred one, listed first.
			s.byGR[info.GroupResource()] = st
		}
		s.order = append(s.order, st)
	}
	if _, overridden := s.cfg.Strategies[ServicesResource]; !overridden {
		// ClusterIPs are IPAddress objects in ServiceCIDRs; node ports
		// keep their bitmap.
		s.ipAddresses = &service.IPAddressAllocator{IPAddresses: s.byGR[ipAddressesResource].Store, ServiceCIDRs: s.byGR[serviceCIDRsResource].Store}
		scfg, err := service.NewIPAddressConfig(s.etcd, s.serviceCIDRs(), s.cfg.ServiceNodePortRange, s.ipAddresses)
		if err != nil {
			return err
		}
		scfg.Logger = s.log
		s.serviceCfg = &scfg
		s.byGR[ServicesResource].Strategy = service.NewStrategy(scfg)
	}
	if b := core.BasicOf(s.byGR[podsGR].Strategy); b != nil && b.Admit != nil {
		adm := &core.PodAdmission{Disabled: map[string]bool{}, ServiceAccounts: s.getServiceAccount}
		for _, p := range s.cfg.DisableAdmissionPlugins {
			adm.Disabled[p] = true
		}
		b.Admit = adm.Admit
	}
	s.installIngressAdmission()
	s.installMetalLBListers()
	esc := &authz.Escalation{RBAC: s.rbac, Authorizer: s.authorizer, Roles: storedRoles{s}}
	for _, gr := range []schema.GroupResource{rolesGR, clusterRolesGR, roleBindingsGR, clusterRoleBindingsGR} {
		if st, ok := s.byGR[gr]; ok {
			if basic, ok := st.Strategy.(*core.Basic); ok {
				st.Strategy = &escalationStrategy{Basic: basic, esc: esc}
			}
		}
	}
	return nil
}

// serviceCIDRs is --service-cluster-ip-range as given: one CIDR or two.
func (s *Server) serviceCIDRs() string {
	cidrs := s.cfg.ServiceClusterIPRange.Masked().String()
	if s.cfg.SecondaryServiceClusterIPRange.IsValid() {
		cidrs += "," + s.cfg.SecondaryServiceClusterIPRange.Masked().String()
	}
	return cidrs
}

// Run starts etcd (embedded unless EtcdServers is set), bootstraps the
// default namespaces and the kubernetes Service, and serves HTTPS until ctx
// ends.
func (s *Server) Run(ctx context.Context) error {
	if err := os.MkdirAll(s.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	endpoints := s.cfg.EtcdServers
	if len(endpoints) == 0 {
		e, err := storage.StartEmbedded(ctx, filepath.Join(s.cfg.DataDir, "etcd"))
		if err != nil {
			return err
		}
		s.embedded = e
		defer e.Close()
		endpoints = []string{e.Endpoint}
	}
	cli, err := storage.NewClient(endpoints)
	if err != nil {
		return err
	}
	defer cli.Close()
	s.etcd = cli
	if err := s.buildStores(); err != nil {
		return err
	}
	if s.pki, err = LoadOrCreatePKI(filepath.Join(s.cfg.DataDir, "pki")); err != nil {
		return err
	}
	keyFile := s.cfg.ServiceAccountSigningKeyFile
	if keyFile == "" {
		keyFile = filepath.Join(s.pki.Dir, "sa.key")
	}
	saKey, err := loadOrCreateSAKey(keyFile)
	if err != nil {
		return err
	}
	if s.saTokens, err = newSATokens(saKey, s.cfg.ServiceAccountIssuer, s.cfg.APIAudiences); err != nil {
		return err
	}
	hosts := []string{"127.0.0.1", "::1", "localhost", s.cfg.BindAddress, s.cfg.AdvertiseAddress,
		FirstServiceIP(s.cfg.ServiceClusterIPRange).String(),
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if net.ParseIP(s.cfg.BindAddress).IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					hosts = append(hosts, ipn.IP.String())
				}
			}
		}
	}
	cert, err := s.pki.servingCert(hosts)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(s.pki.CACert)
	port := s.cfg.SecurePort
	if port < 0 {
		port = 0
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.cfg.BindAddress, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	tlsLn := tls.NewListener(ln, &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	})
	host := s.cfg.BindAddress
	if net.ParseIP(host).IsUnspecified() {
		host = s.cfg.AdvertiseAddress
	}
	s.url = "https://" + net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	if err := s.pki.WriteKubeconfig(s.KubeconfigPath(), s.url); err != nil {
		ln.Close()
		return err
	}
	if err := s.startServiceCIDRs(ctx); err != nil {
		ln.Close()
		return fmt.Errorf("service CIDRs: %w", err)
	}
	if err := s.bootstrap(ctx, ln.Addr().(*net.TCPAddr).Port); err != nil {
		ln.Close()
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := s.bootstrapPolicy(ctx); err != nil {
		ln.Close()
		return fmt.Errorf("bootstrap RBAC policy: %w", err)
	}
	if err := s.startPolicy(ctx); err != nil {
		ln.Close()
		return err
	}
	go s.aggregateLoop(ctx)
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(tlsLn) }()
	s.log.Info("apiserver serving", "url", s.url, "kubeconfig", s.KubeconfigPath(), "etcd", endpoints)
	close(s.ready)
	go s.repairLoop(ctx)
	select {
	case <-ctx.Done():
		shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutCtx)
		srv.Close()
		return nil
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
}

// Etcd is the server's etcd client (for tests and tools); nil before Run.
func (s *Server) Etcd() *clientv3.Client { return s.etcd }

// repairLoop runs the ClusterIP/NodePort allocator repair once at start and
// then every RepairInterval (three minutes), as kube-apiserver's repair
// controllers do, and logs what changed.
func (s *Server) repairLoop(ctx context.Context) {
	if s.serviceCfg == nil {
		return
	}
	rep := s.serviceCfg.Repairer(s.reportRepair(ctx))
	// used counts the allocations: ClusterIPs (IPAddress objects, or the
	// bitmaps without ServiceCIDRs) and NodePorts (bitmap).
	used := func() (ips, ports int) {
		for _, a := range s.serviceCfg.ClusterIPs {
			if n, err := a.Used(ctx); err == nil {
				ips += n
			}
		}
		if s.ipAddresses != nil {
			if l, err := s.ipAddresses.IPAddresses.List(ctx, "", registry.ListOptions{}); err == nil {
				ips += len(l.(*networkingv1.IPAddressList).Items)
			}
		}
		if s.serviceCfg.NodePorts != nil {
			ports, _ = s.serviceCfg.NodePorts.Used(ctx)
		}
		return ips, ports
	}
	for first := true; ; first = false {
		ipsBefore, portsBefore := used()
		if err := rep.RunOnce(ctx, s.listServices); err != nil && ctx.Err() == nil {
			s.log.Warn("service allocation repair", "err", err)
		}
		if s.ipAddresses != nil {
			if err := s.syncDefaultServiceCIDR(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("default ServiceCIDR", "err", err)
			}
			if err := s.ipAddresses.Repair(ctx, s.listServices, s.reportRepair(ctx)); err != nil && ctx.Err() == nil {
				s.log.Warn("ipaddress repair", "err", err)
			}
		}
		// What the repairs found: allocations without a Service are freed
		// once seen unused long enough (NodePorts: on the third run;
		// IPAddresses: after kube-apiserver's 60 s grace).
		if ips, ports := used(); first || ips != ipsBefore || ports != portsBefore {
			s.log.Info("service allocation repair", "clusterIPsAllocatedBefore", ipsBefore, "clusterIPsAllocated", ips,
				"nodePortsAllocatedBefore", portsBefore, "nodePortsAllocated", ports)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.RepairInterval):
		}
	}
}

// reportRepair logs a repair finding and records it as a Warning Event.
func (s *Server) reportRepair(ctx context.Context) func(allocator.Conflict) {
	return func(c allocator.Conflict) {
		s.log.Warn("service allocation repair", "object", c.Service.Kind+" "+c.Service.Namespace+"/"+c.Service.Name, "reason", c.Reason, "message", c.Message)
		if err := s.recordRepairConflict(ctx, c); err != nil {
			s.log.Warn("service allocation repair", "err", err)
		}
	}
}

func (s *Server) listServices(ctx context.Context) ([]corev1.Service, error) {
	l, err := s.byGR[ServicesResource].List(ctx, "", registry.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.(*corev1.ServiceList).Items, nil
}
