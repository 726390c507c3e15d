package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"syscall"

	libipvs "github.com/moby/ipvs"
	v1 "k8s.io/api/core/v1"
)

// ErrNoIPVS is returned when the kernel has no IPVS support.
var ErrNoIPVS = errors.New(`the kernel has no IPVS support: kernel module "ip_vs" is not loaded and could not be loaded (load ip_vs and the ip_vs_<scheduler> modules, e.g. "modprobe ip_vs ip_vs_rr")`)

// KernelHasIPVS reports whether the running kernel has IPVS (built in or
// the ip_vs module loaded): /proc/net/ip_vs exists then.
func KernelHasIPVS() bool {
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		return true
	}
	_, err := os.Stat("/sys/module/ip_vs")
	return err == nil
}

// Netlink is the real Handle, talking generic netlink to the kernel in one
// network namespace.
type Netlink struct{ h *libipvs.Handle }

var _ Handle = (*Netlink)(nil)

// NewNetlink opens an IPVS handle in the network namespace at nsPath (""
// for the caller's). It fails with ErrNoIPVS when the kernel has no IPVS.
func NewNetlink(nsPath string) (*Netlink, error) {
	// Checked first: on a kernel without IPVS the library runs modprobe
	// and logs a warning and an error of its own (in every proxy's log,
	// whatever its mode, since each mode cleans up the others' state).
	if !KernelHasIPVS() {
		// As kube-proxy: try to load the module.
		_ = exec.Command("modprobe", "ip_vs").Run()
		if !KernelHasIPVS() {
			return nil, ErrNoIPVS
		}
	}
	h, err := libipvs.New(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open IPVS netlink handle: %w", err)
	}
	if _, err := h.GetServices(); err != nil {
		h.Close()
		return nil, fmt.Errorf("%w: %v", ErrNoIPVS, err)
	}
	return &Netlink{h: h}, nil
}

// Close releases the netlink socket.
func (n *Netlink) Close() { n.h.Close() }

func protoNum(p v1.Protocol) uint16 {
	switch p {
	case v1.ProtocolUDP:
		return syscall.IPPROTO_UDP
	case v1.ProtocolSCTP:
		return 132
	}
	return syscall.IPPROTO_TCP
}

func protoName(n uint16) v1.Protocol {
	switch n {
	case syscall.IPPROTO_UDP:
		return v1.ProtocolUDP
	case 132:
		return v1.ProtocolSCTP
	}
	return v1.ProtocolTCP
}

func family(a netip.Addr) uint16 {
	if a.Is6() {
		return syscall.AF_INET6
	}
	return syscall.AF_INET
}

func toLib(vs VirtualServer) *libipvs.Service {
	s := &libipvs.Service{
		Address: net.IP(vs.Addr.AsSlice()), Protocol: protoNum(vs.Protocol), Port: vs.Port,
		SchedName: vs.Scheduler, AddressFamily: family(vs.Addr), Netmask: 0xffffffff,
	}
	if vs.Addr.Is6() {
		s.Netmask = 128
	}
	if vs.Persistent {
		s.Flags = FlagPersistent
		s.Timeout = vs.Timeout
	}
	if vs.HashPort {
		s.Flags |= FlagSchedPort
	}
	return s
}

func fromLib(s *libipvs.Service) (VirtualServer, bool) {
	a, ok := netip.AddrFromSlice(s.Address)
	if !ok || s.FWMark != 0 {
		return VirtualServer{}, false
	}
	a = a.Unmap()
	if s.AddressFamily == syscall.AF_INET6 && a.Is4() {
		a = netip.AddrFrom16(a.As16())
	}
	return VirtualServer{Addr: a, Protocol: protoName(s.Protocol), Port: s.Port, Scheduler: s.SchedName,
		Persistent: s.Flags&FlagPersistent != 0, Timeout: s.Timeout, HashPort: s.Flags&FlagSchedPort != 0}, true
}

func destLib(rs RealServer) *libipvs.Destination {
	return &libipvs.Destination{Address: net.IP(rs.Addr.AsSlice()), Port: rs.Port, Weight: rs.Weight,
		ConnectionFlags: libipvs.ConnectionFlagMasq, AddressFamily: family(rs.Addr)}
}

func wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ESRCH), errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%s: %w: %v", op, ErrNotFound, err)
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("%s: %w: %v", op, ErrExists, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// GetServices implements Handle (firewall-mark services are skipped).
func (n *Netlink) GetServices() ([]VirtualServer, error) {
	ss, err := n.h.GetServices()
	if err != nil {
		return nil, wrap("list virtual servers", err)
	}
	out := make([]VirtualServer, 0, len(ss))
	for _, s := range ss {
		if vs, ok := fromLib(s); ok {
			out = append(out, vs)
		}
	}
	return out, nil
}

// AddService implements Handle.
func (n *Netlink) AddService(vs VirtualServer) error {
	if err := validService(vs); err != nil {
		return err
	}
	return wrap("add virtual server "+vs.String(), n.h.NewService(toLib(vs)))
}

// UpdateService implements Handle.
func (n *Netlink) UpdateService(vs VirtualServer) error {
	if err := validService(vs); err != nil {
		return err
	}
	return wrap("update virtual server "+vs.String(), n.h.UpdateService(toLib(vs)))
}

// DelService implements Handle.
func (n *Netlink) DelService(vs VirtualServer) error {
	return wrap("delete virtual server "+vs.String(), n.h.DelService(toLib(vs)))
}

// GetDestinations implements Handle.
func (n *Netlink) GetDestinations(vs VirtualServer) ([]RealServer, error) {
	ds, err := n.h.GetDestinations(toLib(vs))
	if err != nil {
		return nil, wrap("list real servers of "+vs.String(), err)
	}
	out := make([]RealServer, 0, len(ds))
	for _, d := range ds {
		a, ok := netip.AddrFromSlice(d.Address)
		if !ok {
			continue
		}
		if !vs.Addr.Is6() {
			a = a.Unmap()
		}
		out = append(out, RealServer{Addr: a, Port: d.Port, Weight: d.Weight, ActiveConn: d.ActiveConnections, InactiveConn: d.InactiveConnections})
	}
	return out, nil
}

// AddDestination implements Handle.
func (n *Netlink) AddDestination(vs VirtualServer, rs RealServer) error {
	return wrap("add real server "+rs.AddrPort().String()+" to "+vs.String(), n.h.NewDestination(toLib(vs), destLib(rs)))
}

// UpdateDestination implements Handle.
func (n *Netlink) UpdateDestination(vs VirtualServer, rs RealServer) error {
	return wrap("update real server "+rs.AddrPort().String()+" of "+vs.String(), n.h.UpdateDestination(toLib(vs), destLib(rs)))
}

// DelDestination implements Handle.
func (n *Netlink) DelDestination(vs VirtualServer, rs RealServer) error {
	return wrap("delete real server "+rs.AddrPort().String()+" of "+vs.String(), n.h.DelDestination(toLib(vs), destLib(rs)))
}
