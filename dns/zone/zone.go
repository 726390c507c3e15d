// Package zone synthesizes the answers of the cluster DNS zone
// (cluster.local by default) from an index.Index, following the Kubernetes
// DNS-Based Service Discovery specification 1.1.0 and, where the
// specification is silent, the behaviour of CoreDNS's kubernetes plugin:
//
//   - <svc>.<ns>.svc.<zone> A/AAAA: the cluster IPs of a ClusterIP Service, or
//     one record per ready endpoint of a headless Service (NXDOMAIN when a
//     headless Service has no ready endpoint).
//   - <host>.<svc>.<ns>.svc.<zone>: one endpoint, named by its hostname or its
//     dashed IP (10-244-1-5, fd00--5).
//   - _<port>._<proto>.<svc>.<ns>.svc.<zone> SRV (the underscores are optional,
//     as in CoreDNS): priority 0, weight 100/n over the n matching records,
//     targets the Service name or, for headless Services, each endpoint name;
//     the additional section carries the targets' addresses.
//   - ExternalName Services answer a CNAME, chased inside the zone or through
//     the Upstream for outside targets (and dropped when the chase fails,
//     leaving NODATA, as CoreDNS does).
//   - PTR for cluster IPs and ready endpoint IPs in in-addr.arpa and ip6.arpa;
//     reverse names the index does not know are not answered here (the caller
//     forwards them, like CoreDNS's "fallthrough in-addr.arpa ip6.arpa").
//   - dns-version.<zone> TXT "1.1.0".
//   - <a-b-c-d>.<ns>.pod.<zone> per PodMode.
//   - NXDOMAIN for names that do not exist, NOERROR/NODATA for names that exist
//     with other types, both with the zone SOA in the authority section;
//     SERVFAIL until the index has synced; REFUSED for AXFR and IXFR.
//
// Matching is case-insensitive; answers use the question's spelling.
package zone

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/dns/index"
)

// SchemaVersion is the version of the Kubernetes DNS specification served in
// dns-version.<zone>.
const SchemaVersion = "1.1.0"

// versionTTL is the TTL of the dns-version TXT record, as in the
// specification's example and CoreDNS's kubernetes plugin. A cache in front
// (kubeadm's "cache 30") may lower what clients see; the zone does not.
const versionTTL = 28800

// maxCNAMEChain bounds how many ExternalName CNAMEs are followed in the zone
// (CoreDNS stops after more than 10).
const maxCNAMEChain = 10

// PodMode selects how <a-b-c-d>.<ns>.pod.<zone> names are answered.
type PodMode string

// Pod modes, as in CoreDNS's "pods" option.
const (
	PodsInsecure PodMode = "insecure" // answer any well-formed IP in an existing namespace
	PodsVerified PodMode = "verified" // answer only if a pod in that namespace has the IP
	PodsDisabled PodMode = "disabled" // NXDOMAIN for every pod name
)

// ParsePodMode validates a --pods value.
func ParsePodMode(s string) (PodMode, error) {
	switch m := PodMode(s); m {
	case PodsInsecure, PodsVerified, PodsDisabled:
		return m, nil
	}
	return "", errors.New(`pods mode must be one of "insecure", "verified", "disabled", got "` + s + `"`)
}

// Upstream resolves names outside the cluster zone (ExternalName targets).
type Upstream interface {
	Lookup(ctx context.Context, name string, qtype uint16) (*dns.Msg, error)
}

// Config describes the zone.
type Config struct {
	// Zone is the cluster domain, e.g. "cluster.local." (lower case, fully
	// qualified).
	Zone string
	// TTL of every synthesized record and of the SOA minimum.
	TTL  uint32
	Pods PodMode
	// Reverse makes the server authoritative for in-addr.arpa. and
	// ip6.arpa. (PTR for cluster IPs and ready endpoint IPs), as kubeadm's
	// "kubernetes cluster.local in-addr.arpa ip6.arpa".
	Reverse bool
	// ReverseFallthrough hands reverse names that do not exist to the
	// caller (to forward) instead of answering NXDOMAIN, as CoreDNS's
	// "fallthrough in-addr.arpa ip6.arpa".
	ReverseFallthrough bool
	// LocalIPs are the server's own non-loopback addresses. As in
	// CoreDNS, the name servers of the zone (NS at the apex, ns.dns.<zone>)
	// are the Services that have one of them as a ready endpoint (in a
	// cluster: kube-dns), else these addresses themselves.
	LocalIPs []netip.Addr
}

// Zone answers questions about the cluster zone. It is safe for concurrent
// use.
type Zone struct {
	cfg    Config
	idx    *index.Index
	synced func() bool
	up     Upstream
}

// New returns a Zone over idx. synced reports whether idx has its initial
// state; up may be nil, and then ExternalName targets outside the zone are
// not chased.
func New(cfg Config, idx *index.Index, synced func() bool, up Upstream) *Zone {
	cfg.Zone = dns.CanonicalName(cfg.Zone)
	if cfg.Pods == "" {
		cfg.Pods = PodsInsecure
	}
	return &Zone{cfg: cfg, idx: idx, synced: synced, up: up}
}

var (
	errNX      = errors.New("name does not exist")
	reverseV4  = "in-addr.arpa."
	reverseV6  = "ip6.arpa."
	hostmaster = "hostmaster."
)

// Serve answers req if its question is in the cluster zone or, with Reverse,
// in in-addr.arpa. or ip6.arpa. It returns nil when the question is not for
// these zones (or, with ReverseFallthrough, when a reverse name does not
// exist), and the caller should forward it. req must have exactly one
// question.
func (z *Zone) Serve(ctx context.Context, req *dns.Msg) *dns.Msg {
	if len(req.Question) != 1 {
		return nil
	}
	q := req.Question[0]
	lname := strings.ToLower(q.Name)
	zone := z.match(lname)
	if zone == "" {
		return nil
	}
	// The zone as the question spells it: CoreDNS keeps the question's case
	// in every synthesized name below the zone.
	zoneQ := q.Name[len(q.Name)-len(zone):]
	m := z.reply(req)
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		m.Rcode = dns.RcodeRefused
		m.Authoritative = false
		return m
	}
	if !z.synced() {
		m.Rcode = dns.RcodeServerFailure
		m.Ns = []dns.RR{z.soa(zoneQ)}
		return m
	}
	n := name{q: q.Name, l: lname, zone: zone, zoneQ: zoneQ}
	var err error
	m.Answer, m.Extra, err = z.answer(ctx, n, q.Qtype)
	if errors.Is(err, errNX) {
		if zone != z.cfg.Zone && z.cfg.ReverseFallthrough {
			return nil
		}
		m.Rcode = dns.RcodeNameError
		m.Answer, m.Extra = nil, nil
		m.Ns = []dns.RR{z.soa(zoneQ)}
		return m
	}
	if len(m.Answer) == 0 {
		m.Extra = nil
		m.Ns = []dns.RR{z.soa(zoneQ)}
	}
	return m
}

// name is a question name in the forms the lookups need.
type name struct {
	q     string // as asked
	l     string // lower case
	zone  string // the zone it is in, lower case
	zoneQ string // that zone as asked
}

func (n name) reverse() bool { return n.zone == reverseV4 || n.zone == reverseV6 }

// match returns the longest zone served that contains lname, or "".
func (z *Zone) match(lname string) string {
	if dns.IsSubDomain(z.cfg.Zone, lname) {
		return z.cfg.Zone
	}
	if z.cfg.Reverse {
		for _, r := range []string{reverseV4, reverseV6} {
			if dns.IsSubDomain(r, lname) {
				return r
			}
		}
	}
	return ""
}

// answer dispatches on the question type the way CoreDNS's kubernetes
// handler does: each type has its own lookup, and types without one ask
// for A records to tell NODATA from NXDOMAIN.
func (z *Zone) answer(ctx context.Context, n name, qtype uint16) (answer, extra []dns.RR, err error) {
	// CoreDNS compares the lower-cased question with the zone as the
	// question spells it: ns.dns.<zone> has its addresses, and the apex
	// its NS records, only when the question spells the zone in lower
	// case. Otherwise they are names like any other (ns.dns: NXDOMAIN;
	// apex NS: NODATA).
	lowerZone := n.zoneQ == n.zone
	isNS := lowerZone && n.l == "ns.dns."+n.zone
	switch qtype {
	case dns.TypeA, dns.TypeAAAA:
		if isNS {
			return z.nsAddrRRs(n.q, qtype), nil, nil
		}
		answer, err = z.address(ctx, n, qtype, 0)
		return answer, nil, err
	case dns.TypeTXT:
		if n.l == "dns-version."+n.zone {
			h := z.hdr(n.q, dns.TypeTXT)
			h.Ttl = versionTTL
			return []dns.RR{&dns.TXT{Hdr: h, Txt: []string{SchemaVersion}}}, nil, nil
		}
		// Other names never have TXT records: NODATA when the name has
		// records of another type, else NXDOMAIN (also for names that
		// exist without records, such as <ns>.svc.<zone>).
		es, err := z.lookup(n)
		if err == nil && len(es) == 0 {
			err = errNX
		}
		return nil, nil, err
	case dns.TypePTR:
		if n.reverse() {
			if ip, ok := addrFromReverse(n.l); ok {
				for _, t := range z.reverse(ip) {
					answer = append(answer, &dns.PTR{Hdr: z.hdr(n.q, dns.TypePTR), Ptr: t})
				}
				if len(answer) == 0 {
					return nil, nil, errNX
				}
				return answer, nil, nil
			}
		}
		_, err = z.lookup(n)
		return nil, nil, err
	case dns.TypeCNAME:
		if isNS {
			return nil, nil, nil
		}
		es, err := z.lookup(n)
		if err == nil && len(es) > 0 && es[0].cname != "" {
			answer = append(answer, &dns.CNAME{Hdr: z.hdr(n.q, dns.TypeCNAME), Target: es[0].cname})
		}
		return answer, nil, err
	case dns.TypeSRV:
		if isNS {
			return nil, nil, nil
		}
		return z.srv(n)
	case dns.TypeSOA:
		// SOA only at the apex; below it every name is NODATA, whether
		// it exists or not.
		if n.l == n.zone {
			answer = append(answer, z.soa(n.zoneQ))
		}
		return answer, nil, nil
	case dns.TypeNS:
		if lowerZone && n.l == n.zone {
			answer, extra = z.ns(n.zoneQ)
			return answer, extra, nil
		}
	}
	if isNS {
		return nil, nil, nil
	}
	_, err = z.lookup(n)
	return nil, nil, err
}

// Generation changes whenever the answers may have (see index.Generation).
func (z *Zone) Generation() uint64 {
	g := z.idx.Generation() << 1
	if z.synced() {
		g |= 1
	}
	return g
}

func (z *Zone) reply(req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	// Authoritative, and like CoreDNS's kubernetes plugin without RA: the
	// zone is answered here, not recursed for.
	m.Authoritative = true
	return m
}

func (z *Zone) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: z.cfg.TTL}
}

// soa is CoreDNS's synthesized SOA: ns.dns.<zone> hostmaster.<zone> <serial>
// 7200 1800 86400 <ttl>, its own TTL capped at 300 s.
func (z *Zone) soa(zoneQ string) dns.RR {
	h := z.hdr(zoneQ, dns.TypeSOA)
	h.Ttl = min(z.cfg.TTL, 300)
	return &dns.SOA{
		Hdr: h, Ns: "ns.dns." + zoneQ, Mbox: hostmaster + zoneQ,
		Serial: z.idx.Serial(), Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: z.cfg.TTL,
	}
}

func (z *Zone) addrRR(name string, a netip.Addr, qtype uint16) dns.RR {
	switch {
	case qtype == dns.TypeA && a.Is4():
		return &dns.A{Hdr: z.hdr(name, dns.TypeA), A: a.AsSlice()}
	case qtype == dns.TypeAAAA && a.Is6():
		return &dns.AAAA{Hdr: z.hdr(name, dns.TypeAAAA), AAAA: a.AsSlice()}
	}
	return nil
}

// nsRecord is one name server: its name and address.
type nsRecord struct {
	name string
	addr netip.Addr
}

// nsAddrs finds the name servers the way CoreDNS's kubernetes plugin does:
// for every Service with a ready endpoint at one of LocalIPs, its cluster
// IPs under the Service name (or, headless, every endpoint of that slice
// under its endpoint name); if there is none, LocalIPs under ns.dns.<zone>.
func (z *Zone) nsAddrs(zoneQ string) []nsRecord {
	var out []nsRecord
	found := false
	for _, ip := range z.cfg.LocalIPs {
		for _, sl := range z.idx.SlicesByIP(ip) {
			found = true
			s := z.idx.Service(sl.Namespace, sl.Service)
			if s == nil {
				continue
			}
			fq := s.Name + "." + s.Namespace + ".svc." + zoneQ
			if s.Headless {
				for _, ep := range sl.Endpoints {
					out = append(out, nsRecord{endpointName(ep) + "." + fq, ep.Addr})
				}
				continue
			}
			for _, a := range s.ClusterIPs {
				out = append(out, nsRecord{fq, a})
			}
		}
	}
	if !found {
		for _, ip := range z.cfg.LocalIPs {
			out = append(out, nsRecord{"ns.dns." + zoneQ, ip})
		}
	}
	return out
}

// nsAddrRRs answers A/AAAA for ns.dns.<zone>.
func (z *Zone) nsAddrRRs(qname string, qtype uint16) []dns.RR {
	var out []dns.RR
	for _, r := range z.nsAddrs(qname[len("ns.dns."):]) {
		if rr := z.addrRR(qname, r.addr, qtype); rr != nil {
			out = append(out, rr)
		}
	}
	return out
}

// ns answers NS at a zone apex: one NS record per name server name, every
// address in the additional section.
func (z *Zone) ns(zoneQ string) (answer, extra []dns.RR) {
	seen := map[string]bool{}
	for _, r := range z.nsAddrs(zoneQ) {
		t := dns.TypeA
		if r.addr.Is6() {
			t = dns.TypeAAAA
		}
		extra = append(extra, z.addrRR(r.name, r.addr, t))
		if !seen[r.name] {
			seen[r.name] = true
			answer = append(answer, &dns.NS{Hdr: z.hdr(zoneQ, dns.TypeNS), Ns: r.name})
		}
	}
	return answer, extra
}

// entry is one thing a name resolves to: an address (with the port it came
// from, for SRV) or the CNAME target of an ExternalName Service.
type entry struct {
	addr  netip.Addr
	cname string
	port  int32
	// owner is the canonical name of the record (the SRV target): the
	// Service name, or the endpoint name for endpoint records.
	owner string
}

// lookup parses a lower-case name of the forward zone and returns what it
// resolves to. It returns errNX when the name does not exist and (nil, nil)
// when it exists without address records (the apex, svc., <ns>.svc.).
func (z *Zone) lookup(n name) ([]entry, error) {
	zoneQ := n.zoneQ
	base := strings.TrimSuffix(strings.TrimSuffix(n.l, n.zone), ".")
	if base == "" || base == "svc" || base == "pod" {
		return nil, nil
	}
	segs := dns.SplitDomainName(base)
	last := len(segs) - 1
	kind := segs[last]
	if kind != "svc" && kind != "pod" {
		return nil, errNX
	}
	if n.reverse() {
		// <...>.svc.in-addr.arpa. parses, but nothing lives there.
		return nil, errNX
	}
	last--
	ns := segs[last]
	last--
	var svcName, endpoint, port, proto string
	if last >= 0 {
		svcName = segs[last]
		last--
	}
	switch last {
	case -1:
	case 0:
		endpoint = segs[0]
	case 1:
		port, proto = strings.TrimPrefix(segs[0], "_"), strings.TrimPrefix(segs[1], "_")
	default:
		return nil, errNX
	}
	if !z.idx.NamespaceExists(ns) {
		return nil, errNX
	}
	if kind == "pod" {
		return z.pod(ns, svcName, zoneQ)
	}
	if svcName == "" {
		return nil, nil
	}
	svc := z.idx.Service(ns, svcName)
	if svc == nil {
		return nil, errNX
	}
	svcFQDN := svc.Name + "." + svc.Namespace + ".svc." + zoneQ
	if svc.ExternalName != "" {
		// No endpoints, and no ports to name in SRV form.
		if endpoint != "" || port != "" || proto != "" {
			return nil, errNX
		}
		if _, err := netip.ParseAddr(svc.ExternalName); err == nil {
			// An IP is not a valid CNAME target: the Service has no records.
			return nil, errNX
		}
		return []entry{{cname: dns.Fqdn(svc.ExternalName), port: index.NoPort, owner: svcFQDN}}, nil
	}

	var out []entry
	found := false
	if svc.Headless || endpoint != "" {
		for _, sl := range z.idx.Slices(ns, svcName) {
			for _, ep := range sl.Endpoints {
				host := endpointName(ep)
				if endpoint != "" && !strings.EqualFold(endpoint, host) {
					continue
				}
				for _, p := range sl.Ports {
					if !matchPort(port, proto, p) {
						continue
					}
					found = true
					out = append(out, entry{addr: ep.Addr, port: p.Port, owner: host + "." + svcFQDN})
				}
			}
		}
	} else {
		for _, p := range svc.Ports {
			if !matchPort(port, proto, p) {
				continue
			}
			found = true
			for _, ip := range svc.ClusterIPs {
				out = append(out, entry{addr: ip, port: p.Port, owner: svcFQDN})
			}
		}
	}
	if !found {
		return nil, errNX
	}
	return out, nil
}

// endpointName is an endpoint's DNS label: its hostname, else its IP with
// dots (or colons) replaced by dashes.
func endpointName(ep index.Endpoint) string {
	if ep.Hostname != "" {
		return ep.Hostname
	}
	s := ep.Addr.String()
	if ep.Addr.Is4() {
		return strings.ReplaceAll(s, ".", "-")
	}
	s = strings.ReplaceAll(s, ":", "-")
	if strings.HasSuffix(s, "-") {
		s += "0" // a label cannot end in a dash: fd00:: is fd00--0
	}
	return s
}

// matchPort matches a port name and protocol from an SRV-style name; empty
// means any.
func matchPort(port, proto string, p index.Port) bool {
	return (port == "" || strings.EqualFold(port, p.Name)) && (proto == "" || strings.EqualFold(proto, p.Protocol))
}

func (z *Zone) pod(ns, label, zoneQ string) ([]entry, error) {
	if z.cfg.Pods == PodsDisabled {
		return nil, errNX
	}
	if label == "" {
		return nil, nil
	}
	var s string
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		s = strings.ReplaceAll(label, "-", ".")
	} else {
		s = strings.ReplaceAll(label, "-", ":")
	}
	// Verified: a pod in the namespace must have the address spelled
	// exactly so (CoreDNS compares the text: fd00-0-0-0-0-0-0-5 is not
	// the pod fd00::5).
	if z.cfg.Pods == PodsVerified && !z.idx.PodExists(ns, s) {
		return nil, errNX
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return nil, errNX
	}
	ip = ip.Unmap()
	// Port 0: an SRV question for a pod name answers port 0, as CoreDNS.
	return []entry{{addr: ip, port: 0, owner: label + "." + ns + ".pod." + zoneQ}}, nil
}

// address answers an A or AAAA question for name (in the question's case),
// following ExternalName CNAMEs.
func (z *Zone) address(ctx context.Context, n name, qtype uint16, depth int) ([]dns.RR, error) {
	lname, qname := n.l, n.q
	es, err := z.lookup(n)
	if err != nil {
		return nil, err
	}
	var out []dns.RR
	// An address appears once per port: answer it once. Small answers scan
	// a slice; big headless ones use a set.
	var seen []netip.Addr
	var seenSet map[netip.Addr]bool
	if len(es) > 16 {
		seenSet = make(map[netip.Addr]bool, len(es))
	}
	for _, e := range es {
		if e.cname == "" {
			if seenSet != nil && seenSet[e.addr] || seenSet == nil && slices.Contains(seen, e.addr) {
				continue
			}
			if rr := z.addrRR(qname, e.addr, qtype); rr != nil {
				if seenSet != nil {
					seenSet[e.addr] = true
				} else {
					seen = append(seen, e.addr)
				}
				out = append(out, rr)
			}
			continue
		}
		target := e.cname
		ltarget := strings.ToLower(target)
		if dns.IsSubDomain(lname, ltarget) || depth > maxCNAMEChain {
			continue // a loop, or too long a chain
		}
		cname := &dns.CNAME{Hdr: z.hdr(qname, dns.TypeCNAME), Target: target}
		if dns.IsSubDomain(n.zone, ltarget) {
			tn := name{q: target, l: ltarget, zone: n.zone, zoneQ: n.zoneQ}
			next, err := z.address(ctx, tn, qtype, depth+1)
			if err == nil && len(next) > 0 {
				out = append(out, cname)
				out = append(out, next...)
			}
			continue
		}
		if z.up == nil {
			continue
		}
		r, err := z.up.Lookup(ctx, target, qtype)
		if err != nil {
			continue
		}
		out = append(out, cname)
		out = append(out, r.Answer...)
	}
	return out, nil
}

// srv answers an SRV question: CoreDNS weights every record 100/n (n counting
// every matching port and address, floored, at least 1), priority 0.
func (z *Zone) srv(n name) (answer, extra []dns.RR, err error) {
	qname := n.q
	es, err := z.lookup(n)
	if err != nil {
		return nil, nil, err
	}
	es = slices.DeleteFunc(es, func(e entry) bool { return e.cname != "" })
	if len(es) == 0 {
		return nil, nil, nil
	}
	weight := uint16(100 / len(es))
	if weight == 0 {
		weight = 1
	}
	seenSRV := map[string]bool{}
	seenAddr := map[string]bool{}
	for _, e := range es {
		if e.port == index.NoPort {
			continue
		}
		k := strings.ToLower(e.owner) + "/" + strconv.Itoa(int(e.port))
		if !seenSRV[k] {
			seenSRV[k] = true
			answer = append(answer, &dns.SRV{Hdr: z.hdr(qname, dns.TypeSRV), Priority: 0, Weight: weight, Port: uint16(e.port), Target: e.owner})
		}
		ak := strings.ToLower(e.owner) + "/" + e.addr.String()
		if !seenAddr[ak] {
			seenAddr[ak] = true
			t := dns.TypeA
			if e.addr.Is6() {
				t = dns.TypeAAAA
			}
			extra = append(extra, z.addrRR(e.owner, e.addr, t))
		}
	}
	return answer, extra, nil
}

// reverse returns the PTR targets for a lower-case reverse name: the
// Service owning the cluster IP, else every endpoint name with that IP.
func (z *Zone) reverse(ip netip.Addr) []string {
	if svcs := z.idx.ServicesByIP(ip); len(svcs) > 0 {
		slices.SortFunc(svcs, func(a, b *index.Service) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		s := svcs[0]
		return []string{s.Name + "." + s.Namespace + ".svc." + z.cfg.Zone}
	}
	var out []string
	for _, sl := range z.idx.SlicesByIP(ip) {
		for _, ep := range sl.Endpoints {
			if ep.Addr == ip {
				t := endpointName(ep) + "." + sl.Service + "." + sl.Namespace + ".svc." + z.cfg.Zone
				if !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// addrFromReverse parses d.c.b.a.in-addr.arpa. and the 32-nibble ip6.arpa.
// form; partial names are not addresses.
func addrFromReverse(lname string) (netip.Addr, bool) {
	if base, ok := strings.CutSuffix(lname, "."+reverseV4); ok {
		l := strings.Split(base, ".")
		if len(l) != 4 {
			return netip.Addr{}, false
		}
		slices.Reverse(l)
		a, err := netip.ParseAddr(strings.Join(l, "."))
		return a, err == nil && a.Is4()
	}
	if base, ok := strings.CutSuffix(lname, "."+reverseV6); ok {
		l := strings.Split(base, ".")
		// As CoreDNS: the 32 labels next to ip6.arpa. make the address;
		// up to three labels more on the left are ignored (CoreDNS groups
		// the labels by four and drops an incomplete group).
		if len(l) < 32 || len(l) > 35 {
			return netip.Addr{}, false
		}
		l = l[len(l)-32:]
		var b [16]byte
		for i, n := range l {
			if len(n) != 1 {
				return netip.Addr{}, false
			}
			v, err := strconv.ParseUint(n, 16, 8)
			if err != nil {
				return netip.Addr{}, false
			}
			pos := 31 - i // nibble position from the most significant
			if pos%2 == 0 {
				b[pos/2] |= byte(v) << 4
			} else {
				b[pos/2] |= byte(v)
			}
		}
		return netip.AddrFrom16(b).Unmap(), true
	}
	return netip.Addr{}, false
}
