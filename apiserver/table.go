package apiserver

import (
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// TableConverter turns objects of one resource into a server-side Table. It
// is a variable so that apiserver/tables can supply the real kubectl columns.
var TableConverter func(r *http.Request, res *served, objs []runtime.Object) (*metav1.Table, error)

// toTable converts objs for kubectl get. Without a resource-specific
// converter it answers Name and Created At, as kube-apiserver's default
// table convertor does. Each row carries the object's metadata
// (includeObject=Metadata, the default) or the whole object
// (includeObject=Object). withColumns=false drops the column definitions (on
// watch events after the first).
func (s *Server) toTable(r *http.Request, res *served, objs []runtime.Object, withColumns bool) (*metav1.Table, error) {
	var t *metav1.Table
	if TableConverter != nil {
		var err error
		if t, err = TableConverter(r, res, objs); err != nil {
			return nil, err
		}
	} else {
		t = &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
			{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		}}
		for _, o := range objs {
			acc, err := meta.Accessor(o)
			if err != nil {
				continue
			}
			t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{acc.GetName(), acc.GetCreationTimestamp().Time.UTC().Format(time.RFC3339)}})
		}
	}
	t.TypeMeta = metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "Table"}
	include := r.URL.Query().Get("includeObject")
	for i := range t.Rows {
		if i >= len(objs) {
			break
		}
		switch include {
		case "None":
			t.Rows[i].Object = runtime.RawExtension{}
		case "Object":
			t.Rows[i].Object = runtime.RawExtension{Object: objs[i]}
		default:
			t.Rows[i].Object = runtime.RawExtension{Object: partialMeta(objs[i])}
		}
	}
	if !withColumns {
		t.ColumnDefinitions = nil
	}
	return t, nil
}

// humanAge formats an age as kubectl does (for example 5m, 3d2h).
func humanAge(ts metav1.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(ts.Time))
}

var _ = humanAge
