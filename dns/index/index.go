// Package index keeps the slim, query-shaped view of the cluster that the
// cluster DNS server answers from: Services, the ready endpoints of their
// EndpointSlices, Namespaces, and (for --pods=verified) Pod IPs.
//
// The index is updated incrementally, one object per informer event: adding,
// changing or deleting a Service or EndpointSlice touches only that object's
// entries and its reverse (IP → name) entries, never the whole index. Stored
// values are immutable once inserted, so lookups hand out pointers under a
// read lock and callers must not modify them.
//
// Names are stored as Kubernetes stores them (lower case); callers lower-case
// DNS labels before looking them up.
package index

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// NoPort marks an endpoint slice that lists no ports. Its endpoints still get
// A/AAAA records, but never SRV records (CoreDNS uses the same sentinel).
const NoPort = -1

// Port is one named (or unnamed) port of a Service or EndpointSlice.
type Port struct {
	Name     string
	Protocol string // "TCP", "UDP" or "SCTP"
	Port     int32  // NoPort when the slice lists no ports
}

// Service is the part of a v1.Service that DNS needs.
type Service struct {
	Namespace, Name string
	// Headless is true for clusterIP: None. Headless Services answer with their
	// ready endpoints instead of a virtual IP.
	Headless bool
	// ExternalName is the target of an ExternalName Service, else empty.
	ExternalName string
	ClusterIPs   []netip.Addr
	Ports        []Port
}

// Endpoint is one ready address of an EndpointSlice.
type Endpoint struct {
	Addr netip.Addr
	// Hostname is the endpoint's spec hostname, or empty; DNS then names the
	// endpoint by its dashed IP.
	Hostname string
}

// Slice is the part of an EndpointSlice that DNS needs: only endpoints whose
// conditions.ready is true or unset are kept.
type Slice struct {
	Namespace, Name string
	Service         string // the kubernetes.io/service-name label
	Ports           []Port
	Endpoints       []Endpoint
}

// Index is safe for concurrent use. The zero value is not usable; use New.
type Index struct {
	mu          sync.RWMutex
	namespaces  map[string]struct{}
	services    map[string]*Service          // ns/name
	slices      map[string]*Slice            // ns/sliceName
	slicesBySvc map[string]map[string]*Slice // ns/service → sliceName → slice
	svcByIP     map[netip.Addr]map[string]*Service
	sliceByIP   map[netip.Addr]map[string]*Slice // IP → ns/sliceName → slice
	pods        map[string][]string              // ns/name → pod IPs as the API spells them
	podsByIP    map[string]map[string]int        // pod IP → namespace → count

	modified atomic.Int64  // unix seconds of the last change: the SOA serial
	gen      atomic.Uint64 // counts changes: answers cached under an older value are stale
}

// New returns an empty index.
func New() *Index {
	x := &Index{
		namespaces:  map[string]struct{}{},
		services:    map[string]*Service{},
		slices:      map[string]*Slice{},
		slicesBySvc: map[string]map[string]*Slice{},
		svcByIP:     map[netip.Addr]map[string]*Service{},
		sliceByIP:   map[netip.Addr]map[string]*Slice{},
		pods:        map[string][]string{},
		podsByIP:    map[string]map[string]int{},
	}
	x.touch()
	return x
}

func key(ns, name string) string { return ns + "/" + name }

func (x *Index) touch() {
	x.modified.Store(time.Now().Unix())
	x.gen.Add(1)
}

// Generation changes whenever the index does (after the change is visible).
// An answer computed after reading generation g is current while
// Generation() == g.
func (x *Index) Generation() uint64 { return x.gen.Load() }

// Serial is the SOA serial: the unix time of the last change to the index.
func (x *Index) Serial() uint32 { return uint32(x.modified.Load()) }

// SetNamespace records that a namespace exists.
func (x *Index) SetNamespace(name string) {
	x.mu.Lock()
	x.namespaces[name] = struct{}{}
	x.mu.Unlock()
	x.touch()
}

// DeleteNamespace forgets a namespace. Its Services stay until their own
// delete events arrive, but become unreachable by name.
func (x *Index) DeleteNamespace(name string) {
	x.mu.Lock()
	delete(x.namespaces, name)
	x.mu.Unlock()
	x.touch()
}

func (x *Index) namespaceKeys() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.namespaces))
	for k := range x.namespaces {
		out = append(out, k)
	}
	return out
}

func (x *Index) serviceKeys() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.services))
	for k := range x.services {
		out = append(out, k)
	}
	return out
}

func (x *Index) sliceKeys() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.slices))
	for k := range x.slices {
		out = append(out, k)
	}
	return out
}

func (x *Index) podKeys() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.pods))
	for k := range x.pods {
		out = append(out, k)
	}
	return out
}

// NamespaceExists reports whether the namespace exists.
func (x *Index) NamespaceExists(name string) bool {
	x.mu.RLock()
	_, ok := x.namespaces[name]
	x.mu.RUnlock()
	return ok
}

// ServiceFromAPI converts a v1.Service. Unparseable cluster IPs are skipped.
func ServiceFromAPI(s *corev1.Service) *Service {
	out := &Service{Namespace: s.Namespace, Name: s.Name}
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		out.ExternalName = s.Spec.ExternalName
		return out
	}
	out.Headless = s.Spec.ClusterIP == corev1.ClusterIPNone
	ips := s.Spec.ClusterIPs
	if len(ips) == 0 && s.Spec.ClusterIP != "" {
		ips = []string{s.Spec.ClusterIP}
	}
	if !out.Headless {
		for _, ip := range ips {
			if a, err := netip.ParseAddr(ip); err == nil {
				out.ClusterIPs = append(out.ClusterIPs, a.Unmap())
			}
		}
	}
	for _, p := range s.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		out.Ports = append(out.Ports, Port{Name: p.Name, Protocol: proto, Port: p.Port})
	}
	return out
}

// SetService adds or replaces a Service.
func (x *Index) SetService(s *Service) {
	k := key(s.Namespace, s.Name)
	x.mu.Lock()
	if old := x.services[k]; old != nil {
		x.unindexServiceIPs(k, old)
	}
	x.services[k] = s
	for _, ip := range s.ClusterIPs {
		m := x.svcByIP[ip]
		if m == nil {
			m = map[string]*Service{}
			x.svcByIP[ip] = m
		}
		m[k] = s
	}
	x.mu.Unlock()
	x.touch()
}

func (x *Index) unindexServiceIPs(k string, s *Service) {
	for _, ip := range s.ClusterIPs {
		if m := x.svcByIP[ip]; m != nil {
			delete(m, k)
			if len(m) == 0 {
				delete(x.svcByIP, ip)
			}
		}
	}
}

// DeleteService removes a Service; a missing one is not an error.
func (x *Index) DeleteService(ns, name string) {
	k := key(ns, name)
	x.mu.Lock()
	if old := x.services[k]; old != nil {
		x.unindexServiceIPs(k, old)
		delete(x.services, k)
	}
	x.mu.Unlock()
	x.touch()
}

// Service returns the Service ns/name, or nil.
func (x *Index) Service(ns, name string) *Service {
	x.mu.RLock()
	s := x.services[key(ns, name)]
	x.mu.RUnlock()
	return s
}

// ServicesByIP returns the Services that have ip as a cluster IP, sorted by
// nothing in particular; usually one.
func (x *Index) ServicesByIP(ip netip.Addr) []*Service {
	x.mu.RLock()
	defer x.mu.RUnlock()
	m := x.svcByIP[ip]
	out := make([]*Service, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	return out
}

// SliceFromAPI converts an EndpointSlice. It returns nil for slices that DNS
// ignores: FQDN slices and slices without a kubernetes.io/service-name label.
// Endpoints that are not ready (conditions.ready false) are dropped; an
// unset ready condition counts as ready, as the API documents.
func SliceFromAPI(es *discoveryv1.EndpointSlice) *Slice {
	svc := es.Labels[discoveryv1.LabelServiceName]
	if svc == "" || es.AddressType == discoveryv1.AddressTypeFQDN {
		return nil
	}
	out := &Slice{Namespace: es.Namespace, Name: es.Name, Service: svc}
	if len(es.Ports) == 0 {
		out.Ports = []Port{{Port: NoPort}}
	}
	for _, p := range es.Ports {
		pp := Port{Protocol: string(corev1.ProtocolTCP), Port: NoPort}
		if p.Name != nil {
			pp.Name = *p.Name
		}
		if p.Protocol != nil {
			pp.Protocol = string(*p.Protocol)
		}
		if p.Port != nil {
			pp.Port = *p.Port
		}
		out.Ports = append(out.Ports, pp)
	}
	for _, e := range es.Endpoints {
		if e.Conditions.Ready != nil && !*e.Conditions.Ready {
			continue
		}
		host := ""
		if e.Hostname != nil {
			host = *e.Hostname
		}
		for _, a := range e.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				continue
			}
			out.Endpoints = append(out.Endpoints, Endpoint{Addr: ip.Unmap(), Hostname: host})
		}
	}
	return out
}

// SetSlice adds or replaces an EndpointSlice. A slice whose service label
// changed moves to the new Service.
func (x *Index) SetSlice(s *Slice) {
	k := key(s.Namespace, s.Name)
	x.mu.Lock()
	x.removeSliceLocked(k)
	x.slices[k] = s
	sk := key(s.Namespace, s.Service)
	m := x.slicesBySvc[sk]
	if m == nil {
		m = map[string]*Slice{}
		x.slicesBySvc[sk] = m
	}
	m[s.Name] = s
	for _, e := range s.Endpoints {
		r := x.sliceByIP[e.Addr]
		if r == nil {
			r = map[string]*Slice{}
			x.sliceByIP[e.Addr] = r
		}
		r[k] = s
	}
	x.mu.Unlock()
	x.touch()
}

func (x *Index) removeSliceLocked(k string) {
	old := x.slices[k]
	if old == nil {
		return
	}
	delete(x.slices, k)
	sk := key(old.Namespace, old.Service)
	if m := x.slicesBySvc[sk]; m != nil {
		delete(m, old.Name)
		if len(m) == 0 {
			delete(x.slicesBySvc, sk)
		}
	}
	for _, e := range old.Endpoints {
		if r := x.sliceByIP[e.Addr]; r != nil {
			delete(r, k)
			if len(r) == 0 {
				delete(x.sliceByIP, e.Addr)
			}
		}
	}
}

// DeleteSlice removes an EndpointSlice; a missing one is not an error.
func (x *Index) DeleteSlice(ns, name string) {
	x.mu.Lock()
	x.removeSliceLocked(key(ns, name))
	x.mu.Unlock()
	x.touch()
}

// Slices returns the EndpointSlices of the Service ns/name, or none.
func (x *Index) Slices(ns, service string) []*Slice {
	x.mu.RLock()
	defer x.mu.RUnlock()
	m := x.slicesBySvc[key(ns, service)]
	out := make([]*Slice, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sortSlices(out)
	return out
}

// SlicesByIP returns the EndpointSlices with a ready endpoint at ip.
func (x *Index) SlicesByIP(ip netip.Addr) []*Slice {
	x.mu.RLock()
	defer x.mu.RUnlock()
	m := x.sliceByIP[ip]
	out := make([]*Slice, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sortSlices(out)
	return out
}

// sortSlices orders slices by name so that answers are stable.
func sortSlices(s []*Slice) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].Name < s[j-1].Name; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// SetPod records a pod's IPs, as the API spells them (only used by
// --pods=verified). A pod without IPs is forgotten.
func (x *Index) SetPod(ns, name string, ips []string) {
	k := key(ns, name)
	x.mu.Lock()
	x.deletePodLocked(k, ns)
	if len(ips) > 0 {
		x.pods[k] = ips
		for _, ip := range ips {
			m := x.podsByIP[ip]
			if m == nil {
				m = map[string]int{}
				x.podsByIP[ip] = m
			}
			m[ns]++
		}
	}
	x.mu.Unlock()
	x.touch()
}

// PodKnown reports whether the pod ns/name is indexed.
func (x *Index) PodKnown(ns, name string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.pods[key(ns, name)]
	return ok
}

func (x *Index) deletePodLocked(k, ns string) {
	old, ok := x.pods[k]
	if !ok {
		return
	}
	delete(x.pods, k)
	for _, ip := range old {
		if m := x.podsByIP[ip]; m != nil {
			m[ns]--
			if m[ns] <= 0 {
				delete(m, ns)
			}
			if len(m) == 0 {
				delete(x.podsByIP, ip)
			}
		}
	}
}

// DeletePod forgets a pod.
func (x *Index) DeletePod(ns, name string) {
	x.mu.Lock()
	x.deletePodLocked(key(ns, name), ns)
	x.mu.Unlock()
	x.touch()
}

// PodExists reports whether a pod in namespace ns has the IP ip, compared
// as text with the API's spelling (as CoreDNS does: in verified mode
// fd00-0-0-0-0-0-0-5 is not the pod fd00::5).
func (x *Index) PodExists(ns, ip string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.podsByIP[ip][ns] > 0
}

// Counts reports how many Services and EndpointSlices the index holds.
func (x *Index) Counts() (services, slices int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.services), len(x.slices)
}
