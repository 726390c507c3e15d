// Package tables turns API objects into server-side metav1.Table responses, the
// format `kubectl get` asks for with
// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.
//
// The column definitions (names, types, formats, descriptions and priorities)
// and the cell formats follow the printers of a Kubernetes 1.36 kube-apiserver
// for the resources svcnet serves: services, endpoints, endpointslices, pods,
// nodes, namespaces, deployments, replicasets, events, configmaps, leases and
// the scale subresource. Like kube-apiserver, the table always carries the
// `-o wide` columns (Priority 1); kubectl hides them unless asked for wide
// output. Resources without a printer get kube-apiserver's default table
// (Name, Created At).
//
// The package is pure: it does no I/O and reads the clock only through
// Options.Now.
package tables

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Options controls how a table is built. The zero value gives what
// kube-apiserver answers to a plain `kubectl get`: headers, row objects as
// PartialObjectMetadata, ages measured from time.Now.
type Options struct {
	// NoHeaders omits ColumnDefinitions (TableOptions.NoHeaders, used by
	// `kubectl get --watch` after the first response).
	NoHeaders bool
	// IncludeObject selects what each row's Object holds: metav1.IncludeObject
	// (the object itself), metav1.IncludeMetadata or "" (a
	// PartialObjectMetadata, the server default), or metav1.IncludeNone.
	// Any other value is rejected with ErrBadIncludeObject.
	IncludeObject metav1.IncludeObjectPolicy
	// GroupVersion is the meta group version the client asked the table in
	// (meta.k8s.io/v1 or v1beta1). It sets the Table's and the
	// PartialObjectMetadata rows' apiVersion. Empty means meta.k8s.io/v1.
	GroupVersion schema.GroupVersion
	// ListMeta, when set, supplies the table's resourceVersion, continue token
	// and remainingItemCount (a list request). When nil and exactly one object
	// is converted (a get), the table takes that object's resourceVersion.
	ListMeta *metav1.ListMeta
	// ObjectKind, when set, is written into rows' objects under
	// IncludeObject whose apiVersion/kind are empty (a copy is made; the
	// caller's objects are not modified). kubectl decodes those rows and
	// needs the kind.
	ObjectKind schema.GroupVersionKind
	// Now is the clock AGE and similar columns are measured against. Nil
	// means time.Now.
	Now func() time.Time
}

// ErrBadIncludeObject is returned (wrapped) for an unrecognised
// Options.IncludeObject; the API server should answer 400 BadRequest.
var ErrBadIncludeObject = errors.New("unrecognized includeObject value")

// printer renders one object's cells. It always renders the wide cells.
type printer struct {
	columns []metav1.TableColumnDefinition
	row     func(obj runtime.Object, now time.Time) ([]any, error)
}

// Convert builds the table for objs, all of which must belong to gr.
//
// Rows come in the order of objs; an empty objs gives a table with headers
// and no rows (Rows is an empty, non-nil slice, as kube-apiserver sends
// `"rows": []`). An object of a type the resource's printer does not handle
// is an error. gr.Resource is the plural resource name ("services");
// autoscaling/v1 Scale objects always get the scale table, whatever gr (the
// scale subresource is served under its parent's resource).
func Convert(gr schema.GroupResource, objs []runtime.Object, opts Options) (*metav1.Table, error) {
	p, ok := printers[gr]
	switch {
	case len(objs) > 0 && isScale(objs[0]):
		// The scale subresource of deployments/replicasets is served under
		// the parent's resource name.
		p = scalePrinter
	case !ok:
		p = defaultPrinter
	}
	return convert(gr, p, objs, opts)
}

// convert builds the table for objs with printer p.
func convert(gr schema.GroupResource, p printer, objs []runtime.Object, opts Options) (*metav1.Table, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	gv := opts.GroupVersion
	if gv.Empty() {
		gv = metav1.SchemeGroupVersion
	}
	switch opts.IncludeObject {
	case "", metav1.IncludeMetadata, metav1.IncludeObject, metav1.IncludeNone:
	default:
		return nil, fmt.Errorf("%w: %q", ErrBadIncludeObject, opts.IncludeObject)
	}

	table := &metav1.Table{
		TypeMeta: metav1.TypeMeta{APIVersion: gv.String(), Kind: "Table"},
		Rows:     make([]metav1.TableRow, 0, len(objs)),
	}
	if !opts.NoHeaders {
		table.ColumnDefinitions = append([]metav1.TableColumnDefinition(nil), p.columns...)
	}
	switch {
	case opts.ListMeta != nil:
		table.ResourceVersion = opts.ListMeta.ResourceVersion
		table.Continue = opts.ListMeta.Continue
		table.RemainingItemCount = opts.ListMeta.RemainingItemCount
	case len(objs) == 1:
		if m, err := meta.Accessor(objs[0]); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}

	t := now()
	for i, obj := range objs {
		if obj == nil {
			return nil, fmt.Errorf("table for %s: object %d is nil", gr, i)
		}
		cells, err := p.row(obj, t)
		if err != nil {
			return nil, fmt.Errorf("table for %s: %w", gr, err)
		}
		row := metav1.TableRow{Cells: cells}
		if c := rowConditions(obj); c != nil {
			row.Conditions = c
		}
		switch opts.IncludeObject {
		case metav1.IncludeObject:
			o := obj
			if !opts.ObjectKind.Empty() && o.GetObjectKind().GroupVersionKind().Empty() {
				o = o.DeepCopyObject()
				o.GetObjectKind().SetGroupVersionKind(opts.ObjectKind)
			}
			row.Object = runtime.RawExtension{Object: o}
		case metav1.IncludeNone:
		default:
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, fmt.Errorf("table for %s: object metadata: %w", gr, err)
			}
			partial := meta.AsPartialObjectMetadata(m)
			partial.GetObjectKind().SetGroupVersionKind(gv.WithKind("PartialObjectMetadata"))
			row.Object = runtime.RawExtension{Object: partial}
		}
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

// ConvertList is Convert for a list object (a *v1.ServiceList, ...): it takes
// the items and the list's resourceVersion, continue token and
// remainingItemCount from list. opts.ListMeta is ignored.
func ConvertList(gr schema.GroupResource, list runtime.Object, opts Options) (*metav1.Table, error) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("table for %s: %w", gr, err)
	}
	la, err := meta.ListAccessor(list)
	if err != nil {
		return nil, fmt.Errorf("table for %s: %w", gr, err)
	}
	opts.ListMeta = &metav1.ListMeta{
		ResourceVersion:    la.GetResourceVersion(),
		Continue:           la.GetContinue(),
		RemainingItemCount: la.GetRemainingItemCount(),
	}
	return Convert(gr, items, opts)
}

// Columns returns the column definitions Convert uses for gr (the default
// Name/Created At pair for resources without a printer).
func Columns(gr schema.GroupResource) []metav1.TableColumnDefinition {
	p, ok := printers[gr]
	if !ok {
		p = defaultPrinter
	}
	return append([]metav1.TableColumnDefinition(nil), p.columns...)
}

// age formats the time since ts like kubectl's AGE column; a zero timestamp
// is "<unknown>".
func age(ts metav1.Time, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

func microAge(ts metav1.MicroTime, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

// Column descriptions shared by most resources.
var (
	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]}
	ageColumn  = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc["creationTimestamp"]}
)

var objectMetaDoc = metav1.ObjectMeta{}.SwaggerDoc()

// defaultPrinter is kube-apiserver's DefaultTableConvertor: name and the
// creation time in RFC 3339.
var defaultPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Created At", Type: "date", Description: objectMetaDoc["creationTimestamp"]},
	},
	row: func(obj runtime.Object, _ time.Time) ([]any, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("object metadata: %w", err)
		}
		return []any{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)}, nil
	},
}

func wrongType(want string, obj runtime.Object) error {
	return fmt.Errorf("cannot print %T as %s", obj, want)
}
