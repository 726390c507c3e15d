package apiserver_test

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/apiserver"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestInvalidReportsEveryError checks that a 422 lists every field error of
// the validation, in order, even several on one field with one type, as
// kube-apiserver's errors.NewInvalid does.
func TestInvalidReportsEveryError(t *testing.T) {
	srv := apiservertest.Start(t)
	hc := rawClient(t, srv.Config, true)
	url := srv.Config.Host + "/api/v1/namespaces/default/services"
	body := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"x"},"spec":{"ports":[{"port":80,"targetPort":"1234567890123456"}]}}`
	code, st := do(t, hc, "POST", url, "application/json", []byte(body))
	if code != 422 || st.Reason != metav1.StatusReasonInvalid {
		t.Fatalf("got %d %q (%s), want 422 Invalid", code, st.Reason, st.Message)
	}
	want := []metav1.StatusCause{
		{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.ports[0].targetPort", Message: `Invalid value: "1234567890123456": must be no more than 15 characters`},
		{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.ports[0].targetPort", Message: `Invalid value: "1234567890123456": must contain at least one letter (a-z)`},
	}
	if st.Details == nil || len(st.Details.Causes) != len(want) {
		t.Fatalf("causes = %+v, want %+v", st.Details, want)
	}
	for i, c := range st.Details.Causes {
		if c != want[i] {
			t.Errorf("cause %d = %+v, want %+v", i, c, want[i])
		}
	}
	wantMsg := `Service "x" is invalid: [spec.ports[0].targetPort: Invalid value: "1234567890123456": must be no more than 15 characters, spec.ports[0].targetPort: Invalid value: "1234567890123456": must contain at least one letter (a-z)]`
	if st.Message != wantMsg {
		t.Errorf("message = %s\nwant      %s", st.Message, wantMsg)
	}
	if st.Details.Name != "x" || st.Details.Kind != "Service" {
		t.Errorf("details = %+v", st.Details)
	}

	// A single error is reported without brackets.
	body = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"y"},"spec":{"ports":[{"port":80}],"sessionAffinity":"Sticky"}}`
	code, st = do(t, hc, "POST", url, "application/json", []byte(body))
	if code != 422 || strings.Contains(st.Message, "[") || !strings.HasPrefix(st.Message, `Service "y" is invalid: spec.sessionAffinity: Unsupported value: "Sticky"`) {
		t.Errorf("single error: %d %s", code, st.Message)
	}
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeFieldValueNotSupported {
		t.Errorf("single error causes: %+v", st.Details)
	}
}

// TestEndpointsDeprecationWarning checks the warning kube-apiserver 1.33+
// adds to core/v1 Endpoints requests (every verb, not the legacy /watch/
// paths) and that other kinds get none.
func TestEndpointsDeprecationWarning(t *testing.T) {
	srv := apiservertest.Start(t)
	hc := rawClient(t, srv.Config, true)
	const want = `299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"`
	base := srv.Config.Host + "/api/v1/namespaces/default/endpoints"
	ep := `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"e"}}`
	cases := []struct {
		name, method, url, body string
		want                    string
	}{
		{"create", "POST", base, ep, want},
		{"get", "GET", base + "/e", "", want},
		{"list", "GET", base, "", want},
		{"list all namespaces", "GET", srv.Config.Host + "/api/v1/endpoints", "", want},
		{"patch", "PATCH", base + "/e", `{"metadata":{"labels":{"a":"b"}}}`, want},
		{"delete", "DELETE", base + "/e", "", want},
		{"not found still warns", "GET", base + "/nope", "", want},
		{"services do not", "GET", srv.Config.Host + "/api/v1/namespaces/default/services", "", ""},
		{"endpointslices do not", "GET", srv.Config.Host + "/apis/discovery.k8s.io/v1/endpointslices", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.method == "PATCH" {
				req.Header.Set("Content-Type", "application/merge-patch+json")
			} else if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := strings.Join(resp.Header.Values("Warning"), "|")
			if got != tc.want {
				t.Errorf("%s %s: status %d, Warning %q, want %q", tc.method, tc.url, resp.StatusCode, got, tc.want)
			}
		})
	}
}

// TestIPAddressPoolAdmission checks that invalid and overlapping pools are
// denied as MetalLB's validating webhook denies them through kube-apiserver.
func TestIPAddressPoolAdmission(t *testing.T) {
	srv := apiservertest.Start(t)
	hc := rawClient(t, srv.Config, true)
	base := srv.Config.Host + "/apis/metallb.io/v1beta1/namespaces/kube-system/ipaddresspools"
	pool := func(name, addr string) []byte {
		return []byte(`{"apiVersion":"metallb.io/v1beta1","kind":"IPAddressPool","metadata":{"name":"` + name + `"},"spec":{"addresses":["` + addr + `"]}}`)
	}
	const prefix = `admission webhook "ipaddresspoolvalidationwebhook.metallb.io" denied the request: `
	if code, st := do(t, hc, "POST", base, "application/json", pool("first", "172.18.255.200-172.18.255.250")); code != 201 {
		t.Fatalf("valid pool: %d %s", code, st.Message)
	}
	code, st := do(t, hc, "POST", base, "application/json", pool("second", "172.18.255.240/28"))
	if code != 403 || st.Reason != metav1.StatusReasonForbidden ||
		st.Message != prefix+`CIDR "172.18.255.240/28" in pool "second" overlaps with already defined CIDR "172.18.255.240/29"` {
		t.Errorf("overlap: %d %q %s", code, st.Reason, st.Message)
	}
	code, st = do(t, hc, "POST", base, "application/json", pool("bad", "not-an-ip"))
	if code != 403 || st.Message != prefix+`parsing address pool bad: invalid CIDR "not-an-ip" in pool "bad": invalid IP range "not-an-ip": invalid start IP "not"` {
		t.Errorf("invalid range: %d %q %s", code, st.Reason, st.Message)
	}
	// Updating a pool is checked against the others but not against itself.
	code, st = do(t, hc, "PATCH", base+"/first", "application/merge-patch+json", []byte(`{"spec":{"addresses":["172.18.255.200-172.18.255.251"]}}`))
	if code != 200 {
		t.Errorf("update of own range: %d %s", code, st.Message)
	}
	if code, st := do(t, hc, "POST", base, "application/json", pool("third", "172.18.0.0/24")); code != 201 {
		t.Fatalf("disjoint pool: %d %s", code, st.Message)
	}
	code, st = do(t, hc, "PATCH", base+"/third", "application/merge-patch+json", []byte(`{"spec":{"addresses":["172.18.255.0/24"]}}`))
	if code != 403 || !strings.HasPrefix(st.Message, prefix) {
		t.Errorf("overlapping update: %d %s", code, st.Message)
	}
}

// TestRepairConflictEvent checks that a Service whose ClusterIP the
// allocator repair finds out of range gets a Warning Event, as
// kube-apiserver's repair controller emits it, findable with kubectl
// describe's field selector.
func TestRepairConflictEvent(t *testing.T) {
	dir := t.TempDir()
	srv := apiservertest.Start(t, apiservertest.WithDataDir(dir))
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The default ServiceCIDR is only made from the flag when missing (as
	// kube-apiserver): delete it (no servicecidrs controller runs, so no
	// finalizer holds it) and restart with another service range; the
	// stored ClusterIP is then outside every ServiceCIDR.
	if err := c.NetworkingV1().ServiceCIDRs().Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv = apiservertest.Start(t, apiservertest.WithDataDir(dir), apiservertest.WithConfig(func(cfg *apiserver.Config) {
		cfg.ServiceClusterIPRange = netip.MustParsePrefix("10.200.0.0/16")
	}))
	cfg := rest.CopyConfig(srv.Config)
	cfg.QPS, cfg.Burst = -1, 0 // polling, not client-side throttling
	c = kubernetes.NewForConfigOrDie(cfg)
	sel := "involvedObject.name=web,involvedObject.namespace=default,involvedObject.kind=Service,involvedObject.uid=" + string(svc.UID)
	var ev *corev1.Event
	var lastErr error
	// The repair runs in the background once the server is up; on a loaded
	// machine (CI runs the packages in parallel) that took more than 10 s.
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			lastErr = err
			return false, nil
		}
		for i := range l.Items {
			if l.Items[i].Reason == "ClusterIPOutOfRange" {
				ev = &l.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no ClusterIPOutOfRange event: %v (last list error: %v)", err, lastErr)
	}
	if ev.Type != corev1.EventTypeWarning || ev.ReportingController != "ipallocator-repair-controller" || ev.Action != "ClusterIPAllocation" ||
		!strings.Contains(ev.Message, svc.Spec.ClusterIP) || ev.InvolvedObject.UID != svc.UID {
		t.Errorf("event = %+v", ev)
	}
}
