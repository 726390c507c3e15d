package allocator

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// Conflict is a problem Repair found with a stored Service; the caller
// turns it into a Warning Event on that Service.
type Conflict struct {
	Service corev1.ObjectReference
	// Reason is the Event reason kube-apiserver's repair controllers use:
	// ClusterIPNotValid, ClusterIPOutOfRange, ClusterIPAlreadyAllocated,
	// PortOutOfRange, PortAlreadyAllocated.
	Reason  string
	Message string
}

// DefaultLeakThreshold is how many consecutive Repair runs must find a value
// allocated but unused before it is freed (kube-apiserver uses 3), so that a
// value allocated by another apiserver for a Service not written yet is not
// taken away.
const DefaultLeakThreshold = 3

// Repairer rebuilds the stored bitmaps from the Services that exist. Run
// RunOnce at start-up and periodically; it is not safe for concurrent use.
type Repairer struct {
	IPs   []*IPAllocator // one per configured family
	Ports *PortAllocator // may be nil
	// LeakThreshold overrides DefaultLeakThreshold when > 0; 1 frees leaks
	// on the first run (only safe when no other apiserver is allocating).
	LeakThreshold int
	// Report is called for every conflict found; may be nil.
	Report func(Conflict)

	ipLeaks   map[netip.Addr]int
	portLeaks map[int]int
}

func (r *Repairer) threshold() int {
	if r.LeakThreshold > 0 {
		return r.LeakThreshold
	}
	return DefaultLeakThreshold
}

func (r *Repairer) report(svc *corev1.Service, reason, msg string) {
	if r.Report == nil {
		return
	}
	r.Report(Conflict{
		Service: corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace,
			Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion},
		Reason: reason, Message: msg,
	})
}

// RunOnce reads each stored bitmap, then lists the Services with list, and
// replaces each bitmap (by CAS against the revision read first, retried on
// conflict) with: the values the Services use, plus values allocated but
// unused that have not yet been seen unused LeakThreshold times in a row.
// Reading the bitmap before listing guarantees that a value allocated
// concurrently is either in the list or in the bitmap read.
func (r *Repairer) RunOnce(ctx context.Context, list func(context.Context) ([]corev1.Service, error)) error {
	if r.ipLeaks == nil {
		r.ipLeaks = map[netip.Addr]int{}
		r.portLeaks = map[int]int{}
	}
	for attempt := 0; attempt < 10; attempt++ {
		done, err := r.runOnce(ctx, list)
		if err != nil || done {
			return err
		}
	}
	return fmt.Errorf("repair: range allocations kept changing; will retry")
}

type snap struct {
	p    *persistent
	data []byte
	rev  int64
	b    *Bitmap
}

func readSnap(ctx context.Context, p *persistent) (*snap, error) {
	data, rev, err := p.store.Get(ctx)
	if err != nil {
		return nil, err
	}
	b, err := p.decode(data)
	if err != nil {
		return nil, err
	}
	return &snap{p: p, data: data, rev: rev, b: b}, nil
}

func (r *Repairer) runOnce(ctx context.Context, list func(context.Context) ([]corev1.Service, error)) (bool, error) {
	ipSnaps := make([]*snap, len(r.IPs))
	for i, a := range r.IPs {
		s, err := readSnap(ctx, a.p)
		if err != nil {
			return false, fmt.Errorf("repair: %w", err)
		}
		ipSnaps[i] = s
	}
	var portSnap *snap
	if r.Ports != nil {
		s, err := readSnap(ctx, r.Ports.p)
		if err != nil {
			return false, fmt.Errorf("repair: %w", err)
		}
		portSnap = s
	}
	svcs, err := list(ctx)
	if err != nil {
		return false, fmt.Errorf("repair: list services: %w", err)
	}

	fresh := make([]*Bitmap, len(r.IPs))
	for i, a := range r.IPs {
		fresh[i] = a.r.NewBitmap()
	}
	var freshPorts *Bitmap
	if r.Ports != nil {
		freshPorts = r.Ports.r.NewBitmap()
	}
	for i := range svcs {
		svc := &svcs[i]
		if svc.Spec.Type != corev1.ServiceTypeExternalName {
			r.collectIPs(svc, fresh)
		}
		if freshPorts != nil {
			r.collectPorts(svc, freshPorts)
		}
	}

	// Keep values allocated but unused until they were seen leaked enough times.
	seenIP := map[netip.Addr]bool{}
	for i, s := range ipSnaps {
		rng := r.IPs[i].r
		s.b.ForEach(func(off int) {
			if fresh[i].Has(off) {
				return
			}
			ip := rng.Addr(off)
			seenIP[ip] = true
			r.ipLeaks[ip]++
			if r.ipLeaks[ip] < r.threshold() {
				fresh[i].Allocate(off)
			}
		})
	}
	seenPort := map[int]bool{}
	if portSnap != nil {
		portSnap.b.ForEach(func(off int) {
			if freshPorts.Has(off) {
				return
			}
			port := r.Ports.r.Base + off
			seenPort[port] = true
			r.portLeaks[port]++
			if r.portLeaks[port] < r.threshold() {
				freshPorts.Allocate(off)
			}
		})
	}

	for i, s := range ipSnaps {
		ok, err := r.IPs[i].p.store.CAS(ctx, s.rev, s.p.encode(fresh[i]))
		if err != nil {
			return false, fmt.Errorf("repair: %w", err)
		}
		if !ok {
			r.undoLeakCounts(seenIP, seenPort)
			return false, nil
		}
	}
	if portSnap != nil {
		ok, err := r.Ports.p.store.CAS(ctx, portSnap.rev, portSnap.p.encode(freshPorts))
		if err != nil {
			return false, fmt.Errorf("repair: %w", err)
		}
		if !ok {
			r.undoLeakCounts(seenIP, seenPort)
			return false, nil
		}
	}
	// Forget leak counts of values that are no longer leaked.
	for ip, n := range r.ipLeaks {
		if !seenIP[ip] || n >= r.threshold() {
			delete(r.ipLeaks, ip)
		}
	}
	for p, n := range r.portLeaks {
		if !seenPort[p] || n >= r.threshold() {
			delete(r.portLeaks, p)
		}
	}
	return true, nil
}

func (r *Repairer) undoLeakCounts(ips map[netip.Addr]bool, ports map[int]bool) {
	for ip := range ips {
		r.ipLeaks[ip]--
	}
	for p := range ports {
		r.portLeaks[p]--
	}
}

func (r *Repairer) collectIPs(svc *corev1.Service, fresh []*Bitmap) {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if s == "" || s == corev1.ClusterIPNone {
			continue
		}
		ip, err := netip.ParseAddr(s)
		if err != nil {
			r.report(svc, "ClusterIPNotValid", fmt.Sprintf("Cluster IP %s is not a valid IP; please recreate service", s))
			continue
		}
		ip = ip.Unmap()
		placed := false
		familyConfigured := false
		for i, a := range r.IPs {
			if a.r.Prefix().Addr().Is4() != ip.Is4() {
				continue
			}
			familyConfigured = true
			off, ok := a.r.Offset(ip)
			if !ok {
				continue
			}
			placed = true
			if !fresh[i].Allocate(off) {
				r.report(svc, "ClusterIPAlreadyAllocated",
					fmt.Sprintf("Cluster IP [%s]:%s was assigned to multiple services; please recreate service", family(ip), ip))
			}
		}
		if !placed && familyConfigured {
			r.report(svc, "ClusterIPOutOfRange",
				fmt.Sprintf("Cluster IP [%s]:%s is not within the configured Service CIDR %s; please recreate service", family(ip), ip, r.rangesOf(ip)))
		}
	}
}

func (r *Repairer) rangesOf(ip netip.Addr) string {
	for _, a := range r.IPs {
		if a.r.Prefix().Addr().Is4() == ip.Is4() {
			return a.r.String()
		}
	}
	return ""
}

func family(ip netip.Addr) string {
	if ip.Is4() {
		return string(corev1.IPv4Protocol)
	}
	return string(corev1.IPv6Protocol)
}

// collectPorts marks the Service's node ports (and health-check node port).
// One Service may use the same number for two protocols; that is one
// allocation, not a conflict.
func (r *Repairer) collectPorts(svc *corev1.Service, fresh *Bitmap) {
	mine := map[int]bool{}
	add := func(port int) {
		if port == 0 || mine[port] {
			return
		}
		mine[port] = true
		if !r.Ports.r.Contains(port) {
			r.report(svc, "PortOutOfRange",
				fmt.Sprintf("Port %d is not within the port range %s; please recreate service", port, r.Ports.r))
			return
		}
		if !fresh.Allocate(port - r.Ports.r.Base) {
			r.report(svc, "PortAlreadyAllocated",
				fmt.Sprintf("Port %d was assigned to multiple services; please recreate service", port))
		}
	}
	for _, p := range svc.Spec.Ports {
		add(int(p.NodePort))
	}
	add(int(svc.Spec.HealthCheckNodePort))
}
