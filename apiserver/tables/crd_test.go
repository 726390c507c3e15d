package tables

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCRDTable: cells as kube-apiserver's CRD table convertor makes them:
// values of the column's type (integers from float64 too, numbers from
// integers), nil for a missing field or a value of another type, strings
// columns print any value (arrays and objects as JSON), dates as the time
// since them ("<invalid>" unparsable, "<unknown>" empty).
func TestCRDTable(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ct, err := NewCRDTable([]CRDColumn{
		{Name: "Int", Type: "integer", JSONPath: ".spec.i"},
		{Name: "IntF", Type: "integer", JSONPath: ".spec.f"},
		{Name: "Num", Type: "number", JSONPath: ".spec.i", Description: "a number", Priority: 1, Format: "float"},
		{Name: "Bool", Type: "boolean", JSONPath: ".spec.b"},
		{Name: "BoolWrong", Type: "boolean", JSONPath: ".spec.s"},
		{Name: "Str", Type: "string", JSONPath: ".spec.s"},
		{Name: "StrInt", Type: "string", JSONPath: ".spec.i"},
		{Name: "StrList", Type: "string", JSONPath: ".spec.l"},
		{Name: "StrObj", Type: "string", JSONPath: ".spec.o"},
		{Name: "Missing", Type: "string", JSONPath: ".spec.nothing.here"},
		{Name: "Date", Type: "date", JSONPath: ".spec.d"},
		{Name: "BadDate", Type: "date", JSONPath: ".spec.s"},
		{Name: "EmptyDate", Type: "date", JSONPath: ".spec.e"},
		{Name: "Element", Type: "string", JSONPath: ".spec.l[1]"},
	})
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "x", "resourceVersion": "7"},
		"spec": map[string]any{
			"i": int64(7), "f": float64(2.9), "b": true, "s": "text",
			"l": []any{"a", "b"}, "o": map[string]any{"k": "v"},
			"d": now.Add(-90 * time.Minute).Format(time.RFC3339), "e": "",
		},
	}}
	tbl, err := ct.Convert(schema.GroupResource{Group: "example.com", Resource: "things"}, []runtime.Object{u}, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"x", int64(7), int64(2), float64(7), true, nil, "text", "7", `["a","b"]`, `{"k":"v"}`, nil, "90m", "<invalid>", "<unknown>", "b"}
	if len(tbl.Rows) != 1 || !reflect.DeepEqual(tbl.Rows[0].Cells, want) {
		t.Errorf("cells:\n got %#v\nwant %#v", tbl.Rows, want)
	}
	if tbl.ResourceVersion != "7" {
		t.Errorf("resourceVersion %q", tbl.ResourceVersion)
	}
	cols := tbl.ColumnDefinitions
	if len(cols) != 15 || cols[0] != nameColumn {
		t.Fatalf("columns %+v", cols)
	}
	if c := cols[3]; c != (metav1.TableColumnDefinition{Name: "Num", Type: "number", Format: "float", Description: "a number", Priority: 1}) {
		t.Errorf("column with description: %+v", c)
	}
	if c := cols[1]; c.Description != "Custom resource definition column (in JSONPath format): .spec.i" {
		t.Errorf("column without description: %+v", c)
	}

	// No columns: kube-apiserver's Age.
	def, err := NewCRDTable(nil)
	if err != nil {
		t.Fatal(err)
	}
	u.SetCreationTimestamp(metav1.NewTime(now.Add(-3 * time.Hour)))
	tbl, err = def.Convert(schema.GroupResource{Group: "example.com", Resource: "things"}, []runtime.Object{u}, Options{Now: func() time.Time { return now }, NoHeaders: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := def.Columns(); len(got) != 2 || got[1] != (metav1.TableColumnDefinition{Name: "Age", Type: "date", Description: objectMetaDoc["creationTimestamp"]}) {
		t.Errorf("default columns %+v", got)
	}
	if tbl.ColumnDefinitions != nil || !reflect.DeepEqual(tbl.Rows[0].Cells, []any{"x", "3h"}) {
		t.Errorf("default table: %+v", tbl)
	}

	if _, err := NewCRDTable([]CRDColumn{{Name: "Bad", Type: "string", JSONPath: ".spec[?("}}); err == nil {
		t.Error("unparsable JSONPath accepted")
	}
}
