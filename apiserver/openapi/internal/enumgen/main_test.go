package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedUpToDate fails when zz_generated_enums.go no longer matches
// the k8s.io/api sources in go.mod (run `go generate ./apiserver/openapi`).
func TestGeneratedUpToDate(t *testing.T) {
	want, err := generate()
	if err != nil {
		t.Skipf("cannot read the module sources: %v", err)
	}
	got, err := os.ReadFile("../../zz_generated_enums.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("zz_generated_enums.go is stale: run go generate ./apiserver/openapi")
	}
}
