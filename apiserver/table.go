package apiserver

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/apiserver/tables"
)

// toTable converts objs for kubectl get with the kubectl columns of
// apiserver/tables (for the MetalLB kinds, their CRDs' printer columns,
// metallbColumns). includeObject selects the row objects (metadata by
// default); withColumns=false drops the column definitions (watch events
// after the first).
func (s *Server) toTable(r *http.Request, res *served, objs []runtime.Object, withColumns bool) (*metav1.Table, error) {
	opts := tables.Options{
		NoHeaders:     !withColumns,
		IncludeObject: metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject")),
	}
	var t *metav1.Table
	var err error
	if ct, ok := crdTables[res.Info.GVR]; ok {
		// Custom resources: their CRDs' additionalPrinterColumns.
		t, err = ct.Convert(res.Info.GroupResource(), objs, opts)
	} else {
		t, err = tables.Convert(res.Info.GroupResource(), objs, opts)
	}
	if errors.Is(err, tables.ErrBadIncludeObject) {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return t, nil
}
