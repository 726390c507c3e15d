package apiserver

import (
	"net/http/httptest"
	"slices"
	"testing"
)

// TestAddWarningOncePerText: as kube-apiserver's warning recorder, a text
// the response already carries is not added again; quotes and backslashes
// are escaped and an empty text adds nothing.
func TestAddWarningOncePerText(t *testing.T) {
	w := httptest.NewRecorder()
	for _, text := range []string{`a "b"`, "c", `a "b"`, "", `d\e`, "c"} {
		addWarning(w, text)
	}
	want := []string{`299 - "a \"b\""`, `299 - "c"`, `299 - "d\\e"`}
	if got := w.Header().Values("Warning"); !slices.Equal(got, want) {
		t.Errorf("Warning headers %q, want %q", got, want)
	}
}
