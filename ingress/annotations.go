package ingress

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// DefaultAnnotationsPrefix is ingress-nginx's annotation prefix, which svcnet
// reads by default so that Ingresses written for ingress-nginx work unchanged.
const DefaultAnnotationsPrefix = "nginx.ingress.kubernetes.io"

// DefaultCookieName is the session cookie's name when the Ingress names none
// (ingress-nginx's default).
const DefaultCookieName = "INGRESSCOOKIE"

// The annotation names svcnet reads, without their prefix. Every other
// annotation is ignored.
const (
	annAffinity        = "affinity"
	annAffinityMode    = "affinity-mode"
	annCookieName      = "session-cookie-name"
	annCookieExpires   = "session-cookie-expires"
	annCookieMaxAge    = "session-cookie-max-age"
	annCookiePath      = "session-cookie-path"
	annCookieDomain    = "session-cookie-domain"
	annCookieSameSite  = "session-cookie-samesite"
	annCookieSecure    = "session-cookie-secure"
	annChangeOnFailure = "session-cookie-change-on-failure"
	annRewriteTarget   = "rewrite-target"
	annUseRegex        = "use-regex"
	annUpstreamVhost   = "upstream-vhost"
	annBackendProtocol = "backend-protocol"
	annSSLRedirect     = "ssl-redirect"
	annForceSSLRedir   = "force-ssl-redirect"
)

// SupportedAnnotations lists the annotations svcnet acts on (without prefix),
// for documentation and tests.
var SupportedAnnotations = []string{
	annAffinity, annAffinityMode, annCookieName, annCookieExpires, annCookieMaxAge, annCookiePath, annCookieDomain,
	annCookieSameSite, annCookieSecure, annChangeOnFailure, annRewriteTarget, annUseRegex, annUpstreamVhost,
	annBackendProtocol, annSSLRedirect, annForceSSLRedir,
}

// AffinityMode is ingress-nginx's affinity-mode.
type AffinityMode string

const (
	// AffinityBalanced (the default) keeps a session on its endpoint while the
	// endpoints stay the same, and moves a fair share of sessions to new
	// endpoints when the Service scales up.
	AffinityBalanced AffinityMode = "balanced"
	// AffinityPersistent keeps a session on its endpoint for as long as that
	// endpoint is ready.
	AffinityPersistent AffinityMode = "persistent"
)

// Affinity is the cookie affinity of an Ingress's paths.
type Affinity struct {
	CookieName string
	// Expires, when HasExpires, is session-cookie-expires in seconds: the
	// cookie's Expires attribute is that far in the future.
	Expires    int64
	HasExpires bool
	// MaxAge, when HasMaxAge, is session-cookie-max-age (the Max-Age attribute).
	MaxAge    int64
	HasMaxAge bool
	// Path is session-cookie-path; empty means the location's path.
	Path            string
	Domain          string
	SameSite        http.SameSite
	Secure          bool
	Mode            AffinityMode
	ChangeOnFailure bool
}

// Annotations are the parsed annotations of one Ingress; they apply to every
// path of it (and to its defaultBackend).
type Annotations struct {
	// Affinity is nil unless affinity is "cookie".
	Affinity *Affinity
	// RewriteTarget replaces the request path (regex captures $1..$9 of the
	// path expression); empty means none.
	RewriteTarget string
	// UseRegex: Prefix and ImplementationSpecific paths are anchored,
	// case-insensitive regular expressions. rewrite-target implies it, as in
	// ingress-nginx.
	UseRegex bool
	// UpstreamVhost replaces the Host header sent to the backend.
	UpstreamVhost string
	// BackendProtocol is upper case; "" and "HTTP" and "AUTO_HTTP" are served.
	BackendProtocol string
	// SSLRedirect (ssl-redirect, default true): plain HTTP requests for a
	// host with TLS are redirected to HTTPS.
	SSLRedirect bool
	// ForceSSLRedirect (force-ssl-redirect, default false): plain HTTP
	// requests are redirected to HTTPS even for a host without TLS.
	ForceSSLRedirect bool
}

// BackendProtocolSupported reports whether svcnet can talk to the backends
// in the annotated protocol (plain HTTP/1.1 only).
func (a *Annotations) BackendProtocolSupported() bool {
	switch a.BackendProtocol {
	case "", "HTTP", "AUTO_HTTP":
		return true
	}
	return false
}

// ParseAnnotations reads the annotations of one Ingress under prefix (without
// the trailing slash; DefaultAnnotationsPrefix when empty). Invalid values
// are ignored as ingress-nginx ignores them (the default applies), each with
// a warning in the returned list.
func ParseAnnotations(prefix string, ann map[string]string) (Annotations, []string) {
	if prefix == "" {
		prefix = DefaultAnnotationsPrefix
	}
	prefix = strings.TrimSuffix(prefix, "/") + "/"
	a := Annotations{SSLRedirect: true}
	var warn []string
	get := func(name string) (string, bool) {
		v, ok := ann[prefix+name]
		return strings.TrimSpace(v), ok
	}
	boolean := func(name string) (bool, bool) {
		v, ok := get(name)
		if !ok {
			return false, false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			warn = append(warn, fmt.Sprintf("annotation %s%s: %q is not a boolean; ignored", prefix, name, v))
			return false, false
		}
		return b, true
	}
	seconds := func(name string) (int64, bool) {
		v, ok := get(name)
		if !ok || v == "" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 10*365*24*3600*100 {
			warn = append(warn, fmt.Sprintf("annotation %s%s: %q is not a number of seconds; ignored", prefix, name, v))
			return 0, false
		}
		return n, true
	}

	if v, ok := get(annAffinity); ok {
		switch strings.ToLower(v) {
		case "cookie":
			a.Affinity = parseAffinity(get, boolean, seconds, prefix, &warn)
		case "", "none":
		default:
			warn = append(warn, fmt.Sprintf("annotation %s%s: %q is not supported (only \"cookie\"); no affinity", prefix, annAffinity, v))
		}
	}
	if v, ok := get(annRewriteTarget); ok && v != "" {
		a.RewriteTarget = v
	}
	if b, ok := boolean(annUseRegex); ok {
		a.UseRegex = b
	}
	if a.RewriteTarget != "" {
		a.UseRegex = true
	}
	if v, ok := get(annUpstreamVhost); ok && v != "" {
		if strings.ContainsAny(v, " \t\r\n/") {
			warn = append(warn, fmt.Sprintf("annotation %s%s: %q is not a host name; ignored", prefix, annUpstreamVhost, v))
		} else {
			a.UpstreamVhost = v
		}
	}
	if v, ok := get(annBackendProtocol); ok {
		a.BackendProtocol = strings.ToUpper(v)
	}
	if b, ok := boolean(annSSLRedirect); ok {
		a.SSLRedirect = b
	}
	if b, ok := boolean(annForceSSLRedir); ok {
		a.ForceSSLRedirect = b
	}
	return a, warn
}

func parseAffinity(get func(string) (string, bool), boolean func(string) (bool, bool), seconds func(string) (int64, bool),
	prefix string, warn *[]string) *Affinity {
	af := &Affinity{CookieName: DefaultCookieName, Mode: AffinityBalanced}
	if v, ok := get(annCookieName); ok && v != "" {
		if validCookieName(v) {
			af.CookieName = v
		} else {
			*warn = append(*warn, fmt.Sprintf("annotation %s%s: %q is not a valid cookie name; using %s", prefix, annCookieName, v, DefaultCookieName))
		}
	}
	af.Expires, af.HasExpires = seconds(annCookieExpires)
	af.MaxAge, af.HasMaxAge = seconds(annCookieMaxAge)
	if v, ok := get(annCookiePath); ok && v != "" {
		if strings.HasPrefix(v, "/") && !strings.ContainsAny(v, "; \t\r\n") {
			af.Path = v
		} else {
			*warn = append(*warn, fmt.Sprintf("annotation %s%s: %q is not a cookie path; ignored", prefix, annCookiePath, v))
		}
	}
	if v, ok := get(annCookieDomain); ok && v != "" {
		if !strings.ContainsAny(v, "; \t\r\n") {
			af.Domain = v
		} else {
			*warn = append(*warn, fmt.Sprintf("annotation %s%s: %q is not a cookie domain; ignored", prefix, annCookieDomain, v))
		}
	}
	if v, ok := get(annCookieSameSite); ok && v != "" {
		switch strings.ToLower(v) {
		case "none":
			af.SameSite = http.SameSiteNoneMode
		case "lax":
			af.SameSite = http.SameSiteLaxMode
		case "strict":
			af.SameSite = http.SameSiteStrictMode
		default:
			*warn = append(*warn, fmt.Sprintf("annotation %s%s: %q is not None, Lax or Strict; ignored", prefix, annCookieSameSite, v))
		}
	}
	af.Secure, _ = boolean(annCookieSecure)
	af.ChangeOnFailure, _ = boolean(annChangeOnFailure)
	if v, ok := get(annAffinityMode); ok && v != "" {
		switch AffinityMode(strings.ToLower(v)) {
		case AffinityBalanced:
		case AffinityPersistent:
			af.Mode = AffinityPersistent
		default:
			*warn = append(*warn, fmt.Sprintf("annotation %s%s: %q is not balanced or persistent; using balanced", prefix, annAffinityMode, v))
		}
	}
	return af
}

// validCookieName reports whether n is an HTTP token (RFC 6265 cookie-name).
func validCookieName(n string) bool {
	if n == "" || len(n) > 256 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return true
}
