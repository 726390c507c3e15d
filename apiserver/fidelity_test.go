package apiserver_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
