// Package hostport maps pods' hostPorts on the node, as the CNI portmap
// plugin does for the kubelet: a DNAT in the nat table of the node's network
// namespace from <hostIP>:<hostPort> (the node's address when hostIP is
// unset) to <podIP>:<containerPort>, for traffic arriving at the node
// (PREROUTING) and sent by the node itself (OUTPUT). A hostPort already held
// by another pod for the same protocol and address is refused.
//
// The rules live in chains of their own (SVCNET-HOSTPORTS, and
// SVCNET-HOSTPORTS-MASQ for hairpin traffic from a pod to its own hostPort),
// rebuilt in one iptables-restore --noflush transaction on every change.
package hostport

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Mapping is one hostPort of one pod.
type Mapping struct {
	Pod           string // namespace/name, for comments and messages
	Protocol      v1.Protocol
	HostIP        netip.Addr // zero: the node's address
	HostPort      int32
	PodIP         netip.Addr
	ContainerPort int32
}

type key struct {
	proto v1.Protocol
	ip    netip.Addr
	port  int32
}

// ConflictError says a hostPort is taken.
type ConflictError struct {
	Port     int32
	Protocol v1.Protocol
	HeldBy   string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("hostPort %d/%s is already used by pod %s", e.Port, e.Protocol, e.HeldBy)
}

// FromPod lists the hostPort mappings of pod at podIP.
func FromPod(pod *v1.Pod, podIP netip.Addr) []Mapping {
	var out []Mapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			m := Mapping{Pod: pod.Namespace + "/" + pod.Name, Protocol: p.Protocol, HostPort: p.HostPort, PodIP: podIP, ContainerPort: p.ContainerPort}
			if m.Protocol == "" {
				m.Protocol = v1.ProtocolTCP
			}
			if p.HostIP != "" {
				if a, err := netip.ParseAddr(p.HostIP); err == nil && !a.IsUnspecified() {
					m.HostIP = a
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// Applier runs iptables-restore; tests replace it.
type Applier func(ctx context.Context, payload []byte) error

// IPTablesRestore applies payload with `iptables-restore --noflush -w`.
func IPTablesRestore(ctx context.Context, payload []byte) error {
	cmd := exec.CommandContext(ctx, "iptables-restore", "--noflush", "-w", "5")
	cmd.Stdin = bytes.NewReader(payload)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Manager holds the node's hostPort mappings.
type Manager struct {
	mu      sync.Mutex
	nodeIP  netip.Addr
	podCIDR netip.Prefix
	byPod   map[string][]Mapping
	apply   Applier
}

// NewManager returns a manager for a node at nodeIP whose pods are in podCIDR.
func NewManager(nodeIP netip.Addr, podCIDR netip.Prefix, apply Applier) *Manager {
	return &Manager{nodeIP: nodeIP, podCIDR: podCIDR, byPod: map[string][]Mapping{}, apply: apply}
}

// conflicts reports whether a and b would grab the same traffic: same
// protocol and port, and the same address or either on all addresses.
func conflicts(a, b Mapping) bool {
	return a.Protocol == b.Protocol && a.HostPort == b.HostPort && (a.HostIP == b.HostIP || !a.HostIP.IsValid() || !b.HostIP.IsValid())
}

// Add records pod's mappings and applies the rules. A conflict with
// another pod's mapping returns a *ConflictError and changes nothing.
func (m *Manager) Add(ctx context.Context, pod string, maps []Mapping) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for other, oms := range m.byPod {
		if other == pod {
			continue
		}
		for _, om := range oms {
			for _, nm := range maps {
				if conflicts(om, nm) {
					return &ConflictError{Port: nm.HostPort, Protocol: nm.Protocol, HeldBy: other}
				}
			}
		}
	}
	old, had := m.byPod[pod]
	if len(maps) == 0 && !had {
		return nil
	}
	m.byPod[pod] = maps
	if err := m.apply(ctx, m.payload()); err != nil {
		if had {
			m.byPod[pod] = old
		} else {
			delete(m.byPod, pod)
		}
		return fmt.Errorf("map hostPorts of %s: %w", pod, err)
	}
	return nil
}

// Remove drops pod's mappings and applies the rules.
func (m *Manager) Remove(ctx context.Context, pod string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byPod[pod]; !ok {
		return nil
	}
	delete(m.byPod, pod)
	if err := m.apply(ctx, m.payload()); err != nil {
		return fmt.Errorf("unmap hostPorts of %s: %w", pod, err)
	}
	return nil
}

// Init installs the (empty) chains and the jumps to them. Call once.
func (m *Manager) Init(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.apply(ctx, m.payload()); err != nil {
		return err
	}
	// The jumps are added only if missing, so restarts don't stack them.
	for _, j := range [][]string{
		{"PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "SVCNET-HOSTPORTS"},
		{"OUTPUT", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "SVCNET-HOSTPORTS"},
		{"POSTROUTING", "-j", "SVCNET-HOSTPORTS-MASQ"},
	} {
		check := append([]string{"-w", "5", "-t", "nat", "-C"}, j...)
		if exec.CommandContext(ctx, "iptables", check...).Run() == nil {
			continue
		}
		add := append([]string{"-w", "5", "-t", "nat", "-I"}, j...)
		if out, err := exec.CommandContext(ctx, "iptables", add...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(add, " "), err, out)
		}
	}
	return nil
}

// Payload is the iptables-restore input for the current mappings.
func (m *Manager) Payload() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.payload()
}

func (m *Manager) payload() []byte {
	var all []Mapping
	for _, ms := range m.byPod {
		all = append(all, ms...)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].HostPort != all[j].HostPort {
			return all[i].HostPort < all[j].HostPort
		}
		if all[i].Protocol != all[j].Protocol {
			return all[i].Protocol < all[j].Protocol
		}
		return all[i].Pod < all[j].Pod
	})
	var b bytes.Buffer
	b.WriteString("*nat\n:SVCNET-HOSTPORTS - [0:0]\n:SVCNET-HOSTPORTS-MASQ - [0:0]\n")
	for _, mp := range all {
		proto := strings.ToLower(string(mp.Protocol))
		dst := mp.HostIP
		if !dst.IsValid() {
			dst = m.nodeIP
		}
		to := fmt.Sprintf("%s:%d", mp.PodIP, mp.ContainerPort)
		fmt.Fprintf(&b, "-A SVCNET-HOSTPORTS -d %s/32 -p %s -m %s --dport %d -m comment --comment \"%s hostport %d\" -j DNAT --to-destination %s\n",
			dst, proto, proto, mp.HostPort, mp.Pod, mp.HostPort, to)
		fmt.Fprintf(&b, "-A SVCNET-HOSTPORTS-MASQ -s %s/32 -d %s/32 -p %s -m %s --dport %d -j MASQUERADE\n",
			mp.PodIP, mp.PodIP, proto, proto, mp.ContainerPort)
	}
	b.WriteString("COMMIT\n")
	return b.Bytes()
}
