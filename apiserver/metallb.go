package apiserver

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	metallbvalidation "github.com/svcnet/svcnet/apis/metallb/validation"
	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// poolWebhookName is the name of MetalLB's IPAddressPool validating
// webhook, which kube-apiserver puts in the message of a denial.
const poolWebhookName = "ipaddresspoolvalidationwebhook.metallb.io"

var ipAddressPoolsResource = schema.GroupResource{Group: "metallb.io", Resource: "ipaddresspools"}

// poolAdmission stands in for MetalLB's validating webhook on
// IPAddressPools: creates and updates whose addresses do not parse, or
// overlap another pool's, are denied with 403 Forbidden and the message
// kube-apiserver builds from a webhook denial ("admission webhook %q denied
// the request: ..."). Unlike MetalLB it does not require the
// metallb-system namespace, and compares against the pools of every
// namespace, because svcnet's lbipam controller reads pools from all of
// them.
type poolAdmission struct {
	*core.Basic
	list func(ctx context.Context) ([]metallbv1beta1.IPAddressPool, error)
}

type noopTx struct{}

func (noopTx) Commit() {}
func (noopTx) Revert() {}

func (p *poolAdmission) BeginCreate(ctx context.Context, obj runtime.Object, _ bool) (registry.Transaction, error) {
	return noopTx{}, p.admit(ctx, obj)
}

func (p *poolAdmission) BeginUpdate(ctx context.Context, obj, _ runtime.Object, _ bool) (registry.Transaction, error) {
	return noopTx{}, p.admit(ctx, obj)
}

func (p *poolAdmission) admit(ctx context.Context, obj runtime.Object) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("ipaddresspool admission: unexpected %T", obj))
	}
	var pool metallbv1beta1.IPAddressPool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pool); err != nil {
		return webhookDenied(http.StatusBadRequest, "", err.Error())
	}
	others, err := p.list(ctx)
	if err != nil {
		return webhookDenied(http.StatusForbidden, metav1.StatusReasonForbidden,
			fmt.Sprintf("failed to get existing IPAddressPool objects: %v", err))
	}
	all := metallbvalidation.WithUpdate(others, pool, func(p *metallbv1beta1.IPAddressPool) string { return p.Namespace + "/" + p.Name })
	if err := metallbvalidation.Pools(all); err != nil {
		return webhookDenied(http.StatusForbidden, metav1.StatusReasonForbidden, err.Error())
	}
	return nil
}

// webhookDenied is the error kube-apiserver returns when a validating
// webhook denies a request: the webhook's status with its message prefixed
// by the webhook name.
func webhookDenied(code int32, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    code,
		Reason:  reason,
		Message: fmt.Sprintf("admission webhook %q denied the request: %s", poolWebhookName, msg),
	}}
}

// installPoolAdmission puts the IPAddressPool admission in front of the
// pools' strategy.
func (s *Server) installPoolAdmission() {
	st, ok := s.byGR[ipAddressPoolsResource]
	if !ok {
		return
	}
	basic, ok := st.Strategy.(*core.Basic)
	if !ok {
		return // replaced through Config.Strategies: the replacement decides
	}
	st.Strategy = &poolAdmission{Basic: basic, list: func(ctx context.Context) ([]metallbv1beta1.IPAddressPool, error) {
		l, err := st.List(ctx, "", registry.ListOptions{})
		if err != nil {
			return nil, err
		}
		ul, ok := l.(*unstructured.UnstructuredList)
		if !ok {
			return nil, fmt.Errorf("list ipaddresspools: unexpected %T", l)
		}
		out := make([]metallbv1beta1.IPAddressPool, 0, len(ul.Items))
		for _, item := range ul.Items {
			var p metallbv1beta1.IPAddressPool
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &p); err != nil {
				continue
			}
			out = append(out, p)
		}
		return out, nil
	}}
}
