package ingress

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseAnnotations(t *testing.T) {
	const p = "nginx.ingress.kubernetes.io/"
	for _, tc := range []struct {
		name   string
		prefix string
		ann    map[string]string
		want   Annotations
		warns  int
		sslOff bool
	}{
		{name: "none", ann: nil, want: Annotations{}},
		{name: "unknown annotations are ignored", ann: map[string]string{p + "proxy-body-size": "8m", "other/x": "y"}, want: Annotations{}},
		{name: "the seed's example", ann: map[string]string{
			p + "affinity": "cookie", p + "session-cookie-name": "INGRESSCOOKIE", p + "session-cookie-expires": "172800",
		}, want: Annotations{Affinity: &Affinity{CookieName: "INGRESSCOOKIE", Expires: 172800, HasExpires: true, Mode: AffinityBalanced}}},
		{name: "affinity defaults", ann: map[string]string{p + "affinity": "cookie"},
			want: Annotations{Affinity: &Affinity{CookieName: DefaultCookieName, Mode: AffinityBalanced}}},
		{name: "every cookie option", ann: map[string]string{
			p + "affinity": "Cookie", p + "affinity-mode": "persistent", p + "session-cookie-name": "route",
			p + "session-cookie-max-age": "3600", p + "session-cookie-path": "/app", p + "session-cookie-domain": ".example.com",
			p + "session-cookie-samesite": "strict", p + "session-cookie-secure": "true", p + "session-cookie-change-on-failure": "true",
		}, want: Annotations{Affinity: &Affinity{CookieName: "route", MaxAge: 3600, HasMaxAge: true, Path: "/app", Domain: ".example.com",
			SameSite: http.SameSiteStrictMode, Secure: true, Mode: AffinityPersistent, ChangeOnFailure: true}}},
		{name: "cookie options without affinity do nothing", ann: map[string]string{p + "session-cookie-name": "x"}, want: Annotations{}},
		{name: "invalid values fall back to defaults", ann: map[string]string{
			p + "affinity": "cookie", p + "session-cookie-name": "bad name;", p + "session-cookie-expires": "2d",
			p + "session-cookie-max-age": "-1", p + "session-cookie-samesite": "sometimes", p + "affinity-mode": "sticky",
			p + "session-cookie-secure": "yes please", p + "session-cookie-path": "relative",
		}, want: Annotations{Affinity: &Affinity{CookieName: DefaultCookieName, Mode: AffinityBalanced}}, warns: 7},
		{name: "unsupported affinity type", ann: map[string]string{p + "affinity": "ip_hash"}, want: Annotations{}, warns: 1},
		{name: "use-regex", ann: map[string]string{p + "use-regex": "true"}, want: Annotations{UseRegex: true}},
		{name: "rewrite-target implies use-regex", ann: map[string]string{p + "rewrite-target": "/$2"},
			want: Annotations{RewriteTarget: "/$2", UseRegex: true}},
		{name: "upstream-vhost and backend-protocol", ann: map[string]string{p + "upstream-vhost": "internal.svc", p + "backend-protocol": "grpc"},
			want: Annotations{UpstreamVhost: "internal.svc", BackendProtocol: "GRPC"}},
		{name: "ssl-redirect off, force-ssl-redirect on", ann: map[string]string{p + "ssl-redirect": "false", p + "force-ssl-redirect": "true"},
			want: Annotations{ForceSSLRedirect: true}, sslOff: true},
		{name: "ssl-redirect not a boolean", ann: map[string]string{p + "ssl-redirect": "no way"}, want: Annotations{}, warns: 1},
		{name: "custom prefix", prefix: "svcnet.io", ann: map[string]string{
			"svcnet.io/affinity": "cookie", p + "use-regex": "true",
		}, want: Annotations{Affinity: &Affinity{CookieName: DefaultCookieName, Mode: AffinityBalanced}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warns := ParseAnnotations(tc.prefix, tc.ann)
			// ssl-redirect is on unless a case turns it off.
			tc.want.SSLRedirect = !tc.sslOff
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("-want +got:\n%s", d)
			}
			if len(warns) != tc.warns {
				t.Errorf("warnings %q, want %d", warns, tc.warns)
			}
		})
	}
}

func TestBackendProtocolSupported(t *testing.T) {
	for proto, ok := range map[string]bool{"": true, "HTTP": true, "AUTO_HTTP": true, "HTTPS": false, "GRPC": false, "FCGI": false} {
		a := Annotations{BackendProtocol: proto}
		if a.BackendProtocolSupported() != ok {
			t.Errorf("%q: supported %v, want %v", proto, !ok, ok)
		}
	}
}

func TestSessionCookieFormat(t *testing.T) {
	v := formatSessionCookie(0x0123456789abcdef, 42)
	if v != "0123456789abcdef.000000000000002a" {
		t.Fatalf("format: %s", v)
	}
	k, e, ok := parseSessionCookie(v)
	if !ok || k != 0x0123456789abcdef || e != 42 {
		t.Fatalf("parse: %x %x %v", k, e, ok)
	}
	for _, bad := range []string{"", "10.244.1.5:8080", strings.Repeat("g", 16) + "." + strings.Repeat("0", 16), strings.Repeat("0", 33)} {
		if _, _, ok := parseSessionCookie(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestRendezvousAffinity: removing an endpoint moves only its sessions and
// spreads them; adding one moves about a fair share to it.
func TestRendezvousAffinity(t *testing.T) {
	mk := func(addrs ...string) *upstream {
		u := &upstream{byHash: map[uint64]*endpoint{}}
		for _, a := range addrs {
			ep := &endpoint{addr: a, hash: endpointHash(a)}
			u.endpoints = append(u.endpoints, ep)
			u.byHash[ep.hash] = ep
		}
		return u
	}
	four := mk("a:1", "b:1", "c:1", "d:1")
	three := mk("a:1", "b:1", "c:1")
	five := mk("a:1", "b:1", "c:1", "d:1", "e:1")
	const n = 20000
	moved, toNew := 0, 0
	spread := map[string]int{}
	for i := range n {
		key := mix64(uint64(i) + 1)
		before := four.hrw(key, nil).addr
		spread[before]++
		after := three.hrw(key, nil).addr
		if before != "d:1" && after != before {
			t.Fatalf("session %d moved from %s to %s though its endpoint stayed", i, before, after)
		}
		if before == "d:1" {
			moved++
		}
		if grown := five.hrw(key, nil).addr; grown != before {
			if grown != "e:1" {
				t.Fatalf("scale-up moved session %d from %s to %s, not to the new endpoint", i, before, grown)
			}
			toNew++
		}
	}
	for a, c := range spread {
		if c < n/4*9/10 || c > n/4*11/10 {
			t.Errorf("endpoint %s has %d of %d sessions", a, c, n)
		}
	}
	if toNew < n/5*9/10 || toNew > n/5*11/10 {
		t.Errorf("scale-up from 4 to 5 moved %d of %d sessions, want about a fifth", toNew, n)
	}
	_ = moved
}
