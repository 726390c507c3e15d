package service

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/registry"
)

// flow runs the generic registry's create/update/delete order against a
// Strategy, as the API server does.
type flow struct {
	t *testing.T
	s *Strategy
}

func newFlow(t *testing.T, cidrs string) *flow {
	cfg, err := NewMemoryConfig(cidrs, DefaultServiceNodePortRange)
	if err != nil {
		t.Fatal(err)
	}
	return &flow{t: t, s: NewStrategy(cfg)}
}

func (f *flow) create(svc *corev1.Service, dryRun bool) (*corev1.Service, error) {
	ctx := context.Background()
	svc = svc.DeepCopy()
	f.s.Default(svc)
	tx, err := f.s.BeginCreate(ctx, svc, dryRun)
	if err != nil {
		return nil, err
	}
	f.s.PrepareForCreate(ctx, svc)
	if errs := f.s.Validate(ctx, svc); len(errs) > 0 {
		tx.Revert()
		return nil, apierrors.NewInvalid(serviceGroupKind, svc.Name, errs)
	}
	tx.Commit()
	svc.ResourceVersion = "1"
	return svc, nil
}

func (f *flow) update(svc, old *corev1.Service) (*corev1.Service, error) {
	ctx := context.Background()
	svc = svc.DeepCopy()
	svc.ResourceVersion = old.ResourceVersion
	f.s.Default(svc)
	tx, err := f.s.BeginUpdate(ctx, svc, old, false)
	if err != nil {
		return nil, err
	}
	f.s.PrepareForUpdate(ctx, svc, old)
	if errs := f.s.ValidateUpdate(ctx, svc, old); len(errs) > 0 {
		tx.Revert()
		return nil, apierrors.NewInvalid(serviceGroupKind, svc.Name, errs)
	}
	tx.Commit()
	return svc, nil
}

func (f *flow) mustCreate(svc *corev1.Service) *corev1.Service {
	f.t.Helper()
	out, err := f.create(svc, false)
	if err != nil {
		f.t.Fatalf("create %s: %v", svc.Name, err)
	}
	return out
}

func (f *flow) ipUsed(ip string) bool {
	a := netip.MustParseAddr(ip)
	has, err := f.s.allocatorFor(a).(bitmapIPs).a.Has(context.Background(), a)
	if err != nil {
		f.t.Fatal(err)
	}
	return has
}

func (f *flow) portUsed(p int32) bool {
	has, err := f.s.cfg.NodePorts.Has(context.Background(), int(p))
	if err != nil {
		f.t.Fatal(err)
	}
	return has
}

func (f *flow) usedCounts() (ips, ports int) {
	ctx := context.Background()
	for _, a := range f.s.cfg.ClusterIPs {
		n, _ := a.Used(ctx)
		ips += n
	}
	ports, _ = f.s.cfg.NodePorts.Used(ctx)
	return ips, ports
}

func manifest(name string, typ corev1.ServiceType, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Port: 38080, TargetPort: intstr.FromInt32(8080)}}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name}, Ports: ports},
	}
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want error %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error\n  got:  %v\n  want: %s", err, want)
	}
}

func TestCreateClusterIP(t *testing.T) {
	f := newFlow(t, "10.96.0.0/16")
	svc := f.mustCreate(manifest("web", ""))
	ip := netip.MustParseAddr(svc.Spec.ClusterIP)
	if off, ok := f.s.cfg.ClusterIPs[0].Range().Offset(ip); !ok || off < 256 {
		t.Fatalf("auto ClusterIP %s not in the dynamic band", ip)
	}
	if len(svc.Spec.ClusterIPs) != 1 || svc.Spec.ClusterIPs[0] != svc.Spec.ClusterIP ||
		len(svc.Spec.IPFamilies) != 1 || svc.Spec.IPFamilies[0] != corev1.IPv4Protocol ||
		policyOf(svc) != corev1.IPFamilyPolicySingleStack {
		t.Fatalf("family fields: %+v", svc.Spec)
	}
	if !f.ipUsed(svc.Spec.ClusterIP) {
		t.Fatal("ClusterIP not recorded")
	}

	dns := manifest("kube-dns", "")
	dns.Spec.ClusterIP = "10.96.0.10"
	if got := f.mustCreate(dns); got.Spec.ClusterIP != "10.96.0.10" {
		t.Fatalf("requested IP not honoured: %s", got.Spec.ClusterIP)
	}
	dup := manifest("dup", "")
	dup.Spec.ClusterIP = "10.96.0.10"
	_, err := f.create(dup, false)
	wantErr(t, err, `Service "dup" is invalid: spec.clusterIPs: Invalid value: ["10.96.0.10"]: failed to allocate IP 10.96.0.10: provided IP is already allocated`)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("not a 422 Invalid: %v", err)
	}
	out := manifest("out", "")
	out.Spec.ClusterIP = "10.97.0.1"
	_, err = f.create(out, false)
	wantErr(t, err, `spec.clusterIPs: Invalid value: ["10.97.0.1"]: failed to allocate IP 10.97.0.1: the provided network does not match the current range`)
	v6 := manifest("v6", "")
	v6.Spec.ClusterIP = "fd00::1"
	_, err = f.create(v6, false)
	wantErr(t, err, `spec.clusterIPs[0]: Invalid value: ["fd00::1"]: IPv6 is not configured on this cluster`)
	dual := manifest("dual", "")
	dual.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyRequireDualStack)
	_, err = f.create(dual, false)
	wantErr(t, err, `spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services`)

	headless := manifest("hl", "")
	headless.Spec.ClusterIP = "None"
	got := f.mustCreate(headless)
	if got.Spec.ClusterIPs[0] != "None" || got.Spec.IPFamilies[0] != corev1.IPv4Protocol {
		t.Fatalf("headless: %+v", got.Spec)
	}
	if ips, _ := f.usedCounts(); ips != 2 {
		t.Fatalf("allocated IPs %d, want 2 (failed creates must not leak)", ips)
	}
}

func TestCreateRangeFull(t *testing.T) {
	f := newFlow(t, "10.0.0.0/29")
	for i := 0; i < 6; i++ {
		f.mustCreate(manifest("s"+string(rune('a'+i)), ""))
	}
	_, err := f.create(manifest("full", ""), false)
	wantErr(t, err, `Internal error occurred: failed to allocate a serviceIP for Service "full": range is full`)
	if !apierrors.IsInternalError(err) {
		t.Fatalf("range full: want a 500 InternalError, got %v", err)
	}
}

func TestNodePorts(t *testing.T) {
	f := newFlow(t, "10.96.0.0/16")
	np := f.mustCreate(manifest("np", corev1.ServiceTypeNodePort))
	p := np.Spec.Ports[0].NodePort
	if p < 30000+86 || p > 32767 || !f.portUsed(p) {
		t.Fatalf("auto nodePort %d", p)
	}
	if np.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
		t.Fatalf("externalTrafficPolicy %q", np.Spec.ExternalTrafficPolicy)
	}

	fixed := manifest("fixed", corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 38080, NodePort: 30000})
	if got := f.mustCreate(fixed); got.Spec.Ports[0].NodePort != 30000 {
		t.Fatalf("requested nodePort not honoured")
	}
	_, err := f.create(manifest("taken", corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 1, NodePort: 30000}), false)
	wantErr(t, err, `spec.ports[0].nodePort: Invalid value: 30000: provided port is already allocated`)
	_, err = f.create(manifest("range", corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 1, NodePort: 8080}), false)
	wantErr(t, err, `spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767`)

	// Same port number, two protocols: one shared nodePort.
	dnsSvc := f.mustCreate(manifest("dns", corev1.ServiceTypeNodePort,
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}))
	if a, b := dnsSvc.Spec.Ports[0].NodePort, dnsSvc.Spec.Ports[1].NodePort; a == 0 || a != b {
		t.Fatalf("UDP/TCP 53 nodePorts %d %d, want one shared", a, b)
	}

	// A failure on the second port rolls back the first port's allocation.
	_, portsBefore := f.usedCounts()
	_, err = f.create(manifest("rollback", corev1.ServiceTypeNodePort,
		corev1.ServicePort{Name: "a", Port: 1},
		corev1.ServicePort{Name: "b", Port: 2, NodePort: 30000}), false)
	wantErr(t, err, "provided port is already allocated")
	if ips, ports := f.usedCounts(); ports != portsBefore || ips != 3 {
		t.Fatalf("after failed create: %d IPs %d ports, want 3 and %d", ips, ports, portsBefore)
	}
	// Validation failure after allocation also rolls back.
	bad := manifest("Bad_Name", corev1.ServiceTypeNodePort)
	_, err = f.create(bad, false)
	wantErr(t, err, "metadata.name: Invalid value")
	if ips, ports := f.usedCounts(); ports != portsBefore || ips != 3 {
		t.Fatalf("after invalid create: %d IPs %d ports", ips, ports)
	}

	lb := manifest("lb", corev1.ServiceTypeLoadBalancer)
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	got := f.mustCreate(lb)
	if got.Spec.HealthCheckNodePort == 0 || !f.portUsed(got.Spec.HealthCheckNodePort) || got.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("LB+Local: %+v", got.Spec)
	}
	noNP := manifest("lb2", corev1.ServiceTypeLoadBalancer)
	noNP.Spec.AllocateLoadBalancerNodePorts = ptr(false)
	if got := f.mustCreate(noNP); got.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("allocateLoadBalancerNodePorts=false got nodePort %d", got.Spec.Ports[0].NodePort)
	}
}

func TestDryRunAllocatesNothing(t *testing.T) {
	f := newFlow(t, "10.96.0.0/16")
	svc := manifest("np", corev1.ServiceTypeNodePort)
	svc.Spec.ClusterIP = "10.96.5.5"
	got, err := f.create(svc, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Ports[0].NodePort == 0 || got.Spec.ClusterIP != "10.96.5.5" {
		t.Fatalf("dry run did not fill in values: %+v", got.Spec)
	}
	if ips, ports := f.usedCounts(); ips != 0 || ports != 0 {
		t.Fatalf("dry run stored %d IPs %d ports", ips, ports)
	}
}

func TestUpdateSequence(t *testing.T) {
	f := newFlow(t, "10.96.0.0/16")
	orig := manifest("web", corev1.ServiceTypeNodePort)
	cur := f.mustCreate(orig)
	ip, np := cur.Spec.ClusterIP, cur.Spec.Ports[0].NodePort

	// Re-apply the original manifest (no clusterIP, no nodePort): values kept.
	next, err := f.update(orig, cur)
	if err != nil {
		t.Fatal(err)
	}
	if next.Spec.ClusterIP != ip || next.Spec.Ports[0].NodePort != np {
		t.Fatalf("re-apply changed allocations: %s/%d → %s/%d", ip, np, next.Spec.ClusterIP, next.Spec.Ports[0].NodePort)
	}
	if ips, ports := f.usedCounts(); ips != 1 || ports != 1 {
		t.Fatalf("re-apply: %d IPs %d ports", ips, ports)
	}
	cur = next

	// Changing clusterIP is rejected and allocates nothing.
	chg := cur.DeepCopy()
	chg.Spec.ClusterIP, chg.Spec.ClusterIPs = "10.96.9.9", nil
	_, err = f.update(chg, cur)
	wantErr(t, err, `spec.clusterIPs[0]: Invalid value: ["10.96.9.9"]: may not change once set`)
	if f.ipUsed("10.96.9.9") {
		t.Fatal("rejected clusterIP change allocated the new IP")
	}

	// NodePort → ClusterIP releases the nodePort, keeps the IP.
	toCIP := cur.DeepCopy()
	toCIP.Spec.Type = corev1.ServiceTypeClusterIP
	next, err = f.update(toCIP, cur)
	if err != nil {
		t.Fatal(err)
	}
	if next.Spec.Ports[0].NodePort != 0 || next.Spec.ExternalTrafficPolicy != "" || f.portUsed(np) || !f.ipUsed(ip) {
		t.Fatalf("NodePort→ClusterIP: %+v, port used %v", next.Spec, f.portUsed(np))
	}
	cur = next

	// ClusterIP → ExternalName releases the IP.
	toEN := cur.DeepCopy()
	toEN.Spec.Type = corev1.ServiceTypeExternalName
	toEN.Spec.ExternalName = "db.example.com"
	next, err = f.update(toEN, cur)
	if err != nil {
		t.Fatal(err)
	}
	if next.Spec.ClusterIP != "" || len(next.Spec.ClusterIPs) != 0 || next.Spec.IPFamilyPolicy != nil || f.ipUsed(ip) {
		t.Fatalf("→ExternalName: %+v, IP used %v", next.Spec, f.ipUsed(ip))
	}
	cur = next

	// ExternalName → NodePort allocates again.
	back := cur.DeepCopy()
	back.Spec.Type = corev1.ServiceTypeNodePort
	back.Spec.ExternalName = ""
	next, err = f.update(back, cur)
	if err != nil {
		t.Fatal(err)
	}
	if next.Spec.ClusterIP == "" || next.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("ExternalName→NodePort: %+v", next.Spec)
	}
	cur = next

	// Delete releases everything.
	f.s.AfterDelete(context.Background(), cur, false)
	if ips, ports := f.usedCounts(); ips != 0 || ports != 0 {
		t.Fatalf("after delete: %d IPs %d ports", ips, ports)
	}
}

func TestDualStack(t *testing.T) {
	f := newFlow(t, "10.96.0.0/16,fd00:10:96::/112")
	single := f.mustCreate(manifest("single", ""))
	if len(single.Spec.ClusterIPs) != 1 || single.Spec.IPFamilies[0] != corev1.IPv4Protocol {
		t.Fatalf("default service: %+v", single.Spec)
	}
	pref := manifest("pref", "")
	pref.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyPreferDualStack)
	got := f.mustCreate(pref)
	if len(got.Spec.ClusterIPs) != 2 || FamilyOf(got.Spec.ClusterIPs[1]) != corev1.IPv6Protocol ||
		!strings.HasPrefix(got.Spec.ClusterIPs[1], "fd00:10:96::") {
		t.Fatalf("PreferDualStack: %+v", got.Spec)
	}
	v6 := manifest("v6", "")
	v6.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	got6 := f.mustCreate(v6)
	if FamilyOf(got6.Spec.ClusterIP) != corev1.IPv6Protocol {
		t.Fatalf("IPv6 service got %s", got6.Spec.ClusterIP)
	}
	// Downgrade: drop the secondary with SingleStack releases it.
	down := got.DeepCopy()
	down.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
	next, err := f.update(down, got)
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Spec.ClusterIPs) != 1 || f.ipUsed(got.Spec.ClusterIPs[1]) {
		t.Fatalf("downgrade: %+v", next.Spec)
	}
}

var _ registry.Transaction = (*txn)(nil)

func TestHealthCheckNodePortLifecycle(t *testing.T) {
	f := newFlow(t, "10.96.0.0/16")
	lb := manifest("lb", corev1.ServiceTypeLoadBalancer)
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	lb.Spec.HealthCheckNodePort = 32000
	cur := f.mustCreate(lb)
	if cur.Spec.HealthCheckNodePort != 32000 || !f.portUsed(32000) {
		t.Fatalf("requested healthCheckNodePort not allocated: %+v", cur.Spec)
	}
	taken := manifest("lb2", corev1.ServiceTypeLoadBalancer)
	taken.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	taken.Spec.HealthCheckNodePort = 32000
	_, err := f.create(taken, false)
	// kube-apiserver 1.36 answers a taken healthCheckNodePort with a 500.
	wantErr(t, err, "Internal error occurred: failed to allocate requested HealthCheck NodePort 32000: provided port is already allocated")
	if !apierrors.IsInternalError(err) {
		t.Fatalf("taken healthCheckNodePort: want a 500 InternalError, got %v", err)
	}

	// Re-apply without healthCheckNodePort keeps it.
	again := manifest("lb", corev1.ServiceTypeLoadBalancer)
	again.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	next, err := f.update(again, cur)
	if err != nil {
		t.Fatal(err)
	}
	if next.Spec.HealthCheckNodePort != 32000 {
		t.Fatalf("re-apply lost healthCheckNodePort: %d", next.Spec.HealthCheckNodePort)
	}
	cur = next

	// Local → Cluster frees it; the node port stays.
	toCluster := cur.DeepCopy()
	toCluster.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	next, err = f.update(toCluster, cur)
	if err != nil {
		t.Fatal(err)
	}
	if next.Spec.HealthCheckNodePort != 0 || f.portUsed(32000) || !f.portUsed(cur.Spec.Ports[0].NodePort) {
		t.Fatalf("Local→Cluster: hc %d, 32000 used %v", next.Spec.HealthCheckNodePort, f.portUsed(32000))
	}
}

func TestNodePortRangeFull(t *testing.T) {
	cfg, err := NewMemoryConfig("10.96.0.0/16", "30000-30001")
	if err != nil {
		t.Fatal(err)
	}
	f := &flow{t: t, s: NewStrategy(cfg)}
	f.mustCreate(manifest("a", corev1.ServiceTypeNodePort))
	f.mustCreate(manifest("b", corev1.ServiceTypeNodePort))
	_, err = f.create(manifest("c", corev1.ServiceTypeNodePort), false)
	wantErr(t, err, "Internal error occurred: failed to allocate a nodePort: range is full")
	if ips, ports := f.usedCounts(); ips != 2 || ports != 2 {
		t.Fatalf("failed create leaked: %d IPs %d ports", ips, ports)
	}
}
