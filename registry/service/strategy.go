package service

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/operation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/allocator"
	"github.com/svcnet/svcnet/registry"
)

// Defaults of the kube-apiserver flags this package implements.
const (
	DefaultServiceClusterIPRange = "10.96.0.0/16"
	DefaultServiceNodePortRange  = "30000-32767"
)

// KeySecondaryServiceIPs is the etcd key of the second family's bitmap in a
// dual-stack cluster.
const KeySecondaryServiceIPs = "/registry/ranges/secondaryserviceips"

var serviceGroupKind = schema.GroupKind{Kind: "Service"}

// Config holds the allocators a Strategy uses.
type Config struct {
	// ClusterIPs has one allocator per configured family; the first is the
	// primary (default) family, as the first CIDR of
	// --service-cluster-ip-range. Empty = no ClusterIP allocation (every
	// non-headless Service is then rejected).
	ClusterIPs []*allocator.IPAllocator
	// IPAddresses, when set, allocates ClusterIPs as IPAddress objects in
	// ServiceCIDRs (Kubernetes 1.33+) for the families of Families, and
	// ClusterIPs is not used.
	IPAddresses *IPAddressAllocator
	// Families are the IP families of --service-cluster-ip-range, primary
	// first (with IPAddresses).
	Families []corev1.IPFamily
	// NodePorts allocates nodePort and healthCheckNodePort values.
	NodePorts *allocator.PortAllocator
	// Logger receives release failures (which leak, and Repair later frees).
	// nil = slog.Default().
	Logger *slog.Logger
}

// ParseServiceClusterIPRange parses --service-cluster-ip-range: one CIDR, or
// two of different families separated by a comma.
func ParseServiceClusterIPRange(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("--service-cluster-ip-range %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	switch {
	case len(out) > 2:
		return nil, fmt.Errorf("--service-cluster-ip-range %q: at most two CIDRs (one per IP family) may be given", s)
	case len(out) == 2 && out[0].Addr().Is4() == out[1].Addr().Is4():
		return nil, fmt.Errorf("--service-cluster-ip-range %q: the two CIDRs must be of different IP families", s)
	}
	return out, nil
}

// NewEtcdConfig builds a Config whose allocation state lives in etcd under
// allocator.KeyServiceIPs (primary family), KeySecondaryServiceIPs and
// allocator.KeyServiceNodePorts. cidrs and ports are the flag values, e.g.
// "10.96.0.0/16,fd00:10:96::/112" and "30000-32767".
func NewEtcdConfig(c *clientv3.Client, cidrs, ports string) (Config, error) {
	return newConfig(cidrs, ports, func(key string) allocator.Store { return allocator.NewEtcdStore(c, key) })
}

// NewIPAddressConfig builds the Config of an apiserver: ClusterIPs are
// IPAddress objects in the ServiceCIDRs of ips, node ports a bitmap in etcd
// under allocator.KeyServiceNodePorts (Kubernetes keeps a bitmap for them).
func NewIPAddressConfig(c *clientv3.Client, cidrs, ports string, ips *IPAddressAllocator) (Config, error) {
	prefixes, err := ParseServiceClusterIPRange(cidrs)
	if err != nil {
		return Config{}, err
	}
	pr, err := allocator.ParsePortRange(ports)
	if err != nil {
		return Config{}, fmt.Errorf("--service-node-port-range: %w", err)
	}
	cfg := Config{IPAddresses: ips, NodePorts: allocator.NewPortAllocator(pr, allocator.NewEtcdStore(c, allocator.KeyServiceNodePorts))}
	for _, p := range prefixes {
		cfg.Families = append(cfg.Families, familyOf(p.Addr()))
	}
	return cfg, nil
}

// NewMemoryConfig is NewEtcdConfig with in-memory stores (tests, single process).
func NewMemoryConfig(cidrs, ports string) (Config, error) {
	return newConfig(cidrs, ports, func(string) allocator.Store { return allocator.NewMemoryStore() })
}

func newConfig(cidrs, ports string, store func(key string) allocator.Store) (Config, error) {
	prefixes, err := ParseServiceClusterIPRange(cidrs)
	if err != nil {
		return Config{}, err
	}
	pr, err := allocator.ParsePortRange(ports)
	if err != nil {
		return Config{}, fmt.Errorf("--service-node-port-range: %w", err)
	}
	var cfg Config
	for i, p := range prefixes {
		key := allocator.KeyServiceIPs
		if i == 1 {
			key = KeySecondaryServiceIPs
		}
		a, err := allocator.NewIPAllocator(p, store(key))
		if err != nil {
			return Config{}, fmt.Errorf("--service-cluster-ip-range: %w", err)
		}
		cfg.ClusterIPs = append(cfg.ClusterIPs, a)
	}
	cfg.NodePorts = allocator.NewPortAllocator(pr, store(allocator.KeyServiceNodePorts))
	return cfg, nil
}

// Repairer returns an allocator.Repairer over the Config's allocators.
func (c Config) Repairer(report func(allocator.Conflict)) *allocator.Repairer {
	return &allocator.Repairer{IPs: c.ClusterIPs, Ports: c.NodePorts, Report: report}
}

// Strategy is the Service strategy: registry.Strategy plus the allocation
// hooks (CreateAllocator, UpdateAllocator, DeleteReleaser).
type Strategy struct {
	cfg      Config
	byFamily map[corev1.IPFamily]clusterIPAllocator
	primary  corev1.IPFamily
	log      *slog.Logger
}

var (
	_ registry.Strategy        = (*Strategy)(nil)
	_ registry.CreateAllocator = (*Strategy)(nil)
	_ registry.UpdateAllocator = (*Strategy)(nil)
	_ registry.DeleteReleaser  = (*Strategy)(nil)
)

// NewStrategy returns the Service strategy over cfg's allocators.
func NewStrategy(cfg Config) *Strategy {
	s := &Strategy{cfg: cfg, byFamily: map[corev1.IPFamily]clusterIPAllocator{}, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	for i, a := range cfg.ClusterIPs {
		fam := corev1.IPv4Protocol
		if a.Range().Prefix().Addr().Is6() {
			fam = corev1.IPv6Protocol
		}
		s.byFamily[fam] = bitmapIPs{a}
		if i == 0 {
			s.primary = fam
		}
	}
	if cfg.IPAddresses != nil {
		for i, fam := range cfg.Families {
			s.byFamily[fam] = objectIPs{cfg.IPAddresses, fam}
			if i == 0 {
				s.primary = fam
			}
		}
	}
	return s
}

// NamespaceScoped: Services live in a namespace.
func (*Strategy) NamespaceScoped() bool { return true }

// Default applies SetDefaults.
func (*Strategy) Default(obj runtime.Object) {
	if svc, ok := obj.(*corev1.Service); ok {
		SetDefaults(svc)
	}
}

// PrepareForCreate clears status: it is written only through /status.
func (*Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if svc, ok := obj.(*corev1.Service); ok {
		svc.Status = corev1.ServiceStatus{}
	}
}

// PrepareForUpdate keeps the stored status and wipes fields that no longer
// apply after a type change and that the client did not change itself
// (nodePorts when leaving NodePort/LoadBalancer, clusterIPs/ipFamilies/
// ipFamilyPolicy when becoming ExternalName, healthCheckNodePort,
// allocateLoadBalancerNodePorts, loadBalancerClass, externalTrafficPolicy,
// and load-balancer status when leaving LoadBalancer).
func (*Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	svc, ok1 := obj.(*corev1.Service)
	oldSvc, ok2 := old.(*corev1.Service)
	if !ok1 || !ok2 {
		return
	}
	svc.Status = oldSvc.Status
	dropTypeDependentFields(svc, oldSvc)
}

// Validate returns ValidateService.
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a *v1.Service: %T", obj))}
	}
	return ValidateService(svc)
}

// ValidateUpdate returns ValidateServiceUpdate.
func (*Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	svc, ok1 := obj.(*corev1.Service)
	oldSvc, ok2 := old.(*corev1.Service)
	if !ok1 || !ok2 {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a *v1.Service: %T", obj))}
	}
	return ValidateServiceUpdate(svc, oldSvc)
}

// ValidateDeclaratively: kube-apiserver 1.37 validates Services (and their
// status) declaratively too; the only rules are ObjectMeta's.
func (*Strategy) ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	return validateServiceDeclaratively(ctx, op, obj, old)
}

func validateServiceDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil
	}
	var oldMeta *metav1.ObjectMeta
	if o, ok := old.(*corev1.Service); ok {
		oldMeta = &o.ObjectMeta
	}
	return registry.ValidateObjectMetaDeclaratively(ctx, op, &svc.ObjectMeta, oldMeta)
}

// StatusStrategy returns the strategy of the services/status subresource:
// a status write keeps the stored spec (and metadata rules apply). It has
// no allocation hooks: a status write never allocates or releases.
func (s *Strategy) StatusStrategy() registry.Strategy { return statusStrategy{} }

type statusStrategy struct{}

var _ registry.Strategy = statusStrategy{}

func (statusStrategy) NamespaceScoped() bool { return true }

func (statusStrategy) Default(obj runtime.Object) {
	if svc, ok := obj.(*corev1.Service); ok {
		SetDefaults(svc)
	}
}

func (statusStrategy) PrepareForCreate(context.Context, runtime.Object) {}

func (statusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	svc, ok1 := obj.(*corev1.Service)
	oldSvc, ok2 := old.(*corev1.Service)
	if ok1 && ok2 {
		svc.Spec = oldSvc.Spec
	}
}

func (statusStrategy) Validate(context.Context, runtime.Object) field.ErrorList { return nil }

// ValidateDeclaratively: as the main resource's.
func (statusStrategy) ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	return validateServiceDeclaratively(ctx, op, obj, old)
}

func (statusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	svc, ok1 := obj.(*corev1.Service)
	oldSvc, ok2 := old.(*corev1.Service)
	if !ok1 || !ok2 {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a *v1.Service: %T", obj))}
	}
	return ValidateServiceStatusUpdate(svc, oldSvc)
}

// txn collects what to undo on Revert and what to release on Commit.
type txn struct {
	revert []func()
	commit []func()
}

func (t *txn) Commit() {
	for _, f := range t.commit {
		f()
	}
	t.commit, t.revert = nil, nil
}

func (t *txn) Revert() {
	for i := len(t.revert) - 1; i >= 0; i-- {
		t.revert[i]()
	}
	t.commit, t.revert = nil, nil
}

// releaseCtx bounds releases that run in Commit/Revert, which have no context.
func releaseCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func invalid(svc *corev1.Service, errs field.ErrorList) error {
	return apierrors.NewInvalid(serviceGroupKind, svc.Name, errs)
}

// BeginCreate fills in ipFamilyPolicy/ipFamilies/clusterIPs and allocates
// ClusterIPs, NodePorts and the healthCheckNodePort, before validation. On
// error everything it allocated is released. With dryRun the checks run
// and values are filled in, but nothing is stored.
func (s *Strategy) BeginCreate(ctx context.Context, obj runtime.Object, dryRun bool) (registry.Transaction, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("not a *v1.Service: %T", obj))
	}
	normalizeClusterIPs(svc, nil)
	return s.allocate(ctx, svc, nil, dryRun)
}

// BeginUpdate carries allocated values the client omitted over from old
// (clusterIP(s), nodePorts by port name, healthCheckNodePort), applies the
// type-change rules, allocates what the new object needs and old did not
// have, and on Commit releases what old had and the new object no longer
// uses (NodePort → ClusterIP frees the nodePorts; → ExternalName frees the
// ClusterIPs; dropping a secondary family frees its IP).
func (s *Strategy) BeginUpdate(ctx context.Context, obj, old runtime.Object, dryRun bool) (registry.Transaction, error) {
	svc, ok1 := obj.(*corev1.Service)
	oldSvc, ok2 := old.(*corev1.Service)
	if !ok1 || !ok2 {
		return nil, apierrors.NewInternalError(fmt.Errorf("not a *v1.Service: %T", obj))
	}
	patchAllocatedValues(svc, oldSvc)
	normalizeClusterIPs(svc, oldSvc)
	dropTypeDependentFields(svc, oldSvc)
	return s.allocate(ctx, svc, oldSvc, dryRun)
}

// AfterDelete releases the deleted Service's ClusterIPs and node ports.
func (s *Strategy) AfterDelete(ctx context.Context, obj runtime.Object, dryRun bool) {
	svc, ok := obj.(*corev1.Service)
	if !ok || dryRun {
		return
	}
	for _, ip := range heldIPs(svc) {
		if a := s.allocatorFor(ip); a != nil {
			if err := a.Release(ctx, ip); err != nil {
				s.log.Warn("release ClusterIP of deleted service (leaked until repair)", "service", svc.Namespace+"/"+svc.Name, "ip", ip, "err", err)
			}
		}
	}
	if s.cfg.NodePorts != nil {
		for p := range heldPorts(svc) {
			if err := s.cfg.NodePorts.Release(ctx, p); err != nil {
				s.log.Warn("release node port of deleted service (leaked until repair)", "service", svc.Namespace+"/"+svc.Name, "port", p, "err", err)
			}
		}
	}
}

func (s *Strategy) allocatorFor(ip netip.Addr) clusterIPAllocator {
	if ip.Is4() {
		return s.byFamily[corev1.IPv4Protocol]
	}
	return s.byFamily[corev1.IPv6Protocol]
}

// heldIPs are the ClusterIPs a stored Service holds in the allocators.
func heldIPs(svc *corev1.Service) []netip.Addr {
	if svc == nil || !needsClusterIP(svc) || IsHeadless(svc) {
		return nil
	}
	var out []netip.Addr
	for _, s := range svc.Spec.ClusterIPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// heldPorts are the node ports (and health-check node port) a Service holds.
func heldPorts(svc *corev1.Service) map[int]bool {
	out := map[int]bool{}
	if svc == nil {
		return out
	}
	if needsNodePort(svc) {
		for _, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				out[int(p.NodePort)] = true
			}
		}
	}
	if NeedsHealthCheck(svc) && svc.Spec.HealthCheckNodePort != 0 {
		out[int(svc.Spec.HealthCheckNodePort)] = true
	}
	return out
}

func shouldAllocateNodePorts(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

func (s *Strategy) allocate(ctx context.Context, svc, old *corev1.Service, dryRun bool) (registry.Transaction, error) {
	if err := s.initIPFamilyFields(svc, old); err != nil {
		return nil, err
	}
	t := &txn{}
	fail := func(err error) (registry.Transaction, error) {
		t.Revert()
		return nil, err
	}
	if err := s.allocClusterIPs(ctx, svc, old, dryRun, t); err != nil {
		return fail(err)
	}
	if err := s.allocNodePorts(ctx, svc, old, dryRun, t); err != nil {
		return fail(err)
	}
	return t, nil
}

func (s *Strategy) allocClusterIPs(ctx context.Context, svc, old *corev1.Service, dryRun bool, t *txn) error {
	oldHeld := heldIPs(old)
	keep := map[netip.Addr]bool{}
	if needsClusterIP(svc) && !IsHeadless(svc) {
		if old != nil && len(old.Spec.ClusterIPs) > 0 && len(svc.Spec.ClusterIPs) > 0 &&
			svc.Spec.ClusterIPs[0] != old.Spec.ClusterIPs[0] && needsClusterIP(old) && !IsHeadless(old) {
			// Changing the primary clusterIP is rejected by validation
			// ("may not change once set"); allocate nothing for it.
			for _, ip := range oldHeld {
				keep[ip] = true
			}
		} else {
			for len(svc.Spec.ClusterIPs) < len(svc.Spec.IPFamilies) {
				svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, "")
			}
			for i, fam := range svc.Spec.IPFamilies {
				a := s.byFamily[fam] // presence checked by initIPFamilyFields
				if req := svc.Spec.ClusterIPs[i]; req != "" {
					ip, err := netip.ParseAddr(req)
					if err != nil {
						return invalid(svc, field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs").Index(i), req, "must be a valid IP address")})
					}
					ip = ip.Unmap()
					if containsAddr(oldHeld, ip) {
						keep[ip] = true
						continue
					}
					if err := a.Allocate(ctx, svc, ip, dryRun); err != nil {
						return invalid(svc, field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs"), svc.Spec.ClusterIPs,
							fmt.Sprintf("failed to allocate IP %v: %v", req, err))})
					}
					if !dryRun {
						t.revert = append(t.revert, s.releaseIPFunc(a, ip))
					}
					continue
				}
				ip, err := a.AllocateNext(ctx, svc, dryRun)
				if err != nil {
					return apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP for Service %q: %w", svc.Name, err))
				}
				svc.Spec.ClusterIPs[i] = ip.String()
				if !dryRun {
					t.revert = append(t.revert, s.releaseIPFunc(a, ip))
				}
			}
			if len(svc.Spec.ClusterIPs) > 0 {
				svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
			}
		}
	}
	if !dryRun {
		for _, ip := range oldHeld {
			if !keep[ip] {
				if a := s.allocatorFor(ip); a != nil {
					t.commit = append(t.commit, s.releaseIPFunc(a, ip))
				}
			}
		}
	}
	return nil
}

func containsAddr(list []netip.Addr, ip netip.Addr) bool {
	for _, a := range list {
		if a == ip {
			return true
		}
	}
	return false
}

func (s *Strategy) releaseIPFunc(a clusterIPAllocator, ip netip.Addr) func() {
	return func() {
		ctx, cancel := releaseCtx()
		defer cancel()
		if err := a.Release(ctx, ip); err != nil {
			s.log.Warn("release ClusterIP (leaked until repair)", "ip", ip, "err", err)
		}
	}
}

func (s *Strategy) releasePortFunc(p int) func() {
	return func() {
		ctx, cancel := releaseCtx()
		defer cancel()
		if err := s.cfg.NodePorts.Release(ctx, p); err != nil {
			s.log.Warn("release node port (leaked until repair)", "port", p, "err", err)
		}
	}
}

// allocNodePorts gives the Service the node ports it needs. Ports with the
// same port number share one node port (kube-apiserver's rule, so TCP and
// UDP 53 get the same node port); a value the stored object already held is
// not allocated again.
func (s *Strategy) allocNodePorts(ctx context.Context, svc, old *corev1.Service, dryRun bool, t *txn) error {
	oldHeld := heldPorts(old)
	taken := map[int]bool{} // allocated or kept for this object
	portsPath := field.NewPath("spec", "ports")
	alloc := func(p int) error {
		if taken[p] {
			return nil
		}
		if oldHeld[p] {
			taken[p] = true
			return nil
		}
		if s.cfg.NodePorts == nil {
			return fmt.Errorf("node ports are not configured on this cluster")
		}
		if err := s.cfg.NodePorts.Allocate(ctx, p, dryRun); err != nil {
			return err
		}
		taken[p] = true
		if !dryRun {
			t.revert = append(t.revert, s.releasePortFunc(p))
		}
		return nil
	}
	next := func() (int, error) {
		if s.cfg.NodePorts == nil {
			return 0, fmt.Errorf("node ports are not configured on this cluster")
		}
		for {
			p, err := s.cfg.NodePorts.AllocateNext(ctx, dryRun)
			if err != nil {
				return 0, err
			}
			if dryRun && (taken[p] || oldHeld[p]) {
				continue // a dry run does not store; avoid handing out the same value twice
			}
			taken[p] = true
			if !dryRun {
				t.revert = append(t.revert, s.releasePortFunc(p))
			}
			return p, nil
		}
	}

	if needsNodePort(svc) {
		byServicePort := map[int32]int32{}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			if sp.NodePort == 0 && !shouldAllocateNodePorts(svc) {
				continue
			}
			shared := byServicePort[sp.Port]
			if shared == 0 {
				np := requestedNodePort(sp.Port, svc.Spec.Ports)
				if np != 0 {
					if err := alloc(int(np)); err != nil {
						return invalid(svc, field.ErrorList{field.Invalid(portsPath.Index(i).Child("nodePort"), np, err.Error())})
					}
				} else {
					p, err := next()
					if err != nil {
						return apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: %v", err))
					}
					np = int32(p)
				}
				sp.NodePort = np
				byServicePort[sp.Port] = np
			} else if sp.NodePort != shared {
				if sp.NodePort == 0 {
					sp.NodePort = shared
				} else if err := alloc(int(sp.NodePort)); err != nil {
					return invalid(svc, field.ErrorList{field.Invalid(portsPath.Index(i).Child("nodePort"), sp.NodePort, err.Error())})
				}
			}
		}
	}

	if NeedsHealthCheck(svc) {
		hc := svc.Spec.HealthCheckNodePort
		if hc != 0 {
			if err := alloc(int(hc)); err != nil {
				// kube-apiserver answers this one with a 500, not a 422.
				return apierrors.NewInternalError(fmt.Errorf("failed to allocate requested HealthCheck NodePort %v: %v", hc, err))
			}
		} else {
			p, err := next()
			if err != nil {
				return apierrors.NewInternalError(fmt.Errorf("failed to allocate a HealthCheck NodePort %v: %v", hc, err))
			}
			svc.Spec.HealthCheckNodePort = int32(p)
		}
	}

	if !dryRun {
		for p := range oldHeld {
			if !taken[p] {
				t.commit = append(t.commit, s.releasePortFunc(p))
			}
		}
	}
	return nil
}

// requestedNodePort returns the first nodePort a port with this port number
// asks for, or 0.
func requestedNodePort(port int32, ports []corev1.ServicePort) int32 {
	for _, p := range ports {
		if p.Port == port && p.NodePort != 0 {
			return p.NodePort
		}
	}
	return 0
}

// clusterIPAllocator hands out the ClusterIPs of one IP family.
type clusterIPAllocator interface {
	Allocate(ctx context.Context, svc *corev1.Service, ip netip.Addr, dryRun bool) error
	AllocateNext(ctx context.Context, svc *corev1.Service, dryRun bool) (netip.Addr, error)
	Release(ctx context.Context, ip netip.Addr) error
}

// bitmapIPs is the in-memory (or legacy etcd bitmap) allocator of the
// tests' Configs; it does not record owners.
type bitmapIPs struct{ a *allocator.IPAllocator }

func (b bitmapIPs) Allocate(ctx context.Context, _ *corev1.Service, ip netip.Addr, dryRun bool) error {
	return b.a.Allocate(ctx, ip, dryRun)
}
func (b bitmapIPs) AllocateNext(ctx context.Context, _ *corev1.Service, dryRun bool) (netip.Addr, error) {
	return b.a.AllocateNext(ctx, dryRun)
}
func (b bitmapIPs) Release(ctx context.Context, ip netip.Addr) error { return b.a.Release(ctx, ip) }

// objectIPs is one family of the IPAddress allocator.
type objectIPs struct {
	a   *IPAddressAllocator
	fam corev1.IPFamily
}

func (o objectIPs) Allocate(ctx context.Context, svc *corev1.Service, ip netip.Addr, dryRun bool) error {
	return o.a.Allocate(ctx, svc, ip, dryRun)
}
func (o objectIPs) AllocateNext(ctx context.Context, svc *corev1.Service, dryRun bool) (netip.Addr, error) {
	return o.a.AllocateNext(ctx, svc, o.fam, dryRun)
}
func (o objectIPs) Release(ctx context.Context, ip netip.Addr) error { return o.a.Release(ctx, ip) }
