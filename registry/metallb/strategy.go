// Package metallb holds the strategies of the MetalLB kinds svcnet serves
// as unstructured objects (as kube-apiserver serves them from MetalLB's
// CRDs): BGPPeer (metallb.io/v1beta2), BGPAdvertisement, Community,
// ServiceL2Status and ServiceBGPStatus (metallb.io/v1beta1).
//
// Each strategy does what the CRD does in kube-apiserver (schema defaults
// and checks, a status subresource: a create drops status, an update of
// the main resource keeps the stored status, an update of /status keeps
// everything else) and, for BGPPeer, BGPAdvertisement and Community, what
// MetalLB's validating webhook does: the checks of package
// apis/metallb/validation, run against the stored objects they conflict
// with, denied with kube-apiserver's wording for a webhook denial
// (403, `admission webhook "<name>" denied the request: <message>`).
// Unlike MetalLB, objects are not confined to the metallb-system
// namespace.
package metallb

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	metallbv1beta2 "github.com/svcnet/svcnet/apis/metallb/v1beta2"
	"github.com/svcnet/svcnet/apis/metallb/validation"
	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// Lister lists the stored objects of a MetalLB resource in every
// namespace; the API server sets it once its stores exist.
type Lister func(ctx context.Context, gr schema.GroupResource) ([]unstructured.Unstructured, error)

// Strategy is the strategy of one MetalLB kind.
type Strategy struct {
	core.Basic
	// Lister, when set, gives the webhook checks the stored objects.
	Lister Lister
	// admit is the kind's webhook (nil: none).
	admit   func(ctx context.Context, s *Strategy, obj *unstructured.Unstructured) error
	webhook string
}

var (
	_ registry.Strategy         = (*Strategy)(nil)
	_ registry.CreateAllocator  = (*Strategy)(nil)
	_ registry.UpdateAllocator  = (*Strategy)(nil)
	_ registry.StatusStrategist = (*Strategy)(nil)
)

func unstructuredOf(obj runtime.Object) map[string]any {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object
	}
	return nil
}

func schemaFuncs(def func(map[string]any), check func(map[string]any) field.ErrorList) core.Basic {
	b := core.Basic{Namespaced: true}
	if def != nil {
		b.Defaulter = func(obj runtime.Object) {
			if m := unstructuredOf(obj); m != nil {
				def(m)
			}
		}
	}
	if check != nil {
		b.Validator = func(obj runtime.Object) field.ErrorList {
			if m := unstructuredOf(obj); m != nil {
				return check(m)
			}
			return nil
		}
	}
	return b
}

// DefaultStored applies the kind's schema defaults to an object read from
// storage, as kube-apiserver defaults custom resources it reads from etcd
// (with the storage version's schema): objects stored before a default
// existed read back with it.
func (s *Strategy) DefaultStored(obj runtime.Object) { s.Basic.Default(obj) }

// NewBGPPeerStrategy is BGPPeer's (metallb.io/v1beta2).
func NewBGPPeerStrategy() *Strategy {
	return &Strategy{
		Basic:   schemaFuncs(validation.DefaultBGPPeer, validation.SchemaBGPPeer),
		webhook: "bgppeersvalidationwebhook.metallb.io",
		admit:   admitPeer,
	}
}

// NewBGPPeerV1beta1Strategy is BGPPeer's in metallb.io/v1beta1: that
// version's schema, and the webhook's checks on the peer converted to the
// stored version.
func NewBGPPeerV1beta1Strategy() *Strategy {
	return &Strategy{
		Basic:   schemaFuncs(nil, validation.SchemaBGPPeerV1beta1),
		webhook: "bgppeersvalidationwebhook.metallb.io",
		admit:   admitPeerV1beta1,
	}
}

// NewBGPAdvertisementStrategy is BGPAdvertisement's.
func NewBGPAdvertisementStrategy() *Strategy {
	return &Strategy{
		Basic:   schemaFuncs(validation.DefaultBGPAdvertisement, validation.SchemaBGPAdvertisement),
		webhook: "bgpadvertisementvalidationwebhook.metallb.io",
		admit:   admitAdvertisement,
	}
}

// NewCommunityStrategy is Community's.
func NewCommunityStrategy() *Strategy {
	return &Strategy{
		Basic:   schemaFuncs(nil, nil),
		webhook: "communityvalidationwebhook.metallb.io",
		admit:   admitCommunity,
	}
}

// NewBFDProfileStrategy is BFDProfile's: the schema's ranges. MetalLB's
// webhook also refuses to delete a profile a BGPPeer names, but in native
// BGP mode, which svcnet validates peers for, no peer may name one.
func NewBFDProfileStrategy() *Strategy {
	return &Strategy{Basic: schemaFuncs(nil, validation.SchemaBFDProfile)}
}

// NewConfigurationStateStrategy is ConfigurationState's (MetalLB v0.16's
// report of whether a component's configuration loaded): no webhook, the
// schema's enum on status.result.
func NewConfigurationStateStrategy() *Strategy {
	return &Strategy{Basic: schemaFuncs(nil, validation.SchemaConfigurationState)}
}

// NewStatusKindStrategy is for ServiceL2Status and ServiceBGPStatus: no
// webhook; status.node, serviceName and serviceNamespace are immutable
// once set (the CRDs' "Value is immutable" rules).
func NewStatusKindStrategy() *Strategy {
	return &Strategy{Basic: core.Basic{Namespaced: true}}
}

// PrepareForCreate drops status, as for a CRD with a status subresource.
func (s *Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if m := unstructuredOf(obj); m != nil {
		delete(m, "status")
	}
}

// PrepareForUpdate keeps the stored status.
func (s *Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	m, o := unstructuredOf(obj), unstructuredOf(old)
	if m == nil || o == nil {
		return
	}
	if st, ok := o["status"]; ok {
		m["status"] = runtime.DeepCopyJSONValue(st)
	} else {
		delete(m, "status")
	}
}

// StatusStrategy is the strategy of /status: everything but status and
// metadata comes from the stored object.
func (s *Strategy) StatusStrategy() registry.Strategy { return &statusStrategy{s} }

type statusStrategy struct{ *Strategy }

func (s *statusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	m, o := unstructuredOf(obj), unstructuredOf(old)
	if m == nil || o == nil {
		return
	}
	for k := range m {
		if k != "status" && k != "metadata" && k != "apiVersion" && k != "kind" {
			delete(m, k)
		}
	}
	for k, v := range o {
		if k != "status" && k != "metadata" && k != "apiVersion" && k != "kind" {
			m[k] = runtime.DeepCopyJSONValue(v)
		}
	}
}

func (s *statusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	errs := immutableStatus(unstructuredOf(obj), unstructuredOf(old))
	if s.Validator != nil {
		errs = append(errs, s.Validator(obj)...)
	}
	return errs
}

// BeginCreate, BeginUpdate are not called for /status.
func (s *statusStrategy) BeginCreate(context.Context, runtime.Object, bool) (registry.Transaction, error) {
	return noopTx{}, nil
}

func (s *statusStrategy) BeginUpdate(context.Context, runtime.Object, runtime.Object, bool) (registry.Transaction, error) {
	return noopTx{}, nil
}

// immutableStatus is the "self == oldSelf" rule of the status kinds'
// node, serviceName and serviceNamespace, applied once they are set.
func immutableStatus(m, o map[string]any) field.ErrorList {
	if m == nil || o == nil {
		return nil
	}
	var errs field.ErrorList
	for _, f := range []string{"node", "serviceName", "serviceNamespace"} {
		ov, _, _ := unstructured.NestedString(o, "status", f)
		nv, _, _ := unstructured.NestedString(m, "status", f)
		if ov != "" && nv != ov {
			errs = append(errs, field.Invalid(field.NewPath("status", f), nv, "Value is immutable"))
		}
	}
	return errs
}

type noopTx struct{}

func (noopTx) Commit() {}
func (noopTx) Revert() {}

// BeginCreate runs the webhook.
func (s *Strategy) BeginCreate(ctx context.Context, obj runtime.Object, _ bool) (registry.Transaction, error) {
	return noopTx{}, s.runWebhook(ctx, obj)
}

// BeginUpdate runs the webhook.
func (s *Strategy) BeginUpdate(ctx context.Context, obj, _ runtime.Object, _ bool) (registry.Transaction, error) {
	return noopTx{}, s.runWebhook(ctx, obj)
}

func (s *Strategy) runWebhook(ctx context.Context, obj runtime.Object) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || s.admit == nil {
		return nil
	}
	// kube-apiserver runs validating webhooks after the schema: an object
	// the schema refuses gets the schema's 422 (from Validate), not a
	// webhook denial.
	if s.Validator != nil && len(s.Validator(obj)) > 0 {
		return nil
	}
	return s.admit(ctx, s, u)
}

// Denied is kube-apiserver's error for a validating webhook's denial.
func Denied(webhook string, code int32, msg string) error {
	reason := metav1.StatusReasonForbidden
	if code == http.StatusBadRequest {
		reason = metav1.StatusReasonBadRequest
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    code,
		Reason:  reason,
		Message: fmt.Sprintf("admission webhook %q denied the request: %s", webhook, msg),
	}}
}

func (s *Strategy) deny(err error) error {
	return Denied(s.webhook, http.StatusForbidden, err.Error())
}

func decode[T any](s *Strategy, u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, Denied(s.webhook, http.StatusBadRequest, err.Error())
	}
	return out, nil
}

func list[T any](ctx context.Context, s *Strategy, gr schema.GroupResource) ([]T, error) {
	if s.Lister == nil {
		return nil, nil
	}
	items, err := s.Lister(ctx, gr)
	if err != nil {
		return nil, s.deny(fmt.Errorf("failed to get existing %s objects: %w", gr.Resource, err))
	}
	out := make([]T, 0, len(items))
	for i := range items {
		var v T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(items[i].Object, &v); err != nil {
			continue // a stored object MetalLB's types cannot hold is not a conflict
		}
		out = append(out, v)
	}
	return out, nil
}

func nsName(m *metav1.ObjectMeta) string { return m.Namespace + "/" + m.Name }

func admitPeer(_ context.Context, s *Strategy, u *unstructured.Unstructured) error {
	p, err := decode[metallbv1beta2.BGPPeer](s, u)
	if err != nil {
		return err
	}
	if err := validation.Peer(p); err != nil {
		return s.deny(err)
	}
	return nil
}

func admitPeerV1beta1(_ context.Context, s *Strategy, u *unstructured.Unstructured) error {
	p, err := decode[metallbv1beta1.BGPPeer](s, u)
	if err != nil {
		return err
	}
	if err := validation.Peer(metallbv1beta1.PeerToV1beta2(p)); err != nil {
		return s.deny(err)
	}
	return nil
}

func admitAdvertisement(ctx context.Context, s *Strategy, u *unstructured.Unstructured) error {
	a, err := decode[metallbv1beta1.BGPAdvertisement](s, u)
	if err != nil {
		return err
	}
	advs, err := list[metallbv1beta1.BGPAdvertisement](ctx, s, metallbv1beta1.BGPAdvertisementsResource.GroupResource())
	if err != nil {
		return err
	}
	pools, err := list[metallbv1beta1.IPAddressPool](ctx, s, metallbv1beta1.IPAddressPoolsResource.GroupResource())
	if err != nil {
		return err
	}
	comms, err := list[metallbv1beta1.Community](ctx, s, metallbv1beta1.CommunitiesResource.GroupResource())
	if err != nil {
		return err
	}
	// Only the advertisement's own namespace: pools and advertisements
	// match within one (MetalLB keeps all of them in metallb-system).
	advs = validation.WithUpdate(sameNamespace(advs, a.Namespace, func(x *metallbv1beta1.BGPAdvertisement) string { return x.Namespace }), *a,
		func(x *metallbv1beta1.BGPAdvertisement) string { return nsName(&x.ObjectMeta) })
	pools = sameNamespace(pools, a.Namespace, func(x *metallbv1beta1.IPAddressPool) string { return x.Namespace })
	comms = sameNamespace(comms, a.Namespace, func(x *metallbv1beta1.Community) string { return x.Namespace })
	if err := validation.Advertisement(advs, pools, comms); err != nil {
		return s.deny(err)
	}
	return nil
}

func admitCommunity(ctx context.Context, s *Strategy, u *unstructured.Unstructured) error {
	c, err := decode[metallbv1beta1.Community](s, u)
	if err != nil {
		return err
	}
	comms, err := list[metallbv1beta1.Community](ctx, s, metallbv1beta1.CommunitiesResource.GroupResource())
	if err != nil {
		return err
	}
	comms = validation.WithUpdate(sameNamespace(comms, c.Namespace, func(x *metallbv1beta1.Community) string { return x.Namespace }), *c,
		func(x *metallbv1beta1.Community) string { return nsName(&x.ObjectMeta) })
	if _, err := validation.Communities(comms); err != nil {
		return s.deny(err)
	}
	return nil
}

func sameNamespace[T any](in []T, ns string, nsOf func(*T) string) []T {
	out := in[:0:0]
	for i := range in {
		if nsOf(&in[i]) == ns {
			out = append(out, in[i])
		}
	}
	return out
}
