package apiserver

import (
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/svcnet/svcnet/apiserver/authz"
)

// inFlightLimiter is kube-apiserver's max-in-flight filter
// (--max-requests-inflight, --max-mutating-requests-inflight): at most
// that many read-only and mutating requests are served at once; the next
// one is answered 429 TooManyRequests with Retry-After: 1. Long-running
// requests (watches, pod exec/attach/portforward/log, node proxies) and
// members of system:masters are not counted, as in kube-apiserver. svcnet
// adds a per-user share: one user may hold at most half of each limit, so
// that one client cannot starve the others (kube-apiserver gets that from
// API Priority and Fairness, which svcnet does not have).
type inFlightLimiter struct {
	readOnly, mutating chan struct{}
	perUser            map[bool]int
	mu                 chan struct{} // guards users
	users              map[string]int
}

func newInFlightLimiter(readOnly, mutating int) *inFlightLimiter {
	if readOnly <= 0 && mutating <= 0 {
		return nil
	}
	l := &inFlightLimiter{perUser: map[bool]int{}, mu: make(chan struct{}, 1), users: map[string]int{}}
	if readOnly > 0 {
		l.readOnly = make(chan struct{}, readOnly)
		l.perUser[false] = max(1, readOnly/2)
	}
	if mutating > 0 {
		l.mutating = make(chan struct{}, mutating)
		l.perUser[true] = max(1, mutating/2)
	}
	return l
}

func longRunning(r *http.Request) bool {
	q := r.URL.Query()
	if w := q.Get("watch"); w == "true" || w == "1" {
		return true
	}
	parts := splitPath(r.URL.Path)
	for i, p := range parts {
		if p == "watch" && i <= 3 {
			return true
		}
	}
	last := parts[len(parts)-1]
	switch last {
	case "exec", "attach", "portforward", "log", "proxy":
		return true
	}
	return q.Get("follow") == "true" && strings.HasSuffix(r.URL.Path, "/log")
}

func (l *inFlightLimiter) wrap(next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := authz.UserFrom(r.Context())
		if !ok || u.InGroup(authz.SystemMasters) || longRunning(r) {
			next.ServeHTTP(w, r)
			return
		}
		mutating := r.Method != http.MethodGet && r.Method != http.MethodHead
		sem := l.readOnly
		if mutating {
			sem = l.mutating
		}
		if sem == nil {
			next.ServeHTTP(w, r)
			return
		}
		key := map[bool]string{false: "r/", true: "m/"}[mutating] + u.Name
		l.mu <- struct{}{}
		if l.users[key] >= l.perUser[mutating] {
			<-l.mu
			tooMany(w)
			return
		}
		select {
		case sem <- struct{}{}:
			l.users[key]++
			<-l.mu
		default:
			<-l.mu
			tooMany(w)
			return
		}
		defer func() {
			<-sem
			l.mu <- struct{}{}
			if l.users[key]--; l.users[key] == 0 {
				delete(l.users, key)
			}
			<-l.mu
		}()
		next.ServeHTTP(w, r)
	})
}

func tooMany(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, apierrors.NewTooManyRequests("Too many requests, please try again later.", 1))
}
