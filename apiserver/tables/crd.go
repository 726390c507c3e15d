package tables

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"
)

// CRDColumn is one of a CustomResourceDefinition version's
// additionalPrinterColumns (apiextensions.k8s.io/v1
// CustomResourceColumnDefinition).
type CRDColumn struct {
	Name        string
	Type        string // integer, number, string, boolean or date
	Format      string
	Description string
	Priority    int32
	JSONPath    string
}

// CRDTable converts custom resources (served as unstructured objects) to
// Tables as kube-apiserver's CRD table convertor
// (k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor)
// does: the Name column, then one column per additionalPrinterColumn
// evaluated from its JSONPath. A version without additionalPrinterColumns
// gets kube-apiserver's logical default, a single Age column
// (.metadata.creationTimestamp), not the Created At of built-in resources
// without a printer.
type CRDTable struct {
	columns []CRDColumn
	headers []metav1.TableColumnDefinition
}

// crdAgeColumn is the column kube-apiserver serves for a CRD version
// without additionalPrinterColumns (serveDefaultColumnsIfEmpty).
var crdAgeColumn = CRDColumn{Name: "Age", Type: "date", Description: objectMetaDoc["creationTimestamp"], JSONPath: ".metadata.creationTimestamp"}

// NewCRDTable returns the convertor of a CRD version with columns as its
// additionalPrinterColumns. A JSONPath that does not parse is an error
// (kube-apiserver then falls back to its default table).
func NewCRDTable(columns []CRDColumn) (*CRDTable, error) {
	if len(columns) == 0 {
		columns = []CRDColumn{crdAgeColumn}
	}
	c := &CRDTable{
		columns: append([]CRDColumn(nil), columns...),
		headers: []metav1.TableColumnDefinition{nameColumn},
	}
	for _, col := range columns {
		if _, err := parseColumn(col); err != nil {
			return nil, err
		}
		desc := fmt.Sprintf("Custom resource definition column (in JSONPath format): %s", col.JSONPath)
		if col.Description != "" {
			desc = col.Description
		}
		c.headers = append(c.headers, metav1.TableColumnDefinition{
			Name: col.Name, Type: col.Type, Format: col.Format, Description: desc, Priority: col.Priority,
		})
	}
	return c, nil
}

func parseColumn(col CRDColumn) (*jsonpath.JSONPath, error) {
	p := jsonpath.New(col.Name)
	if err := p.Parse(fmt.Sprintf("{%s}", col.JSONPath)); err != nil {
		return nil, fmt.Errorf("unrecognized column definition %q", col.JSONPath)
	}
	p.AllowMissingKeys(true)
	return p, nil
}

// Columns returns the table's column definitions.
func (c *CRDTable) Columns() []metav1.TableColumnDefinition {
	return append([]metav1.TableColumnDefinition(nil), c.headers...)
}

// Convert is the package's Convert for custom resources of gr with this
// table's columns.
func (c *CRDTable) Convert(gr schema.GroupResource, objs []runtime.Object, opts Options) (*metav1.Table, error) {
	// A JSONPath keeps state while it evaluates: each conversion parses
	// its own.
	paths := make([]*jsonpath.JSONPath, len(c.columns))
	for i, col := range c.columns {
		p, err := parseColumn(col)
		if err != nil {
			return nil, err
		}
		paths[i] = p
	}
	p := printer{columns: c.headers, row: func(obj runtime.Object, now time.Time) ([]any, error) {
		return c.row(paths, obj, now)
	}}
	return convert(gr, p, objs, opts)
}

func (c *CRDTable) row(paths []*jsonpath.JSONPath, obj runtime.Object, now time.Time) ([]any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("object metadata: %w", err)
	}
	cells := make([]any, 1, 1+len(paths))
	cells[0] = m.GetName()
	us, ok := obj.(runtime.Unstructured)
	if !ok {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		us = &unstructured.Unstructured{Object: content}
	}
	var buf bytes.Buffer
	for i, path := range paths {
		results, err := path.FindResults(us.UnstructuredContent())
		if err != nil || len(results) == 0 || len(results[0]) == 0 {
			cells = append(cells, nil)
			continue
		}
		// Simple JSONPaths: one result at most.
		value := results[0][0].Interface()
		typ := c.columns[i].Type
		if typ == "string" {
			// Strings as they are; arrays and objects as JSON, other
			// values as fmt prints them.
			if err := path.PrintResults(&buf, []reflect.Value{reflect.ValueOf(value)}); err == nil {
				cells = append(cells, buf.String())
			} else {
				cells = append(cells, nil)
			}
			buf.Reset()
			continue
		}
		cells = append(cells, crdCell(typ, value, now))
	}
	return cells, nil
}

// crdCell is kube-apiserver's cellForJSONValue: a value of the column's
// type, a date as the human-readable time since it, and nil for a value of
// another type.
func crdCell(typ string, value any, now time.Time) any {
	if value == nil {
		return nil
	}
	switch typ {
	case "integer":
		switch v := value.(type) {
		case int64:
			return v
		case float64:
			return int64(v)
		case json.Number:
			if i, err := v.Int64(); err == nil {
				return i
			}
		}
	case "number":
		switch v := value.(type) {
		case int64:
			return float64(v)
		case float64:
			return v
		case json.Number:
			if f, err := v.Float64(); err == nil {
				return f
			}
		}
	case "boolean":
		if b, ok := value.(bool); ok {
			return b
		}
	case "string":
		if s, ok := value.(string); ok {
			return s
		}
	case "date":
		if s, ok := value.(string); ok {
			var ts metav1.Time
			if err := ts.UnmarshalQueryParameter(s); err != nil {
				return "<invalid>"
			}
			if ts.IsZero() {
				return "<unknown>"
			}
			return duration.HumanDuration(now.Sub(ts.Time))
		}
	}
	return nil
}
