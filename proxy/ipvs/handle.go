package ipvs

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// FlagPersistent is IP_VS_SVC_F_PERSISTENT: the virtual server keeps a
// client on the same real server for Timeout seconds.
const FlagPersistent = 0x1

// FlagSchedPort is IP_VS_SVC_F_SCHED2, for the mh scheduler "mh-port": the
// client's port is hashed with its address, so one client's connections
// spread over the real servers. kube-proxy sets it on every virtual server
// when the scheduler is mh.
const FlagSchedPort = 0x10

// VirtualServer is one IPVS service: the address, protocol and port
// clients connect to, and how it picks a real server.
type VirtualServer struct {
	Addr      netip.Addr
	Protocol  v1.Protocol
	Port      uint16
	Scheduler string
	// Persistent and Timeout (seconds) express ClientIP session affinity.
	Persistent bool
	Timeout    uint32
	// HashPort is FlagSchedPort (with the mh scheduler).
	HashPort bool
}

// Key identifies a virtual server in the kernel (address, protocol, port).
type Key struct {
	Addr     netip.Addr
	Protocol v1.Protocol
	Port     uint16
}

// Key returns the identity of v.
func (v VirtualServer) Key() Key { return Key{v.Addr, v.Protocol, v.Port} }

// String returns "TCP 10.96.3.215:38080".
func (v VirtualServer) String() string { return v.Key().String() }

// String returns "TCP 10.96.3.215:38080".
func (k Key) String() string {
	return string(k.Protocol) + " " + netip.AddrPortFrom(k.Addr, k.Port).String()
}

// sameSettings reports whether two virtual servers with the same Key need
// no update.
func (v VirtualServer) sameSettings(w VirtualServer) bool {
	return v.Scheduler == w.Scheduler && v.Persistent == w.Persistent && (!v.Persistent || v.Timeout == w.Timeout) &&
		v.HashPort == w.HashPort
}

// RealServer is one IPVS destination, always with masquerade (NAT)
// forwarding. ActiveConn and InactiveConn are read from the kernel and
// ignored when writing.
type RealServer struct {
	Addr         netip.Addr
	Port         uint16
	Weight       int
	ActiveConn   int
	InactiveConn int
}

// AddrPort returns the real server's address and port.
func (r RealServer) AddrPort() netip.AddrPort { return netip.AddrPortFrom(r.Addr, r.Port) }

// Handle is the kernel's IPVS table. Get* return copies; Add* fail with an
// error matching ErrExists when the entry exists, Update*/Del* with one
// matching ErrNotFound when it does not.
type Handle interface {
	GetServices() ([]VirtualServer, error)
	AddService(vs VirtualServer) error
	UpdateService(vs VirtualServer) error
	DelService(vs VirtualServer) error
	GetDestinations(vs VirtualServer) ([]RealServer, error)
	AddDestination(vs VirtualServer, rs RealServer) error
	UpdateDestination(vs VirtualServer, rs RealServer) error
	DelDestination(vs VirtualServer, rs RealServer) error
}

// Errors a Handle returns (wrapped); test with errors.Is.
var (
	ErrNotFound = errors.New("no such IPVS entry")
	ErrExists   = errors.New("IPVS entry exists")
)

// Fake is an in-memory Handle that keeps the kernel's rules: keys are
// unique, destinations belong to a service, deleting a service deletes its
// destinations. Tests set connection counts with SetConnections. It is safe
// for concurrent use.
type Fake struct {
	mu       sync.Mutex
	services map[Key]*fakeService
}

type fakeService struct {
	vs    VirtualServer
	dests map[netip.AddrPort]RealServer
}

var _ Handle = (*Fake)(nil)

// NewFake returns an empty Fake.
func NewFake() *Fake { return &Fake{services: map[Key]*fakeService{}} }

func (f *Fake) get(k Key) (*fakeService, error) {
	s := f.services[k]
	if s == nil {
		return nil, fmt.Errorf("virtual server %s %s: %w", k.Protocol, netip.AddrPortFrom(k.Addr, k.Port), ErrNotFound)
	}
	return s, nil
}

// GetServices implements Handle.
func (f *Fake) GetServices() ([]VirtualServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]VirtualServer, 0, len(f.services))
	for _, s := range f.services {
		out = append(out, s.vs)
	}
	sortServices(out)
	return out, nil
}

// AddService implements Handle.
func (f *Fake) AddService(vs VirtualServer) error {
	if err := validService(vs); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.services[vs.Key()] != nil {
		return fmt.Errorf("add virtual server %s: %w", vs, ErrExists)
	}
	f.services[vs.Key()] = &fakeService{vs: vs, dests: map[netip.AddrPort]RealServer{}}
	return nil
}

// UpdateService implements Handle.
func (f *Fake) UpdateService(vs VirtualServer) error {
	if err := validService(vs); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(vs.Key())
	if err != nil {
		return err
	}
	s.vs = vs
	return nil
}

// DelService implements Handle.
func (f *Fake) DelService(vs VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.get(vs.Key()); err != nil {
		return err
	}
	delete(f.services, vs.Key())
	return nil
}

// GetDestinations implements Handle.
func (f *Fake) GetDestinations(vs VirtualServer) ([]RealServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(vs.Key())
	if err != nil {
		return nil, err
	}
	out := make([]RealServer, 0, len(s.dests))
	for _, d := range s.dests {
		out = append(out, d)
	}
	sortDests(out)
	return out, nil
}

// AddDestination implements Handle.
func (f *Fake) AddDestination(vs VirtualServer, rs RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(vs.Key())
	if err != nil {
		return err
	}
	if rs.Addr.Is6() != vs.Addr.Is6() {
		return fmt.Errorf("add real server %s to %s: address family differs", rs.AddrPort(), vs)
	}
	if _, ok := s.dests[rs.AddrPort()]; ok {
		return fmt.Errorf("add real server %s to %s: %w", rs.AddrPort(), vs, ErrExists)
	}
	rs.ActiveConn, rs.InactiveConn = 0, 0
	s.dests[rs.AddrPort()] = rs
	return nil
}

// UpdateDestination implements Handle; connection counts are kept.
func (f *Fake) UpdateDestination(vs VirtualServer, rs RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(vs.Key())
	if err != nil {
		return err
	}
	cur, ok := s.dests[rs.AddrPort()]
	if !ok {
		return fmt.Errorf("update real server %s of %s: %w", rs.AddrPort(), vs, ErrNotFound)
	}
	cur.Weight = rs.Weight
	s.dests[rs.AddrPort()] = cur
	return nil
}

// DelDestination implements Handle.
func (f *Fake) DelDestination(vs VirtualServer, rs RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(vs.Key())
	if err != nil {
		return err
	}
	if _, ok := s.dests[rs.AddrPort()]; !ok {
		return fmt.Errorf("delete real server %s of %s: %w", rs.AddrPort(), vs, ErrNotFound)
	}
	delete(s.dests, rs.AddrPort())
	return nil
}

// SetConnections sets the connection counters of a real server, as traffic
// would in the kernel.
func (f *Fake) SetConnections(vs Key, rs netip.AddrPort, active, inactive int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(vs)
	if err != nil {
		return err
	}
	d, ok := s.dests[rs]
	if !ok {
		return fmt.Errorf("real server %s: %w", rs, ErrNotFound)
	}
	d.ActiveConn, d.InactiveConn = active, inactive
	s.dests[rs] = d
	return nil
}

func validService(vs VirtualServer) error {
	if !vs.Addr.IsValid() || vs.Port == 0 {
		return fmt.Errorf("virtual server %s: address and port are required", vs)
	}
	switch vs.Protocol {
	case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
	default:
		return fmt.Errorf("virtual server %s: unsupported protocol %q", vs, vs.Protocol)
	}
	if vs.Scheduler == "" {
		return fmt.Errorf("virtual server %s: no scheduler", vs)
	}
	return nil
}

func sortServices(s []VirtualServer) {
	slices.SortFunc(s, func(a, b VirtualServer) int {
		if c := cmp.Compare(a.Protocol, b.Protocol); c != 0 {
			return c
		}
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
}

func sortDests(d []RealServer) {
	slices.SortFunc(d, func(a, b RealServer) int { return a.AddrPort().Compare(b.AddrPort()) })
}

// Dump returns the table in `ipvsadm -Ln` form: the header, then each
// virtual server ("TCP  10.96.3.215:38080 rr", with " persistent N" for
// affinity and " (mh-port)" for FlagSchedPort) followed by its real servers ("  -> 10.244.1.5:8080 Masq 1 0 0"
// in ipvsadm's columns). Services are sorted by protocol, address and port,
// real servers by address and port (ipvsadm prints the kernel's hash
// order).
func Dump(h Handle) (string, error) {
	svcs, err := h.GetServices()
	if err != nil {
		return "", fmt.Errorf("dump IPVS table: %w", err)
	}
	sortServices(svcs)
	var b strings.Builder
	b.WriteString("IP Virtual Server version 1.2.1 (size=4096)\n")
	b.WriteString("Prot LocalAddress:Port Scheduler Flags\n")
	b.WriteString("  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n")
	for _, vs := range svcs {
		fmt.Fprintf(&b, "%-3s  %s %s", vs.Protocol, netip.AddrPortFrom(vs.Addr, vs.Port), vs.Scheduler)
		if vs.Persistent {
			fmt.Fprintf(&b, " persistent %d", vs.Timeout)
		}
		if vs.HashPort {
			b.WriteString(" (mh-port)")
		}
		b.WriteByte('\n')
		dests, err := h.GetDestinations(vs)
		if err != nil {
			return b.String(), fmt.Errorf("dump IPVS table: %w", err)
		}
		sortDests(dests)
		for _, d := range dests {
			fmt.Fprintf(&b, "  -> %-28s %-7s %-6d %-10d %-10d\n", d.AddrPort(), "Masq", d.Weight, d.ActiveConn, d.InactiveConn)
		}
	}
	return b.String(), nil
}
