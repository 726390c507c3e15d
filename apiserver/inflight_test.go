package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/apiserver/authz"
)

// TestMaxInFlight: with 2 read-only slots, a user holding one slot cannot
// take the second (per-user share), another user can, a third then gets
// 429 with Retry-After; system:masters and watches are not counted.
func TestMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	h := newInFlightLimiter(2, 1).wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	do := func(user, method, url string, groups ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, url, nil)
		r = r.WithContext(authz.WithUser(context.Background(), authz.User{Name: user, Groups: groups}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	var wg sync.WaitGroup
	hold := func(user string) {
		wg.Add(1)
		go func() { defer wg.Done(); do(user, "GET", "/api/v1/namespaces/default/services") }()
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s not served", user)
		}
	}
	is429 := func(w *httptest.ResponseRecorder, what string) {
		t.Helper()
		var st metav1.Status
		_ = json.Unmarshal(w.Body.Bytes(), &st)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || st.Reason != metav1.StatusReasonTooManyRequests {
			t.Errorf("%s: %d %q %+v, want 429 TooManyRequests with Retry-After 1", what, w.Code, w.Header().Get("Retry-After"), st)
		}
	}
	hold("alice")
	is429(do("alice", "GET", "/api/v1/services"), "alice's second request")
	hold("bob")
	is429(do("carol", "GET", "/api/v1/services"), "carol with every slot taken")
	// Not counted: watches, system:masters; mutating requests have their own slots.
	for _, f := range []func(){
		func() { do("carol", "GET", "/api/v1/services?watch=true") },
		func() { do("admin", "GET", "/api/v1/services", authz.SystemMasters) },
		func() { do("carol", "POST", "/api/v1/namespaces/default/services") },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatal("exempt or mutating request not served")
		}
	}
	close(release)
	wg.Wait()
	if w := do("carol", "GET", "/api/v1/services"); w.Code != http.StatusOK {
		t.Errorf("after release: %d", w.Code)
	}
}
