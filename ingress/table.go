package ingress

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Table is one immutable routing table, built from the served Ingresses,
// their Services and EndpointSlices on every change and swapped in
// atomically: a request is routed entirely by the table it started with.
type Table struct {
	exact    map[string]*server // by lower-case host
	wildcard map[string]*server // "*.foo.com" by "foo.com"
	catchAll *server            // rules without host
	// defaultRoute answers what no server answers: the
	// --default-backend-service, else the built-in 404.
	defaultRoute *route
	// Served are the Ingresses the table serves, oldest first.
	Served []*networkingv1.Ingress
	// Problems are what the build could not serve as asked (events and
	// logs), in Ingress order.
	Problems []Problem
	// referenced are the Services ("namespace/name") the table reads, so
	// that changes of other Services do not cause rebuilds.
	referenced map[string]bool
	upstreams  map[string]*upstream
	// tls is the TLS of the hosts of spec.tls (wildcards as "*.foo.com"),
	// by lower-case host; secrets are the Secrets ("namespace/name") it
	// reads, so that changes of other Secrets do not cause rebuilds.
	tls     map[string]*tlsHost
	secrets map[string]bool
}

// server is the locations of one host (or of the rules without host).
type server struct {
	host      string
	locations []*location // in precedence order: the first match wins
	// fallback answers requests for this host that no path matches: the
	// spec.defaultBackend of the oldest Ingress with rules for this host
	// that has one; nil means the table's default.
	fallback *route
}

// location is one path of one Ingress rule.
type location struct {
	path  string // Prefix: normalized; Exact and Regex: as written
	kind  pathKind
	re    *regexp.Regexp // kindRegex
	order int            // age rank of its Ingress (0 = oldest)
	route *route
}

func (l *location) matches(p string) bool {
	switch l.kind {
	case kindExact:
		return p == l.path
	case kindPrefix:
		return prefixMatch(l.path, p)
	default:
		return l.re.MatchString(p)
	}
}

// route is what a matched location (or fallback) does with a request.
type route struct {
	// ingress is the Ingress the route comes from (zero for the built-in
	// default backend and --default-backend-service).
	ingress types.NamespacedName
	// service is the backend Service's name ("" when none), for metrics.
	service string
	// upstream is nil when the route answers status itself: 404 for the
	// built-in default backend, 503 for a backend svcnet cannot serve.
	upstream *upstream
	status   int

	affinity      *Affinity
	cookiePath    string
	rewrite       *regexp.Regexp // the location's expression; nil: no rewrite
	rewriteTarget string
	upstreamVhost string
	// sslRedirect and forceSSLRedirect are the Ingress's ssl-redirect and
	// force-ssl-redirect.
	sslRedirect, forceSSLRedirect bool
}

// upstream is the ready endpoints of one Service port.
type upstream struct {
	key       string // namespace/name:port
	endpoints []*endpoint
	byHash    map[uint64]*endpoint
	// rr is the round-robin position, kept across tables while the
	// upstream exists, so that frequent rebuilds do not skew towards the
	// first endpoint.
	rr *atomic.Uint64
}

// endpoint is one backend address.
type endpoint struct {
	addr string // host:port
	hash uint64 // identity in affinity cookies (opaque)
}

// Problem is something in an Ingress that svcnet does not serve as asked:
// logged once, and recorded as an Event on the Ingress by the leader.
type Problem struct {
	Ingress *networkingv1.Ingress
	Reason  string
	Message string
}

func (p Problem) key() string {
	return string(p.Ingress.UID) + "/" + strconv.FormatInt(p.Ingress.Generation, 10) + "/" + p.Reason + "/" + p.Message
}

// Problem reasons.
const (
	ReasonServiceNotFound     = "ServiceNotFound"
	ReasonPortNotFound        = "ServicePortNotFound"
	ReasonResourceBackend     = "ResourceBackendNotSupported"
	ReasonBackendProtocol     = "BackendProtocolNotSupported"
	ReasonInvalidPath         = "InvalidPath"
	ReasonPathConflict        = "PathConflict"
	ReasonInvalidAnnotation   = "InvalidAnnotation"
	ReasonInvalidBackend      = "InvalidBackend"
	defaultBackendBody        = "default backend - 404\n"
	serviceUnavailableMessage = "503 Service Temporarily Unavailable\n"
)

// BuildInput is what a table is built from.
type BuildInput struct {
	// Ingresses are the served Ingresses, in any order.
	Ingresses []*networkingv1.Ingress
	// Service looks a Service up (nil when it does not exist).
	Service func(namespace, name string) *corev1.Service
	// Slices lists the EndpointSlices of a Service.
	Slices            func(namespace, name string) []*discoveryv1.EndpointSlice
	AnnotationsPrefix string
	// DefaultBackend is --default-backend-service (nil: the built-in 404).
	DefaultBackend *types.NamespacedName
	// Prev is the table being replaced (nil for the first); its round-robin
	// positions carry over.
	Prev *Table
	// Certificate returns the key pair of a TLS Secret (an error when the
	// Secret does not exist or holds none); nil serves no TLS.
	Certificate func(namespace, name string) (*Certificate, error)
}

// Build makes a routing table. It is a pure function of its input.
func Build(in BuildInput) *Table {
	b := &builder{in: in, t: &Table{
		exact:      map[string]*server{},
		wildcard:   map[string]*server{},
		catchAll:   &server{},
		referenced: map[string]bool{},
		upstreams:  map[string]*upstream{},
		tls:        map[string]*tlsHost{},
		secrets:    map[string]bool{},
	}, seen: map[string]bool{}}
	return b.build()
}

type builder struct {
	in   BuildInput
	t    *Table
	seen map[string]bool // problems already listed
}

func (b *builder) build() *Table {
	t := b.t
	ings := slices.Clone(b.in.Ingresses)
	slices.SortStableFunc(ings, compareAge)
	t.Served = ings
	t.defaultRoute = b.defaultRoute()

	type locKey struct {
		kind pathKind
		path string
	}
	owners := map[*server]map[locKey]*networkingv1.Ingress{}
	for order, ing := range ings {
		ann, warns := ParseAnnotations(b.in.AnnotationsPrefix, ing.Annotations)
		for _, w := range warns {
			b.problem(ing, ReasonInvalidAnnotation, w)
		}
		if !ann.BackendProtocolSupported() {
			b.problem(ing, ReasonBackendProtocol, fmt.Sprintf("backend-protocol %q is not supported (HTTP only); its backends answer 503", ann.BackendProtocol))
		}
		var defRoute *route
		if ing.Spec.DefaultBackend != nil {
			defRoute = b.backendRoute(ing, &ann, ing.Spec.DefaultBackend, nil, "/")
		}
		catchAllDefault := len(ing.Spec.Rules) == 0
		for _, rule := range ing.Spec.Rules {
			host := strings.ToLower(strings.TrimSuffix(rule.Host, "."))
			srv := b.server(host)
			if host == "" {
				catchAllDefault = true
			} else if srv.fallback == nil && defRoute != nil {
				srv.fallback = defRoute
			}
			if rule.HTTP == nil {
				continue
			}
			if owners[srv] == nil {
				owners[srv] = map[locKey]*networkingv1.Ingress{}
			}
			for _, p := range rule.HTTP.Paths {
				kind := kindOf(p.PathType, ann.UseRegex)
				loc := &location{kind: kind, order: order, path: p.Path}
				switch kind {
				case kindPrefix:
					loc.path = normalizePrefix(p.Path)
				case kindExact:
					if loc.path == "" {
						loc.path = "/"
					}
					if ann.RewriteTarget != "" {
						// Matched exactly, rewritten with the path as
						// expression (ingress-nginx: location = PATH
						// with rewrite "(?i)PATH" TARGET).
						loc.re, _ = compileRegexPath(loc.path)
					}
				case kindRegex:
					if loc.path == "" {
						loc.path = "/"
					}
					re, err := compileRegexPath(loc.path)
					if err != nil {
						b.problem(ing, ReasonInvalidPath, fmt.Sprintf("path %q is not a valid regular expression (Go RE2 syntax): %v; the path is not served", p.Path, err))
						continue
					}
					loc.re = re
				}
				k := locKey{kind, loc.path}
				if prev, dup := owners[srv][k]; dup {
					if prev.UID != ing.UID {
						b.problem(ing, ReasonPathConflict, fmt.Sprintf("path %q (%s) of host %q is also defined by the older Ingress %s/%s, which serves it",
							p.Path, kind, displayHost(host), prev.Namespace, prev.Name))
					}
					continue
				}
				owners[srv][k] = ing
				cookiePath := loc.path
				if kind == kindRegex {
					cookiePath = "/"
				}
				bk := p.Backend
				loc.route = b.backendRoute(ing, &ann, &bk, loc, cookiePath)
				srv.locations = append(srv.locations, loc)
			}
		}
		if catchAllDefault && t.catchAll.fallback == nil && defRoute != nil {
			t.catchAll.fallback = defRoute
		}
	}
	for _, s := range t.allServers() {
		slices.SortStableFunc(s.locations, comparePrecedence)
	}
	b.buildTLS(ings)
	return t
}

// comparePrecedence orders locations as the Ingress spec ranks matches: the
// longest path first; at equal length Exact before Prefix (and regular
// expressions last); then the older Ingress.
func comparePrecedence(a, b *location) int {
	if c := cmp.Compare(len(b.path), len(a.path)); c != 0 {
		return c
	}
	if c := cmp.Compare(a.kind, b.kind); c != 0 {
		return c
	}
	return cmp.Compare(a.order, b.order)
}

// compareAge orders Ingresses oldest first (creationTimestamp, then
// namespace and name), which decides conflicts deterministically.
func compareAge(a, b *networkingv1.Ingress) int {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

func displayHost(h string) string {
	if h == "" {
		return "*"
	}
	return h
}

func (t *Table) allServers() []*server {
	out := []*server{t.catchAll}
	for _, s := range t.exact {
		out = append(out, s)
	}
	for _, s := range t.wildcard {
		out = append(out, s)
	}
	return out
}

// server returns (creating) the server of a rule's host.
func (b *builder) server(host string) *server {
	switch {
	case host == "":
		return b.t.catchAll
	case strings.HasPrefix(host, "*."):
		suffix := host[2:]
		s := b.t.wildcard[suffix]
		if s == nil {
			s = &server{host: host}
			b.t.wildcard[suffix] = s
		}
		return s
	default:
		s := b.t.exact[host]
		if s == nil {
			s = &server{host: host}
			b.t.exact[host] = s
		}
		return s
	}
}

func (b *builder) problem(ing *networkingv1.Ingress, reason, msg string) {
	p := Problem{Ingress: ing, Reason: reason, Message: msg}
	if k := p.key(); !b.seen[k] {
		b.seen[k] = true
		b.t.Problems = append(b.t.Problems, p)
	}
}

// defaultRoute is the --default-backend-service (its first port), or the
// built-in 404 when it is not set, does not exist or has no ready
// endpoints (as ingress-nginx falls back to its own default server).
func (b *builder) defaultRoute() *route {
	r404 := &route{status: http.StatusNotFound}
	d := b.in.DefaultBackend
	if d == nil {
		return r404
	}
	b.t.referenced[d.String()] = true
	svc := b.in.Service(d.Namespace, d.Name)
	if svc == nil || len(svc.Spec.Ports) == 0 {
		return r404
	}
	up := b.upstream(svc, &svc.Spec.Ports[0])
	if len(up.endpoints) == 0 {
		return r404
	}
	return &route{service: d.Name, upstream: up}
}

// backendRoute resolves an Ingress backend to a route. A backend svcnet
// cannot serve (a resource backend, a missing Service or port) answers 503.
func (b *builder) backendRoute(ing *networkingv1.Ingress, ann *Annotations, be *networkingv1.IngressBackend, loc *location, cookiePath string) *route {
	r := &route{ingress: types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}, status: http.StatusServiceUnavailable,
		affinity: ann.Affinity, cookiePath: cookiePath, upstreamVhost: ann.UpstreamVhost,
		sslRedirect: ann.SSLRedirect, forceSSLRedirect: ann.ForceSSLRedirect}
	if ann.Affinity != nil && ann.Affinity.Path != "" {
		r.cookiePath = ann.Affinity.Path
	}
	if loc != nil && loc.re != nil && ann.RewriteTarget != "" && ann.RewriteTarget != loc.path {
		r.rewrite, r.rewriteTarget = loc.re, ann.RewriteTarget
	}
	switch {
	case be.Resource != nil:
		b.problem(ing, ReasonResourceBackend, fmt.Sprintf("resource backend %s %q is not supported; requests for it answer 503",
			be.Resource.Kind, be.Resource.Name))
		return r
	case be.Service == nil:
		b.problem(ing, ReasonInvalidBackend, "backend names neither a service nor a resource; requests for it answer 503")
		return r
	}
	r.service = be.Service.Name
	b.t.referenced[ing.Namespace+"/"+be.Service.Name] = true
	if !ann.BackendProtocolSupported() {
		return r
	}
	svc := b.in.Service(ing.Namespace, be.Service.Name)
	if svc == nil {
		b.problem(ing, ReasonServiceNotFound, fmt.Sprintf("service %s/%s not found; requests for it answer 503", ing.Namespace, be.Service.Name))
		return r
	}
	sp := findServicePort(svc, be.Service.Port)
	if sp == nil {
		if svc.Spec.Type == corev1.ServiceTypeExternalName && be.Service.Port.Number > 0 {
			sp = &corev1.ServicePort{Port: be.Service.Port.Number}
		} else {
			b.problem(ing, ReasonPortNotFound, fmt.Sprintf("service %s/%s has no port %s; requests for it answer 503",
				ing.Namespace, be.Service.Name, portString(be.Service.Port)))
			return r
		}
	}
	r.upstream = b.upstream(svc, sp)
	return r
}

func portString(p networkingv1.ServiceBackendPort) string {
	if p.Name != "" {
		return strconv.Quote(p.Name)
	}
	return strconv.Itoa(int(p.Number))
}

// findServicePort finds the Service port an Ingress backend names, by number
// or by name.
func findServicePort(svc *corev1.Service, p networkingv1.ServiceBackendPort) *corev1.ServicePort {
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		if p.Name != "" && sp.Name == p.Name || p.Name == "" && sp.Port == p.Number {
			return sp
		}
	}
	return nil
}

// upstream returns (building once per table) the endpoints of a Service
// port: for an ExternalName Service its external name at the port, else
// the ready endpoints of its EndpointSlices at the slice port named as the
// Service port.
func (b *builder) upstream(svc *corev1.Service, sp *corev1.ServicePort) *upstream {
	key := svc.Namespace + "/" + svc.Name + ":" + strconv.Itoa(int(sp.Port))
	if up := b.t.upstreams[key]; up != nil {
		return up
	}
	up := &upstream{key: key, byHash: map[uint64]*endpoint{}}
	if b.in.Prev != nil {
		if old := b.in.Prev.upstreams[key]; old != nil {
			up.rr = old.rr
		}
	}
	if up.rr == nil {
		up.rr = new(atomic.Uint64)
	}
	add := func(addr string) {
		h := endpointHash(addr)
		if _, dup := up.byHash[h]; dup {
			return
		}
		ep := &endpoint{addr: addr, hash: h}
		up.byHash[h] = ep
		up.endpoints = append(up.endpoints, ep)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if name := strings.TrimSuffix(svc.Spec.ExternalName, "."); name != "" {
			add(net.JoinHostPort(name, strconv.Itoa(int(sp.Port))))
		}
	} else {
		for _, sl := range b.in.Slices(svc.Namespace, svc.Name) {
			if sl.AddressType == discoveryv1.AddressTypeFQDN {
				continue
			}
			port := int32(-1)
			for _, p := range sl.Ports {
				name := ""
				if p.Name != nil {
					name = *p.Name
				}
				if name == sp.Name && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) && p.Port != nil {
					port = *p.Port
					break
				}
			}
			if port < 0 {
				continue
			}
			for _, ep := range sl.Endpoints {
				if len(ep.Addresses) == 0 || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
					continue
				}
				add(net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port))))
			}
		}
	}
	slices.SortFunc(up.endpoints, func(a, b *endpoint) int { return cmp.Compare(a.addr, b.addr) })
	b.t.upstreams[key] = up
	return up
}

// endpointHash is an endpoint's identity in affinity cookies: a 64-bit hash
// of its address, so that the cookie does not show the pod's address in
// clear (it is not a secret: a guess of the address can be checked).
func endpointHash(addr string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("svcnet-ingress\x00"))
	_, _ = h.Write([]byte(addr))
	return mix64(h.Sum64())
}

// mix64 is splitmix64's finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Match is the result of routing one request.
type Match struct {
	route *route
	loc   *location // nil for a fallback
}

// Ingress is the Ingress the request was routed by (zero for the default
// backend).
func (m Match) Ingress() types.NamespacedName { return m.route.ingress }

// Service is the backend Service's name ("" for the built-in default
// backend and resource backends).
func (m Match) Service() string { return m.route.service }

// Path is the Ingress path that matched ("" for a fallback).
func (m Match) Path() string {
	if m.loc == nil {
		return ""
	}
	return m.loc.path
}

// Route finds the route of a request: host is the Host header, path the
// decoded URL path. An exact host rule wins over a wildcard one, which wins
// over rules without host; within the chosen host, the longest matching path
// wins (Exact before Prefix at equal length); with no path matching, the
// host's default backend answers.
func (t *Table) Route(host, path string) Match {
	h := normalizeHost(host)
	p := cleanPath(path)
	s := t.exact[h]
	if s == nil {
		if suffix, ok := wildcardSuffix(h); ok {
			s = t.wildcard[suffix]
		}
	}
	if s == nil {
		s = t.catchAll
	}
	for _, l := range s.locations {
		if l.matches(p) {
			return Match{route: l.route, loc: l}
		}
	}
	if s.fallback != nil {
		return Match{route: s.fallback}
	}
	return Match{route: t.defaultRoute}
}

// references reports whether the table reads the Service namespace/name.
func (t *Table) references(key string) bool { return t.referenced[key] }

// readsSecret reports whether the table reads the Secret namespace/name.
func (t *Table) readsSecret(key string) bool { return t.secrets[key] }
