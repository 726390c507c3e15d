// Package l2 answers ARP (IPv4) and NDP neighbor solicitations (IPv6) for
// LoadBalancer addresses announced in MetalLB's layer2 mode, and sends
// gratuitous ARP / unsolicited neighbor advertisements when it takes an
// address over and periodically afterwards (switches age out their FDB
// entries; a client's stale neighbor entry is corrected by the next one).
//
// It uses github.com/mdlayher/arp (a raw AF_PACKET socket per interface,
// ethertype ARP) and github.com/mdlayher/ndp (an ICMPv6 socket per
// interface, joined to the solicited-node multicast group of every IPv6
// address announced there). An interface is eligible when it is up, not a
// loopback, not enslaved to a bridge or bond, and not NOARP; ARP also needs
// an IPv4 address on it (the library's requirement), NDP an IPv6 link-local
// one. Interfaces are rescanned every ScanInterval, so ones that appear
// later are served too.
//
// The kernel does not answer for these addresses itself (they are not
// assigned to any interface); packets sent to them arrive at this node
// because its MAC is the answer, and the service proxy's rules take them.
package l2

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

// Options configure a Responder.
type Options struct {
	Logger *slog.Logger
	// ReannounceInterval is how often every announced address is announced
	// again after the takeover burst (0 disables).
	ReannounceInterval time.Duration
	// ScanInterval is how often interfaces are rescanned (default 10s).
	ScanInterval time.Duration
	// Metrics, when set, counts requests, responses and gratuitous
	// packets (MetalLB's metallb_layer2_* counters).
	Metrics *Metrics
}

// Takeover burst: announce at once and then every burstEvery for burstFor,
// as MetalLB does, so that a lost packet does not leave clients on the old
// node.
const (
	burstEvery = 1100 * time.Millisecond
	burstFor   = 5 * time.Second
)

type balancer struct {
	ips []netip.Addr
	ifs []string // nil: every eligible interface
}

// Responder serves the addresses given by SetBalancer. Create with New and
// Run it; it implements speaker.L2Responder.
type Responder struct {
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	balancers map[string]balancer
	burst     map[netip.Addr]time.Time // address -> end of its takeover burst
	arps      map[string]*arpIf
	ndps      map[string]*ndpIf
	wake      chan struct{}
}

// New returns a Responder; nothing is sent or answered before Run.
func New(opts Options) *Responder {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ScanInterval <= 0 {
		opts.ScanInterval = 10 * time.Second
	}
	return &Responder{opts: opts, log: opts.Logger, balancers: map[string]balancer{}, burst: map[netip.Addr]time.Time{},
		arps: map[string]*arpIf{}, ndps: map[string]*ndpIf{}, wake: make(chan struct{}, 1)}
}

// SetBalancer announces ips for key on the named interfaces (nil: all).
// Addresses that were not announced before start with a takeover burst.
func (r *Responder) SetBalancer(key string, ips []netip.Addr, ifs []string) {
	r.mu.Lock()
	old := map[netip.Addr]bool{}
	for _, b := range r.balancers {
		for _, ip := range b.ips {
			old[ip] = true
		}
	}
	r.balancers[key] = balancer{ips: slices.Clone(ips), ifs: slices.Clone(ifs)}
	for _, ip := range ips {
		if !old[ip] {
			r.burst[ip] = time.Now().Add(burstFor)
		}
	}
	r.reconcileGroupsLocked()
	r.mu.Unlock()
	r.log.Info("announcing", "service", key, "ips", ips, "interfaces", ifs)
	r.kick()
}

// DeleteBalancer stops answering for key's addresses.
func (r *Responder) DeleteBalancer(key string) {
	r.mu.Lock()
	b, ok := r.balancers[key]
	delete(r.balancers, key)
	for _, ip := range b.ips {
		delete(r.burst, ip)
	}
	r.reconcileGroupsLocked()
	r.mu.Unlock()
	if ok {
		r.log.Info("stopped announcing", "service", key, "ips", b.ips)
	}
}

// Interfaces lists the interfaces served now.
func (r *Responder) Interfaces() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	set := map[string]bool{}
	for n := range r.arps {
		set[n] = true
	}
	for n := range r.ndps {
		set[n] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (r *Responder) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// announcedOn reports whether ip is announced on interface ifname.
func (r *Responder) announcedOn(ip netip.Addr, ifname string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.announcedOnLocked(ip, ifname)
}

func (r *Responder) announcedOnLocked(ip netip.Addr, ifname string) bool {
	for _, b := range r.balancers {
		if slices.Contains(b.ips, ip) && (b.ifs == nil || slices.Contains(b.ifs, ifname)) {
			return true
		}
	}
	return false
}

// Run serves until ctx ends, then closes every socket.
func (r *Responder) Run(ctx context.Context) error {
	r.scan()
	scan := time.NewTicker(r.opts.ScanInterval)
	defer scan.Stop()
	var reannounce <-chan time.Time
	if r.opts.ReannounceInterval > 0 {
		t := time.NewTicker(r.opts.ReannounceInterval)
		defer t.Stop()
		reannounce = t.C
	}
	burst := time.NewTicker(burstEvery)
	defer burst.Stop()
	defer r.closeAll()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-scan.C:
			r.scan()
		case <-reannounce:
			r.announce(false)
		case <-burst.C:
			r.announce(true)
		case <-r.wake:
			r.announce(true)
		}
	}
}

// announce sends gratuitous ARP / unsolicited NA for the addresses in
// their takeover burst (onlyBurst) or for every announced address.
func (r *Responder) announce(onlyBurst bool) {
	now := time.Now()
	type job struct {
		ip  netip.Addr
		ifs []string
	}
	var jobs []job
	r.mu.Lock()
	for ip, until := range r.burst {
		if now.After(until) {
			delete(r.burst, ip)
		}
	}
	for _, b := range r.balancers {
		for _, ip := range b.ips {
			if _, inBurst := r.burst[ip]; onlyBurst && !inBurst {
				continue
			}
			jobs = append(jobs, job{ip, b.ifs})
		}
	}
	arps, ndps := make([]*arpIf, 0, len(r.arps)), make([]*ndpIf, 0, len(r.ndps))
	for _, a := range r.arps {
		arps = append(arps, a)
	}
	for _, n := range r.ndps {
		ndps = append(ndps, n)
	}
	r.mu.Unlock()
	for _, j := range jobs {
		if j.ip.Is4() {
			for _, a := range arps {
				if j.ifs == nil || slices.Contains(j.ifs, a.name) {
					if err := a.gratuitous(j.ip, r.opts.Metrics); err != nil {
						r.log.Warn("gratuitous ARP", "interface", a.name, "ip", j.ip, "err", err)
					}
				}
			}
			continue
		}
		for _, n := range ndps {
			if j.ifs == nil || slices.Contains(j.ifs, n.name) {
				if err := n.unsolicited(j.ip); err != nil {
					r.log.Warn("unsolicited neighbor advertisement", "interface", n.name, "ip", j.ip, "err", err)
				} else {
					r.opts.Metrics.sentGratuitous(j.ip)
				}
			}
		}
	}
}

// eligible reports whether an interface can carry announcements, and
// whether for ARP and NDP.
func eligible(ifi net.Interface) (forARP, forNDP bool) {
	if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagLoopback != 0 || len(ifi.HardwareAddr) != 6 {
		return false, false
	}
	// Bridge ports and bond members: the master answers for the segment.
	if _, err := os.Stat("/sys/class/net/" + ifi.Name + "/master"); err == nil {
		return false, false
	}
	if b, err := os.ReadFile("/sys/class/net/" + ifi.Name + "/flags"); err == nil {
		if f, err := strconv.ParseUint(strings.TrimSpace(string(b)), 0, 32); err == nil && f&0x80 != 0 { // IFF_NOARP
			return false, false
		}
	}
	addrs, _ := ifi.Addrs()
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if p.Addr().Is4() && ifi.Flags&net.FlagBroadcast != 0 {
			forARP = true
		}
		if p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
			forNDP = true
		}
	}
	return forARP, forNDP
}

// scan opens responders on new eligible interfaces and closes those of
// interfaces that went away or stopped being eligible.
func (r *Responder) scan() {
	ifs, err := net.Interfaces()
	if err != nil {
		r.log.Warn("list interfaces", "err", err)
		return
	}
	keepARP, keepNDP := map[string]bool{}, map[string]bool{}
	for _, ifi := range ifs {
		a, n := eligible(ifi)
		r.mu.Lock()
		cur := r.arps[ifi.Name]
		r.mu.Unlock()
		if a && cur != nil && cur.index == ifi.Index && bytes.Equal(cur.mac, ifi.HardwareAddr) {
			keepARP[ifi.Name] = true
		} else if a {
			if ai, err := newARPIf(r, ifi); err != nil {
				r.log.Warn("ARP responder", "interface", ifi.Name, "err", err)
			} else {
				keepARP[ifi.Name] = true
				r.mu.Lock()
				if old := r.arps[ifi.Name]; old != nil {
					old.close()
				}
				r.arps[ifi.Name] = ai
				r.mu.Unlock()
				r.log.Info("ARP responder started", "interface", ifi.Name, "mac", ifi.HardwareAddr.String())
			}
		}
		r.mu.Lock()
		curN := r.ndps[ifi.Name]
		r.mu.Unlock()
		if n && curN != nil && curN.index == ifi.Index && bytes.Equal(curN.mac, ifi.HardwareAddr) {
			keepNDP[ifi.Name] = true
		} else if n {
			if ni, err := newNDPIf(r, ifi); err != nil {
				r.log.Warn("NDP responder", "interface", ifi.Name, "err", err)
			} else {
				keepNDP[ifi.Name] = true
				r.mu.Lock()
				if old := r.ndps[ifi.Name]; old != nil {
					old.close()
				}
				r.ndps[ifi.Name] = ni
				r.reconcileGroupsLocked()
				r.mu.Unlock()
				r.log.Info("NDP responder started", "interface", ifi.Name, "mac", ifi.HardwareAddr.String())
			}
		}
	}
	r.mu.Lock()
	for name, a := range r.arps {
		if !keepARP[name] {
			a.close()
			delete(r.arps, name)
			r.log.Info("ARP responder stopped", "interface", name)
		}
	}
	for name, n := range r.ndps {
		if !keepNDP[name] {
			n.close()
			delete(r.ndps, name)
			r.log.Info("NDP responder stopped", "interface", name)
		}
	}
	r.mu.Unlock()
}

func (r *Responder) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, a := range r.arps {
		a.close()
		delete(r.arps, name)
	}
	for name, n := range r.ndps {
		n.close()
		delete(r.ndps, name)
	}
}

// arpIf answers ARP on one interface.
type arpIf struct {
	name  string
	index int
	mac   net.HardwareAddr
	c     *arp.Client
	done  chan struct{}
}

func newARPIf(r *Responder, ifi net.Interface) (*arpIf, error) {
	c, err := arp.Dial(&ifi)
	if err != nil {
		return nil, err
	}
	a := &arpIf{name: ifi.Name, index: ifi.Index, mac: ifi.HardwareAddr, c: c, done: make(chan struct{})}
	go a.serve(r)
	return a, nil
}

func (a *arpIf) serve(r *Responder) {
	for {
		pkt, eth, err := a.c.Read()
		if err != nil {
			select {
			case <-a.done:
				return
			default:
			}
			// Not an ARP packet the library can parse, or a transient
			// error: keep serving (without spinning on a broken socket).
			if !errors.Is(err, arp.ErrInvalidHardwareAddr) {
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		if pkt.Operation != arp.OperationRequest || bytes.Equal(pkt.SenderHardwareAddr, a.mac) {
			continue
		}
		if !bytes.Equal(eth.Destination, ethernet.Broadcast) && !bytes.Equal(eth.Destination, a.mac) {
			continue
		}
		if !r.announcedOn(pkt.TargetIP, a.name) {
			continue
		}
		r.opts.Metrics.gotRequest(pkt.TargetIP)
		if err := a.c.Reply(pkt, a.mac, pkt.TargetIP); err != nil {
			r.log.Warn("ARP reply", "interface", a.name, "ip", pkt.TargetIP, "to", pkt.SenderIP, "err", err)
		} else {
			r.opts.Metrics.sentResponse(pkt.TargetIP)
		}
	}
}

// gratuitous broadcasts the address as ours, as a request and as a reply
// (clients differ in which they accept); m counts each packet sent.
func (a *arpIf) gratuitous(ip netip.Addr, m *Metrics) error {
	for _, op := range []arp.Operation{arp.OperationRequest, arp.OperationReply} {
		p, err := arp.NewPacket(op, a.mac, ip, ethernet.Broadcast, ip)
		if err != nil {
			return err
		}
		if err := a.c.WriteTo(p, ethernet.Broadcast); err != nil {
			return err
		}
		m.sentGratuitous(ip)
	}
	return nil
}

func (a *arpIf) close() {
	close(a.done)
	_ = a.c.Close()
}

// ndpIf answers neighbor solicitations on one interface.
type ndpIf struct {
	name   string
	index  int
	mac    net.HardwareAddr
	c      *ndp.Conn
	groups map[netip.Addr]bool // solicited-node groups joined
	done   chan struct{}
}

func newNDPIf(r *Responder, ifi net.Interface) (*ndpIf, error) {
	c, _, err := ndp.Listen(&ifi, ndp.LinkLocal)
	if err != nil {
		return nil, err
	}
	n := &ndpIf{name: ifi.Name, index: ifi.Index, mac: ifi.HardwareAddr, c: c, groups: map[netip.Addr]bool{}, done: make(chan struct{})}
	go n.serve(r)
	return n, nil
}

// reconcileGroupsLocked joins, on every NDP interface, the solicited-node
// multicast groups of the IPv6 addresses announced there and leaves the
// others: the kernel delivers a solicitation only to a joined group.
func (r *Responder) reconcileGroupsLocked() {
	for _, n := range r.ndps {
		want := map[netip.Addr]bool{}
		for _, b := range r.balancers {
			for _, ip := range b.ips {
				if ip.Is6() && (b.ifs == nil || slices.Contains(b.ifs, n.name)) {
					if g, err := ndp.SolicitedNodeMulticast(ip); err == nil {
						want[g] = true
					}
				}
			}
		}
		for g := range want {
			if !n.groups[g] {
				if err := n.c.JoinGroup(g); err != nil {
					r.log.Warn("join solicited-node group", "interface", n.name, "group", g, "err", err)
					continue
				}
				n.groups[g] = true
			}
		}
		for g := range n.groups {
			if !want[g] {
				if err := n.c.LeaveGroup(g); err != nil {
					r.log.Warn("leave solicited-node group", "interface", n.name, "group", g, "err", err)
				}
				delete(n.groups, g)
			}
		}
	}
}

func (n *ndpIf) serve(r *Responder) {
	for {
		msg, _, src, err := n.c.ReadFrom()
		if err != nil {
			select {
			case <-n.done:
				return
			default:
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		ns, ok := msg.(*ndp.NeighborSolicitation)
		if !ok {
			continue
		}
		// A solicitation from the unspecified address is duplicate address
		// detection: nobody to answer to directly (RFC 4861 7.2.4 would
		// multicast; an address in use elsewhere is a configuration error
		// MetalLB does not handle either).
		if src.IsUnspecified() {
			continue
		}
		if !r.announcedOn(ns.TargetAddress, n.name) {
			continue
		}
		r.opts.Metrics.gotRequest(ns.TargetAddress)
		na := &ndp.NeighborAdvertisement{Solicited: true, Override: true, TargetAddress: ns.TargetAddress,
			Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: n.mac}}}
		if err := n.c.WriteTo(na, nil, src); err != nil {
			r.log.Warn("neighbor advertisement", "interface", n.name, "ip", ns.TargetAddress, "to", src, "err", err)
		} else {
			r.opts.Metrics.sentResponse(ns.TargetAddress)
		}
	}
}

// unsolicited tells every node on the link that the address is here now.
func (n *ndpIf) unsolicited(ip netip.Addr) error {
	na := &ndp.NeighborAdvertisement{Override: true, TargetAddress: ip,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: n.mac}}}
	return n.c.WriteTo(na, nil, netip.IPv6LinkLocalAllNodes().WithZone(n.name))
}

func (n *ndpIf) close() {
	close(n.done)
	_ = n.c.Close()
}
