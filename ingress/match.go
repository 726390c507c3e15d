package ingress

import (
	"net"
	"regexp"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// pathKind is how a location matches a request path.
type pathKind uint8

const (
	// kindExact: the request path equals the location's path (pathType Exact).
	kindExact pathKind = iota
	// kindPrefix: element-wise prefix by '/'-separated elements (pathType
	// Prefix, and ImplementationSpecific, which svcnet treats as Prefix).
	kindPrefix
	// kindRegex: an anchored, case-insensitive regular expression (paths of
	// an Ingress with use-regex or rewrite-target, as ingress-nginx turns
	// them into `location ~* "^PATH"`).
	kindRegex
)

func (k pathKind) String() string {
	switch k {
	case kindExact:
		return "Exact"
	case kindPrefix:
		return "Prefix"
	default:
		return "Regex"
	}
}

// kindOf maps an Ingress path type to a match kind. A nil pathType is
// invalid in networking.k8s.io/v1 (the API server rejects it); it is taken as
// ImplementationSpecific.
func kindOf(pt *networkingv1.PathType, regex bool) pathKind {
	if pt != nil && *pt == networkingv1.PathTypeExact {
		return kindExact
	}
	if regex {
		return kindRegex
	}
	return kindPrefix
}

// normalizePrefix is a Prefix path as compared: without trailing slashes
// (the Ingress spec ignores them: /foo/ matches /foo), "/" for the root, and
// "/" prepended when missing.
func normalizePrefix(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	p = strings.TrimRight(p, "/")
	if p == "" {
		return "/"
	}
	return p
}

// prefixMatch reports whether request path req matches Prefix path p (already
// normalized): element by element, so /foo matches /foo, /foo/ and /foo/bar
// but not /foobar.
func prefixMatch(p, req string) bool {
	if p == "/" {
		return true
	}
	if !strings.HasPrefix(req, p) {
		return false
	}
	return len(req) == len(p) || req[len(p)] == '/'
}

// compileRegexPath turns an Ingress path of a regex Ingress into the anchored,
// case-insensitive expression ingress-nginx would give nginx
// (`location ~* "^PATH"`), in Go's RE2 syntax.
func compileRegexPath(p string) (*regexp.Regexp, error) {
	return regexp.Compile("(?i)^(?:" + p + ")")
}

// cleanPath is the request path the locations are matched against, as nginx
// normalizes $uri: decoded (the caller passes URL.Path), runs of slashes
// merged, "." and ".." elements resolved (never above the root), a trailing
// slash kept. The request is still sent upstream with its original URI unless
// a rewrite applies.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	if !needsClean(p) {
		return p
	}
	trailing := strings.HasSuffix(p, "/")
	out := make([]string, 0, strings.Count(p, "/"))
	for _, el := range strings.Split(p, "/") {
		switch el {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, el)
		}
	}
	s := "/" + strings.Join(out, "/")
	if trailing && s != "/" {
		s += "/"
	}
	return s
}

// needsClean reports whether p has "//", "/./" or "/../" elements (or ends in
// "/." or "/..").
func needsClean(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		rest := p[i+1:]
		switch {
		case strings.HasPrefix(rest, "/"):
			return true
		case rest == "." || strings.HasPrefix(rest, "./"):
			return true
		case rest == ".." || strings.HasPrefix(rest, "../"):
			return true
		}
	}
	return false
}

// normalizeHost is the Host header as matched against rules: without its
// port, lower case, without a trailing dot, and without the brackets of an
// IPv6 literal.
func normalizeHost(h string) string {
	if h == "" {
		return ""
	}
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	h = strings.TrimSuffix(h, ".")
	return strings.ToLower(h)
}

// wildcardSuffix is the part of a request host a wildcard rule "*.SUFFIX"
// must equal for the host to match: the host without its first label. A
// wildcard covers exactly one label, so "foo.com" (no label left of a dot)
// has none and "a.b.foo.com" has "b.foo.com", which "*.foo.com" does not
// match.
func wildcardSuffix(host string) (string, bool) {
	i := strings.IndexByte(host, '.')
	if i <= 0 || i == len(host)-1 {
		return "", false
	}
	return host[i+1:], true
}
