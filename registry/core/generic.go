// Package core holds the strategies of the resources svcnet serves that are
// not about Services: namespaces, pods, nodes, events, configmaps, leases,
// deployments and replicasets (Services, Endpoints and EndpointSlices have
// their own packages: registry/service, registry/endpoints,
// registry/endpointslice).
//
// Defaults follow the Kubernetes defaulting functions of the same types
// (for example a Pod gets dnsPolicy ClusterFirst, enableServiceLinks true,
// restartPolicy Always); validation covers ObjectMeta (done by the generic
// registry) plus the rules clients rely on, with Kubernetes' field paths and
// messages.
package core

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/operation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
)

// Basic is a strategy with no defaults and no rules beyond ObjectMeta. With
// HasStatus, a create clears status, an update keeps the stored status, and
// StatusStrategy returns the strategy for /status (which keeps the stored
// spec and metadata other than labels and annotations... as Kubernetes does,
// it keeps everything but status).
type Basic struct {
	Namespaced bool
	HasStatus  bool
	// Defaulter, when set, fills defaults.
	Defaulter func(obj runtime.Object)
	// Validator and UpdateValidator, when set, add field errors.
	Validator       func(obj runtime.Object) field.ErrorList
	UpdateValidator func(obj, old runtime.Object) field.ErrorList
	// FieldsFunc, when set, gives the field-selector fields.
	FieldsFunc func(obj runtime.Object) map[string]string
	// FieldLabels, when set, is the kind's field-label conversion (the
	// labels a field selector may use); nil = metadata.name/namespace only.
	FieldLabels func(label, value string) (string, string, error)
	// Graceful, when set, implements registry.GracefulDeleter.
	Graceful func(obj runtime.Object, requested *int64) (int64, bool)
	// OnCreate runs in PrepareForCreate after status is cleared.
	OnCreate func(obj runtime.Object)
	// OnCreateContext, when set, runs after OnCreate with the request's
	// context (for registry.Warn).
	OnCreateContext func(ctx context.Context, obj runtime.Object)
	// NameFunc, when set, validates names instead of the DNS-subdomain rule.
	NameFunc func(name string, prefix bool) []string
	// CreateKeepsStatus: a create keeps the status it is given (Nodes).
	CreateKeepsStatus bool
	// OnUpdate, when set, runs in PrepareForUpdate after status is kept.
	OnUpdate func(obj, old runtime.Object)
	// StatusValidator, when set, validates writes to /status.
	StatusValidator func(obj, old runtime.Object) field.ErrorList
	// StatusPrepare, when set, runs in the status strategy's
	// PrepareForUpdate after the stored spec is copied (for what else a
	// kind's /status keeps from the stored object).
	StatusPrepare func(obj, old runtime.Object)
	// Admit, when set, is what kube-apiserver's default admission plugins
	// do to the kind's writes (not its /status): it runs after defaulting
	// and before PrepareForCreate or PrepareForUpdate, where mutating
	// admission runs; old is nil on create. Its error (Forbidden, as
	// admission's) is returned as is.
	Admit func(ctx context.Context, obj, old runtime.Object) error
	// CreateWarnings, when set, is the kind's WarningsOnCreate: the
	// warnings a successful create of obj returns.
	CreateWarnings func(obj runtime.Object) []string
	// UpdateWarnings and StatusUpdateWarnings, when set, are the kind's
	// WarningsOnUpdate and its /status strategy's.
	UpdateWarnings       func(obj, old runtime.Object) []string
	StatusUpdateWarnings func(obj, old runtime.Object) []string
}

// WarningsOnCreate implements registry.CreateWarner.
func (b *Basic) WarningsOnCreate(_ context.Context, obj runtime.Object) []string {
	if b.CreateWarnings != nil {
		return b.CreateWarnings(obj)
	}
	return nil
}

// WarningsOnUpdate implements registry.UpdateWarner.
func (b *Basic) WarningsOnUpdate(_ context.Context, obj, old runtime.Object) []string {
	if b.UpdateWarnings != nil {
		return b.UpdateWarnings(obj, old)
	}
	return nil
}

// BeginCreate implements registry.CreateAllocator for Admit.
func (b *Basic) BeginCreate(ctx context.Context, obj runtime.Object, _ bool) (registry.Transaction, error) {
	if b.Admit != nil {
		if err := b.Admit(ctx, obj, nil); err != nil {
			return nil, err
		}
	}
	return registry.NopTransaction{}, nil
}

// BeginUpdate implements registry.UpdateAllocator for Admit.
func (b *Basic) BeginUpdate(ctx context.Context, obj, old runtime.Object, _ bool) (registry.Transaction, error) {
	if b.Admit != nil {
		if err := b.Admit(ctx, obj, old); err != nil {
			return nil, err
		}
	}
	return registry.NopTransaction{}, nil
}

// DeclarativeFunc returns the errors of a kind's declarative rules (see
// registry.DeclarativeValidator); old is nil on create.
type DeclarativeFunc func(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList

// WithDeclarative returns b as a registry.DeclarativeValidator running fn,
// for the kinds whose kube-apiserver 1.37 strategy validates declaratively
// (its /status too): their handwritten errors then merge with fn's as the
// generic registry merges them.
func WithDeclarative(b *Basic, fn DeclarativeFunc) registry.Strategy {
	return &declarative{Basic: b, fn: fn}
}

// ObjectMetaDeclarative is the declarative validation of kinds whose only
// declarative rules are ObjectMeta's (registry.ValidateObjectMetaDeclaratively).
func ObjectMetaDeclarative(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	return registry.ValidateObjectMetaDeclaratively(ctx, op, objectMeta(obj), objectMeta(old))
}

// objectMeta returns the embedded ObjectMeta of a typed object, or nil.
func objectMeta(obj runtime.Object) *metav1.ObjectMeta {
	if obj == nil {
		return nil
	}
	v, ok := structValue(obj)
	if !ok {
		return nil
	}
	f := v.FieldByName("ObjectMeta")
	if !f.IsValid() || !f.CanAddr() {
		return nil
	}
	m, _ := f.Addr().Interface().(*metav1.ObjectMeta)
	return m
}

type declarative struct {
	*Basic
	fn DeclarativeFunc
}

func (d *declarative) ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	return d.fn(ctx, op, obj, old)
}

func (d *declarative) StatusStrategy() registry.Strategy {
	return &declarativeStatus{statusStrategy: &statusStrategy{d.Basic}, fn: d.fn}
}

type declarativeStatus struct {
	*statusStrategy
	fn DeclarativeFunc
}

func (d *declarativeStatus) ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	return d.fn(ctx, op, obj, old)
}

// BasicOf returns the Basic strategy behind st (itself, or what
// WithDeclarative wrapped), or nil.
func BasicOf(st registry.Strategy) *Basic {
	switch b := st.(type) {
	case *Basic:
		return b
	case *declarative:
		return b.Basic
	}
	return nil
}

var _ registry.Strategy = (*Basic)(nil)

func (b *Basic) NamespaceScoped() bool { return b.Namespaced }

func (b *Basic) Default(obj runtime.Object) {
	if b.Defaulter != nil {
		b.Defaulter(obj)
	}
}

func (b *Basic) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if b.HasStatus && !b.CreateKeepsStatus {
		clearField(obj, "Status")
	}
	if b.OnCreate != nil {
		b.OnCreate(obj)
	}
	if b.OnCreateContext != nil {
		b.OnCreateContext(ctx, obj)
	}
}

func (b *Basic) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	if b.HasStatus {
		copyField(obj, old, "Status")
	}
	if b.OnUpdate != nil {
		b.OnUpdate(obj, old)
	}
}

func (b *Basic) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	if b.Validator != nil {
		return b.Validator(obj)
	}
	return nil
}

func (b *Basic) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	if b.UpdateValidator != nil {
		return b.UpdateValidator(obj, old)
	}
	if b.Validator != nil {
		return b.Validator(obj)
	}
	return nil
}

// FieldsSet implements registry.FieldsSetter when FieldsFunc is set.
func (b *Basic) FieldsSet(obj runtime.Object) map[string]string {
	if b.FieldsFunc != nil {
		return b.FieldsFunc(obj)
	}
	return metaFields(obj, b.Namespaced)
}

// FieldLabelConversion implements registry.FieldLabelConverter.
func (b *Basic) FieldLabelConversion() func(label, value string) (string, string, error) {
	return b.FieldLabels
}

// GracePeriod implements registry.GracefulDeleter.
func (b *Basic) GracePeriod(obj runtime.Object, requested *int64) (int64, bool) {
	if b.Graceful != nil {
		return b.Graceful(obj, requested)
	}
	return 0, false
}

// ValidateName implements registry.NameValidator when NameFunc is set.
func (b *Basic) ValidateName(name string, prefix bool) []string {
	if b.NameFunc != nil {
		return b.NameFunc(name, prefix)
	}
	return dnsSubdomain(name, prefix)
}

// StatusStrategy returns the strategy for the status subresource.
func (b *Basic) StatusStrategy() registry.Strategy { return &statusStrategy{b} }

type statusStrategy struct{ *Basic }

// BeginUpdate: admission does not see /status writes.
func (s *statusStrategy) BeginUpdate(context.Context, runtime.Object, runtime.Object, bool) (registry.Transaction, error) {
	return registry.NopTransaction{}, nil
}

// PrepareForUpdate keeps everything of the stored object but status (and
// metadata the generic registry owns), as /status writes do in Kubernetes.
func (s *statusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	copyField(obj, old, "Spec")
	if s.StatusPrepare != nil {
		s.StatusPrepare(obj, old)
	}
}

// WarningsOnUpdate: the /status strategy's own (not the kind's).
func (s *statusStrategy) WarningsOnUpdate(_ context.Context, obj, old runtime.Object) []string {
	if s.StatusUpdateWarnings != nil {
		return s.StatusUpdateWarnings(obj, old)
	}
	return nil
}

func (s *statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if s.StatusValidator != nil {
		return s.StatusValidator(obj, old)
	}
	return nil
}

func structValue(obj runtime.Object) (reflect.Value, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return reflect.Value{}, false
	}
	v = v.Elem()
	return v, v.Kind() == reflect.Struct
}

func clearField(obj runtime.Object, name string) {
	if v, ok := structValue(obj); ok {
		if f := v.FieldByName(name); f.IsValid() && f.CanSet() {
			f.Set(reflect.Zero(f.Type()))
		}
	}
}

func copyField(dst, src runtime.Object, name string) {
	dv, ok1 := structValue(dst)
	sv, ok2 := structValue(src)
	if !ok1 || !ok2 || dv.Type() != sv.Type() {
		return
	}
	if f := dv.FieldByName(name); f.IsValid() && f.CanSet() {
		f.Set(sv.FieldByName(name))
	}
}
