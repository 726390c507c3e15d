package ingress

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Cookie affinity (ingress-nginx's affinity: cookie).
//
// The cookie's value is "KEY.ENDPOINT": KEY a random 64-bit session key,
// ENDPOINT the 64-bit hash of the endpoint the session is on (both 16 hex
// digits), so the cookie names its upstream without showing its address.
//
//   - persistent: a request whose cookie names a ready endpoint goes there;
//     otherwise (no cookie, a malformed one, or its endpoint gone) it is
//     balanced round-robin and gets a new cookie naming its endpoint.
//   - balanced (the default): the session key chooses the endpoint by
//     rendezvous hashing over the ready endpoints (the endpoint with the
//     highest hash of key and endpoint). A new session gets a random key.
//     While the endpoints stay the same a session stays where it is; when
//     an endpoint goes, only its sessions move, spread over the others; when
//     endpoints are added, a fair share of the sessions moves to them (as
//     ingress-nginx's consistent hashing does). When the endpoint a
//     request's cookie names is not the one its key now chooses, the
//     request goes to the new one and gets a cookie naming it.
//
// A Set-Cookie is sent only when the cookie changes.

// pickAffinity chooses the endpoint of a request under cookie affinity and
// records the cookie to set, if any.
func pickAffinity(af *Affinity, up *upstream, r *http.Request, st *reqState) *endpoint {
	var key, named uint64
	valid := false
	if c, err := r.Cookie(af.CookieName); err == nil {
		key, named, valid = parseSessionCookie(c.Value)
	}
	if af.Mode == AffinityPersistent {
		if valid {
			if ep := up.byHash[named]; ep != nil {
				return ep
			}
		}
		ep := up.next(nil)
		st.setCookie = sessionCookie(af, st.route.cookiePath, newSessionKey(), ep)
		return ep
	}
	if !valid {
		key = newSessionKey()
	}
	ep := up.hrw(key, nil)
	if !valid || ep.hash != named {
		st.setCookie = sessionCookie(af, st.route.cookiePath, key, ep)
	}
	return ep
}

// hrw is the endpoint with the highest rendezvous score for key, skipping
// those in exclude (nil when none is left).
func (u *upstream) hrw(key uint64, exclude []*endpoint) *endpoint {
	var best *endpoint
	var bestScore uint64
	for _, ep := range u.endpoints {
		if containsEndpoint(exclude, ep) {
			continue
		}
		if s := mix64(key ^ ep.hash); best == nil || s > bestScore {
			best, bestScore = ep, s
		}
	}
	return best
}

func newSessionKey() uint64 { return rand.Uint64() }

// sessionCookie is the Set-Cookie of a session on ep.
func sessionCookie(af *Affinity, path string, key uint64, ep *endpoint) *http.Cookie {
	c := &http.Cookie{
		Name:     af.CookieName,
		Value:    formatSessionCookie(key, ep.hash),
		Path:     path,
		Domain:   af.Domain,
		HttpOnly: true,
		Secure:   af.Secure,
		SameSite: af.SameSite,
	}
	if c.Path == "" {
		c.Path = "/"
	}
	if af.HasExpires {
		c.Expires = time.Now().Add(time.Duration(af.Expires) * time.Second).UTC()
	}
	if af.HasMaxAge && af.MaxAge > 0 {
		c.MaxAge = int(af.MaxAge)
	}
	return c
}

func formatSessionCookie(key, ep uint64) string {
	var b [33]byte
	hex16(b[:16], key)
	b[16] = '.'
	hex16(b[17:], ep)
	return string(b[:])
}

func hex16(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		dst[i] = digits[v&0xf]
		v >>= 4
	}
}

// parseSessionCookie reads a cookie value written by formatSessionCookie.
func parseSessionCookie(v string) (key, ep uint64, ok bool) {
	if len(v) != 33 || v[16] != '.' {
		return 0, 0, false
	}
	k, err1 := strconv.ParseUint(v[:16], 16, 64)
	e, err2 := strconv.ParseUint(v[17:], 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return k, e, true
}
